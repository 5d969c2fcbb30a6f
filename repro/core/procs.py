"""Child processes that cannot outlive their parent, and whose descendants die with them.

Bottom layer (standard library only). ``spawn`` starts a command under a guard
(``python -m repro.run.guard``), a tiny supervisor that

- is a child subreaper (PR_SET_CHILD_SUBREAPER), so every orphaned descendant
  of the command is re-parented to it and can still be found and killed;
- watches a pipe whose write end only the parent holds: when the parent dies
  (even by SIGKILL) or closes it on purpose, the read end sees EOF and the guard
  SIGKILLs every descendant, then itself;
- also gets PR_SET_PDEATHSIG, as a second line of defence when the parent's
  spawning thread is its main thread;
- when the command ends by itself, kills whatever the command left running
  (a repro's grandchildren die with it), and exits as the command did.

Every process of the tree carries ``GPU_REPRO_TREE=<token>`` in its environment,
so the parent can sweep the whole tree by scanning /proc even for a process
that left the process group and the parent chain.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from typing import IO, Any, Protocol

TOKEN_VAR = "GPU_REPRO_TREE"
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


class Cancel(Protocol):
    """Whatever says that a wait for a child should end early: a ``threading.Event``, or a Ctrl-C
    that a CLI recorded (``repro.run.runner.Interrupts``)."""

    def is_set(self) -> bool: ...


def _prctl(option: int, arg: int) -> bool:
    """prctl(2) through libc; False where it is not available (not Linux, no libc)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def set_pdeathsig(sig: int) -> bool:
    """Have the kernel send ``sig`` to this process when the thread that forked it exits."""
    return _prctl(_PR_SET_PDEATHSIG, sig)


def set_child_subreaper() -> bool:
    """Become the reaper of orphaned descendants (instead of init), so they stay findable."""
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)


# --------------------------------------------------------------------------- finding processes


def _ppids() -> dict[int, int]:
    """pid -> parent pid for every process visible in /proc."""
    out: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        # The command name (field 2) may hold spaces and parentheses; fields resume after the last ')'.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1:
            out[int(name)] = int(fields[1])
    return out


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (children first)."""
    kids: dict[int, list[int]] = {}
    for child, parent in _ppids().items():
        kids.setdefault(parent, []).append(child)
    out: list[int] = []
    todo = list(kids.get(pid, []))
    while todo:
        p = todo.pop(0)
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def pids_with_env(var: str, value: str) -> list[int]:
    """Processes (other than this one) whose environment holds ``var=value``."""
    needle = f"{var}={value}".encode()
    me = os.getpid()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                env = fh.read()
        except OSError:
            continue
        if needle in env.split(b"\0"):
            out.append(int(name))
    return out


def _kill(pids: Iterable[int], sig: int = signal.SIGKILL) -> int:
    n = 0
    for p in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p, sig)
            n += 1
    return n


def kill_descendants(pid: int, rounds: int = 50) -> None:
    """SIGKILL every descendant of ``pid``, again until none is left (a forking child adds more)."""
    for _ in range(rounds):
        if not _kill(descendants(pid)):
            return
        _reap()
        time.sleep(0.01)


def sweep(token: str, rounds: int = 50) -> list[int]:
    """SIGKILL every process whose environment carries this tree's token; returns the pids found first."""
    first: list[int] = []
    for i in range(rounds):
        found = pids_with_env(TOKEN_VAR, token)
        if i == 0:
            first = found
        if not _kill(found):
            break
        # No reaping here: the parent must not steal the exit status of a child it still waits for.
        time.sleep(0.01)
    return first


def _reap() -> None:
    """Collect exited children of this process (zombies) without blocking."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


# --------------------------------------------------------------------------- the parent's side


class Tree:
    """A command running under a guard; ``stop()`` ends it and everything it started."""

    def __init__(self, proc: subprocess.Popen[Any], lifeline: int, token: str) -> None:
        self.proc = proc
        self.token = token
        self._lifeline: int | None = lifeline

    @property
    def pid(self) -> int:
        """The guard's pid (also its process group and session id)."""
        return self.proc.pid

    def poll(self) -> int | None:
        """The guard's exit status, None while it runs."""
        return self.proc.poll()

    def _cut_lifeline(self) -> None:
        if self._lifeline is not None:
            with contextlib.suppress(OSError):
                os.close(self._lifeline)
            self._lifeline = None

    def stop(self, grace_s: float = 3.0) -> None:
        """End the tree: the guard kills its descendants; whatever is left after ``grace_s`` is SIGKILLed."""
        self._cut_lifeline()  # the guard sees EOF on its lifeline and kills its descendants
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.finish()

    def finish(self) -> None:
        """After the guard has exited: close the lifeline and kill anything of the tree still running."""
        self._cut_lifeline()
        sweep(self.token)


def spawn(
    argv: Sequence[str],
    *,
    stdin: int | IO[Any] | None = subprocess.DEVNULL,
    stdout: int | IO[Any] | None = None,
    stderr: int | IO[Any] | None = None,
    text: bool = False,
    env: dict[str, str] | None = None,
) -> Tree:
    """Start ``argv`` under a guard in a new session; see the module docstring for what that buys."""
    token = uuid.uuid4().hex
    child_env = dict(os.environ if env is None else env)
    child_env[TOKEN_VAR] = token
    read_end, write_end = os.pipe()
    on_main = threading.current_thread() is threading.main_thread()

    def before_exec() -> None:
        # PDEATHSIG follows the *thread* that forked: only tie it to the main thread, which lives as long
        # as the process. The lifeline pipe covers every other case.
        if on_main:
            set_pdeathsig(signal.SIGTERM)

    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "repro.run.guard", str(read_end), str(os.getpid()), "--", *argv],
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            text=text,
            env=child_env,
            pass_fds=(read_end,),
            start_new_session=True,  # its own process group: a terminal's Ctrl-C reaches only us, we stop it
            preexec_fn=before_exec,  # noqa: PLW1509 - only a prctl, no locks taken
        )
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    return Tree(proc, write_end, token)
