"""What evidence34's cold read found shown misleadingly in the pasted report, answered in the repros' Not-tested
lines: each fact the reader needed stands outside the parentheses a short report drops."""

from __future__ import annotations

from repro.evidence.report_parts import bare
from repro.repros.graph_memset import GraphMemset
from repro.repros.linear_5090 import Linear5090
from repro.repros.solve_cliff import Solve512Cliff


def _item(cls: type[GraphMemset] | type[Linear5090] | type[Solve512Cliff], start: str) -> str:
    return bare(next(u for u in cls.untested if u.startswith(start)))


def test_the_live_graph_side_experiment_is_quantified_in_the_short_form() -> None:
    said = _item(GraphMemset, "another process's live CUDA graph")
    # evidence48's reader: where it ran, not on this GPU
    assert "only in a side experiment on another H200: twin fill node 0.70 us, not 0.62, twin 1.30-1.33x" in said


def test_the_slow_fill_gpus_are_not_said_to_have_had_no_live_graph() -> None:
    said = _item(GraphMemset, "what sets apart")
    assert "no live graph" not in said and "with no other process in NVML's view from their containers" in said


def test_the_cublas_fix_comment_names_its_version_and_not_a_gpu_it_did_not_name() -> None:
    said = _item(Linear5090, "other cuBLAS versions")
    assert "whose cuBLAS it reads as 12.8.4.1, naming no GPU" in said and "RTX 5090" not in said


def test_the_solve_cutoffs_reported_replacement_is_in_the_short_form() -> None:
    said = _item(Solve512Cliff, "PyTorch 2.13 or later")
    assert (
        said
        == "PyTorch 2.13 or later, where a batch-aware heuristic replaced the cutoff, per the seed document, unchecked"
    )
