"""lora-batch-scaling: CPU smoke run end to end, params, FLOP count, failures and the verdict (paired and not)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers import full_text, timing_for

from repro.core.claim import not_tested_here
from repro.core.context import SamplingConfig
from repro.core.errors import UsageError
from repro.core.spec import RunResult, VariantResult, build_params
from repro.evidence.artifact import validation_errors
from repro.repros import _lora_finding as lb_words
from repro.repros import lora_batch as lb
from repro.repros.lora_batch import LoraBatchScaling, LoraParams, step_flops
from repro.run.context import RunContext
from repro.run.execute import RunRequest, execute
from repro.run.schedule import QUICK_SKIP

RID = "lora-batch-scaling"


def test_smoke_run_on_cpu_writes_a_valid_artifact(run_dir: Path, fast: SamplingConfig) -> None:
    doc, path = execute(RunRequest(RID, smoke=True, sampling=fast), run_dir)
    assert path.is_file()
    assert validation_errors(doc) == []
    assert doc["run"]["device"] == "cpu" and doc["error"] is None
    assert [v["name"] for v in doc["variants"]] == ["bs1", "bs2"]
    for v in doc["variants"]:
        assert v["status"] == "ok" and v["kernel_source"] == "cpu"
        names = {k["name"] for k in v["kernels"]}
        assert "aten::mm" in names or "aten::addmm" in names
        assert v["work"]["flops"] == step_flops(build_params(RID, LoraParams, {}, smoke=True), v["config"]["batch"])
        assert v["work"]["ceiling"] == "fp32" and v["achieved"]["tflops"] > 0
        assert v["extra"]["per_sample_s"] == pytest.approx(v["timing"]["stats"]["median"] / v["config"]["batch"])
        assert v["extra"]["peak_allocated_bytes"] is None and v["extra"]["num_alloc_retries"] is None
        # Both batch sizes were timed in the same interleaved rounds.
        assert v["timing"]["group"] == "batches" and v["timing"]["rounds"]
    assert len(doc["variants"][0]["timing"]["rounds"]) == len(doc["variants"][1]["timing"]["rounds"])
    verdict = doc["verdict"]
    assert verdict["status"] == "smoke"  # a CPU run never judges the cliff
    assert verdict["ci_low"] <= verdict["value"] <= verdict["ci_high"]
    assert verdict["finding"].startswith(
        "Smoke run on cpu, not evidence about any GPU: per-sample t(batch 2)/t(batch 1) was "
        f"{verdict['value']:.2f}x (95% CI {verdict['ci_low']:.2f}-{verdict['ci_high']:.2f}); a batch-2 step took"
    )
    assert verdict["details"] == ["Peak memory with no memory cap: batch 1 n/a; batch 2 n/a."]
    (row,) = verdict["breakdown"]
    assert (row["comparison"], row["num"], row["den"], row["batch"]) == ("bs2/bs1", "bs2", "bs1", 2)
    assert row["status"] == "smoke" and row["paired"] is True and row["scale"] == 0.5
    assert row["memory_cap_gib"] is None and row["headline"] is True and row["ratio"] == verdict["value"]
    # The per-batch table the report shows sits beside the verdict, one row per batch size.
    table = doc["extra"]["batch_table"]
    assert [(r["batch"], r["status"]) for r in table] == [(1, "ok"), (2, "ok")]
    per = [v["extra"]["per_sample_s"] for v in doc["variants"]]
    assert [r["per_sample_ms"] for r in table] == pytest.approx([x * 1e3 for x in per])
    assert [r["per_sample_vs_bs1"] for r in table] == pytest.approx([1.0, per[1] / per[0]])
    assert all(r["peak_allocated_gib"] is None and r["alloc_retries"] is None for r in table)


def test_memory_cap_is_ignored_on_cpu_with_a_note(fast: SamplingConfig) -> None:
    p = build_params(RID, LoraParams, {"memory_gb": "32"}, smoke=True)
    res = LoraBatchScaling().run(p, RunContext(device="cpu", smoke=True, sampling=fast))
    assert [v.status for v in res.variants] == ["ok", "ok"]
    assert res.extra["memory_cap_gib"] is None
    assert any("memory_gb=32 ignored" in n for n in res.notes)
    v = LoraBatchScaling().verdict(p, res)
    assert "Peak memory with no memory cap:" in v.details[0]


def test_a_quick_run_neither_checks_nor_times_a_batch_no_headline_uses(
    fast: SamplingConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = build_params(RID, LoraParams, {"batches": "1,2,4"}, smoke=True)
    ctx = RunContext(device="cpu", smoke=True, sampling=fast, quick=True)
    ctx.comparisons = tuple(c for c in LoraBatchScaling().comparisons(p) if c.headline)
    built: list[int] = []
    real = LoraBatchScaling._arm

    def arm(self: LoraBatchScaling, batch: int, *args: Any) -> Any:
        built.append(batch)
        return real(self, batch, *args)

    monkeypatch.setattr(LoraBatchScaling, "_arm", arm)
    res = LoraBatchScaling().run(p, ctx)
    assert built == [1, 2]  # batch 4's inputs were never made, nor its step run
    assert [(v.name, v.status) for v in res.variants] == [("bs1", "ok"), ("bs2", "ok"), ("bs4", "skipped")]
    assert res.variant("bs4").reason == QUICK_SKIP


def test_a_cap_that_was_not_applied_is_not_in_the_breakdown(fast: SamplingConfig) -> None:
    p = build_params(RID, LoraParams, {"memory_gb": "32"}, smoke=True)
    res = LoraBatchScaling().run(p, RunContext(device="cpu", smoke=True, sampling=fast))
    v = LoraBatchScaling().verdict(p, res)
    assert [r["memory_cap_gib"] for r in v.breakdown] == [None]  # what run() applied: res.extra["memory_cap_gib"]


def test_params_parse_and_reject() -> None:
    p = build_params(RID, LoraParams, {"batches": "1,2", "memory_gb": "32", "dtype": "float32"})
    assert p.batches == (1, 2) and p.memory_gb == 32.0 and p.dtype == "float32"
    smoke = build_params(RID, LoraParams, {}, smoke=True)
    assert (smoke.hidden, smoke.heads, smoke.tokens, smoke.depth, smoke.rank) == (64, 4, 32, 1, 4)
    assert smoke.batches == (1, 2) and smoke.dtype == "float32"
    assert LoraParams().batches == (1, 2, 4) and LoraParams().tokens == 4608
    with pytest.raises(UsageError, match="unknown parameter 'batch'"):
        build_params(RID, LoraParams, {"batch": "2"})
    with pytest.raises(UsageError, match="expected >= 1"):
        build_params(RID, LoraParams, {"rank": "0"})
    with pytest.raises(UsageError, match="expected one of bfloat16, float32"):
        build_params(RID, LoraParams, {"dtype": "float16"})
    with pytest.raises(UsageError, match="expected comma-separated integers"):
        build_params(RID, LoraParams, {"batches": "1,two"})
    with pytest.raises(UsageError, match="include 1 and 2"):
        build_params(RID, LoraParams, {"batches": "4,8"})
    with pytest.raises(UsageError, match="divisible by heads"):
        build_params(RID, LoraParams, {"hidden": "100", "heads": "3"})


def test_step_flops_by_hand() -> None:
    p = build_params(RID, LoraParams, {}, smoke=True)  # hidden 64, rank 4, tokens 32, depth 1
    base = 2 * 32 * 12 * 64 * 64  # q, k, v, out (4 d^2) + up, down (2 * 4 d^2)
    lora = 2 * 32 * 4 * (4 * (64 + 64) + 2 * (64 + 256))
    attn = 4 * 32 * 32 * 64
    first_qkv = 3 * 2 * 32 * 64 * 64  # block 0's q/k/v get no input gradient
    assert step_flops(p, 1) == 2 * base + 3 * lora + 3 * attn - first_qkv
    assert step_flops(p, 4) == 4 * step_flops(p, 1)
    deeper = build_params(RID, LoraParams, {"depth": "3"}, smoke=True)
    assert step_flops(deeper, 1) == 3 * (2 * base + 3 * lora + 3 * attn) - first_qkv


# --------------------------------------------------------------------------- verdict on synthetic results

# A slow drift of the GPU over the rounds (up to 45%), the same for every batch size in a round.
DRIFT = [1 + 0.5 * ((i * 7) % 10) / 10 for i in range(24)]


def _variant(
    batch: int,
    step_s: float | None,
    retries: int = 0,
    device: str = "cuda",
    drift: Sequence[float] | None = None,
) -> VariantResult:
    """A batch size's step: unpaired samples around ``step_s``, or with ``drift`` paired rounds."""
    config = {"batch": batch}
    extra: dict[str, Any] = {"peak_allocated_bytes": int(batch * 3 * 2**30), "num_alloc_retries": retries}
    if step_s is None:
        reason = "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
        return VariantResult(
            name=f"bs{batch}", label="", config=config, status="error", reason=reason, device=device, extra=extra
        )
    if drift is None:
        samples = [step_s * (1 + 0.003 * (k - 10)) for k in range(21)]
        timing = timing_for(samples, method="cuda_events", calls_per_sample=1, budget_s=5.0)
    else:  # per-round jitter that differs between batch sizes, so the paired CI is not zero-width
        rounds = [step_s * d * (1 + 0.004 * (((i + batch) % 3) - 1)) for i, d in enumerate(drift)]
        t = timing_for(rounds, method="cuda_events", calls_per_sample=1, budget_s=5.0)
        timing = dataclasses.replace(t, group="batches", rounds=tuple(rounds))
    extra["per_sample_s"] = step_s / batch
    return VariantResult(
        name=f"bs{batch}", label="", config=config, status="ok", device=device, timing=timing, extra=extra
    )


