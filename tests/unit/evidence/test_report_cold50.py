"""What a cold reader of evidence49's report, rendered again at f0767d7, asked: graph-memset's Impact line gave the
headline pair's +298 ns per op only, though the same run timed the rows not judged (a memset after a work kernel,
or in a torch graph with a matmul) at about four times that per op."""

from __future__ import annotations

import copy

from evidence_run import typed
from helpers import ROOT

from repro.evidence import model, scope

RUN = next((ROOT / "artifacts" / "reference" / "h200" / "evidence49" / "all").iterdir())


def test_the_impact_line_gives_the_rows_not_judged_beside_the_headline_pair() -> None:
    doc = typed(RUN, "graph-memset")
    said = scope.impact(doc) or ""
    assert said.endswith(
        "Here: +298 ns per op (917 ns against 619 ns); in the rows not judged, per op: +9.63 ns (torch graph), "
        "+1.13 us (torch graph, with matmul), +1.2 us (pure CUDA twin, with work kernel)."
    )


def test_a_row_not_judged_that_ran_the_other_way_or_a_run_without_such_rows_adds_nothing() -> None:
    raw = copy.deepcopy(typed(RUN, "graph-memset").raw)
    rows = raw["verdict"]["breakdown"]
    times = {v["name"]: v for v in raw["variants"]}
    # The torch graph's memset made faster than its fill: no penalty there, so it is not listed.
    slow, fast = times["memset"], times["fill"]
    slow["timing"], fast["timing"] = fast["timing"], slow["timing"]
    said = scope.impact(model.run_of(raw)) or ""
    assert "(torch graph)," not in said and "+1.13 us (torch graph, with matmul)" in said
    raw["verdict"]["breakdown"] = [r for r in rows if r["status"] != "informational"]
    assert "not judged" not in (scope.impact(model.run_of(raw)) or "")
