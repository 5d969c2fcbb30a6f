"""solve-512-cliff on a real GPU: every backend at small sizes, kernel capture, LU paths and the restored preference."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from repro.core.context import SamplingConfig
from repro.evidence import artifact
from repro.repros import _lu_paths as sc
from repro.run.execute import RunRequest, execute

pytestmark = pytest.mark.gpu

QUICK = SamplingConfig(target_rel_ci=0.02, budget_s=0.2, warmup_s=0.05)
RID = "solve-512-cliff"


def _kernel_names(v: dict[str, Any]) -> str:
    return "; ".join(k["name"][:120] for k in v["kernels"][:8])


def test_small_sizes_every_backend(run_dir: Path) -> None:
    import torch

    before = torch.backends.cuda.preferred_linalg_library()
    overrides = {"n_min": "126", "n_max": "130", "cliff_n": "128", "batches": "16"}
    doc, _ = execute(RunRequest(RID, overrides=overrides, sampling=QUICK), run_dir)
    assert torch.backends.cuda.preferred_linalg_library() == before  # the user's preference is restored
    assert artifact.validation_errors(doc) == [], artifact.validation_errors(doc)
    assert doc["run"]["device"] == "cuda" and doc["error"] is None
    backends = ["default", "cusolver"] + (["magma"] if torch.cuda.has_magma else [])
    assert doc["extra"]["backends"] == backends
    points = [v for v in doc["variants"] if "n" in v["config"]]
    assert [v["name"] for v in points] == [f"{b}_b16_n{n}" for b in backends for n in range(126, 131)]
    for v in points:
        assert v["status"] == "ok", v["reason"]
        assert v["kernel_source"] == "cuda" and v["kernels"], v["name"]
        assert v["timing"]["method"] == "cuda_events" and v["achieved"]["tflops"] > 0
        # Every path must be recognised from its kernel names; if not, the names say what to match.
        assert v["extra"]["path"] != sc.PATH_UNKNOWN, f"{v['name']}: {_kernel_names(v)}"
        if v["config"]["backend"] == "magma":
            assert v["extra"]["path"] == sc.PATH_MAGMA, f"{v['name']}: {_kernel_names(v)}"
    # Under cuSOLVER, batch 16 of n <= 130 goes to batched cuBLAS getrf on every torch version
    # (n < 512 before 2.13; n*n under 18600*batch after).
    for v in points:
        if v["config"]["backend"] == "cusolver":
            assert v["extra"]["path"] == sc.PATH_CUBLAS, f"{v['name']}: {_kernel_names(v)}"
    rows = doc["verdict"]["breakdown"]
    assert [(r["backend"], r["batch"]) for r in rows] == [(b, 16) for b in backends]
    assert doc["verdict"]["status"] in ("reproduced", "not_reproduced")
    grid = doc["extra"]["time_grid"]
    assert all(grid[b]["16"][str(n)]["median_s"] > 0 for b in backends for n in range(126, 131))


def test_looped_cusolver_path_at_512(run_dir: Path) -> None:
    # Batch 2 at n=512 goes to looped cuSOLVER getrf on every torch version (m >= 512 before
    # 2.13; n*n over 8400*batch after): this pins the cuSOLVER kernel names.
    overrides = {"n_min": "511", "n_max": "512", "cliff_n": "512", "batches": "2", "backends": "cusolver"}
    doc, _ = execute(RunRequest(RID, overrides=overrides, sampling=QUICK), run_dir)
    assert artifact.validation_errors(doc) == []
    at = {v["name"]: v for v in doc["variants"]}["cusolver_b2_n512"]
    assert at["status"] == "ok", at["reason"]
    assert at["extra"]["path"] == sc.PATH_CUSOLVER, _kernel_names(at)
    row = doc["verdict"]["breakdown"][0]
    assert row["paired"] is True and row["ci_low"] <= row["ratio"] <= row["ci_high"]


def test_the_api_log_names_cublas_getrf_batched_below_the_cutoff() -> None:
    import torch

    from repro.repros._lu_api import api_clause, api_log

    before = torch.backends.cuda.preferred_linalg_library()
    log = api_log(torch, [511, 512])
    assert torch.backends.cuda.preferred_linalg_library() == before
    assert "error" not in log, log
    if "cublas" in log.get("no_logger", {}):
        pytest.skip(f"no cuBLAS logger: {log['no_logger']['cublas']}")
    below = log["sizes"]["511"]["cublas"]
    assert any("getrfBatched" in fn for fn in below), log
    assert not any("getrfBatched" in fn for fn in log["sizes"]["512"]["cublas"]), log
    assert "n=511 called " in api_clause(log)
