"""`repro --help`, `list`, `--version`, `validate` and `report` must work where torch cannot be imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, TORCH_BLOCKER


@pytest.fixture(scope="module")
def blocked_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    site = tmp_path_factory.mktemp("block")
    (site / "sitecustomize.py").write_text(TORCH_BLOCKER)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT)])
    return env


def repro(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    code = "import sys; from repro.cli.main import main; sys.argv = ['repro', *sys.argv[1:]]; main()"
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=120)


def test_blocker_really_blocks(blocked_env: dict[str, str]) -> None:
    r = subprocess.run([sys.executable, "-c", "import torch"], env=blocked_env, capture_output=True, text=True)
    assert r.returncode != 0 and "blocked" in r.stderr


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["list"], ["list", "--json"], ["script", "5090-linear"]])
def test_commands_without_torch(blocked_env: dict[str, str], args: list[str]) -> None:
    r = repro(blocked_env, *args)
    assert r.returncode == 0, r.stderr
    assert "blocked" not in r.stderr


def test_validate_and_report_without_torch(blocked_env: dict[str, str], tmp_path: Path) -> None:
    # Produce a real artifact with torch available, then read it with torch blocked.
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    code = "import sys; from repro.cli.main import main; sys.argv = ['repro', *sys.argv[1:]]; main()"
    made = subprocess.run(
        [sys.executable, "-c", code, "run", "5090-linear", "--out", str(tmp_path), "--no-collect-env"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert made.returncode == 0, made.stderr
    (run_dir,) = tmp_path.iterdir()
    r = repro(blocked_env, "validate", str(run_dir))
    assert r.returncode == 0 and "ok:" in r.stdout, r.stderr
    r = repro(blocked_env, "report", str(run_dir))
    assert r.returncode == 0 and "| 5090-linear " in r.stdout, r.stderr
    # Without torch, `run` still leaves a valid skipped artifact saying why.
    r = repro(blocked_env, "run", "5090-linear", "--out", str(tmp_path / "nt"))
    assert r.returncode == 0, r.stderr
    (art,) = (tmp_path / "nt").glob("*/5090-linear.json")
    doc = json.loads(art.read_text())
    assert doc["verdict"]["status"] == "skipped" and "torch" in doc["verdict"]["finding"]


def test_fingerprint_without_torch_is_plain_and_explains(blocked_env: dict[str, str]) -> None:
    r = repro(blocked_env, "fingerprint", "--no-collect-env")
    assert r.returncode == 0, r.stderr
    assert "**" not in r.stdout  # plain text on a terminal, not markdown
    assert "GPU:     no CUDA GPU" in r.stdout and "torch:   not installed" in r.stdout
    assert f"torch is not installed in {sys.executable}" in r.stdout and "make smoke" in r.stdout
    assert "probe torch failed" not in r.stdout + r.stderr and "Error" not in r.stdout


def test_all_without_torch_says_why_and_what_to_do(blocked_env: dict[str, str], tmp_path: Path) -> None:
    r = repro(blocked_env, "all", "--smoke", "--only", "5090-linear", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "5090-linear: skipped" in r.stderr and "torch is not installed in this environment" in r.stderr
    assert "every repro was skipped (torch is not installed in this Python" in r.stderr
    assert "make smoke" in r.stderr


def test_cliff_without_torch_is_a_skipped_artifact_that_validate_and_report_read(
    blocked_env: dict[str, str], tmp_path: Path
) -> None:
    r = repro(blocked_env, "cliff", "5090-linear", "--param", "features", "--range", "700:800", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    (run_dir,) = tmp_path.iterdir()
    doc = json.loads((run_dir / "5090-linear.cliff-features.json").read_text())
    assert doc["status"] == "skipped" and "torch is not installed" in doc["finding"]
    r = repro(blocked_env, "validate", str(run_dir))
    assert r.returncode == 0 and "ok:" in r.stdout, r.stderr
    r = repro(blocked_env, "report", str(run_dir))
    assert r.returncode == 0 and "where the cliff starts in `features` (700..800)" in r.stdout, r.stderr


# Blocks the optional backends' packages as the torch blocker blocks torch.
_OPTIONAL_BLOCKER = TORCH_BLOCKER.replace(
    'if name == "torch" or name.startswith("torch."):',
    'if name.split(".")[0] in ("torch", "kubernetes", "yaml", "docker"):',
)


def test_matrix_plan_and_help_import_no_backend_package(tmp_path: Path) -> None:
    site = tmp_path / "block"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_OPTIONAL_BLOCKER)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]))
    r = subprocess.run([sys.executable, "-c", "import kubernetes"], env=env, capture_output=True, text=True)
    assert r.returncode != 0 and "blocked" in r.stderr  # the blocker works
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"schema_version": 1, "name": "s", "lanes": [{"name": "a"}], "repros": ["5090-linear"]}))
    for args in (["--help"], ["list"], ["matrix", "--help"], ["matrix", "plan", str(spec)]):
        r = repro(env, *args)
        assert r.returncode == 0, (args, r.stderr)
        assert "blocked" not in r.stderr
    image_lane = {"schema_version": 1, "name": "s", "lanes": [{"name": "a", "image": "x:1"}], "repros": ["5090-linear"]}
    spec.write_text(json.dumps(image_lane))
    r = repro(env, "matrix", "run", str(spec), "--backend", "k8s", "--dry-run")
    assert r.returncode == 1 and "pip install 'gpu-repro[k8s]'" in r.stderr, r.stderr
