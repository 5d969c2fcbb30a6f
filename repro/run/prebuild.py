"""``repro all``'s builds ahead: what its repros would compile (graph-memset's nvcc programs), built
while the fork server imports torch, so no repro waits for a compiler and none runs beside a timing.

The parent starts ``python -m repro.run.prebuild`` under a guard (``repro.core.procs.spawn``) with a
JSON request on stdin and waits for it before the first repro; a build that fails here costs
nothing, as the repro builds again and says why. Each build caches its output where the repro's
``run`` finds it (``Repro.builds``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from repro.core import procs
from repro.env import nvml
from repro.run.execute import RunRequest, resolve

# Longer than two nvcc builds of a small .cu: past it, the repros build for themselves.
WAIT_S = 120.0


def tasks(spec: dict[str, Any], arch: str | None) -> list[Callable[[], object]]:
    """The builds of every repro the request names, for ``arch``; none without an architecture."""
    if arch is None:
        return []
    out: list[Callable[[], object]] = []
    for rid in spec.get("repro_ids", []):
        req = RunRequest(
            repro_id=rid, smoke=bool(spec.get("smoke")), repro_paths=[Path(p) for p in spec.get("repro_paths", [])]
        )
        cls, params = resolve(req)
        out += list(cls().builds(params, arch))
    return out


def main() -> int:
    spec = json.loads(sys.stdin.read())
    t0 = time.monotonic()
    arch = nvml.compute_arch()
    todo = tasks(spec, arch)
    failed = 0
    with ThreadPoolExecutor(max_workers=max(1, len(todo))) as pool:
        for got in [pool.submit(t) for t in todo]:
            try:
                got.result()
            except Exception:  # the repro builds again and says why
                failed += 1
    if todo:
        print(f"{len(todo) - failed} of {len(todo)} built for {arch} in {time.monotonic() - t0:.1f} s", flush=True)
    return 0


class Builds:
    """The builds-ahead process of one ``repro all``: started at once, waited for, always ended."""

    def __init__(self, repro_ids: Sequence[str], repro_paths: Sequence[Path], smoke: bool) -> None:
        self.tree = procs.spawn(
            [sys.executable, "-m", "repro.run.prebuild"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        spec = {"repro_ids": list(repro_ids), "repro_paths": [str(p) for p in repro_paths], "smoke": smoke}
        assert self.tree.proc.stdin is not None
        try:
            self.tree.proc.stdin.write(json.dumps(spec))
            self.tree.proc.stdin.close()
        except BrokenPipeError:
            pass

    def wait(self, timeout_s: float = WAIT_S, cancel: procs.Cancel | None = None) -> str:
        """Its one line of output once it ends ("" when it built nothing), or why it was stopped: past
        ``timeout_s``, or as soon as ``cancel`` is set (a Ctrl-C the batch recorded)."""
        deadline = time.monotonic() + timeout_s
        try:
            while self.tree.proc.poll() is None:  # its output is one short line: the pipe never fills
                if cancel is not None and cancel.is_set():
                    self.stop()
                    return "stopped: interrupted"
                if time.monotonic() >= deadline:
                    self.stop()
                    return f"stopped after {timeout_s:g} s; the repros build for themselves"
                time.sleep(0.05)
        finally:
            self.tree.finish()
        return self._read()

    def _read(self) -> str:
        pipe = self.tree.proc.stdout
        if pipe is None or pipe.closed:
            return ""
        with pipe:
            return str(pipe.read() or "").strip()

    def stop(self) -> None:
        self.tree.stop()
        self._read()


if __name__ == "__main__":
    sys.exit(main())
