"""evidence46's cold read: a seed.cu node named only where it alone lies outside seed.cu's own processes, and
lora's per-batch power said to be NVML's one-second average, not one batch's."""

from __future__ import annotations

from evidence_run import pasted, section
from helpers import ROOT

RUN = ROOT / "artifacts" / "reference" / "h200" / "evidence46" / "all" / "20261204T134236Z-ab9654"


def test_a_node_is_named_only_where_it_alone_lies_outside_seed_cus_processes() -> None:
    memset = section(pasted(RUN), "graph-memset")
    # -2.5% and +2.3% from seed.cu's medians, but the memset node's 914 lies inside seed.cu's 889-940 and the
    # kernel node's 622 just above its 593-620.
    assert (
        "ns per op: memset node 914 (seed.cu 937, -2.5%; its processes 889-940), kernel node 622 (seed.cu 608, "
        "+2.3%; its processes 593-620), only the kernel node outside seed.cu's processes"
    ) in memset
    assert "moves it" not in memset


def test_the_run_keeps_every_section_under_the_limits() -> None:
    said = pasted(RUN)
    assert "Report cut" not in said and len(said) <= 20_000 and said.count("\n") + 1 <= 250
    assert all(section(said, rid) for rid in ("5090-linear", "graph-memset", "solve-512-cliff"))
