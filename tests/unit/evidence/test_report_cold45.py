"""evidence45's cold read: every section kept (its own report lost solve's), seed.cu's nodes set beside the
re-implementation's with seed.cu's own spread, and the twin's timing not said to leave out what its
numbers show it holds."""

from __future__ import annotations

from evidence_run import pasted, section
from helpers import ROOT

RUN = ROOT / "artifacts" / "reference" / "h200" / "evidence45" / "all" / "20261204T123555Z-ec8e33"


def test_the_run_renders_whole_where_its_own_report_was_cut() -> None:
    said = pasted(RUN)
    assert "Report cut" not in said and len(said) <= 20_000 and said.count("\n") + 1 <= 250
    assert "Report cut" in (RUN / "report.md").read_text()
    assert section(said, "solve-512-cliff") and "the seed's-programs-run-here and re-run lines" in said
    assert "- The seed's own seed.cu" in section(said, "graph-memset")


def test_seed_cu_against_the_reimplementation_names_the_node_outside_seed_cus_processes() -> None:
    memset = section(pasted(RUN), "graph-memset")
    # seed.cu printed 872 and 592 us per 1000-op replay (medians of 3 processes, 867-878 and 590-597); the
    # re-implementation's per-op medians were 872 and 620 ns: only the kernel node lies outside seed.cu's own spread.
    assert (
        "against the seed's own program above (1.47x), -4.6%, ns per op: memset node 872 (seed.cu 872, +0.0%; its "
        "processes 867-878), kernel node 620 (seed.cu 592, +4.7%; its processes 590-597), only the kernel node "
        "outside seed.cu's processes"
    ) in memset


def test_the_twin_is_not_said_to_leave_out_launch_time() -> None:
    from repro.repros.graph_memset import GraphMemset

    said = GraphMemset.seed_experiment or ""
    assert "without launch" not in said and "each launch queued behind the last replay" in said
