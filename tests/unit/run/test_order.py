"""A paired headline whose rounds split by which of its two arms ran first is said to, with both halves' medians;
in a group of three or more arms, one whose rounds split by their whole order too (evidence49's second cold read).

Which ran first comes from the arms' positions in their group and ``round_order``: with three arms in a group, a
round's parity does not say it (evidence31's cold read)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from helpers import ROOT, timing_for

from repro.core.order import num_first, order_warnings, round_order
from repro.core.results import VariantResult

EVIDENCE9 = ROOT / "artifacts" / "reference" / "h200" / "evidence9" / "all" / "20261202T012116Z-0e1f37"


def _variants(doc: dict[str, Any], *names: str) -> list[VariantResult]:
    """The named variants of a committed artifact with their recorded rounds and group, as the harness holds them."""
    out = []
    for v in doc["variants"]:
        if v["name"] in names:
            rounds = [float(x) for x in v["timing"]["rounds"]]
            t = timing_for(rounds, method="cuda_events")
            timing = dataclasses.replace(t, rounds=tuple(rounds), group=v["timing"].get("group"))
            out.append(VariantResult(name=v["name"], label="", config={}, status="ok", timing=timing))
    return out


def test_the_h200s_lora_headline_splits_by_whole_orders_not_by_which_batch_ran_first() -> None:
    """bs1, bs2 and bs4 rotate in one group: split by whether bs2 ran before bs1, evidence9's rounds read 0.9481
    (14 rounds) and 0.9299 (14), 2.0% apart against twice the CI's ±2.0%; round parity would read 0.9176 and
    0.9602 and call it an order effect. By whole orders, bs2 right after bs4 reads 0.9663 and bs2 first 0.8856:
    a carry-over from bs4 that the split by which ran first averages away (evidence45-49's rounds show it too)."""
    lora = json.loads((EVIDENCE9 / "lora-batch-scaling.json").read_text())
    arms = _variants(lora, "bs1", "bs2", "bs4")
    (said,) = order_warnings(lora["verdict"]["breakdown"], arms)
    assert said.startswith(
        "bs2/bs1: the per-round ratios depend on the arms' order within a round: 0.8856 with (bs2, bs4, bs1) to "
        "0.9663 with (bs4, bs2, bs1) over its 6 orders (4+ rounds each; 9.1% apart, beyond twice the CI's ±"
    )
    assert "forward rounds" not in said
    first = num_first(arms, "bs2", "bs1", 28)
    assert first is not None and first[:6] == [False, True, True, False, False, True] and sum(first) == 14
    linear = json.loads((EVIDENCE9 / "5090-linear.json").read_text())
    assert order_warnings(linear["verdict"]["breakdown"], _variants(linear, "linear_fp32", "manual_fp32")) == []


def _grouped(rounds: dict[str, list[float]]) -> list[VariantResult]:
    return [
        VariantResult(
            name=n,
            label="",
            config={},
            status="ok",
            timing=dataclasses.replace(timing_for(r, method="cuda_events"), rounds=tuple(r), group="g"),
        )
        for n, r in rounds.items()
    ]


def test_an_arm_slower_after_another_splits_that_pair_by_who_ran_first() -> None:
    """Three arms in one group; b takes 1.2 when it runs after a, else 1.0: b/a splits, c/a does not."""
    n = 24
    first = num_first(_grouped({"a": [1.0] * n, "b": [1.0] * n, "c": [1.0] * n}), "b", "a", n)
    assert first is not None
    after_a = [not x for x in first]
    b = [1.2 if late else 1.0 for late in after_a]
    arms = _grouped({"a": [1.0] * n, "b": b, "c": [1.0] * n})
    row = {"num": "b", "den": "a", "ratio": 1.1, "ci_low": 1.09, "ci_high": 1.11, "headline": True, "paired": True}
    (said,) = order_warnings([{**row, "comparison": "b/a"}], arms)
    assert "1 in forward rounds, 1.2 in reversed ones (forward: b ran before a; 16.7% apart" in said
    flat = {**row, "num": "c", "ratio": 1.0, "ci_low": 0.99, "ci_high": 1.01}
    assert order_warnings([{**flat, "comparison": "c/a"}], arms) == []


def test_no_rounds_no_pairing_or_too_few_rounds_say_nothing() -> None:
    row = {"comparison": "a/b", "num": "a", "den": "b", "ratio": 1.0, "ci_low": 0.99, "ci_high": 1.01}
    few = [VariantResult(name=n, label="", config={}, status="ok", timing=None) for n in ("a", "b")]
    assert order_warnings([{**row, "headline": True, "paired": True}], few) == []
    zig = [1.0 if round_order(2, r) == [0, 1] else 1.2 for r in range(10)]  # a 20% order effect: a after b
    vs = [
        VariantResult(
            name=n,
            label="",
            config={},
            status="ok",
            timing=dataclasses.replace(timing_for(r, method="cuda_events"), rounds=tuple(r), group=group),
        )
        for n, r, group in (("a", zig, "g"), ("b", [1.0] * 10, "g"))
    ]
    alone = [dataclasses.replace(v, timing=dataclasses.replace(v.timing, group=None)) for v in vs if v.timing]
    assert order_warnings([{**row, "headline": True, "paired": True}], alone) == []  # no group: order unknown
    side = [{**row, "headline": False, "paired": True}]
    assert order_warnings(side, vs) == []  # not the headline: not a reason to call the run suspect
    (aside,) = order_warnings(side, vs, headline=False)  # but a warning of its own
    assert aside.startswith("a/b: the per-round ratios depend on the arms' order within a round: 1 in forward")
    assert order_warnings([{**row, "headline": True, "paired": False}], vs) == []  # unpaired: no rounds to split
    (said,) = order_warnings([{**row, "headline": True, "paired": True}], vs)
    assert "1 in forward rounds, 1.2 in reversed ones (forward: a ran before b; 16.7% apart" in said


def test_an_order_split_makes_the_artifact_suspect_and_says_why(tmp_path: Any) -> None:
    from repro.core.spec import RunResult
    from repro.repros.lora_batch import LoraBatchScaling, LoraParams
    from repro.run.execute import RunRequest, document

    lora = json.loads((EVIDENCE9 / "lora-batch-scaling.json").read_text())
    mon = {"sm_clock_during_mhz": 1980, "throttled": [], "other_pids": []}
    vs = [
        dataclasses.replace(v, gpu_monitor=mon, extra={"per_sample_s": 0.0})
        for v in _variants(lora, "bs1", "bs2", "bs4")
    ]
    # The H200's rounds with bs2 made 10% slower in the rounds where it ran after bs1: an order effect.
    timing = vs[1].timing
    assert timing is not None and timing.rounds is not None
    late = [not f for f in num_first(vs, "bs2", "bs1", len(timing.rounds)) or ()]
    slowed = tuple(x * (1.1 if f else 1.0) for x, f in zip(timing.rounds, late, strict=True))
    vs[1] = dataclasses.replace(vs[1], timing=dataclasses.replace(timing, rounds=slowed))
    verdict = LoraBatchScaling().verdict(LoraParams(), RunResult(variants=tuple(vs)))
    order = order_warnings(verdict.breakdown, vs)
    assert order and order[0].startswith("bs2/bs1: ")
    fp = {"gpu": {"nvml": {"sm_clock_max_mhz": 1980}}}
    req = RunRequest("lora-batch-scaling")
    common: dict[str, Any] = {"seconds": 1.0, "device": "cuda", "variants": vs, "verdict": verdict, "fp": fp}
    doc = document(req, LoraBatchScaling, LoraParams(), tmp_path, order=order, **common)
    assert doc["validity"]["flag"] == "suspect" and doc["validity"]["reasons"][-1] == order[0]
    assert order[0] in doc["warnings"]
    plain = document(req, LoraBatchScaling, LoraParams(), tmp_path, **common)
    assert plain["validity"] == {"flag": "valid", "reasons": []}  # the same run without the split


def test_a_side_rows_order_split_is_a_warning_of_the_artifact_not_a_reason_for_suspect(tmp_path: Any) -> None:
    from repro.core.spec import RunResult
    from repro.repros.lora_batch import LoraBatchScaling, LoraParams
    from repro.run.execute import RunRequest, document

    run = next((ROOT / "artifacts" / "reference" / "h200" / "evidence25" / "all").iterdir())
    lora = json.loads((run / "lora-batch-scaling.json").read_text())
    mon = {"sm_clock_during_mhz": 1980, "throttled": [], "other_pids": []}
    vs = [
        dataclasses.replace(v, gpu_monitor=mon, extra={"per_sample_s": 0.0})
        for v in _variants(lora, "bs1", "bs2", "bs4")
    ]
    verdict = LoraBatchScaling().verdict(LoraParams(), RunResult(variants=tuple(vs)))
    fp = {"gpu": {"nvml": {"sm_clock_max_mhz": 1980}}}
    common: dict[str, Any] = {"seconds": 1.0, "device": "cuda", "variants": vs, "verdict": verdict, "fp": fp}
    doc = document(RunRequest("lora-batch-scaling"), LoraBatchScaling, LoraParams(), tmp_path, **common)
    assert any(w.startswith("bs4/bs1: the per-round ratios depend on the arms' order") for w in doc["warnings"])
    assert doc["validity"] == {"flag": "valid", "reasons": []}
    smoke = document(RunRequest("lora-batch-scaling", smoke=True), LoraBatchScaling, LoraParams(), tmp_path, **common)
    assert not any("bs4/bs1" in w for w in smoke["warnings"])


def test_evidence25s_lora_side_row_splits_by_order_and_is_a_warning() -> None:
    # evidence25's bs4/bs1 rounds part 0.9021 (bs4 first) against 0.9200 (bs1 first), 2.0% apart.
    run = next((ROOT / "artifacts" / "reference" / "h200" / "evidence25" / "all").iterdir())
    lora = json.loads((run / "lora-batch-scaling.json").read_text())
    said = order_warnings(lora["verdict"]["breakdown"], _variants(lora, "bs1", "bs2", "bs4"), headline=False)
    assert [w.split(":", 1)[0] for w in said] == ["bs4/bs1"]
    assert "0.9021 in forward rounds, 0.92 in reversed ones (forward: bs4 ran before bs1; 2.0% apart" in said[0]


def test_a_report_restates_the_split_by_which_arm_ran_first() -> None:
    from typing import cast

    from repro.evidence.clocks import restate
    from repro.evidence.model import Artifact

    new = (
        "b/a: the per-round ratios depend on the arms' order within a round: 1 in forward rounds, 1.2 in reversed "
        "ones (forward: b ran before a; 16.7% apart, beyond twice the CI's ±1.0%); the median 1.1 sits between them "
        "and the CI does not cover this"
    )
    assert restate(new, cast(Artifact, None)) == (
        "b/a: the arms' order split the rounds: 1 with b first, 1.2 with a first (16.7% apart, over twice the CI's "
        "±1.0%, which does not cover it)"
    )
    old = new.replace("forward: b ran before a; ", "")  # an artifact of a harness that split by round parity
    assert "1 forward, 1.2 reversed (16.7% apart" in restate(old, cast(Artifact, None))


def test_a_carry_over_from_a_third_arm_is_found_by_whole_orders_and_noise_is_not() -> None:
    """b runs 10% slower right after c: which of a and b ran first is balanced over that, so only whole orders
    show it; the same rounds without the carry-over, or with it under twice the CI, say nothing."""
    from repro.core.order import order_effect, orders_of

    n = 48
    orders = orders_of(["a", "b", "c"], n)
    after_c = [o.index("b") == o.index("c") + 1 for o in orders]
    wobble = [1.0 + 0.002 * ((r * 7) % 5 - 2) for r in range(n)]  # a deterministic ±0.4% jitter
    b = [w * (1.1 if late else 1.0) for w, late in zip(wobble, after_c, strict=True)]
    arms = _grouped({"a": [1.0] * n, "b": b, "c": [1.0] * n})
    row = {"num": "b", "den": "a", "ratio": 1.0, "ci_low": 0.99, "ci_high": 1.01, "headline": True, "paired": True}
    (said,) = order_warnings([{**row, "comparison": "b/a"}], arms)
    assert "over its 6 orders (8+ rounds each; " in said and "forward rounds" not in said
    assert "permutation p 0.0005)" in said  # no permutation of 2000 spreads the orders as far
    e = order_effect([1.0] * n, [1.0] * n, orders, half=0.0)
    assert e is None  # no spread at all
    assert order_effect(wobble, [1.0] * n, orders, half=0.0) is None  # ±0.4%: under FLOOR
    assert order_effect(b, [1.0] * n, orders, half=0.06) is None  # under twice a ±6% CI


def test_the_whole_orders_warning_reads_back_in_a_reports_words() -> None:
    from repro.core.order import OrderEffect, orders_words
    from repro.evidence.clocks import _order_match

    e = OrderEffect(0.8867, ("bs2", "bs4", "bs1"), 0.9786, ("bs1", "bs4", "bs2"), 6, 8, 0.104, 0.0005)
    said = _order_match(f"bs2/bs1: {orders_words(e, 0.9413, 0.019)}")
    assert said == (
        "the arms' order split the rounds: 0.8867 in rounds run bs2, bs4, bs1 to 0.9786 run bs1, bs4, bs2 (6 orders, "
        "8+ rounds each, Kruskal-Wallis permutation p 0.0005; 10.4% apart, over twice the CI's ±1.9%)"
    )

    # Arm names holding the words' own punctuation read back whole.
    odd = OrderEffect(0.9, ("bs(2)", "x) to y"), 1.0, ("x) to y", "bs(2)"), 2, 4, 0.11, 0.001)
    got = _order_match(f"b/c: {orders_words(odd, 0.95, 0.01)}")
    assert got is not None and "0.9 in rounds run bs(2), x) to y to 1 run x) to y, bs(2)" in got


def test_an_external_programs_rounds_are_not_classified_by_the_harnesss_orders() -> None:
    """graph-memset's CUDA twin orders its own rounds (forward, then reversed, no rotation): round_order does not
    say how they ran, so neither order check reads them."""
    twin = [
        dataclasses.replace(v, timing=dataclasses.replace(v.timing, method="external"))
        for v in _grouped({"a": [1.0] * 24, "b": [1.0, 1.2] * 12, "c": [1.0] * 24})
        if v.timing is not None
    ]
    row = {"num": "b", "den": "a", "ratio": 1.1, "ci_low": 1.09, "ci_high": 1.11, "headline": True, "paired": True}
    assert num_first(twin, "b", "a", 24) is None
    assert order_warnings([{**row, "comparison": "b/a"}], twin) == []


def test_a_round_with_no_denominator_leaves_the_check_out() -> None:
    """A round dropped from the ratios would shift every later round's order: the check says nothing instead."""
    n = 24
    first = num_first(_grouped({"a": [1.0] * n, "b": [1.0] * n}), "b", "a", n) or []
    b = [1.2 if not f else 1.0 for f in first]
    a = [1.0] * n
    a[3] = 0.0
    row = {"num": "b", "den": "a", "ratio": 1.1, "ci_low": 1.09, "ci_high": 1.11, "headline": True, "paired": True}
    assert order_warnings([{**row, "comparison": "b/a"}], _grouped({"a": a, "b": b})) == []
    assert order_warnings([{**row, "comparison": "b/a"}], _grouped({"a": [1.0] * n, "b": b}))
