"""`repro doctor`: findings from planted machine states, and a clean exit on a CPU-only machine."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from repro.cli.main import app
from repro.env import doctor


def test_doctor_runs_here_and_exits_zero() -> None:
    r = CliRunner(env={"COLUMNS": "160"}).invoke(app, ["doctor", "--json"])
    assert r.exit_code == 0, r.output
    result = json.loads(r.output)
    assert result["findings"]
    if not result["cuda"]:
        assert result["headline"].startswith("No CUDA GPU is visible")


def test_env_findings_flag_debug_and_allocator_vars() -> None:
    found = {
        f.check: f for f in doctor._env_findings({"CUDA_LAUNCH_BLOCKING": "1", "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"})
    }
    assert found["env CUDA_LAUNCH_BLOCKING"].level == "warn"
    assert "unset" in found["env PYTORCH_NO_CUDA_MEMORY_CACHING"].action
    assert doctor._env_findings({"CUDA_LAUNCH_BLOCKING": "0"})[0].level == "ok"


def test_gpu_findings_from_planted_nvml_state() -> None:
    nv = {
        "error": None,
        "static": {
            "mig_mode": True,
            "pcie_gen": 3,
            "pcie_gen_max": 5,
            "pcie_width": 16,
            "pcie_width_max": 16,
            "persistence_mode": False,
            "power_limit_w": 300.0,
            "power_default_limit_w": 700.0,
        },
        "state": {
            "clocks_event_reasons": ["sw_power_cap", "gpu_idle"],
            "compute_pids": [1, 4242],
            "ecc_volatile_uncorrected": 2,
        },
    }
    found = {f.check: f for f in doctor._gpu_findings(nv, own_pid=1)}
    assert found["MIG"].level == "warn"
    assert found["PCIe link"].seen == "gen 3 x16 now, gen 5 x16 possible"
    assert found["throttling"].seen == "sw_power_cap"
    assert found["other GPU processes"].seen == "pids 4242"
    assert found["persistence mode"].level == "info"
    assert found["power limit"].level == "warn"
    assert found["ECC"].level == "warn"


def test_tf32_off_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        doctor,
        "_torch_info",
        lambda: {
            "version": "2.11.0",
            "debug": False,
            "cuda": False,
            "knobs": {"cuda_matmul_allow_tf32": False, "float32_matmul_precision": "highest"},
        },
    )
    result = doctor.diagnose({})
    tf32 = [f for f in result["findings"] if f["check"] == "TF32"][0]
    assert tf32["level"] == "info" and "set_float32_matmul_precision" in tf32["action"]


def _torch(cuda_built: str | None) -> dict[str, Any]:
    return {
        "version": "2.13.0+cpu" if cuda_built is None else "2.11.0+cu130",
        "cuda_built": cuda_built,
        "debug": False,
        "cuda": False,
        "knobs": {"cuda_matmul_allow_tf32": False, "float32_matmul_precision": "high"},
    }


def test_no_torch_is_a_failure_that_says_every_repro_will_skip(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor, "_torch_info", lambda: None)
    result = doctor.diagnose({})
    first = result["findings"][0]
    assert first["level"] == "fail" and first["check"] == "torch"
    assert "every repro will skip" in first["action"] and "make smoke" in first["action"]
    assert "every repro will record 'skipped'" in result["headline"]


@pytest.mark.parametrize(
    ("cuda_built", "env", "seen"),
    [
        (None, {}, "is a CPU-only build"),
        ("13.0", {}, "(CUDA 13.0) sees no CUDA device"),
        ("13.0", {"CUDA_VISIBLE_DEVICES": ""}, "CUDA_VISIBLE_DEVICES=''"),
    ],
)
def test_no_cuda_is_a_warning_ranked_first_with_its_cause(
    monkeypatch: pytest.MonkeyPatch, cuda_built: str | None, env: dict[str, str], seen: str
) -> None:
    monkeypatch.setattr(doctor, "_torch_info", lambda: _torch(cuda_built))
    result = doctor.diagnose(env)
    first = result["findings"][0]
    assert (first["level"], first["check"]) == ("warn", "CUDA")
    assert seen in first["seen"] and "every GPU repro will skip" in first["action"]
    levels = [f["level"] for f in result["findings"]]
    assert levels == sorted(levels, key=doctor.LEVELS.index)


def test_doctor_table_shows_levels_by_consequence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor, "_torch_info", lambda: None)
    r = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["doctor"])
    assert r.exit_code == 0
    assert "| FAIL " in r.output and "torch is not importable" in r.output
