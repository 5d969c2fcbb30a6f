"""``python -m repro.zygote SOCKET``: the fork server of ``repro all``: torch imported once, one child per repro.

Started by ``repro.forkserver.ForkServer`` under a guard (``repro.procs``). It imports torch
and the harness once, without touching CUDA (a process that initialised CUDA cannot fork a
child that uses it), connects to the runner's Unix socket, and then serves requests one at a
time over a SOCK_SEQPACKET socket (one message per request or answer). Each request brings a
worker spec (JSON) and, as an SCM_RIGHTS file descriptor, the write end of the pipe that
becomes the child's stdout and stderr. For each request it forks:

- the child runs the repro exactly as ``python -m repro.worker`` would (``worker.run_spec``),
  with its own tree token in the environment (so the runner can sweep whatever it starts),
  PR_SET_PDEATHSIG so that it dies with the server, and default signal dispositions;
- the server answers ``{"pid": N}`` at once and ``{"exit": N, "code": C}`` when the child ends,
  ``C`` as ``subprocess`` reports it (negative: killed by that signal).

A crash, hang or OOM of a child costs that child only: the runner kills it by pid and by
token, and the server goes on with the next request. Standard library and the harness only.
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import signal
import socket
import sys
import time
from typing import Any

from repro import procs

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
    import repro.execute  # noqa: F401  (and through it: catalog, measure, verdict, fingerprint)
    import repro.worker  # noqa: F401

    info["import_s"] = time.perf_counter() - t0
    return info


def _child(spec: dict[str, Any], out_fd: int, conn: socket.socket) -> None:
    """In the forked child: become the worker. Never returns."""
    code = 70  # EX_SOFTWARE, should anything below fail before the worker runs
    try:
        conn.close()
        procs.set_pdeathsig(signal.SIGKILL)
        procs.set_child_subreaper()  # orphans of its subtree stay findable under it
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
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
        from repro import worker

        code = worker.run_spec(spec)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException as exc:  # the worker's own handlers missed it: say so on its log
        try:
            import traceback

            traceback.print_exception(exc)
        finally:
            code = 70
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed pipe: nothing more to say
                stream.flush()
        os._exit(code)


def serve(path: str) -> int:
    """Connect to the runner at ``path`` and fork one child per request until it hangs up."""
    info = _preload()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    conn.connect(path)
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
        spec = json.loads(data.decode())
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(spec, fds[0], conn)
        os.close(fds[0])
        _send(conn, {"pid": pid})
        _, status = os.waitpid(pid, 0)
        _send(conn, {"exit": pid, "code": os.waitstatus_to_exitcode(status)})


def main(argv: list[str]) -> int:
    """Serve the runner whose socket is ``argv[0]``."""
    if len(argv) != 1:
        print("usage: python -m repro.zygote SOCKET", file=sys.stderr)
        return 2
    return serve(argv[0])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
