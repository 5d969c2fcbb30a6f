"""``repro all``: each repro in its own subprocess with a timeout; a crash or hang becomes an error artifact."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro import artifact, catalog, fingerprint
from repro.execute import RunRequest, repro_section, rerun_command, resolve, validity
from repro.measure import SamplingConfig
from repro.verdict import unavailable

DEFAULT_TIMEOUT_S = 900.0
_POLL_S = 0.2
_TAIL_CHARS = 4000


@dataclass(frozen=True)
class Outcome:
    """How one repro of the batch ended."""

    repro_id: str
    status: str
    path: Path | None
    seconds: float
    message: str


def _tail(path: Path, chars: int = _TAIL_CHARS) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-chars:].decode(errors="replace")


def _last_line(path: Path) -> str:
    lines = [ln for ln in _tail(path, 400).splitlines() if ln.strip()]
    return lines[-1][:100] if lines else ""


def _signal_name(code: int) -> str | None:
    if code >= 0:
        return None
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def run_one_isolated(
    req: RunRequest,
    run_dir: Path,
    timeout_s: float,
    on_line: Callable[[str], None] = lambda line: None,
) -> Outcome:
    """Run ``req`` in a child process; whatever happens, leave an artifact behind."""
    cls, params = resolve(req)  # bad input fails here, before any child starts
    logs = run_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"{req.repro_id}.log"
    spec = {
        "repro_id": req.repro_id,
        "overrides": dict(req.overrides),
        "smoke": req.smoke,
        "repro_paths": [str(p) for p in req.repro_paths],
        "sampling": dataclasses.asdict(req.sampling),
        "command": list(req.command),
        "run_dir": str(run_dir),
    }
    t0 = time.monotonic()
    with open(log_path, "wb") as log:
        # A new session, so a timeout can kill the child and anything it started.
        child = subprocess.Popen(
            [sys.executable, "-m", "repro.worker", json.dumps(spec)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        timed_out = False
        while child.poll() is None:
            if time.monotonic() - t0 > timeout_s:
                timed_out = True
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
                break
            on_line(_last_line(log_path))
            time.sleep(_POLL_S)
    seconds = time.monotonic() - t0
    path = run_dir / f"{cls.id}.json"
    if path.exists() and not timed_out:
        doc = json.loads(path.read_text())
        return Outcome(req.repro_id, doc["verdict"]["status"], path, seconds, doc["verdict"]["finding"])
    code = child.returncode
    sig = _signal_name(code)
    if timed_out:
        kind, message = "timeout", f"killed after exceeding the {timeout_s:g} s timeout"
    elif sig == "SIGKILL":
        kind, message = "oom", "killed by SIGKILL (the kernel's out-of-memory killer is the usual cause)"
    elif sig:
        kind, message = "crash", f"the repro process died of {sig}"
    else:
        kind, message = "crash", f"the repro process exited with code {code} without writing an artifact"
    error = {
        "kind": kind,
        "message": message,
        "exit_code": None if sig else code,
        "signal": sig,
        "stderr_tail": _tail(log_path),
        "traceback": None,
    }
    doc = artifact.assemble(
        repro=repro_section(cls, params),
        run={
            "run_id": run_dir.name,
            "created_utc": artifact.utc_now(),
            "command": list(req.command),
            "rerun": rerun_command(req),
            "smoke": req.smoke,
            "device": None,
            "duration_s": seconds,
        },
        variants=[],
        verdict=unavailable(cls.metric, message, status="error"),
        validity=validity([], None),
        fingerprint=fingerprint.collect(with_torch=False),
        error=error,
    )
    doc = fingerprint.redactor()(doc)
    if path.exists():  # a hung child wrote late; keep its file and do not overwrite it
        return Outcome(req.repro_id, "error", path, seconds, message)
    artifact.write_artifact(doc, path)
    return Outcome(req.repro_id, "error", path, seconds, message)


def outcome_line(o: Outcome) -> str:
    """``id: status (seconds) - finding``: the finding says why a repro skipped or what it measured."""
    return f"{o.repro_id}: {o.status} ({o.seconds:.1f} s) - {o.message}"


def _torch_seen(o: Outcome) -> tuple[bool, bool] | None:
    """(torch importable, CUDA visible) as the repro's own artifact recorded them; None if unreadable."""
    try:
        doc = json.loads(o.path.read_text()) if o.path else None
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    torch_info = ((doc.get("fingerprint") or {}).get("software") or {}).get("torch")
    if not torch_info:
        return False, False
    return True, bool(torch_info.get("cuda_available"))


