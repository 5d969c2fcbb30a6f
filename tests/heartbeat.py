"""A pytest plugin: a test that keeps running says so on the terminal every 30 s, and tests may print
progress lines there (the ``progress`` fixture), under xdist too. tests/conftest.py loads it."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Generator
from typing import TextIO

import pytest

# A test still running after this long says so on the terminal, and again every as long after, so
# that a person watching `make test` (or CI's log) tells a slow test from a hung one. The variable
# exists for the test of this mechanism (tests/system/test_heartbeat.py).
PROGRESS_EVERY_S = float(os.environ.get("GPU_REPRO_TEST_PROGRESS_S", "30"))

# The terminal's stderr, duplicated before any test runs: while a test runs, pytest captures fds 1
# and 2 (into the test's report), and sys.__stderr__ writes to that same captured fd 2. At
# pytest_configure pytest's global capture is suspended, so fd 2 is still the terminal, in the main
# process and in each xdist worker alike (execnet starts workers with the controller's stderr).
_terminal: TextIO | None = None
_progress_lock = threading.Lock()
# Whether the terminal's cursor is at the start of a line: true after our own line, false once pytest
# may have written (its progress dots) at a test's start or end. Under xdist the controller writes
# whenever a result comes in, so a worker always starts its line on a new one.
_at_line_start = False


def pytest_configure(config: pytest.Config) -> None:
    global _terminal
    _terminal = os.fdopen(os.dup(2), "w", buffering=1)


def pytest_unconfigure(config: pytest.Config) -> None:
    global _terminal
    if _terminal is not None:
        _terminal.close()
        _terminal = None


def say(line: str) -> None:
    """Write one line to the terminal now, even from inside a running test (and from an xdist worker)."""
    global _at_line_start
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    with _progress_lock:
        if _terminal is None:
            return
        if worker:
            _terminal.write(f"\n[{worker}] {line}\n")
        else:
            _terminal.write(("" if _at_line_start else "\n") + line + "\n")
        _terminal.flush()
        _at_line_start = True


def _pytest_may_write() -> None:
    global _at_line_start
    with _progress_lock:
        _at_line_start = False


def _heartbeat(nodeid: str, stop: threading.Event) -> None:
    start = time.monotonic()
    while not stop.wait(PROGRESS_EVERY_S):
        say(f"still running {nodeid} after {time.monotonic() - start:.0f} s")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    stop = threading.Event()
    beat = threading.Thread(target=_heartbeat, args=(item.nodeid, stop), name="test-heartbeat", daemon=True)
    _pytest_may_write()
    beat.start()
    try:
        return (yield)
    finally:
        stop.set()
        beat.join()
        _pytest_may_write()


@pytest.fixture
def progress(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """``progress("trial 3/90: ok")``: a line on the terminal now, prefixed with the test's id."""
    nodeid = request.node.nodeid
    return lambda line: say(f"{nodeid}: {line}")
