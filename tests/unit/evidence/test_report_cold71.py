"""What h100/evidence57's cold read (a=0) asked of the wording, checked on that run's own artifacts: the pasted
report named the farthest script but not the one outside the run's CI, and a kernel-time ratio printed at three
decimals read as equal to the CI's end it lies outside of."""

from __future__ import annotations

import pytest
from evidence_run import pasted
from helpers import ROOT

RUN = ROOT / "artifacts" / "reference" / "h100" / "evidence57" / "all" / "20261205T184016Z-2ec0d8"


@pytest.fixture(scope="module")
def full() -> str:
    return pasted(RUN, limit=10**9, max_lines=None)


def test_the_scripts_outside_the_ci_are_named_beside_the_farthest() -> None:
    lean = pasted(RUN)
    assert len(lean) <= 20_000 and "Report cut" not in lean
    # graph-memset's script (1.161) lies outside the run's CI (1.139-1.151); lora's, the farthest, inside its own.
    assert (
        "(1 outside the run's CI (graph-memset): no spread here bounds a script (one process each, clocks not "
        "recorded); farthest: lora-batch-scaling 0.982 (+2.4%))"
    ) in lean


def test_a_kernel_time_ratio_outside_its_rows_ci_prints_apart_from_its_ends(full: str) -> None:
    # 0.91045 against the row's 0.91013: at three decimals both read 0.910.
    assert "reads 0.9104x, outside its row's CI (0.9055-0.9101): each timed call held" in full
    assert "reads 10.730x, outside its row's CI (10.613-10.714)" in full  # apart at three decimals already