def _verdict(*variants: VariantResult, cap: float | None = None) -> Any:
    p = LoraParams(memory_gb=cap or 0.0)
    return LoraBatchScaling().verdict(p, RunResult(variants=variants, extra={"memory_cap_gib": cap}))


def test_comparisons_are_per_sample_ratios_against_batch_one() -> None:
    comps = LoraBatchScaling().comparisons(LoraParams(memory_gb=32.0))
    assert [(c.name, c.num, c.den, c.scale, c.headline) for c in comps] == [
        ("bs2/bs1", "bs2", "bs1", 0.5, True),
        ("bs4/bs1", "bs4", "bs1", 0.25, False),
    ]
    assert all(c.threshold == 1.3 and c.qualifiers["memory_cap_gib"] == 32.0 for c in comps)


def test_linear_scaling_is_not_a_cliff() -> None:
    v = _verdict(_variant(1, 0.025), _variant(2, 0.050), _variant(4, 0.100))
    assert v.status == "not_reproduced" and v.value == pytest.approx(1.0) and v.paired is False
    assert v.finding.startswith("Not reproduced: per-sample t(batch 2)/t(batch 1) was 1.00x (95% CI")
    assert "the whole CI is below the 1.3 threshold" in v.finding
    assert 'a batch-2 step took 2.00x (95% CI 1.93-2.07) a batch-1 step (the seed: "about 2x"' in v.finding
    assert (
        "per sample, linear scaling on this stack (the CI holds 1.0), not a cliff (read as step time, the seed's 2x "
        "is linear scaling, nothing to fix)"
    ) in v.finding
    assert "the model is 4 transformer blocks at FLUX's width, 6.0 GiB peak at batch 2, not FLUX" in v.finding
    assert "reproduced;" not in v.finding  # the measured step ratio, never a claim said to reproduce
    assert "Peak memory with no memory cap: batch 1 3.0 GiB; batch 2 6.0 GiB; batch 4 12.0 GiB." in v.details
    rows = {r["comparison"]: r for r in v.breakdown}
    assert list(rows) == ["bs2/bs1", "bs4/bs1"]
    assert [r["ratio"] for r in rows.values()] == pytest.approx([1.0, 1.0])
    assert [(r["batch"], r["headline"], r["paired"]) for r in rows.values()] == [(2, True, False), (4, False, False)]


