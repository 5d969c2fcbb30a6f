"""``python -m repro.run.guard LIFELINE_FD PARENT_PID -- CMD...``: run CMD so nothing of it outlives us or our parent.

Started by ``repro.core.procs.spawn``; see that module for the whole scheme. Standard
library only, so it starts in milliseconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from typing import Any, NoReturn

from repro.core import procs

# Exit status when the parent went away (its end of the lifeline closed).
PARENT_GONE = 129
_dying = threading.Lock()


def _die(code: int) -> NoReturn:
    """Kill every descendant (we are their subreaper, so none can hide), then leave at once."""
    if not _dying.acquire(blocking=False):
        # Another thread is already tearing the tree down; it will exit the process.
        threading.Event().wait()
    procs.kill_descendants(os.getpid())
    os._exit(code)


def _watch(fd: int) -> None:
    """Block on the lifeline; EOF means the parent closed it or died."""
    while True:
        try:
            data = os.read(fd, 64)
        except InterruptedError:
            continue
        except OSError:
            data = b""
        if not data:
            _die(PARENT_GONE)


def main(argv: list[str]) -> int:
    """Run the command; returns (or mirrors, for a signal) its exit status."""
    if len(argv) < 4 or argv[2] != "--":
        print("usage: python -m repro.run.guard LIFELINE_FD PARENT_PID -- CMD...", file=sys.stderr)
        return 2
    fd, parent, cmd = int(argv[0]), int(argv[1]), argv[3:]
    procs.set_child_subreaper()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):

        def on_signal(signum: int, frame: Any) -> None:
            # A second signal while this thread is already tearing down (it runs inside the first
            # handler) must not re-enter _die: that would wait on a lock this very thread holds.
            if not _dying.locked():
                _die(128 + signum)

        signal.signal(sig, on_signal)
    if os.getppid() != parent:  # the parent died before we could watch it
        _die(PARENT_GONE)
    threading.Thread(target=_watch, args=(fd,), daemon=True, name="lifeline").start()
    try:
        child = subprocess.Popen(cmd)
    except OSError as exc:
        print(f"error: cannot start {cmd[0]}: {exc}", file=sys.stderr)
        return 127
    rc = child.wait()
    # Whatever the command left running (a daemonised grandchild, a pip it forgot) dies with it.
    procs.kill_descendants(os.getpid())
    if rc < 0:
        # Die of the same signal, so our parent learns what killed the command. SIGKILL and
        # SIGSTOP have no disposition to reset (signal.signal raises for them): just send them.
        if -rc not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(-rc, signal.SIG_DFL)
        os.kill(os.getpid(), -rc)
    return rc if rc >= 0 else 128 - rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