def _repro_command() -> str:
    """How the user can type ``repro`` again: ``.venv/bin/repro`` when that is not on PATH."""
    script = Path(sys.executable).parent / "repro"
    if not script.is_file() or shutil.which("repro") == str(script):
        return "repro"
    rel = os.path.relpath(script)
    return rel if not rel.startswith("..") else str(script)


def next_steps(outcomes: Sequence[Outcome]) -> list[str]:
    """What to do when nothing could run here (every repro skipped); empty when something ran.

    The cause comes from what the repros' artifacts recorded (torch missing, or no CUDA device),
    so the advice names it instead of guessing from message text.
    """
    if not outcomes or any(o.status != "skipped" for o in outcomes):
        return []
    seen = [t for t in (_torch_seen(o) for o in outcomes) if t is not None]
    if seen and not any(has_torch for has_torch, _ in seen):
        cause = f"torch is not installed in this Python ({sys.executable})"
    elif seen and not any(cuda for _, cuda in seen):
        cause = "torch sees no CUDA GPU here"
    else:
        cause = "each repro's reason is on its line above"
    repro = _repro_command()
    smoke = (
        "  make smoke      a CPU trial of the whole pipeline in the test env (.venv-test, CPU torch);"
        if Path("Makefile").is_file()
        else f"  {repro} all --smoke   where a CPU torch is installed: a trial of the whole pipeline;"
    )
    return [
        f"Nothing could run here: every repro was skipped ({cause}). Next steps:",
        smoke + " small sizes, so it proves the tool, never a cliff",
        "  GPU             on a machine with an NVIDIA GPU, give .venv a CUDA torch:"
        " .venv/bin/pip install torch --index-url https://download.pytorch.org/whl/cu126"
        " (or make the venv from a Python that has one: rm -rf .venv; make setup PYTHON=/path/to/python),"
        " then make repro-all",
        "  image           or use a pinned image that brings its own torch (Docker + NVIDIA toolkit):"
        " make image-cu126-pt26 && make docker-repro-all LANE=cu126-pt26",
        f"  {repro} doctor    what this machine lacks, ranked by consequence",
    ]


def select(only: Sequence[str], skip: Sequence[str], repro_paths: Sequence[Path]) -> list[str]:
    """The ids to run, in catalog order; unknown ids in --only/--skip are usage errors."""
    known = catalog.load(repro_paths)
    for rid in [*only, *skip]:
        catalog.get(rid, repro_paths)
    ids = list(only) if only else sorted(known)
    return [i for i in ids if i not in set(skip)]


def run_all(
    ids: Sequence[str],
    run_dir: Path,
    *,
    smoke: bool,
    timeout_s: float,
    repro_paths: Sequence[Path],
    sampling: SamplingConfig,
    command: Sequence[str],
    progress: bool = True,
) -> list[Outcome]:
    """Run every id in turn, each isolated; a failing repro never stops the batch."""
    outcomes: list[Outcome] = []
    reqs = [
        RunRequest(repro_id=i, smoke=smoke, repro_paths=repro_paths, sampling=sampling, command=command) for i in ids
    ]
    for req in reqs:
        resolve(req)  # validate all before running any
    if not progress:
        for req in reqs:
            outcomes.append(run_one_isolated(req, run_dir, timeout_s))
            print(outcome_line(outcomes[-1]), file=sys.stderr, flush=True)
        return outcomes
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    columns: list[Any] = [
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
    ]
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task("repro all", total=len(reqs))
        for req in reqs:
            bar.update(task, description=f"{req.repro_id}")
            outcome = run_one_isolated(
                req,
                run_dir,
                timeout_s,
                on_line=lambda line, r=req: bar.update(task, description=f"{r.repro_id}: {line}"),
            )
            outcomes.append(outcome)
            console.print(outcome_line(outcome), markup=False, highlight=False, soft_wrap=True)
            bar.advance(task)
        bar.update(task, description="repro all: done")
    return outcomes
