"""What evidence47's cold reader asked of the report, answered from its own artifacts: which row an Impact
line's "where it did not hold" figure is, and what the timed per-call median holds beside the kernels."""

from __future__ import annotations

from helpers import ROOT

from repro.evidence import artifact
from repro.evidence.report import report

RUN = next((ROOT / "artifacts" / "reference" / "h200" / "evidence47" / "all").iterdir())


def _full(rid: str) -> str:
    return report([artifact.load(RUN / f"{rid}.json")])


def test_the_impact_line_names_the_batch_as_well_as_the_backend_of_a_row_that_did_not_hold() -> None:
    # default/b16 ran 5.005 -> 5.039 ms, but its work-scaled per-round ratio is under 1: it ran the other way, with
    # its medians and no difference (their sign disagrees with the ratio's); b64 and b128 ran faster at n=512.
    assert (
        "where it ran the other way, per call: (default backend, batch 16: 5.04 ms against 5 ms), -329 us (default "
        "backend, batch 64: 6.05 ms against 6.38 ms), -320 us (default backend, batch 128: 7.76 ms against 8.08 ms)."
    ) in _full("solve-512-cliff")
    assert "where it did not hold, per call" not in _full("solve-512-cliff")


def test_the_details_say_what_the_timed_median_holds_beside_the_kernels_where_they_read_outside_the_ci() -> None:
    said = _full("5090-linear")
    assert (
        "By kernel time alone, x @ w.t() + b (FP32) -> nn.Linear (FP32) reads 0.913x, outside its row's CI "
        "(0.918-0.930): each timed call held +67.8 us and +74 us beyond its kernels (the CUDA events also count the "
        "launch's host latency and host gaps inside a call)."
    ) in said
    # A pair whose kernels alone read inside the row's CI needs no such sentence.
    assert "By kernel time alone" not in _full("fused-adam-capturable")
