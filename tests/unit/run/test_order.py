"""A paired headline whose rounds split by the arms' order is said to, with both halves' medians."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from helpers import ROOT, timing_for

from repro.core.results import VariantResult
from repro.run.order import order_warnings

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


def test_the_h200s_lora_headline_splits_by_order_and_5090_linear_does_not() -> None:
    lora = json.loads((EVIDENCE9 / "lora-batch-scaling.json").read_text())
    (said,) = order_warnings(lora["verdict"]["breakdown"], _variants(lora, "bs1", "bs2"))
    # Recomputed from the rounds: forward rounds 1.8353/2, reversed 1.9204/2; the headline 0.9403 (±1.97%).
    assert said.startswith("bs2/bs1: the per-round ratios depend on the arms' order within a round: 0.9176 in ")
    assert "forward rounds, 0.9602 in reversed ones (4.4% apart, beyond twice the CI's ±2.0%)" in said
    linear = json.loads((EVIDENCE9 / "5090-linear.json").read_text())
    assert order_warnings(linear["verdict"]["breakdown"], _variants(linear, "linear_fp32", "manual_fp32")) == []


def test_no_rounds_no_pairing_or_too_few_rounds_say_nothing() -> None:
    row = {"comparison": "a/b", "num": "a", "den": "b", "ratio": 1.0, "ci_low": 0.99, "ci_high": 1.01}
    few = [VariantResult(name=n, label="", config={}, status="ok", timing=None) for n in ("a", "b")]
    assert order_warnings([{**row, "headline": True, "paired": True}], few) == []
    zig = [1.0, 1.2] * 5  # a 20% order effect
    vs = [
        VariantResult(
            name=n,
            label="",
            config={},
            status="ok",
            timing=dataclasses.replace(timing_for(r, method="cuda_events"), rounds=tuple(r)),
        )
        for n, r in (("a", zig), ("b", [1.0] * 10))
    ]
    side = [{**row, "headline": False, "paired": True}]
    assert order_warnings(side, vs) == []  # not the headline: not a reason to call the run suspect
    (aside,) = order_warnings(side, vs, headline=False)  # but a warning of its own
    assert aside.startswith("a/b: the per-round ratios depend on the arms' order within a round: 1 in forward")
    assert order_warnings([{**row, "headline": True, "paired": False}], vs) == []  # unpaired: no rounds to split
    (said,) = order_warnings([{**row, "headline": True, "paired": True}], vs)
    assert "1 in forward rounds, 1.2 in reversed ones (16.7% apart" in said


def test_an_order_split_makes_the_artifact_suspect_and_says_why(tmp_path: Any) -> None:
    from repro.core.spec import RunResult
    from repro.repros.lora_batch import LoraBatchScaling, LoraParams
    from repro.run.execute import RunRequest, document

    lora = json.loads((EVIDENCE9 / "lora-batch-scaling.json").read_text())
    mon = {"sm_clock_during_mhz": 1980, "throttled": [], "other_pids": []}
    vs = [dataclasses.replace(v, gpu_monitor=mon, extra={"per_sample_s": 0.0}) for v in _variants(lora, "bs1", "bs2")]
    verdict = LoraBatchScaling().verdict(LoraParams(), RunResult(variants=tuple(vs)))
    order = order_warnings(verdict.breakdown, vs)
    assert order  # the H200's rounds, re-judged here, still split by order
    fp = {"gpu": {"nvml": {"sm_clock_max_mhz": 1980}}}
    req = RunRequest("lora-batch-scaling")
    common: dict[str, Any] = {"seconds": 1.0, "device": "cuda", "variants": vs, "verdict": verdict, "fp": fp}
    doc = document(req, LoraBatchScaling, LoraParams(), tmp_path, order=order, **common)
    assert doc["validity"]["flag"] == "suspect" and doc["validity"]["reasons"][-1] == order[0]
    assert doc["warnings"][-1] == order[0]
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
    # evidence25's bs4/bs1 rounds part 0.9001 (forward) against 0.9202 (reversed), 2.2% apart.
    run = next((ROOT / "artifacts" / "reference" / "h200" / "evidence25" / "all").iterdir())
    lora = json.loads((run / "lora-batch-scaling.json").read_text())
    said = order_warnings(lora["verdict"]["breakdown"], _variants(lora, "bs1", "bs2", "bs4"), headline=False)
    assert [w.split(":", 1)[0] for w in said] == ["bs4/bs1"]
    assert "0.9001 in forward rounds, 0.9202 in reversed ones (2.2% apart" in said[0]
