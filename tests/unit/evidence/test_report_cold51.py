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


def test_a_headline_whose_rounds_split_by_whole_orders_is_suspect_by_this_reports_check(full: str) -> None:
    """The harness that ran split the rounds only by which of two arms ran first: the report makes the whole-orders
    check on the run's rounds, and a headline it finds split is suspect, as the legend defines it, in the table and
    in its section, saying whose check it was; the orders themselves are in the details."""
    lora = section(full, "lora-batch-scaling")
    assert lora.split("\n")[1].startswith(
        "**inconclusive** (suspect: power cap, median SM clock bs1 1650, bs2 1665, bs4 1650 MHz of 1980 MHz max, "
        "power up to 690.6 W of a 700 W limit in NVML's polls; by this report's check: bs2/bs1: its rounds split by "
        "the arms' order: medians 0.8867-0.9786 over 6 orders of 8+ rounds (permutation p 0.0005), past the CI's "
        "±1.9%, all below the 1.3 threshold):"
    )
    assert (
        "suspect reason in full: by this report's check (the run's harness split rounds only by which arm ran "
        "first): bs2/bs1: the arms' order split the rounds: 0.8867 in rounds run bs2, bs4, bs1 to 0.9786 run bs1, "
        "bs4, bs2 (6 orders, 8+ rounds each, Kruskal-Wallis permutation p 0.0005; 10.4% apart, over twice the CI's "
        "±1.9%)"
    ) in lora.split("<details>", 1)[1]
    solve = section(full, "solve-512-cliff")
    assert solve.split("\n")[1].startswith(
        "**reproduced** (suspect: by this report's check: cusolver/b128: its rounds split by the arms' order: "
        "medians 9.505-9.631 over 8 orders of 3+ rounds (permutation p 0.004), past the CI's ±0.5%, all above the 1.5 "
        "threshold):"
    )
    assert "run n512, n511, n510, n513 to 9.631 run n511, n512, n513, n510 (arms cusolver_b128\\_\\*; 8 orders" in solve
    assert "| solve-512-cliff | **reproduced** (cusolver backend only) (suspect by this report's check) |" in full
    assert "| lora-batch-scaling | **inconclusive** (suspect) |" in full  # its own power cap too
    for rid in ("5090-linear", "fused-adam-capturable", "graph-memset"):
        assert "(suspect" not in section(full, rid).split("\n")[1]
    # A row that is not the headline: in the seed-program line that names it, and among the details' warnings.
    memset = section(full, "graph-memset")
    torch_row = "(memset+mm)/(fill+mm) (torch graph) 1.03x (95% CI 1.03-1.04); by this report's check: its rounds split"
    assert (
        torch_row + " by the arms' order: medians 1.023-1.038 over 6 orders of 4+ rounds (permutation p 0.0005)"
        in memset
    )
    assert (
        "arning: by this report's check (the run's harness split rounds only by which arm ran first): (memset+mm)"
        in memset.split("<details>", 1)[1]
    )
    # The twin orders its own rounds: no check reads them.
    assert "pure CUDA twin): the arms' order" not in memset
    assert full.count("_Rendered by another harness than the run's: words, checks") == 1


def test_a_run_that_recorded_the_check_is_not_checked_again() -> None:
    doc = typed(RUN, "lora-batch-scaling")
    (said,) = [w for w in unrecorded_orders(doc) if w.startswith("bs2/bs1: ")]
    raw = copy.deepcopy(doc.raw)
    raw["validity"]["reasons"].append(said)  # as a harness with the whole-orders check records it
    again = model.run_of(raw)
    assert not any(w.startswith("bs2/bs1: ") for w in unrecorded_orders(again))
    text = report([raw], limit=10**9, max_lines=None, declared=scripts.declared([raw]))
    status = section(text, "lora-batch-scaling").split("\n")[1]
    assert "by this report's check" not in status
    assert (
        "; its rounds split by the arms' order: medians 0.8867-0.9786 over 6 orders of 8+ rounds (permutation p "
        "0.0005), past" in status
    )
    assert "past the CI's ±1.9%, all below the 1.3 threshold (bs2/bs1)):" in status


def test_a_smoke_runs_other_rows_and_a_malformed_seed_cu_record_are_left_alone() -> None:
    raw = copy.deepcopy(typed(RUN, "graph-memset").raw)
    assert unrecorded_orders(model.run_of(raw))  # the torch graph's row with its matmul
    raw["run"]["smoke"] = True
    assert unrecorded_orders(model.run_of(raw)) == []  # its harness checks a smoke run's headline only
    raw["run"]["smoke"] = False
    raw["extra"]["seed_cu"]["us"]["memset"] = [None, "903", 5]
    said = report([raw], limit=10**9, max_lines=None, declared=scripts.declared([raw]))
    assert "memset node 888 (seed.cu 903, -1.6%), kernel node 621 (seed.cu 592, +4.9%; its processes 592-607)" in said


def test_the_script_line_keeps_the_runs_digest_and_names_the_rendering_harnesss(full: str) -> None:
    memset = section(full, "graph-memset")
    here = scripts.declared([artifact.load(RUN / "graph-memset.json")])
    (declared,) = here.values()
    assert "this installation" not in memset
    assert "Script: `scripts/graph-memset.sh` in the bundle. Repro source sha256 `2b451fbc1168`" in memset
    assert declared.source and declared.source != typed(RUN, "graph-memset").repro.source_sha256
    assert f"(this report's harness has another source of it, `{declared.source[:12]}`)." in memset
    assert "Repro source sha256 `0cc527e60c7f`." in section(full, "5090-linear")  # the same source: no more
