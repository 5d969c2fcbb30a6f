"""evidence43's cold read: a run beyond the band on a side its farthest GPUs do not set is outside the band, not only
without them; CIs said to overlap or miss print at the digits that show it, beside this run's; the scripts' note
says what a script's run is (one process), not one schedule for all."""

from __future__ import annotations

from evidence_run import attached_of, with_catalog_prose
from helpers import ROOT

from repro.cli.evidence import _rendered
from repro.evidence import artifact

RUN = ROOT / "artifacts" / "reference" / "h200" / "evidence43" / "all" / "20261203T215407Z-bda9ea"


def test_the_later_runs_and_the_band_cell_say_what_the_data_says() -> None:
    docs = with_catalog_prose([artifact.load(p) for p in artifact.expand([RUN])])
    pasted = _rendered(docs, RUN, **attached_of(RUN))
    assert "Report cut" not in pasted and len(pasted) <= 20_000
    memset = next(ln for ln in pasted.splitlines() if ln.startswith("| graph-memset |"))
    assert "this run +2%, outside the band)" in memset  # above every GPU: with its farthest GPUs too
    # The quick run's CI misses this run's by 0.0014: at three decimals, beside this run's.
    assert (
        "Later runs' headline CIs that miss this run's: 5090-linear 0.917x (95% CI 0.915-0.918) against 0.920-0.929 "
        "by `repro all --quick`"
    ) in pasted
    assert "no spread here bounds a script (one process each, clocks not recorded)" in pasted
