"""What a second cold reader of evidence49's report, rendered again at 14222e0, asked: seed.cu's "so the kernel node
moves it" rested on three processes per form with no CI; lora's per-round ratios depended on the arms' whole order
in a round (bs2 right after bs4 slowest), which a split by which of two arms ran first averages away; and the
re-rendered script line dropped the run's repro digest for an undefined "this installation's source"."""

from __future__ import annotations

import copy

import pytest
from evidence_run import pasted, section, typed
from helpers import ROOT

from repro.evidence import artifact, model
from repro.evidence.clocks import unrecorded_orders
from repro.evidence.report import report
from repro.run import scripts

RUN = next((ROOT / "artifacts" / "reference" / "h200" / "evidence49" / "all").iterdir())
LABEL = "- Arms' order (checked by this report, not by the run): "


@pytest.fixture(scope="module")
def full() -> str:
    return pasted(RUN, limit=10**9, max_lines=None)


def test_seed_cu_nodes_are_set_against_its_own_processes_and_none_is_said_to_move_it(full: str) -> None:
    memset = section(full, "graph-memset")
    assert (
        "ns per op: memset node 888 (seed.cu 903, -1.6%; its processes 894-924), kernel node 621 (seed.cu 592, "
        "+4.9%; its processes 592-607): seed.cu times one replay per process"
    ) in memset
    assert "moves it:" not in memset and "only the" not in memset  # both lie outside seed.cu's own spread


def test_a_headline_whose_rounds_split_by_whole_orders_says_so_in_its_section(full: str) -> None:
    lora = section(full, "lora-batch-scaling")
    assert (
        f"{LABEL}0.8867 in rounds run bs2, bs4, bs1 to 0.9786 run bs1, bs4, bs2 (6 orders, 8+ rounds each, "
        "permutation p 0.0005; 10.4% apart, over twice the CI's ±1.9%)"
    ) in lora
    solve = section(full, "solve-512-cliff")
    assert f"{LABEL}9.505 in rounds run n512, n511, n510, n513 to 9.631 run n511, n512, n513, n510 (arms " in solve
    for rid in ("5090-linear", "fused-adam-capturable", "graph-memset"):
        assert LABEL not in section(full, rid)
    # A row that is not the headline: in the seed-program line that names it, and among the details' warnings.
    memset = section(full, "graph-memset")
    torch_row = "(memset+mm)/(fill+mm) (torch graph) 1.03x (95% CI 1.03-1.04); the arms' order split the rounds: "
    assert torch_row + "1.023 in rounds run memset_mm, mm_only, fill_mm to 1.038 run" in memset
    assert "(checked by this report, not by the run)" in memset.split("<details>", 1)[1]


def test_a_run_that_recorded_the_check_gets_no_second_line() -> None:
    doc = typed(RUN, "lora-batch-scaling")
    (said,) = [w for w in unrecorded_orders(doc) if w.startswith("bs2/bs1: ")]
    raw = copy.deepcopy(doc.raw)
    raw["validity"]["reasons"].append(said)  # as a harness with the whole-orders check records it
    again = model.run_of(raw)
    assert not any(w.startswith("bs2/bs1: ") for w in unrecorded_orders(again))
    text = report([raw], limit=10**9, max_lines=None, declared=scripts.declared([raw]))
    lora = section(text, "lora-batch-scaling")
    assert LABEL not in lora
    status = lora.split("\n")[1]  # the suspect note says it, with the comparison it is about
    assert "; the arms' order split the rounds: 0.8867 in rounds run bs2, bs4, bs1 to 0.9786 run" in status
    assert "over twice the CI's ±1.9%) (bs2/bs1)):" in status


def test_the_script_line_keeps_the_runs_digest_and_names_the_rendering_harnesss(full: str) -> None:
    memset = section(full, "graph-memset")
    here = scripts.declared([artifact.load(RUN / "graph-memset.json")])
    (declared,) = here.values()
    assert "this installation" not in memset
    assert "Script: `scripts/graph-memset.sh` in the bundle. Repro source sha256 `2b451fbc1168`" in memset
    if declared.source != typed(RUN, "graph-memset").repro.source_sha256:
        assert f"(this report's harness has another source of it, `{(declared.source or '')[:12]}`)." in memset
    assert "Repro source sha256 `0d98c07f87b5`." in section(full, "solve-512-cliff")  # the same source: no more
