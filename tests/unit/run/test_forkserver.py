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


PROBE = """
import sys
from dataclasses import dataclass

from repro.api import register
from repro.core.spec import Metric, Repro, Requirements, RunResult, Verdict
from repro.core.verdict import ratio_verdict


@dataclass(frozen=True)
class ProbeParams:
    pass


@register
class Probe(Repro[ProbeParams]):
    id = "test-inductor-probe"
    title = "whether torch._inductor was imported before the repro ran"
    upstream = ()
    seed_claim = "test fixture"
    requires = Requirements(cuda=False)
    metric = Metric(name="t(a)/t(b)", description="test ratio", threshold=1.5)

    def run(self, p, ctx):
        seen = "torch._inductor" in sys.modules
        a, b = ctx.measure("a", lambda: None), ctx.measure("b", lambda: None)
        return RunResult(variants=(a, b), extra={"inductor_before_run": seen})

    def verdict(self, p, result):
        return ratio_verdict(self.metric, result.variant("a"), result.variant("b"), finding=lambda *a: "probe")
"""


@pytest.mark.parametrize("profiler", [True, False])
def test_the_server_imports_the_profilers_modules_once_its_first_child_runs(
    tmp_path: Path, run_dir: Path, profiler: bool
) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "inductor_probe.py").write_text(PROBE)  # module repro_plugin_inductor_probe: a unique name
    req = RunRequest(
        repro_id="test-inductor-probe", repro_paths=(plugins,), smoke=True, sampling=FAST, collect_env=False
    )
    seen = []
    with ForkServer(profiler=profiler) as s:
        for i in range(2):
            folder = run_dir.parent / f"20261130T17000{i}Z-abcdef"
            folder.mkdir(exist_ok=True)
            out = runner.run_one_isolated(req, folder, 120, server=s)
            assert out.status == "smoke", out.message
            seen.append(json.loads((folder / "test-inductor-probe.json").read_text())["extra"]["inductor_before_run"])
    assert seen == [False, profiler]  # the first child is forked before the import, every later one after


def test_an_import_that_initialised_cuda_stops_the_server_forking(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from repro.run import zygote

    assert zygote._preload_profiler() is None
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert zygote._preload_profiler() == "importing torch._inductor initialised CUDA in the fork server"


def test_the_zygote_takes_only_its_profiler_flag() -> None:
    import subprocess
    import sys

    bad = subprocess.run([sys.executable, "-m", "repro.run.zygote", "--other"], capture_output=True, text=True)
    assert bad.returncode == 2 and "usage: python -m repro.run.zygote [--profiler]" in bad.stderr


@pytest.mark.parametrize(
    ("smoke", "quick", "preload"), [(False, False, True), (False, True, True), (True, False, False)]
)
def test_a_gpu_run_has_its_server_preload_for_the_profiler_a_smoke_run_not(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch, smoke: bool, quick: bool, preload: bool
) -> None:
    asked: list[bool] = []

    def fake(interrupts: object, profiler: bool = False) -> None:
        asked.append(profiler)  # no server: the batch runs in fresh workers

    monkeypatch.setattr(runner, "_fork_server", fake)
    monkeypatch.setattr(runner, "run_one_isolated", lambda *a, **k: runner.Outcome("test-fine", "smoke", None, 0.0, ""))
    runner.run_all(
        ["test-fine"], run_dir, smoke=smoke, timeout_s=5, repro_paths=[PLUGINS], sampling=FAST,
        command=["repro", "all"], progress=False, collect_env=False, quick=quick,
    )  # fmt: skip
    assert asked == [preload]