def test_per_sample_slowdown_is_reproduced_and_names_retries_under_a_cap() -> None:
    v = _verdict(_variant(1, 0.025), _variant(2, 0.100, retries=37), cap=32.0)
    assert v.status == "reproduced" and v.value == pytest.approx(2.0)
    assert v.finding.startswith("Reproduced: per-sample t(batch 2)/t(batch 1) was 2.00x")
    assert "the whole CI is above the 1.3 threshold" in v.finding and "a per-sample slowdown on this stack" in v.finding
    assert "under a 32 GiB cap" in full_text(v) and "batch 2 6.0 GiB, 37 allocator retries" in full_text(v)
    assert v.breakdown[0]["memory_cap_gib"] == 32.0
    # bs4 was not given: its comparison is simply absent, the headline stands.
    assert [r["comparison"] for r in v.breakdown] == ["bs2/bs1"]


def test_paired_rounds_cancel_drift_that_would_sink_a_two_sample_ci() -> None:
    # Per sample 1.4x at batch 2 (a step 2.8x), 1.0x at batch 4, under a drift of up to 45%.
    paired = (_variant(1, 0.025, drift=DRIFT), _variant(2, 0.070, drift=DRIFT), _variant(4, 0.100, drift=DRIFT))
    v = _verdict(*paired)
    assert v.status == "reproduced" and v.paired is True and v.value == pytest.approx(1.4, rel=1e-2)
    assert v.ci_low >= 1.3 and f"a batch-2 step took {2 * v.value:.2f}x (" in v.finding
    rows = {r["comparison"]: r for r in v.breakdown}
    assert rows["bs2/bs1"]["paired"] is True and rows["bs2/bs1"]["n"] == len(DRIFT)
    assert rows["bs4/bs1"]["ratio"] == pytest.approx(1.0, rel=1e-2) and rows["bs4/bs1"]["status"] == "not_reproduced"
    # Without the rounds, the same samples give a two-sample CI that the drift widens past the threshold.
    unpaired = [
        dataclasses.replace(x, timing=dataclasses.replace(x.timing, group=None, rounds=None))
        for x in paired
        if x.timing is not None
    ]
    u = _verdict(*unpaired)
    assert u.paired is False and u.ci_low < 1.3 <= u.ci_high and u.status == "not_reproduced"
    assert u.finding.startswith("Not reproduced (inconclusive): per-sample t(batch 2)/t(batch 1)")


