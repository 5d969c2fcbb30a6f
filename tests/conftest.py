"""Shared fixtures: a clean environment, a fresh run folder, and skipping of gpu-marked tests without CUDA."""

from __future__ import annotations

import fcntl
import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# One intra-op thread for torch (OpenMP) in this process and every process a test starts, set
# before anything imports torch. The suite runs torch on the CPU in three xdist workers and in many
# subprocesses at once on a 2-core machine; a pool per process of one thread per core oversubscribes
# the cores, and its spinning threads made one CPU smoke script take 98 s instead of 15 s (load ~8).
# The harness pins its own CPU timing to one thread anyway (repro.run.execute.CPU_THREADS).
os.environ.setdefault("OMP_NUM_THREADS", "1")

from repro.core.context import SamplingConfig  # noqa: E402
from repro.evidence.artifact import new_run_id  # noqa: E402

# A line on the terminal for every 30 s a test keeps running, the `progress` fixture (tests/heartbeat.py);
# the committed H200 evidence run as the `docs` and `rendered` fixtures (tests/evidence_run.py).
pytest_plugins = ["heartbeat", "evidence_run"]

# Variables that change what the harness does; tests start without them.
_ENV = (
    "GPU_REPRO_OUT",
    "GPU_REPRO_IMAGE",
    "GPU_REPRO_LANE",
    "GPU_REPRO_LOCK",
    "GPU_REPRO_BUILD_NETWORK",
    "CUDA_VISIBLE_DEVICES",
    "TORCH_LINALG_PREFER_CUSOLVER",
)

# Short sampling so CPU smoke runs finish in seconds; the statistics still run.
FAST = SamplingConfig(target_rel_ci=0.05, budget_s=0.2, warmup_s=0.01, min_samples=6, max_samples=50, profile_iters=1)


def _cuda() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        # A docker test that asked for no engine would silently pass or skip without one.
        if "docker" in item.keywords and "engine" not in getattr(item, "fixturenames", ()):
            raise pytest.UsageError(f"{item.nodeid} is marked docker but does not use the engine fixture")
        if "slurm" in item.keywords and "slurm_cluster" not in getattr(item, "fixturenames", ()):
            raise pytest.UsageError(f"{item.nodeid} is marked slurm but does not use the slurm_cluster fixture")
    if _cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run tests/gpu on the GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def engine() -> Iterator[Any]:
    """A docker SDK client for a running engine. Without one, docker tests skip and say why;
    with GPU_REPRO_REQUIRE_ENGINE=1 (set by .ci/run) they fail instead, so CI cannot pass with
    its engine tests skipped."""
    from repro.core.errors import ReproError
    from repro.lanes.images.engine import client as engine_client

    try:
        client = engine_client()
    except ReproError as exc:
        if os.environ.get("GPU_REPRO_REQUIRE_ENGINE") == "1":
            pytest.fail(f"GPU_REPRO_REQUIRE_ENGINE=1 and no Docker engine: {exc}")
        pytest.skip(f"needs a Docker engine: {exc}")
    yield client
    client.close()


@pytest.fixture(scope="session")
def slurm_cluster() -> str:
    """The answering Slurm cluster's idle node (tools/slurm-local.sh starts one). Without one, slurm
    tests skip and say why; with GPU_REPRO_REQUIRE_ENGINE=1 (set by .ci/run) they fail instead."""
    import subprocess

    try:
        res = subprocess.run(["sinfo", "-h", "-o", "%n %t"], capture_output=True, text=True, timeout=30)
        problem = None if res.returncode == 0 else res.stderr.strip() or f"sinfo exited {res.returncode}"
    except (OSError, subprocess.TimeoutExpired) as exc:
        problem = str(exc)
    nodes = [] if problem else [line.split() for line in res.stdout.splitlines() if line.strip()]
    idle = [n for n, state in nodes if state in ("idle", "mix")]
    if problem or not idle:
        why = problem or f"no idle node ({res.stdout.strip() or 'none'})"
        if os.environ.get("GPU_REPRO_REQUIRE_ENGINE") == "1":
            pytest.fail(f"GPU_REPRO_REQUIRE_ENGINE=1 and no Slurm cluster: {why}")
        pytest.skip(f"needs a Slurm cluster (tools/slurm-local.sh start DIR): {why}")
    return idle[0]


@pytest.fixture(autouse=True)
def _engine_tests_one_at_a_time(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """A docker or slurm test holds a lock that every xdist worker of the session shares, so the
    engine and Slurm tests never run beside each other, whichever worker `--dist worksteal` gives
    them to (they share the engine, its images and the cluster's one node)."""
    if request.node.get_closest_marker("docker") is None and request.node.get_closest_marker("slurm") is None:
        yield
        return
    # The workers' base folders sit in one folder of the session (the user's pytest folder without xdist).
    with open(tmp_path_factory.getbasetemp().parent / "engine-tests.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    d = tmp_path / new_run_id()
    d.mkdir()
    return d


@pytest.fixture(scope="session")
def fast() -> SamplingConfig:
    return FAST
