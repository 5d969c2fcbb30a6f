"""`repro cliff` on a real GPU: solve_ex under cuSOLVER over a narrow range around 512 (about 30 s)."""

from __future__ import annotations

from pathlib import Path

import pytest

from repro.cliff.run import CliffRequest, run
from repro.evidence import artifact
from repro.repros import _lu_paths as sc

pytestmark = pytest.mark.gpu


def test_cusolver_step_is_found_between_511_and_512_with_the_lu_paths(run_dir: Path) -> None:
    import torch

    before = torch.backends.cuda.preferred_linalg_library()
    req = CliffRequest(
        "solve-512-cliff",
        "n",
        "504:520",
        overrides={"backends": "cusolver", "batches": "64"},
        grid=5,
        budget_s=30,
        collect_env=False,
    )
    doc, path = run(req, run_dir)
    assert torch.backends.cuda.preferred_linalg_library() == before  # the user's preference is restored
    assert artifact.load(path)["kind"] == "gpu-repro.cliff"
    assert doc["run"]["device"] == "cuda" and doc["error"] is None
    resolved = [s for s in doc["steps"] if s["resolved"]]
    assert [(s["lo"], s["hi"]) for s in resolved] == [(511, 512)], doc["finding"]
    (step,) = resolved
    assert step["ci_low"] > 1 + req.threshold
    assert (step["tag_before"], step["tag_after"]) == (sc.PATH_CUBLAS, sc.PATH_CUSOLVER)
    assert doc["search"]["points_measured"] < 17
