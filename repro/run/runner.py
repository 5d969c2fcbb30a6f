"""``repro all``: each repro in its own subprocess with a timeout; a crash or hang becomes an error artifact."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from select import POLLIN, poll
from typing import IO, Any

from repro.core import fsio, procs
from repro.core.context import SamplingConfig
from repro.core.errors import ReproError
from repro.core.redact import LineRedactor
from repro.env import fingerprint
from repro.evidence import artifact
from repro.run import catalog
from repro.run.execute import RunRequest, error_document, error_info, resolve
from repro.run.forkserver import ForkedChild, ForkServer, ForkServerError
from repro.run.prebuild import Builds

DEFAULT_TIMEOUT_S = 900.0
_POLL_S = 0.1
_TAIL_CHARS = 4000
# Exit status of a worker whose artifact could not be written for lack of space (ENOSPC's errno).
NO_SPACE_EXIT = 28


@dataclass(frozen=True)
class Outcome:
    """How one repro of the batch ended."""

    repro_id: str
    status: str
    path: Path | None
    seconds: float
    message: str
    no_space: bool = False
    breakdown: str = ""  # where the repro's seconds went (artifact.format_breakdown), when known


class Interrupts:
    """SIGINT and SIGTERM, recorded instead of obeyed at once.

    While installed, the first signal sets ``signum``; the batch polls ``is_set()``, stops the
    repro in flight (its whole process tree), writes its ``interrupted`` artifact and the report,
    and the CLI then exits 128 + signum. Nothing is raised asynchronously, so no write is ever cut
    in half by a signal.

    The handler takes no lock. Python runs it in the main thread between two bytecodes, whatever
    that thread holds just then; a ``threading.Event.set()`` there would wait forever for the
    event's own lock whenever the signal lands while the same thread is inside that event's
    ``wait()`` (which holds the lock on its way in and out). So the handler only records the
    signal and writes a byte to a pipe, and ``wait()`` sleeps in poll(2) on that pipe: a signal
    ends the sleep at once.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}
        self._wake: tuple[int, int] | None = None  # the wake-up pipe (read end, write end) while installed

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self.signum is None:
            self.signum = signum
        wake = self._wake
        if wake is not None:
            with contextlib.suppress(OSError):  # full: a wake-up is already pending
                os.write(wake[1], b"\0")

    @property
    def name(self) -> str:
        """The name of the signal received (empty when none was)."""
        return signal.Signals(self.signum).name if self.signum else ""

    def is_set(self) -> bool:
        """Whether a signal came."""
        return self.signum is not None

    def wait(self, timeout_s: float) -> bool:
        """``is_set()`` after up to ``timeout_s`` seconds of waiting for a signal (one ends the wait).

        A signal that comes before the poll has already written its byte, one that comes during it
        runs the handler and poll(2) is retried (PEP 475) with the byte there: either way no sleep
        outlasts it. Not installed, this only sleeps.
        """
        wake = self._wake
        if self.signum is None and wake is not None:
            poller = poll()  # select.poll (this module's select() picks the batch's ids)
            poller.register(wake[0], POLLIN)
            poller.poll(timeout_s * 1000)
        elif self.signum is None:
            time.sleep(timeout_s)
        return self.signum is not None

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():
            r, w = os.pipe()
            os.set_blocking(w, False)  # the handler must never block on a full pipe
            self._wake = (r, w)
            for sig in self.SIGNALS:
                self._previous[sig] = signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        wake, self._wake = self._wake, None
        for fd in wake or ():
            os.close(fd)


class _Pump(threading.Thread):
    """Copies the worker's output into its log, redacted as it is written, keeping the tail in memory."""

    def __init__(self, stream: IO[bytes], log: fsio.StagedFile | None) -> None:
        super().__init__(daemon=True, name="log-pump")
        self._stream = stream
        self._log = log
        self._redact = LineRedactor()
        self._tail = b""
        self.last_line = ""

    def _emit(self, data: bytes) -> None:
        if not data:
            return
        if self._log is not None:
            self._log.write(data)
        self._tail = (self._tail + data)[-_TAIL_CHARS:]
        lines = [ln for ln in data.decode(errors="replace").splitlines() if ln.strip()]
        if lines:
            self.last_line = lines[-1][:100]

    def run(self) -> None:
        fd = self._stream.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            self._emit(self._redact.feed(chunk))
        self._emit(self._redact.flush())

    def tail(self) -> str:
        """The last few thousand characters the worker printed (redacted)."""
        return self._tail.decode(errors="replace")


def _signal_name(code: int) -> str | None:
    if code >= 0:
        return None
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _worker_spec(req: RunRequest, run_dir: Path) -> dict[str, Any]:
    return {
        "repro_id": req.repro_id,
        "overrides": dict(req.overrides),
        "smoke": req.smoke,
        "repro_paths": [str(p) for p in req.repro_paths],
        "sampling": dataclasses.asdict(req.sampling),
        "command": list(req.command),
        "run_dir": str(run_dir),
        "collect_env": req.collect_env,
        "quick": req.quick,
    }