def test_better_than_linear_says_batching_helped() -> None:
    v = _verdict(_variant(1, 0.025), _variant(2, 0.030))
    assert v.status == "not_reproduced" and v.value == pytest.approx(0.6)
    assert "cheaper" in v.finding and "linear scaling, not a cliff" not in full_text(v)


def test_a_ci_below_linear_scaling_is_not_called_linear_scaling() -> None:
    from repro.core.results import Comparison, Ratio
    from repro.repros._lora_finding import lora_sentence

    # evidence41's H200: 0.9511 (95% CI 0.9300-0.9684), every value under 1.0.
    head = Ratio(Comparison("bs2/bs1", "bs2", "bs1", 1.3), 0.9511, 0.9300, 0.9684, "not_reproduced", "below", True, 40)
    said = lora_sentence(head)
    assert "linear scaling on this stack" not in said
    assert said.endswith(
        ": per sample 5% under linear scaling (1.0, outside the CI), not a cliff (read as step time, the seed's 2x "
        "is linear scaling, nothing to fix)"
    )
    worse = lora_sentence(dataclasses.replace(head, value=1.08, ci_low=1.05, ci_high=1.11))
    assert worse.endswith("a little worse than linear scaling (1.0, below the CI) but below the 1.3 threshold")


def test_batch_two_out_of_memory_under_a_cap_is_an_error_verdict() -> None:
    v = _verdict(_variant(1, 0.025), _variant(2, None), cap=32.0)
    assert v.status == "error" and v.value is None and v.breakdown == ()
    oom = "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    assert v.finding == f"Not measured: variant bs2 was error: {oom}"
    assert v.details == ("Under the 32 GiB cap, batch 2 or batch 1 ran out of memory.",)


def test_a_smoke_run_on_cpu_never_decides() -> None:
    v = _verdict(_variant(1, 0.025, device="cpu"), _variant(2, 0.100, device="cpu"))
    assert v.status == "smoke" and v.value == pytest.approx(2.0)
    assert v.finding.startswith("Smoke run on cpu, not evidence about any GPU: per-sample t(batch 2)/t(batch 1)")
    assert "Reproduced" not in full_text(v) and "threshold" not in v.finding
    assert [r["status"] for r in v.breakdown] == ["smoke"]


