"""``python -m repro.run.zygote``: the fork server of ``repro all``: torch imported once, one child per repro.

Started by ``repro.run.forkserver.ForkServer`` under a guard (``repro.core.procs``), with its end of
a SOCK_SEQPACKET socketpair as stdin (no socket path: nobody else can connect). It imports torch
and the harness once, without touching CUDA (a process that initialised CUDA cannot fork a
child that uses it), says it is ready, and then serves requests one at a
time over that socket (one message per request or answer). Each request brings a
worker spec (JSON) and, as an SCM_RIGHTS file descriptor, the write end of the pipe that
becomes the child's stdout and stderr. For each request it forks:

- the child runs the repro exactly as ``python -m repro.run.worker`` would (``worker.run_spec``),
  with its own tree token in the environment (so the runner can sweep whatever it execs; what
  it forks without exec is found as its descendants, or under the guard once orphaned),
  PR_SET_PDEATHSIG so that it dies with the server, and default signal dispositions;
- the server answers ``{"pid": N}`` at once and ``{"exit": N, "code": C}`` when the child ends,
  ``C`` as ``subprocess`` reports it (negative: killed by that signal), both with the request's
  id; it reaps the child only when the runner says ``{"reap": N}``, so until then the pid
  cannot be reused and a kill by pid cannot hit another process.

A crash, hang or OOM of a child costs that child only: the runner kills it by pid and by
token, and the server goes on with the next request. While a child runs the server watches the
socket too: a runner that is gone (its end closed, even after the guard was killed first) makes
it kill the child's tree and exit, so nothing outlives the runner. Standard library and the
harness only.
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import select
import signal
import socket
import sys
import time
from typing import Any

from repro.core import procs

# One request's JSON (a worker spec with its overrides) stays far below this.
MAX_REQUEST = 1 << 20


def _send(conn: socket.socket, msg: dict[str, Any]) -> None:
    conn.send(json.dumps(msg).encode())


def _preload() -> dict[str, Any]:
    """Import what every child needs, once; never initialise CUDA here."""
    t0 = time.perf_counter()
    info: dict[str, Any] = {"torch": None, "torch_error": None}
    try:
        import torch

        info["torch"] = torch.__version__
    except Exception as exc:  # each child then reports torch as missing, as a worker would
        info["torch_error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
    import repro.run.execute  # noqa: F401  (and through it: catalog, measure, verdict, fingerprint)
    import repro.run.worker  # noqa: F401

    info["import_s"] = time.perf_counter() - t0
    return info


def _child(spec: dict[str, Any], out_fd: int, conn: socket.socket) -> None:
    """In the forked child: become the worker. Never returns."""
    code = 1  # as Python exits on an uncaught exception
    try:
        conn.close()
        procs.set_pdeathsig(signal.SIGKILL)
        procs.set_child_subreaper()  # orphans of its subtree stay findable under it
        # As a fresh `python -m repro.run.worker` has them: Ctrl-C raises KeyboardInterrupt, a closed
        # pipe raises BrokenPipeError (SIGPIPE ignored), TERM and HUP kill.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        token = spec.pop("tree_token", None)
        if token:
            os.environ[procs.TOKEN_VAR] = token
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        os.close(out_fd)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        from repro.run import worker

        code = worker.run_spec(spec)
    except SystemExit as exc:  # Python's own rules: None is 0, an int is itself, anything else is printed, 1
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            with contextlib.suppress(Exception):
                print(exc.code, file=sys.stderr)
            code = 1
    except BaseException as exc:  # the worker's own handlers missed it: say so on its log, exit 1
        with contextlib.suppress(Exception):
            import traceback

            traceback.print_exception(exc)
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed pipe: nothing more to say
                stream.flush()
        os._exit(code)


def _kill_child(pid: int, token: str | None) -> None:
    """SIGKILL the child and everything it started (found as its descendants, and by its token)."""
    for _ in range(3):  # a forking child adds more while we kill
        for victim in [pid, *procs.descendants(pid)]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(victim, signal.SIGKILL)
    if token:
        procs.sweep(token)


def _wait_for_child(conn: socket.socket, pid: int, token: str | None) -> bool:
    """Wait until the child has exited (True, left unreaped) or the runner has hung up (False).

    Blocking in waitid alone would miss a runner that died while its guard was already gone: the
    child would run on with nobody to report to. A pidfd (Linux 5.3+) wakes this at the child's
    exit; without one, the child is checked every 0.1 s.
    """
    pidfd = None
    with contextlib.suppress(AttributeError, OSError):
        pidfd = os.pidfd_open(pid)
    poller = select.poll()
    poller.register(conn, select.POLLIN | select.POLLHUP | select.POLLERR)
    if pidfd is not None:
        poller.register(pidfd, select.POLLIN)
    try:
        while True:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
            for fd, _ in poller.poll(None if pidfd is not None else 100):
                if fd != conn.fileno():
                    continue
                try:
                    data = conn.recv(MAX_REQUEST)
                except OSError:
                    data = b""
                if not data:  # the runner is gone: so is its repro
                    _kill_child(pid, token)
                    return False
                print("zygote: ignored a message that came while a child ran", file=sys.stderr, flush=True)
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _wait_for_reap(conn: socket.socket, pid: int) -> None:
    """Block until the runner's ``{"reap": pid}`` (or its hang-up): it has finished killing by pid."""
    while True:
        try:
            data = conn.recv(MAX_REQUEST)
        except OSError:
            return
        if not data:
            return
        with contextlib.suppress(ValueError):
            if json.loads(data.decode()).get("reap") == pid:
                return