def _open_log(path: Path) -> tuple[fsio.StagedFile | None, str | None]:
    try:
        return fsio.StagedFile(path), None
    except OSError as exc:
        return None, f"{path}: {exc.strerror or exc}"


class _Spawned:
    """``python -m repro.run.worker`` under a guard: the same face as a ``ForkedChild``."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.tree = procs.spawn(
            [sys.executable, "-m", "repro.run.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        assert self.tree.proc.stdin is not None and self.tree.proc.stdout is not None
        self.stdout: IO[bytes] = self.tree.proc.stdout
        # The request goes through a pipe, not argv: --set values must not show in `ps`.
        with contextlib.suppress(BrokenPipeError):
            self.tree.proc.stdin.write(json.dumps(spec).encode())
            self.tree.proc.stdin.close()

    @property
    def returncode(self) -> int | None:
        return self.tree.proc.returncode

    def poll(self) -> int | None:
        return self.tree.poll()

    def stop(self) -> None:
        self.tree.stop()
        if self.tree.proc.stdin is not None:
            self.tree.proc.stdin.close()


def _start_child(spec: dict[str, Any], server: ForkServer | None) -> _Spawned | ForkedChild:
    """A forked child of the server when it runs, else a worker process of its own.

    A server that is dead, stopped or talking nonsense is given up (taken down, one line on stderr
    saying why), and this and every later repro get a worker process of their own.
    """
    if server is None:
        return _Spawned(spec)
    if server.lost is None:
        try:
            return server.fork(spec)
        except ForkServerError as exc:
            server.give_up(str(exc))
    if not server.announced:
        server.announced = True
        print(
            f"repro all: fork server given up ({server.lost}); each repro now starts its own process",
            file=sys.stderr,
            flush=True,
        )
    return _Spawned(spec)


def run_one_isolated(
    req: RunRequest,
    run_dir: Path,
    timeout_s: float,
    on_line: Callable[[str], None] = lambda line: None,
    interrupts: Interrupts | None = None,
    server: ForkServer | None = None,
) -> Outcome:
    """Run ``req`` in a child process of its own; whatever happens, leave an artifact behind if the disk allows.

    The child is forked by ``server`` (``repro.run.forkserver``: torch already imported) when one
    is given and running, else started as ``python -m repro.run.worker`` under a guard. Either way
    the child and everything it starts are killed on timeout or interrupt, and die on their
    own if this process dies.
    """
    cls, _ = resolve(req)  # bad input fails here, before any child starts
    fingerprint.record_run_start(run_dir)  # the first repro's call reads it; the rest find it
    log, log_error = _open_log(run_dir / "logs" / f"{req.repro_id}.log")
    stop = interrupts if interrupts is not None else Interrupts()  # one never installed only sleeps
    t0 = time.monotonic()
    tree = _start_child(_worker_spec(req, run_dir), server)
    pump = _Pump(tree.stdout, log)
    pump.start()
    ended: str | None = None  # "timeout" or "interrupted" when we ended it
    try:
        while tree.poll() is None:
            if stop.is_set():
                ended = "interrupted"
                break
            if time.monotonic() - t0 > timeout_s:
                ended = "timeout"
                break
            on_line(pump.last_line)
            stop.wait(_POLL_S)
    finally:
        # Every way out (an exception of ours included) takes the whole tree down.
        tree.stop()
        pump.join(10)
        tree.stdout.close()
        if log is not None:
            # The runner's last word: how the child ended (and a log is never empty, even for a silent child).
            how = ended or f"exit status {tree.returncode}"
            log.write(f"[repro all: {req.repro_id} ended after {time.monotonic() - t0:.1f} s: {how}]\n".encode())
        if log is not None and log.publish() is None and log.error is not None:
            log_error = f"{log.path}: {log.error.strerror or log.error}"
    seconds = time.monotonic() - t0
    path = run_dir / f"{cls.id}.json"
    code = tree.returncode if tree.returncode is not None else -signal.SIGKILL
    if path.exists() and ended is None:
        try:
            doc = artifact.load(path, validate=False)
            spent = artifact.format_breakdown(artifact.time_breakdown(doc))
            busy = artifact.format_busy(doc)
            spent += f"; {busy}" if spent and busy else busy
            return Outcome(
                req.repro_id, doc["verdict"]["status"], path, seconds, doc["verdict"]["finding"], breakdown=spent
            )
        except (ReproError, KeyError, TypeError) as exc:  # our own file, so this is a bug; still, go on
            return Outcome(req.repro_id, "error", path, seconds, f"unreadable artifact: {exc}")
    sig = _signal_name(code)
    no_space = code == NO_SPACE_EXIT and ended is None
    if ended == "interrupted":
        name = interrupts.name if interrupts is not None else "a signal"
        kind, message = "interrupted", f"interrupted by {name} after {seconds:.1f} s; the batch stopped here"
        sig = name or None
    elif ended == "timeout":
        kind, message = "timeout", f"killed after exceeding the {timeout_s:g} s timeout"
    elif no_space:
        kind, message = "no_space", pump.last_line or "the artifact could not be written: no space left on device"
    elif lost := getattr(tree, "server_lost", None):
        # The server's death killed its child (PDEATHSIG): a SIGKILL that says nothing of the repro's memory.
        kind, message = "crash", f"the fork server went away while the repro ran, and took it along: {lost}"
        sig = None
    elif sig == "SIGKILL":
        kind, message = "oom", "killed by SIGKILL (the kernel's out-of-memory killer is the usual cause)"
    elif sig:
        kind, message = "crash", f"the repro process died of {sig}"
    else:
        kind, message = "crash", f"the repro process exited with code {code} without writing an artifact"
    tail = pump.tail()
    if log_error:
        tail += f"\n[repro: the log could not be written: {log_error}]"
    error = error_info(
        kind,
        message,
        exit_code=None if (sig or ended) else code,
        signal=sig,
        stderr_tail=tail,
    )
    if path.exists():  # a child that was being stopped finished its (atomic) write first: keep it
        return Outcome(req.repro_id, "error", path, seconds, message, no_space)
    try:
        artifact.write_artifact(error_document(req, run_dir, error, seconds), path)
    except fsio.NoSpace as exc:
        return Outcome(req.repro_id, "error", None, seconds, str(exc), True)
    except FileExistsError:
        pass
    return Outcome(req.repro_id, "error", path, seconds, message, no_space)


def outcome_line(o: Outcome) -> str:
    """``id: status (seconds) - finding``: the finding says why a repro skipped or what it measured;
    a second line says where the seconds went, when the artifact recorded it."""
    line = f"{o.repro_id}: {o.status} ({o.seconds:.1f} s) - {o.message}"
    return f"{line}\n  time: {o.breakdown}" if o.breakdown else line


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


def _describe(bar: Any, task: Any, repro_id: str, line: str) -> None:
    """The progress bar's description: the repro and the last line its log printed."""
    bar.update(task, description=f"{repro_id}: {line}")


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
    interrupts: Interrupts | None = None,
    collect_env: bool = True,
    fork_server: bool = True,
    quick: bool = False,
) -> list[Outcome]:
    """Run every id in turn, each isolated; a failing repro never stops the batch, an interrupt does.

    ``fork_server``: fork each repro from one server that imported torch once (see
    ``repro.run.forkserver``); without it, or when it cannot start, each repro is a fresh worker.
    """
    reqs = [
        RunRequest(
            repro_id=i,
            smoke=smoke,
            repro_paths=repro_paths,
            sampling=sampling,
            command=command,
            collect_env=collect_env,
            quick=quick,
        )
        for i in ids
    ]
    for req in reqs:
        resolve(req)  # validate all before running any
    run_dir.mkdir(parents=True, exist_ok=True)
    fingerprint.record_run_start(run_dir)  # before the fork server and any repro
    # What the repros would compile, built while the fork server imports torch (only then: a build
    # beside a repro's timing would be one more source of noise).
    builds = Builds(ids, repro_paths, smoke) if fork_server and ids else None
    server: ForkServer | None = None
    try:
        server = _fork_server(interrupts) if fork_server and ids else None
        if builds is not None:
            said = builds.wait(cancel=interrupts)
            if said:
                print(f"repro all: builds ahead: {said}", file=sys.stderr, flush=True)
    except BaseException:
        if builds is not None:
            builds.stop()
        if server is not None:
            server.close()
        raise
    try:
        outcomes: list[Outcome] = []

        def stopped() -> bool:
            return interrupts is not None and interrupts.is_set()

        if not progress:
            for req in reqs:
                if stopped():
                    break
                outcomes.append(run_one_isolated(req, run_dir, timeout_s, interrupts=interrupts, server=server))
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
                if stopped():
                    break
                bar.update(task, description=f"{req.repro_id}")
                outcome = run_one_isolated(
                    req,
                    run_dir,
                    timeout_s,
                    on_line=functools.partial(_describe, bar, task, req.repro_id),
                    interrupts=interrupts,
                    server=server,
                )
                outcomes.append(outcome)
                console.print(outcome_line(outcome), markup=False, highlight=False, soft_wrap=True)
                bar.advance(task)
            bar.update(task, description="repro all: interrupted" if stopped() else "repro all: done")
        return outcomes
    finally:
        if server is not None:
            server.close()


def _fork_server(interrupts: Interrupts | None) -> ForkServer | None:
    """A started fork server, or None (with a line saying why) when it could not start."""
    t0 = time.monotonic()
    print("repro all: importing torch once (fork server)", file=sys.stderr, flush=True)
    try:
        server = ForkServer().start(cancel=interrupts)
    except (ForkServerError, OSError) as exc:
        print(f"repro all: no fork server ({exc}); each repro starts its own process", file=sys.stderr, flush=True)
        return None
    torch_version = server.info.get("torch") or f"not importable: {server.info.get('torch_error')}"
    print(
        f"repro all: fork server ready in {time.monotonic() - t0:.1f} s (torch {torch_version})",
        file=sys.stderr,
        flush=True,
    )
    return server
