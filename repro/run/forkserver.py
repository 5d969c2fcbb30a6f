"""The runner's side of the fork server (``repro.run.zygote``): start it once, fork one child per repro, kill a child.

``python -m repro.run.worker`` per repro imports torch again each time (seconds on a GPU machine,
paid five times by ``repro all``). The fork server imports it once; each repro still runs in a
process of its own, so a segfault, hang or OOM costs that repro only, as before:

- the server runs under a guard (``repro.core.procs.spawn``), so it and every child die with the
  runner, whatever kills the runner;
- each child carries its own tree token, dies with the server (PR_SET_PDEATHSIG), and is
  ended by SIGKILL to its pid plus a sweep of its token (whatever it started);
- a server that cannot start, or dies, costs nothing but time: the runner falls back to
  one ``python -m repro.run.worker`` per repro.
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
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


def _readable(sock: socket.socket, timeout_s: float) -> bool:
    """Whether ``sock`` has something to read (or hung up) within ``timeout_s`` (poll: no fd limit)."""
    p = select.poll()
    p.register(sock, select.POLLIN | select.POLLHUP | select.POLLERR)
    return bool(p.poll(max(0.0, timeout_s) * 1000))


def _zombie(pid: int) -> bool:
    """Whether ``pid`` has exited and waits to be reaped (or is gone): nothing left to kill."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):
        return True


class ForkServerError(RuntimeError):
    """The fork server could not start, or stopped answering."""


class ForkedChild:
    """One repro's process, forked by the server: its output, its exit status, and how to end it."""

    def __init__(self, pid: int, stdout: IO[bytes], token: str, server: ForkServer) -> None:
        self.pid = pid
        self.stdout = stdout
        self.token = token
        self.returncode: int | None = None
        self._server = server

    def poll(self) -> int | None:
        """The exit status (negative: killed by that signal), None while it runs."""
        if self.returncode is None:
            self.returncode = self._server.exit_status(self.pid, timeout_s=0.0)
        return self.returncode

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
            self.returncode = self._server.exit_status(self.pid, timeout_s=grace_s)
            if self.returncode is None:  # the server is wedged: it and the child go together
                self._server.close()
                self.returncode = -signal.SIGKILL
        procs.sweep(self.token)
        self._server.reap_orphans()


class ForkServer:
    """``repro.run.zygote`` under a guard, talked to over a SOCK_SEQPACKET Unix socket."""

    def __init__(self, python: str = sys.executable, ready_timeout_s: float = READY_TIMEOUT_S) -> None:
        self.python = python
        self.ready_timeout_s = ready_timeout_s
        self.info: dict[str, Any] = {}
        self._dir: str | None = None
        self._tree: procs.Tree | None = None
        self._conn: socket.socket | None = None
        self._pending: dict[int, int] = {}  # exit statuses read while waiting for something else
        self._request = ""  # id of the request in flight; answers carry it
        self._log: IO[bytes] | None = None

    @property
    def alive(self) -> bool:
        """Whether requests can still be sent."""
        return self._conn is not None and self._tree is not None and self._tree.poll() is None

    def start(self, cancel: threading.Event | None = None) -> ForkServer:
        """Start the server and wait until it has imported torch; ForkServerError if it cannot
        (or if ``cancel`` is set meanwhile: an interrupt must not wait for an import)."""
        self._dir = tempfile.mkdtemp(prefix="gpu-repro-fork-")
        path = os.path.join(self._dir, "sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            listener.bind(path)
            listener.listen(1)
            # Kept open: the folder is removed once the server connects, and its log is read from here.
            self._log = open(os.path.join(self._dir, "server.log"), "w+b")  # noqa: SIM115 (closed in close())
            self._tree = procs.spawn(
                [self.python, "-m", "repro.run.zygote", path],
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
            )
            deadline = time.monotonic() + self.ready_timeout_s
            while True:
                if self._tree.poll() is not None:
                    raise ForkServerError(f"the fork server exited with {self._tree.poll()}: {self._log_tail()}")
                if time.monotonic() > deadline:
                    raise ForkServerError(f"the fork server was not ready after {self.ready_timeout_s:g} s")
                if cancel is not None and cancel.is_set():
                    raise ForkServerError("interrupted while the fork server started")
                if _readable(listener, 0.2):
                    self._conn, _ = listener.accept()
                    # Nothing left to find by name: a killed runner leaves no folder behind in /tmp.
                    shutil.rmtree(self._dir, ignore_errors=True)
                    self._dir = None
                    break
            msg = self._recv(self.ready_timeout_s)
            if not msg.get("ready"):
                raise ForkServerError(f"unexpected first message from the fork server: {msg}")
            self.info = msg
        except BaseException:
            self.close()
            raise
        finally:
            listener.close()
        return self

    def fork(self, spec: dict[str, Any]) -> ForkedChild:
        """Start one repro (a worker spec) in a forked child whose stdout and stderr go to a new pipe."""
        if not self.alive or self._conn is None:
            raise ForkServerError("the fork server is not running")
        token = uuid.uuid4().hex
        self._request = uuid.uuid4().hex
        data = json.dumps({**spec, "tree_token": token, "request_id": self._request}).encode()
        r, w = os.pipe()
        try:
            self._conn.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [w]))])
        except OSError as exc:
            os.close(r)
            raise ForkServerError(f"could not reach the fork server: {exc}") from exc
        finally:
            os.close(w)  # the child holds the only write end: EOF on r when it (and its own children) end
        try:
            reply = self._recv(REPLY_TIMEOUT_S)
        except ForkServerError:
            os.close(r)
            # A late answer would belong to this request, and the repro may run unwatched: end it all.
            self.close()
            raise
        if "pid" not in reply or reply.get("request_id") != self._request:
            os.close(r)
            self.close()
            raise ForkServerError(f"the fork server did not fork: {reply.get('error', reply)}")
        return ForkedChild(int(reply["pid"]), os.fdopen(r, "rb", buffering=0), token, self)

    def exit_status(self, pid: int, timeout_s: float) -> int | None:
        """The child's exit status once the server reports it; None if not within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while pid not in self._pending:
            if self._conn is None:
                return -signal.SIGKILL  # the server is gone, and its children died with it
            if not _readable(self._conn, deadline - time.monotonic()):
                return None
            try:
                msg = self._recv(REPLY_TIMEOUT_S)
            except ForkServerError:
                return -signal.SIGKILL
            if "exit" in msg and msg.get("request_id") == self._request:
                self._pending[int(msg["exit"])] = int(msg["code"])
        # Every kill by pid is done: the server may reap it now (until then the pid cannot be reused).
        with contextlib.suppress(OSError):
            if self._conn is not None:
                self._conn.send(json.dumps({"reap": pid}).encode())
        return self._pending.pop(pid)

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
        assert self._conn is not None
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
            self.close()
            raise ForkServerError(f"the fork server stopped answering ({why})")
        msg: dict[str, Any] = json.loads(data.decode())
        return msg

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
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> ForkServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
