"""The runner's side of the fork server (``repro.run.zygote``): start it once, fork one child per repro, kill a child.

``python -m repro.run.worker`` per repro imports torch again each time (seconds on a GPU machine,
paid five times by ``repro all``). The fork server imports it once; each repro still runs in a
process of its own, so a segfault, hang or OOM costs that repro only, as before:

- the server runs under a guard (``repro.core.procs.spawn``), so it and every child die with the
  runner, whatever kills the runner;
- each child carries its own tree token, dies with the server (PR_SET_PDEATHSIG), and is
  ended by SIGKILL to its pid plus a sweep of its token (whatever it started);
- a server that cannot start, or dies, costs nothing but time: the runner falls back to
  one ``python -m repro.run.worker`` per repro;
- the server talks over one end of a socketpair, handed to it as its stdin: there is no socket
  path (nothing another process could connect to first, nothing left in /tmp by a SIGKILL), and
  its log is an unnamed temporary file;
- the server watches that socket while a child runs: when the runner is gone (even after its
  guard was killed first) it kills the child's tree and exits;
- what the server says is checked: a message that is not one, or a pid that is not its own
  child, gives the server up (one line; the repro runs in a fresh worker) and nothing is killed
  by that pid; a server that died, or is stopped, is reported as such, never as the repro's OOM.
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from types import TracebackType
from typing import IO, Any

from repro.core import procs

# Importing torch on a cold GPU machine took ~20 s; a server not ready long after is broken.
READY_TIMEOUT_S = 300.0
# The server answers a fork at once; a reply this late means it is wedged.
REPLY_TIMEOUT_S = 30.0
_MAX_MESSAGE = 1 << 16
# How long an exited child may wait for the server's report before the kernel's record is used (and
# the server given up): a well server answers in milliseconds; a loaded machine gets some slack.
STALL_S = 5.0


def _readable(sock: socket.socket, timeout_s: float) -> bool:
    """Whether ``sock`` has something to read (or hung up) within ``timeout_s`` (poll: no fd limit)."""
    p = select.poll()
    p.register(sock, select.POLLIN | select.POLLHUP | select.POLLERR)
    return bool(p.poll(max(0.0, timeout_s) * 1000))


def _stat(pid: int) -> list[bytes]:
    """The fields of /proc/PID/stat after the command name (field 3, the state, first); empty when gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()
    except OSError:
        return []


def _zombie(pid: int) -> bool:
    """Whether ``pid`` has exited and waits to be reaped (or is gone): nothing left to kill."""
    fields = _stat(pid)
    return not fields or fields[0] in (b"Z", b"X")


def _stopped(pid: int) -> bool:
    """Whether ``pid`` is stopped (SIGSTOP, a debugger): it answers nothing until continued."""
    fields = _stat(pid)
    return bool(fields) and fields[0] in (b"T", b"t")


def _parent(pid: int) -> int | None:
    fields = _stat(pid)
    return int(fields[1]) if len(fields) > 1 else None


def _exit_code(pid: int) -> int | None:
    """The exit status of ``pid`` once it is a zombie, as ``subprocess`` reports it; None while it runs.

    Read from /proc/PID/stat (field 52, Linux 3.5+): the server keeps its exited child unreaped until
    the runner says so, so the kernel still holds the status even when the server cannot answer.
    """
    fields = _stat(pid)
    if len(fields) < 50 or fields[0] != b"Z":
        return None
    return os.waitstatus_to_exitcode(int(fields[49]))


