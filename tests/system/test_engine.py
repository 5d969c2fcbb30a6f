"""The lanes' images against a real Docker engine: the run-time contract, a smoke run, a plain run.

Marked ``docker``: they need an engine and the three images built (``make images``, or in CI
``tools/standins.sh`` then ``GPU_REPRO_LOCK=docker/standins/images.lock.json make images``).
Without an engine they skip and say why; with ``GPU_REPRO_REQUIRE_ENGINE=1`` (set by .ci/run) they fail
instead, so CI can never pass with them skipped. The lock file is ``GPU_REPRO_LOCK`` when set (the stand-in lock in CI).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import docker.errors
import pytest
from helpers import ROOT

import docker
from repro.lanes.images import container
from repro.lanes.images.lock import Lock, load_lock

LANES = ("cu126-pt26", "cu128-nightly", "nemo")
REPROS = {"5090-linear", "fused-adam-capturable", "lora-batch-scaling", "solve-512-cliff", "graph-memset"}
# A host user that is not root and has no entry in the images' /etc/passwd, like most users' uids.
HOST_UID = os.getuid() if os.getuid() != 0 else 4242
HOST_GID = os.getgid() if os.getuid() != 0 else 4242

pytestmark = pytest.mark.docker
# Read at import: the autouse fixture in conftest clears GPU_REPRO_LOCK for every test.
LOCK_PATH = Path(os.environ["GPU_REPRO_LOCK"]) if os.environ.get("GPU_REPRO_LOCK") else None


def docker_cli(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("docker")
    if exe is None:
        pytest.fail("the docker CLI is not on PATH; expected it next to the engine (apt-get install docker.io)")
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def lock() -> Lock:
    return load_lock(LOCK_PATH)


@pytest.fixture(scope="module")
def built(engine: Any, lock: Lock) -> dict[str, Any]:
    """Each lane's image as the engine has it; a missing one fails in CI and skips elsewhere."""
    found: dict[str, Any] = {}
    for lane in LANES:
        ref = lock.lanes[lane].image
        try:
            found[lane] = engine.images.get(ref)
        except docker.errors.ImageNotFound:
            why = f"{ref} is not built here (make image-{lane}; see docs/docker.md)"
            if os.environ.get("GPU_REPRO_REQUIRE_ENGINE") == "1":
                pytest.fail(f"GPU_REPRO_REQUIRE_ENGINE=1: {why}")
            pytest.skip(why)
    return found


def head_commit() -> str | None:
    r = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    return r.stdout.strip() if r.returncode == 0 else None


def host_out(tmp_path: Path, uid: int = HOST_UID, gid: int = HOST_GID) -> Path:
    """A fresh folder for /artifacts that belongs to ``uid`` (a root test process lends it)."""
    out = tmp_path / "out"
    out.mkdir()
    if os.getuid() == 0:
        os.chown(out, uid, gid)
    return out


def validate_on_host(paths: list[Path]) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "repro.cli.main", "validate", *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stdout + r.stderr


# --------------------------------------------------------------------------- the images


@pytest.mark.parametrize("lane", LANES)
def test_image_carries_the_run_time_contract(built: dict[str, Any], lock: Lock, lane: str) -> None:
    config = built[lane].attrs["Config"]
    assert config["Entrypoint"] == ["repro"] and config["Cmd"] == ["all"]
    assert config["User"] == container.IMAGE_USER
    labels = config["Labels"]
    assert labels["dev.gpu-repro.lane"] == lane
    assert labels["org.opencontainers.image.base.name"] == lock.lanes[lane].base_ref
    # Set only by `repro images build` (the docker SDK path), never by a plain docker build.
    assert labels["org.opencontainers.image.created"].endswith("Z")
    env = dict(item.split("=", 1) for item in config["Env"])
    assert env["GPU_REPRO_LANE"] == lane and env["GPU_REPRO_OUT"] == "/artifacts"
    assert env["GPU_REPRO_IMAGE"] == lock.lanes[lane].base_ref
    assert env["GPU_REPRO_IMAGE_DIGEST"] == (lock.lanes[lane].digest or "")
    commit = head_commit()
    if commit:
        assert env["GPU_REPRO_GIT_COMMIT"] in (commit, commit + "-dirty")


@pytest.mark.parametrize("lane", LANES)
def test_no_network_and_no_root_at_run_time(built: dict[str, Any], lock: Lock, lane: str) -> None:
    probe = (
        "import os, socket\n"
        "print('uid', os.getuid())\n"
        "try:\n"
        "    socket.create_connection(('pypi.org', 443), timeout=3)\n"
        "    print('network: reachable')\n"
        "except OSError as exc:\n"
        "    print('network: off', type(exc).__name__)\n"
    )
    r = docker_cli("run", "--rm", "--network", "none", "--entrypoint", "python", lock.lanes[lane].image, "-c", probe)
    assert r.returncode == 0, r.stderr
    assert "uid 1000" in r.stdout and "network: off" in r.stdout, r.stdout