def _stdin_socket() -> socket.socket:
    """The runner's socket, handed over as stdin; stdin itself becomes /dev/null (as a worker's is)."""
    conn = socket.socket(fileno=os.dup(0))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return conn


def serve(conn: socket.socket) -> int:
    """Serve the runner on ``conn``: fork one child per request until it hangs up."""
    info = _preload()
    _send(conn, {"ready": True, "pid": os.getpid(), **info})
    while True:
        fds = array.array("i")
        try:
            data, ancdata, _, _ = conn.recvmsg(MAX_REQUEST, socket.CMSG_SPACE(fds.itemsize))
        except (ConnectionResetError, OSError):
            return 0
        if not data:
            return 0  # the runner is done
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - (len(payload) % fds.itemsize)])
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            _send(conn, {"error": f"expected one file descriptor with the request, got {len(fds)}"})
            continue
        try:
            spec = json.loads(data.decode())
            if not isinstance(spec, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            os.close(fds[0])
            _send(conn, {"error": f"expected a worker spec (a JSON object): {exc}"})
            continue
        req = spec.pop("request_id", None)  # echoed, so the runner never takes a stale answer for a new one
        token = spec.get("tree_token")
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(spec, fds[0], conn)
        os.close(fds[0])
        _send(conn, {"pid": pid, "request_id": req})
        # Collected without reaping, reported, and only reaped once the runner says so: until
        # then the pid stays a zombie, so the runner's kill can never hit a process that reused it.
        if not _wait_for_child(conn, pid, token):
            return 0  # the runner is gone; the child's tree was killed
        st = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        assert st is not None  # _wait_for_child saw it exit
        code = -st.si_status if st.si_code in (os.CLD_KILLED, os.CLD_DUMPED) else st.si_status
        _send(conn, {"exit": pid, "code": code, "request_id": req})
        _wait_for_reap(conn, pid)
        os.waitpid(pid, 0)


def main(argv: list[str]) -> int:
    """Serve the runner whose socket is this process's stdin."""
    if argv:
        print("usage: python -m repro.run.zygote (its stdin: the runner's end of a socketpair)", file=sys.stderr)
        return 2
    try:
        conn = _stdin_socket()
    except OSError as exc:
        print(f"zygote: stdin is not the runner's socket ({exc})", file=sys.stderr)
        return 2
    return serve(conn)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
