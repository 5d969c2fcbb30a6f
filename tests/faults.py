"""Helpers for the fault suite: run the real CLI as a process tree we can signal, and find what survives."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from repro.core.context import SamplingConfig

PLUGINS = Path(__file__).parent / "plugins"
# Sampling that ends at once: the fault tests care how a repro ends, not what it measures.
FAST = SamplingConfig(budget_s=0.2, target_rel_ci=0.2)
MARK = "GPU_REPRO_TEST_MARK"


def marked(token: str) -> list[int]:
    """Processes whose environment carries ``MARK=token`` (every descendant of a marked CLI inherits it)."""
    needle = f"{MARK}={token}".encode()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    with open(f"/proc/{name}/stat", "rb") as st:
                        if st.read().rsplit(b")", 1)[-1].split()[0] == b"Z":
                            continue  # a zombie runs nothing; its parent reaps it
                    out.append(int(name))
        except OSError:
            continue
    return out


def survivors(token: str, wait_s: float = 10.0) -> list[int]:
    """The marked processes still alive after up to ``wait_s`` (death by a watched pipe takes a moment)."""
    deadline = time.monotonic() + wait_s
    while True:
        alive = marked(token)
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def kill_marked(token: str) -> None:
    """Clean up after a failed test so one failure does not leak processes into the next."""
    for pid in marked(token):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def start(
    args: Sequence[str], token: str | None = None, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """``python -m repro ARGS`` in the background, marked with a fresh token (``env``: more variables)."""
    token = token or uuid.uuid4().hex
    env = {**os.environ, **(env or {}), MARK: token, "COLUMNS": "120"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "repro", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
    )
    return proc, token


def end(proc: subprocess.Popen[bytes], token: str) -> None:
    """After a test, passed or failed: kill whatever carries ``token`` (the CLI too), then reap the CLI
    and close its pipes, so that neither a process nor an unclosed Popen (a ResourceWarning in some
    later test) outlives the test that started it."""
    kill_marked(token)
    proc.kill()  # a no-op once it was reaped
    try:
        proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:  # a process of another tree holds its pipes: close ours anyway
        pass
    finally:
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)


def stacks(proc: subprocess.Popen[bytes]) -> str:
    """What a CLI started with ``PYTHONFAULTHANDLER=1`` was doing when it did not exit in time: SIGABRT
    makes it print every thread's Python stack on its stderr as it dies (the end of that stderr)."""
    proc.send_signal(signal.SIGABRT)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr or b""
    return err.decode(errors="replace")[-8000:]


def wait_for(predicate: Callable[[], object], timeout_s: float = 60.0) -> bool:
    """Poll ``predicate()`` until true or the timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def running(token: str, needle: str) -> bool:
    """A marked process whose command line holds ``needle`` is running."""
    for pid in marked(token):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if needle.encode() in fh.read():
                    return True
        except OSError:
            continue
    return False


def log_says(run_root: Path, text: str) -> bool:
    """Some (staged or published) log under ``run_root`` contains ``text``."""
    for p in run_root.glob("*/logs/*"):
        try:
            if text in p.read_text(errors="replace"):
                return True
        except OSError:
            continue
    return False


def visible_files(root: Path) -> list[Path]:
    """The files under ``root`` a reader sees (not hidden: fsio's temp files start with ".")."""
    return [p for p in root.rglob("*") if p.is_file() and not p.name.startswith(".")]


def summary(progress: Callable[[str], None], trial: str, token: str | None, root: Path | None) -> tuple[int, int]:
    """Print one line of what a trial left: surviving processes of ``token``, files under ``root`` and how
    many are torn or empty; returns (survivors, torn). artifacts/reference/cpu/hardening-totals.txt
    counts trials from these lines."""
    alive = len(survivors(token)) if token is not None else 0
    files = visible_files(root) if root is not None and root.exists() else []
    torn = len(torn_files(root)) if root is not None and root.exists() else 0
    progress(f"summary: {trial}: {alive} surviving processes, {len(files)} files checked, {torn} torn or 0-byte")
    return alive, torn


def torn_files(root: Path) -> list[str]:
    """Visible files under ``root`` that are empty or incomplete (JSON that does not parse, gzip cut short)."""
    import gzip
    import json

    bad = []
    for p in visible_files(root):
        data = p.read_bytes()
        if not data:
            bad.append(f"{p}: 0 bytes")
        elif p.suffix == ".json":
            try:
                json.loads(data)
            except ValueError:
                bad.append(f"{p}: JSON cut short")
        elif p.name.endswith(".gz"):
            try:
                gzip.decompress(data)
            except (OSError, EOFError):
                bad.append(f"{p}: gzip cut short")
        elif p.name == "report.md" and not data.rstrip().endswith((b"</details>", b"artifacts._")):
            bad.append(f"{p}: report does not end where a report ends")
    return bad