# --------------------------------------------------------------------------- runs


@pytest.mark.parametrize("lane", LANES)
def test_smoke_all_as_the_host_user_without_network(
    built: dict[str, Any], lock: Lock, lane: str, tmp_path: Path
) -> None:
    """`docker run --rm --network none --user UID:GID -v OUT:/artifacts IMAGE all --smoke`, as typed."""
    out = host_out(tmp_path)
    image = lock.lanes[lane].image
    r = docker_cli(
        "run", "--rm", "--network", "none", "--user", f"{HOST_UID}:{HOST_GID}",
        "-v", f"{out}:/artifacts", image, "all", "--smoke",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    arts = sorted(run_dir.glob("*.json"))
    assert {p.stem for p in arts} == REPROS
    validate_on_host(arts)
    for path in [run_dir, *run_dir.rglob("*")]:
        assert (path.stat().st_uid, path.stat().st_gid) == (HOST_UID, HOST_GID), path
    commit = head_commit()
    for path in arts:
        doc = json.loads(path.read_text())
        fp = doc["fingerprint"]
        env = fp["container"]["env"]
        assert env["GPU_REPRO_LANE"] == lane
        assert env["GPU_REPRO_IMAGE"] == lock.lanes[lane].base_ref
        assert fp["harness"]["git_commit"] not in (None, "unknown")
        if commit:
            assert fp["harness"]["git_commit"] in (commit, commit + "-dirty")
        assert doc["run"]["smoke"] is True
        assert doc["verdict"]["status"] not in ("error",), (path.name, doc["verdict"])
    assert (run_dir / "report.md").is_file()


def test_nemo_transformer_engine_import_fails_cleanly(built: dict[str, Any], lock: Lock) -> None:
    """The harness's own TE lookup in the nemo image: the stand-in's TE fails to import, and that is one line."""
    code = "from repro.repros.fused_adam import _te_fused_adam; cls, why = _te_fused_adam(); print(cls, why)"
    r = docker_cli("run", "--rm", "--network", "none", "--entrypoint", "python", lock.lanes["nemo"].image, "-c", code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("None transformer_engine.pytorch is not importable: ImportError: "), r.stdout
    assert "placeholder" in r.stdout and len(r.stdout.strip().splitlines()) == 1


@pytest.mark.parametrize("lane", LANES)
def test_plain_docker_run_without_gpu_records_why_it_skipped(
    built: dict[str, Any], lock: Lock, lane: str, tmp_path: Path
) -> None:
    """`docker run -v OUT:/artifacts IMAGE`: no GPU, so every repro is recorded as skipped, with why.

    Those with a CPU path say that --smoke exercises it there.
    """
    out = host_out(tmp_path, 1000, 1000)  # the image's own user writes here
    r = docker_cli("run", "--rm", "--network", "none", "-v", f"{out}:/artifacts", lock.lanes[lane].image)
    assert r.returncode == 0, r.stderr[-3000:]
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    arts = sorted(run_dir.glob("*.json"))
    assert {p.stem for p in arts} == REPROS
    validate_on_host(arts)
    hints = 0
    for path in arts:
        doc = json.loads(path.read_text())
        assert doc["verdict"]["status"] == "skipped", (path.name, doc["verdict"])
        assert "no CUDA device is visible to torch" in json.dumps(doc["verdict"]), doc["verdict"]
        hints += "--smoke exercises it on CPU" in json.dumps(doc["verdict"])
        assert doc["fingerprint"]["container"]["env"]["GPU_REPRO_LANE"] == lane
    assert hints >= 3  # 5090-linear, fused-adam and lora have a CPU path
    assert "skipped" in (run_dir / "report.md").read_text()


def test_repro_images_run_hands_the_files_to_the_caller(
    built: dict[str, Any], lock: Lock, engine: Any, tmp_path: Path
) -> None:
    """The SDK path (`repro images run`): no GPUs asked here, the caller owns what was written."""
    import io

    out = tmp_path / "lanes"
    err = io.BytesIO()
    code = container.run(
        lock.lanes["cu126-pt26"],
        out=out,
        args=["run", "5090-linear", "--smoke", "--budget", "0.2"],
        docker_client=engine,
        gpus="none",
        stdout=io.BytesIO(),
        stderr=err,
    )
    assert code == 0, err.getvalue().decode(errors="replace")[-2000:]
    (path,) = out.glob("*/5090-linear.json")
    validate_on_host([path])
    for p in (out, path.parent, path):
        assert (p.stat().st_uid, p.stat().st_gid) == (os.getuid(), os.getgid()), p
