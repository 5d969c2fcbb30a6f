"""The fork server: torch imported once, one forked child per repro, and still no crash, hang or orphan escapes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from faults import FAST, PLUGINS

from repro.core import procs
from repro.run import forkserver, runner
from repro.run.execute import RunRequest
from repro.run.forkserver import ForkServer


@pytest.fixture
def server() -> Iterator[ForkServer]:
    with ForkServer() as s:
        yield s


def _req(rid: str) -> RunRequest:
    return RunRequest(repro_id=rid, repro_paths=(PLUGINS,), smoke=True, sampling=FAST, collect_env=False)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def _living_descendants(server: ForkServer) -> list[int]:
    """The live processes under the server's guard (the guard is the process tree procs.spawn started)."""
    tree = server._tree
    assert tree is not None, "the server was never started"
    return [p for p in procs.descendants(tree.pid) if _alive(p)]


def test_the_server_imports_torch_once_and_outlives_a_segfault(server: ForkServer, run_dir: Path) -> None:
    assert server.info["ready"] and server.info["torch"], server.info
    zygote = server.info["pid"]
    crash = runner.run_one_isolated(_req("test-segfault"), run_dir, 60, server=server)
    assert crash.status == "error" and "SIGSEGV" in crash.message
    doc = json.loads((run_dir / "test-segfault.json").read_text())
    assert doc["error"]["kind"] == "crash" and doc["error"]["signal"] == "SIGSEGV"
    assert server.alive and server.info["pid"] == zygote and _alive(zygote)
    fine = runner.run_one_isolated(_req("test-fine"), run_dir, 60, server=server)
    assert fine.status == "smoke", fine.message
    # The repro ran in a child of the server: the log came through the pipe the server handed it.
    assert "test-fine" in (run_dir / "logs" / "test-fine.log").read_text()


def test_a_timeout_kills_the_child_and_its_detached_grandchildren_not_the_server(
    server: ForkServer, run_dir: Path
) -> None:
    zygote = server.info["pid"]
    out = runner.run_one_isolated(_req("test-forks-hang"), run_dir, 8, server=server)
    assert out.status == "error" and "timeout" in out.message
    assert server.alive and _alive(zygote)
    # Under the server's guard only the server itself is left: the child, its detached daemon and
    # that daemon's own child are gone (found by pid, by token, and as orphans re-parented to the guard).
    assert _living_descendants(server) == [zygote]


def test_orphans_of_a_finished_repro_are_killed_before_the_next(server: ForkServer, run_dir: Path) -> None:
    zygote = server.info["pid"]
    out = runner.run_one_isolated(_req("test-forks"), run_dir, 60, server=server)
    assert out.status == "smoke", out.message
    assert _living_descendants(server) == [zygote]


def test_a_dead_server_takes_its_child_along_and_the_batch_falls_back(server: ForkServer, run_dir: Path) -> None:
    child = server.fork(runner._worker_spec(_req("test-hang"), run_dir))
    deadline = time.monotonic() + 30
    while not (run_dir / "logs").exists() and time.monotonic() < deadline and not _alive(child.pid):
        time.sleep(0.05)
    os.kill(server.info["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while _alive(child.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child.pid)  # PR_SET_PDEATHSIG: the child does not outlive the server
    assert child.poll() is not None  # reported as killed, not waited on forever
    child.stop()
    child.stdout.close()
    assert not server.alive
    # A server that is gone is not used: the next repro gets a fresh worker process.
    fine = runner.run_one_isolated(_req("test-fine"), run_dir, 120, server=server)
    assert fine.status == "smoke", fine.message


def test_without_the_fork_server_the_batch_runs_as_before(run_dir: Path) -> None:
    outcomes = runner.run_all(
        ["test-segfault", "test-fine"],
        run_dir,
        smoke=True,
        timeout_s=120,
        repro_paths=[PLUGINS],
        sampling=FAST,
        command=["repro", "all"],
        progress=False,
        collect_env=False,
        fork_server=False,
    )
    assert [o.status for o in outcomes] == ["error", "smoke"]
    assert "SIGSEGV" in outcomes[0].message


def test_a_stalled_server_is_given_up_and_its_request_runs_once_elsewhere(
    server: ForkServer, run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A server that does not answer in time is ended: a late answer could otherwise be taken for
    # the next request's, and the repro it forked would run unwatched beside the fallback worker.
    monkeypatch.setattr(forkserver, "REPLY_TIMEOUT_S", 1.0)
    zygote = server.info["pid"]
    os.kill(zygote, signal.SIGSTOP)
    try:
        out = runner.run_one_isolated(_req("test-fine"), run_dir, 120, server=server)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(zygote, signal.SIGCONT)
    assert out.status == "smoke", out.message  # ran in a fresh worker
    assert not server.alive and not _alive(zygote)
    again = runner.run_one_isolated(_req("test-fine"), run_dir.parent / "20261130T170001Z-abcdef", 120, server=server)
    assert again.status == "smoke", again.message


def test_the_server_leaves_no_folder_behind_once_connected(server: ForkServer) -> None:
    # Its socket and log are unlinked as soon as it connects, so a SIGKILLed CLI leaves nothing in /tmp.
    assert getattr(server, "_dir", None) is None and server.alive  # no folder at all since the socketpair


def test_the_zygote_takes_no_arguments() -> None:
    import subprocess
    import sys

    bad = subprocess.run([sys.executable, "-m", "repro.run.zygote", "--other"], capture_output=True, text=True)
    assert bad.returncode == 2 and "usage: python -m repro.run.zygote (its stdin" in bad.stderr