def test_out_of_memory_at_one_batch_is_an_error_variant_and_the_run_goes_on(
    fast: SamplingConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    real = lb._forward

    def forward(x: Any, *args: Any) -> Any:  # batch 2's step runs out of memory, as under a tight cap
        out = real(x, *args)  # leave a half-built step behind, as a real OOM would
        if x.shape[0] == 2:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB.")
        return out

    monkeypatch.setattr(lb, "_forward", forward)
    p = build_params(RID, LoraParams, {"batches": "1,2,4"}, smoke=True)
    res = LoraBatchScaling().run(p, RunContext(device="cpu", smoke=True, sampling=fast))
    assert [(v.name, v.status) for v in res.variants] == [("bs1", "ok"), ("bs2", "error"), ("bs4", "ok")]
    assert res.variants[1].reason == "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    assert res.variants[1].extra["per_sample_s"] is None
    # The batches that fit are still timed together, in paired rounds.
    t1, t4 = res.variants[0].timing, res.variants[2].timing
    assert t1 is not None and t4 is not None and t1.group == t4.group == "batches"
    assert t1.rounds and t4.rounds and len(t1.rounds) == len(t4.rounds)
    assert [r["status"] for r in res.extra["batch_table"]] == ["ok", "out of memory", "ok"]
    assert res.extra["batch_table"][1]["step_ms"] is None
    v = LoraBatchScaling().verdict(p, res)
    assert v.status == "error" and v.value is None
    assert v.finding.startswith("Not measured: variant bs2 was error: OutOfMemoryError")


class _TimingFails(RunContext):
    """A CPU context whose paired timing fails, as an OOM once the batches share the allocator would."""

    def measure_paired(self, arms: Any, *, group: str | None = None, sampling: Any = None) -> list[VariantResult]:
        raise RuntimeError("CUDA out of memory (simulated, while timing)")


def test_a_failure_while_timing_the_batches_together_is_every_batch_s_error(fast: SamplingConfig) -> None:
    p = build_params(RID, LoraParams, {}, smoke=True)
    res = LoraBatchScaling().run(p, _TimingFails(device="cpu", smoke=True, sampling=fast))
    assert [(v.name, v.status) for v in res.variants] == [("bs1", "error"), ("bs2", "error")]
    assert all("while timing" in (v.reason or "") and v.extra["per_sample_s"] is None for v in res.variants)
    assert [r["status"] for r in res.extra["batch_table"]] == ["out of memory", "out of memory"]
    assert LoraBatchScaling().verdict(p, res).status == "error"


def test_no_gpu_tests_the_articles_claim_with_a_stand_in_model() -> None:
    decided = _verdict(_variant(1, 0.025), _variant(2, 0.04625), _variant(4, 0.0925))
    off = not_tested_here(decided, ("12.0",), "9.0", "NVIDIA H200", LoraBatchScaling.stand_in)
    assert off.status == "inconclusive" and off.claim is not None and off.claim["tested"] is False
    assert off.claim["reason"] == (
        "not on this architecture: the claim is about sm_120; NVIDIA H200 is sm_90; and not the seed's subject: a "
        "stand-in model, not the article's FLUX pipeline"
    )
    assert off.not_run[-1]["reason"] == "not on this architecture; not the seed's subject"
    # The step ratio as measured, with its CI, beside the seed's words: 1.85 is not rounded up to 2.
    assert 'a batch-2 step took 1.85x (95% CI 1.78-1.92) a batch-1 step (the seed: "about 2x" on an RTX 5090)' in (
        off.finding
    )
    # The claim was not tested here: nothing in the finding says the seed's observation reproduced.
    assert " reproduced" not in off.finding.replace("Not reproduced", "")
    # On the article's own GPU too: the stand-in is not the article's pipeline.
    on = not_tested_here(decided, ("12.0",), "12.0", "NVIDIA GeForce RTX 5090", LoraBatchScaling.stand_in)
    assert on.status == "inconclusive" and on.claim is not None
    assert on.claim["reason"] == f"not the seed's subject: {LoraBatchScaling.stand_in}"
    assert on.finding.startswith("Inconclusive, the seed's claim was not tested (not the seed's subject: a stand-in")


def _monitored(v: VariantResult, mid: int, lo: int, hi: int, watts: float, throttled: Sequence[str]) -> VariantResult:
    mon = {
        "arm": v.name,
        "sm_clock_during_mhz": mid,
        "sm_clock_min_mhz": lo,
        "sm_clock_max_mhz": hi,
        "power_during_w": watts,
        "throttled": list(throttled),
    }
    return dataclasses.replace(v, gpu_monitor=mon)


def test_a_cap_flagged_while_the_median_clock_stays_at_its_max_is_not_said_to_hold_it_down() -> None:
    one = _monitored(_variant(1, 0.025), 1980, 1605, 1980, 435.0, ["sw_power_cap"])
    two = _monitored(_variant(2, 0.04625), 1980, 1700, 1980, 440.0, ["sw_power_cap"])
    v = _verdict(one, two)
    assert "held the SM clock down" not in v.finding
    assert (
        "sw_power_cap showed during bs1 and bs2's rounds, the median SM clock at its max "
        "(median MHz: bs1 1980, bs2 1980; min: bs1 1605, bs2 1700)" in v.finding
    )


def test_the_finding_names_whose_clocks_sagged_with_each_batch_s_own_numbers() -> None:
    one = _monitored(_variant(1, 0.025), 1980, 1965, 1980, 520.0, [])
    two = _monitored(_variant(2, 0.04625), 1695, 1335, 1980, 654.5, ["sw_power_cap"])
    v = _verdict(one, two)
    assert "sw_power_cap held the SM clock down during bs2's rounds (median MHz: bs1 1980, bs2 1695)" in v.finding
    assert "bs1" not in v.finding.split("held the SM clock down during")[1].split("'s rounds")[0]
    clocks = [d for d in v.details if d.startswith("GPU clocks and power")]
    assert clocks == [
        "GPU clocks and power, medians (min-max) of the polls after each batch's blocks (power: NVML's average over "
        "about its last second, which spans the other batches' blocks too, so it is not one batch's): "
        "bs1 SM 1980 MHz (1965-1980), 520 W; bs2 SM 1695 MHz (1335-1980), 654 W."
    ]
    # No clock events: the finding says nothing about clocks; the numbers stay in the details.
    calm_two = dataclasses.replace(two, gpu_monitor={**(two.gpu_monitor or {}), "throttled": []})
    calm = _verdict(_monitored(_variant(1, 0.025), 1980, 1980, 1980, 500.0, []), calm_two)
    assert "held the SM clock" not in calm.finding and any(d.startswith("GPU clocks") for d in calm.details)


def test_the_scope_gives_the_parameter_count_the_run_built(fast: SamplingConfig) -> None:
    p = build_params(RID, LoraParams, {}, smoke=True)
    res = LoraBatchScaling().run(p, RunContext(device="cpu", smoke=True, sampling=fast))
    params = res.extra["parameters"]
    # One block of six adapted projections: 12 hidden^2 frozen weights, 9 hidden of biases, and
    # adapters of rank r on (in + out) = 18 hidden.
    h, r = p.hidden, p.rank
    assert params == {"total": p.depth * (12 * h * h + 9 * h + 18 * h * r), "trainable": p.depth * 18 * h * r}
    v = LoraBatchScaling().verdict(p, res)
    said = f"the model is 1 transformer block of width {h} (FLUX's is 3072), {params['total']:,} parameters in all ("
    assert said in v.finding
    assert lb_words.count_words(453_000_000) == "453M" and lb_words.count_words(1_234_000) == "1.2M"
    assert any("the real FLUX pipeline" in u for u in LoraBatchScaling.untested)


def test_the_finding_sets_the_kernels_alone_beside_the_event_timed_ratio() -> None:
    from repro.api import Kernel

    def with_kernels(v: VariantResult, us: float) -> VariantResult:
        # Two kernels per step whose time, per call, sums to ``us``: the one-step kernel table.
        ks = (Kernel("gemm", 2, us * 1.5, us * 0.75, 1.0), Kernel("sdpa", 1, us * 0.25, us * 0.25, 1.0))
        return dataclasses.replace(v, kernels=ks)

    # Steps of 26.4 and 48.9 ms by events; 23.7 and 45.6 ms of kernels (as the H200 ran in evidence6).
    bs1, bs2 = with_kernels(_variant(1, 0.0264), 23_700.0), with_kernels(_variant(2, 0.0489), 45_600.0)
    v = _verdict(bs1, bs2, _variant(4, 0.0942))
    assert "the profiled kernels alone gave 0.962x per sample (23.7 -> 45.6 ms a step)" in v.finding
    assert "kernels alone" not in _verdict(_variant(1, 0.025), _variant(2, 0.050)).finding  # no tables: no clause
    # Kernels alone 0.962 against a headline near 0.926: outside its CI, so the clause says where the kernels come
    # from, and names no cause for the timed steps' extra time.
    assert (
        "above the CI's 0.960: one profiled step per batch after sampling, clock not recorded, so not a measure of "
        "the timed steps."
    ) in v.finding


def test_the_kernel_clause_says_where_the_kernels_come_from_and_attributes_nothing() -> None:
    from repro.api import Kernel
    from repro.core.results import Comparison, Ratio
    from repro.repros._lora_finding import kernel_clause

    # evidence41's H200 (GPU-bf6e8f5d): steps timed 25.91, 49.13 and 94.93 ms; one profiled step's kernels 24.92,
    # 46.35 and 99.67 ms; headline 0.95105 (95% CI 0.93004-0.96837).
    def step(batch: int, timed_s: float, kernel_us: float) -> VariantResult:
        return dataclasses.replace(_variant(batch, timed_s), kernels=(Kernel("k", 1, kernel_us, kernel_us, 1.0),))

    res = RunResult(
        variants=(
            step(1, 0.025911711692810055, 24_922.278999999990),
            step(2, 0.049133918762207030, 46_350.278000000006),
            step(4, 0.094928928375244140, 99_674.918),
        )
    )
    head = Ratio(
        Comparison("bs2/bs1", "bs2", "bs1", 1.3),
        0.9510532496570061,
        0.9300412723399663,
        0.9683738518707781,
        "not_reproduced",
        "below",
        True,
        60,
    )
    said = kernel_clause(res, head)
    # 0.92990 prints as the CI's 0.93 at two decimals: the clause prints the digits that show it outside.
    assert said == (
        "the profiled kernels alone gave 0.9299x per sample (24.9 -> 46.4 ms a step), below the CI's 0.9300: one "
        "profiled step per batch after sampling, clock not recorded, so not a measure of the timed steps (batch 4's "
        "kernels, 99.7 ms, exceed its timed step, 94.9 ms)"
    )
    assert "launch and host gaps) move" not in said and "timed medians' ratio" not in said
    # Inside the CI, or without a headline, the kernels' ratio stands alone.
    wide = dataclasses.replace(head, ci_low=0.92)
    assert (
        kernel_clause(res, wide)
        == kernel_clause(res)
        == "the profiled kernels alone gave 0.93x per sample (24.9 -> 46.4 ms a step)"
    )


def test_the_seeds_2x_is_read_both_ways() -> None:
    from repro.repros._lora_finding import THRESHOLD_WHY

    # The seed's 2x is a per-sample or a step time; the threshold's words give both readings.
    assert "read as step time it is linear scaling" in THRESHOLD_WHY


def test_the_standalone_script_steps_the_same_projection_as_the_harness() -> None:
    """The adapter's scale is a multiply, one kernel per projection even at 1.0: the script times it as the
    harness does, so the two run one program."""
    import inspect

    from repro.repros import lora_batch
    from repro.repros.lora_batch import LoraBatchScaling, LoraParams

    harness = inspect.getsource(lora_batch._forward)
    assert "return F.linear(h, w, b) + F.linear(F.linear(h, a), bb) * scale" in harness
    script = LoraBatchScaling().script(LoraParams())
    assert "return F.linear(h, w, bias) + F.linear(F.linear(h, a), bb) * SCALE" in script
    assert f"SCALE = {lora_batch.LORA_SCALE!r}" in script