def _how(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def _brief(value: object) -> str:
    """A message as a short, printable excerpt for an error line."""
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


class ForkServerError(RuntimeError):
    """The fork server could not start, or stopped answering."""


class ForkServerLost(ForkServerError):
    """The fork server is gone (dead, stopped, or given up): how its child ended is unknown."""


class _HungUp(ForkServerError):
    """The server closed its end of the socket (it exited, or was killed)."""


class ForkedChild:
    """One repro's process, forked by the server: its output, its exit status, and how to end it."""

    def __init__(self, pid: int, stdout: IO[bytes], token: str, server: ForkServer) -> None:
        self.pid = pid
        self.stdout = stdout
        self.token = token
        self.returncode: int | None = None
        # Why the server went away while this child ran, when its own exit status is therefore unknown.
        self.server_lost: str | None = None
        self._server = server

    def poll(self) -> int | None:
        """The exit status (negative: killed by that signal), None while it runs.

        The server reports it; when the server cannot (stopped, wedged) the kernel's record of the
        exited child is used; when the server is gone, ``server_lost`` says why.
        """
        if self.returncode is not None:
            return self.returncode
        server = self._server
        try:
            code = server.exit_status(self.pid, timeout_s=0.0)
            if code is None and _zombie(self.pid):
                # Ended, and the server has not said so: a well server answers within milliseconds. The
                # kernel keeps the status of a child its (stopped) server has not reaped; a dead server's
                # child is gone, reaped by the guard.
                ended = _exit_code(self.pid)
                code = server.exit_status(self.pid, timeout_s=STALL_S)
                if code is None:
                    dead = server.dead
                    server.give_up(
                        "the fork server died"
                        if dead
                        else f"the fork server did not report its child's exit within {STALL_S:g} s"
                    )
                    if dead and ended in (None, -signal.SIGKILL):  # PDEATHSIG: the server's death, not the child's
                        raise ForkServerLost(server.lost or "the fork server died")
                    code = ended if ended is not None else -signal.SIGKILL  # stopped: the kernel's record
        except ForkServerLost as exc:
            code = _exit_code(self.pid)
            # A child of a dead server is SIGKILLed by its PDEATHSIG: that says nothing of the repro.
            if code is None or code == -signal.SIGKILL:
                self.server_lost, code = str(exc), -signal.SIGKILL
        self.returncode = code
        return code

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGKILL the child and everything it started; then collect its exit status.

        What it started is found three ways: its descendants (the child is a subreaper, so
        orphans of its subtree stay under it), its token (whatever exec'd with its
        environment), and, once it is gone, whatever was re-parented to the server's guard.
        """
        if self.poll() is None:
            for _ in range(3):  # a forking child adds more while we kill
                victims = [self.pid, *procs.descendants(self.pid)]
                for pid in victims:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
            procs.sweep(self.token)
            try:
                self.returncode = self._server.exit_status(self.pid, timeout_s=grace_s)
            except ForkServerLost:
                self.returncode = _exit_code(self.pid)
            if self.returncode is None:  # the server is wedged: it and the child go together
                self._server.give_up(f"the fork server did not report its killed child within {grace_s:g} s")
                self.returncode = -signal.SIGKILL
        procs.sweep(self.token)
        self._server.reap_orphans()


class ForkServer:
    """``repro.run.zygote`` under a guard, talked to over a SOCK_SEQPACKET socketpair (its stdin)."""

    def __init__(self, python: str = sys.executable, ready_timeout_s: float = READY_TIMEOUT_S) -> None:
        self.python = python
        self.ready_timeout_s = ready_timeout_s
        self.info: dict[str, Any] = {}
        self.lost: str | None = None  # why the server was given up (died, stopped, spoke nonsense)
        self.announced = False  # whether the runner has said so (once)
        self._tree: procs.Tree | None = None
        self._conn: socket.socket | None = None
        self._pending: dict[int, int] = {}  # exit statuses read while waiting for something else
        self._request = ""  # id of the request in flight; answers carry it
        self._log: IO[bytes] | None = None

    @property
    def alive(self) -> bool:
        """Whether requests can still be sent: connected, its guard running, the server not stopped."""
        if self._conn is None or self._tree is None or self._tree.poll() is not None:
            return False
        pid = int(self.info.get("pid") or 0)
        if pid and _stopped(pid):
            self.lost = self.lost or f"the fork server (pid {pid}) is stopped (SIGSTOP or a debugger)"
            return False
        return True

    def start(self, cancel: procs.Cancel | None = None) -> ForkServer:
        """Start the server and wait until it has imported torch; ForkServerError if it cannot
        (or if ``cancel`` is set meanwhile: an interrupt must not wait for an import)."""
        # Unnamed: a runner killed at any moment leaves no file, folder or socket behind.
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        try:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            self._conn = ours
            try:
                self._tree = procs.spawn(
                    [self.python, "-m", "repro.run.zygote"],
                    stdin=theirs.fileno(),
                    stdout=self._log,
                    stderr=subprocess.STDOUT,
                )
            finally:
                theirs.close()  # the server holds the other end now; EOF here once it is gone
            deadline = time.monotonic() + self.ready_timeout_s
            while not _readable(ours, 0.2):
                if self._tree.poll() is not None:
                    raise ForkServerError(f"the fork server exited with {self._tree.poll()}: {self._log_tail()}")
                if time.monotonic() > deadline:
                    raise ForkServerError(f"the fork server was not ready after {self.ready_timeout_s:g} s")
                if cancel is not None and cancel.is_set():
                    raise ForkServerError("interrupted while the fork server started")
            try:
                msg = self._recv(self.ready_timeout_s)
            except _HungUp as exc:  # it died before its first word: its exit and log say why
                code = self._wait_guard(5.0)
                raise ForkServerError(f"{exc}; it ended with {_how(code)}: {self._log_tail()}") from None
            pid = msg.get("pid")
            if msg.get("ready") is not True or not isinstance(pid, int) or _parent(pid) != self._tree.pid:
                raise ForkServerError(f"unexpected first message from the fork server: {_brief(msg)}")
            self.info = msg
        except BaseException:
            self.close()
            raise
        return self

    def fork(self, spec: dict[str, Any]) -> ForkedChild:
        """Start one repro (a worker spec) in a forked child whose stdout and stderr go to a new pipe."""
        if not self.alive or self._conn is None:
            raise ForkServerLost(self.lost or "the fork server is not running")
        token = uuid.uuid4().hex
        self._request = uuid.uuid4().hex
        data = json.dumps({**spec, "tree_token": token, "request_id": self._request}).encode()
        r, w = os.pipe()
        try:
            self._conn.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [w]))])
        except OSError as exc:
            os.close(r)
            self.give_up(f"could not reach the fork server: {exc}")
            raise ForkServerError(self.lost or str(exc)) from exc
        finally:
            os.close(w)  # the child holds the only write end: EOF on r when it (and its own children) end
        try:
            reply = self._recv(REPLY_TIMEOUT_S)
        except ForkServerError as exc:
            os.close(r)
            # A late answer would belong to this request, and the repro may run unwatched: end it all.
            self.give_up(str(exc))
            raise
        pid = reply.get("pid")
        server = int(self.info.get("pid") or 0)
        if reply.get("request_id") != self._request or not isinstance(pid, int) or _parent(pid) != server:
            os.close(r)
            # Never believed: a pid that is not the server's own child is never killed by this runner.
            self.give_up(f"the fork server did not fork: {_brief(reply)}")
            raise ForkServerError(self.lost or "the fork server did not fork")
        return ForkedChild(pid, os.fdopen(r, "rb", buffering=0), token, self)

    def exit_status(self, pid: int, timeout_s: float) -> int | None:
        """The child's exit status once the server reports it; None if not within ``timeout_s``.

        ForkServerLost when the server is gone (or goes) first: the child died with it.
        """
        deadline = time.monotonic() + timeout_s
        while pid not in self._pending:
            if self._conn is None:
                raise ForkServerLost(self.lost or "the fork server is gone")
            if not _readable(self._conn, deadline - time.monotonic()):
                return None
            try:
                msg = self._recv(REPLY_TIMEOUT_S)
            except ForkServerError as exc:
                self.give_up(str(exc))
                raise ForkServerLost(self.lost or str(exc)) from None
            if "exit" in msg and msg.get("request_id") == self._request:
                if not isinstance(msg["exit"], int) or not isinstance(msg.get("code"), int):
                    self.give_up(f"the fork server sent a malformed exit report: {_brief(msg)}")
                    raise ForkServerLost(self.lost or "malformed exit report")
                self._pending[msg["exit"]] = msg["code"]
        # Every kill by pid is done: the server may reap it now (until then the pid cannot be reused).
        with contextlib.suppress(OSError):
            if self._conn is not None:
                self._conn.send(json.dumps({"reap": pid}).encode())
        return self._pending.pop(pid)

    @property
    def dead(self) -> bool:
        """Whether the server process has exited (or never said who it is)."""
        pid = int(self.info.get("pid") or 0)
        return not pid or _zombie(pid)

    def give_up(self, why: str) -> None:
        """Stop using the server: remember why (with how it ended, when it did) and take its tree down."""
        if self.lost is None:
            pid = self.info.get("pid")
            code = self._wait_guard(1.0)
            ended = f" (server pid {pid or '?'}: {_how(code)})" if code is not None else ""
            self.lost = f"{why}{ended}"
        self.close()

    def reap_orphans(self) -> None:
        """Between children: SIGKILL everything under the guard but the server itself.

        A child's own children that outlived it were re-parented to the guard (a subreaper);
        no child of the server runs now, so nothing else can be there.
        """
        if self._tree is None or self._tree.poll() is not None:
            return
        keep = int(self.info.get("pid") or 0)
        for _ in range(20):
            left = [p for p in procs.descendants(self._tree.pid) if p != keep and not _zombie(p)]
            if not left:
                return
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)

    def _recv(self, timeout_s: float) -> dict[str, Any]:
        """One message from the server; ForkServerError (one line) for silence, a hang-up or nonsense."""
        if self._conn is None:
            raise ForkServerError(self.lost or "the fork server is not running")
        if not _readable(self._conn, timeout_s):
            raise ForkServerError(f"the fork server did not answer within {timeout_s:g} s")
        try:
            data = self._conn.recv(_MAX_MESSAGE)
        except OSError as exc:
            data = b""
            why = str(exc)
        else:
            why = "it closed the connection"
        if not data:
            raise _HungUp(f"the fork server stopped answering ({why})")
        try:
            msg = json.loads(data.decode())
        except ValueError:  # JSONDecodeError and undecodable bytes
            msg = None
        if not isinstance(msg, dict):
            raise ForkServerError(f"the fork server sent something that is not a message: {_brief(data)}")
        return msg

    def _wait_guard(self, timeout_s: float) -> int | None:
        """The guard's exit status (it mirrors the server's), waiting up to ``timeout_s``; None if it runs."""
        if self._tree is None:
            return None
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._tree.proc.wait(timeout_s)
        return self._tree.poll()

    def _log_tail(self) -> str:
        if self._log is None:
            return ""
        try:
            self._log.seek(0)
            return self._log.read()[-1500:].decode(errors="replace").strip() or "no output"
        except OSError:
            return "no log"

    def close(self) -> None:
        """Hang up (the server exits on EOF) and take its tree down; idempotent."""
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.close()
            self._conn = None
        if self._tree is not None:
            self._tree.stop()
            self._tree.finish()
            self._tree = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> ForkServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
