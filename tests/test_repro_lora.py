"""lora-batch-scaling: CPU smoke run end to end, params, FLOP count and the verdict's wording."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import full_text, timing_for

from repro.artifact import validation_errors
from repro.errors import UsageError
from repro.execute import RunRequest, execute
from repro.measure import Context, SamplingConfig
from repro.repros.lora_batch import LoraBatchScaling, Params, step_flops
from repro.spec import RunResult, VariantResult, build_params

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
        assert v["work"]["flops"] == step_flops(build_params(RID, Params, {}, smoke=True), v["config"]["batch"])
        assert v["work"]["ceiling"] == "fp32" and v["achieved"]["tflops"] > 0
        assert v["extra"]["per_sample_s"] == pytest.approx(v["timing"]["stats"]["median"] / v["config"]["batch"])
        assert v["extra"]["peak_allocated_bytes"] is None and v["extra"]["num_alloc_retries"] is None
    verdict = doc["verdict"]
    assert verdict["status"] == "smoke"  # a CPU run never judges the cliff
    assert verdict["ci_low"] <= verdict["value"] <= verdict["ci_high"]
    assert " ".join([verdict["finding"], *verdict["details"]]).endswith("Smoke run on cpu, not evidence about any GPU.")
    assert [r["batch"] for r in verdict["breakdown"]] == [1, 2]


def test_memory_cap_is_ignored_on_cpu_with_a_note(fast: SamplingConfig) -> None:
    p = build_params(RID, Params, {"memory_gb": "32"}, smoke=True)
    res = LoraBatchScaling().run(p, Context(device="cpu", smoke=True, sampling=fast))
    assert [v.status for v in res.variants] == ["ok", "ok"]
    assert res.extra["memory_cap_gib"] is None
    assert any("memory_gb=32 ignored" in n for n in res.notes)


def test_params_parse_and_reject() -> None:
    p = build_params(RID, Params, {"batches": "1,2", "memory_gb": "32", "dtype": "float32"})
    assert p.batches == (1, 2) and p.memory_gb == 32.0 and p.dtype == "float32"
    smoke = build_params(RID, Params, {}, smoke=True)
    assert (smoke.hidden, smoke.heads, smoke.tokens, smoke.depth, smoke.rank) == (64, 4, 32, 1, 4)
    assert smoke.batches == (1, 2) and smoke.dtype == "float32"
    assert Params().batches == (1, 2, 4) and Params().tokens == 4608
    with pytest.raises(UsageError, match="unknown parameter 'batch'"):
        build_params(RID, Params, {"batch": "2"})
    with pytest.raises(UsageError, match="expected >= 1"):
        build_params(RID, Params, {"rank": "0"})
    with pytest.raises(UsageError, match="expected one of bfloat16, float32"):
        build_params(RID, Params, {"dtype": "float16"})
    with pytest.raises(UsageError, match="expected comma-separated integers"):
        build_params(RID, Params, {"batches": "1,two"})
    with pytest.raises(UsageError, match="include 1 and 2"):
        build_params(RID, Params, {"batches": "4,8"})
    with pytest.raises(UsageError, match="divisible by heads"):
        build_params(RID, Params, {"hidden": "100", "heads": "3"})


def test_step_flops_by_hand() -> None:
    p = build_params(RID, Params, {}, smoke=True)  # hidden 64, rank 4, tokens 32, depth 1
    base = 2 * 32 * 12 * 64 * 64  # q, k, v, out (4 d^2) + up, down (2 * 4 d^2)
    lora = 2 * 32 * 4 * (4 * (64 + 64) + 2 * (64 + 256))
    attn = 4 * 32 * 32 * 64
    first_qkv = 3 * 2 * 32 * 64 * 64  # block 0's q/k/v get no input gradient
    assert step_flops(p, 1) == 2 * base + 3 * lora + 3 * attn - first_qkv
    assert step_flops(p, 4) == 4 * step_flops(p, 1)
    deeper = build_params(RID, Params, {"depth": "3"}, smoke=True)
    assert step_flops(deeper, 1) == 3 * (2 * base + 3 * lora + 3 * attn) - first_qkv


# --------------------------------------------------------------------------- verdict on synthetic results


def _variant(batch: int, step_s: float | None, retries: int = 0, device: str = "cuda") -> VariantResult:
    config = {"batch": batch}
    extra: dict[str, Any] = {"peak_allocated_bytes": int(batch * 3 * 2**30), "num_alloc_retries": retries}
    if step_s is None:
        reason = "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
        return VariantResult(
            name=f"bs{batch}", label="", config=config, status="error", reason=reason, device=device, extra=extra
        )
    samples = [step_s * (1 + 0.003 * (k - 10)) for k in range(21)]
    timing = timing_for(samples, method="cuda_events", calls_per_sample=1, budget_s=5.0)
    extra["per_sample_s"] = step_s / batch
    return VariantResult(
        name=f"bs{batch}", label="", config=config, status="ok", device=device, timing=timing, extra=extra
    )


def _verdict(*variants: VariantResult, cap: float | None = None) -> Any:
    return LoraBatchScaling().verdict(Params(), RunResult(variants=variants, extra={"memory_cap_gib": cap}))


def test_linear_scaling_is_not_a_cliff() -> None:
    v = _verdict(_variant(1, 0.025), _variant(2, 0.050), _variant(4, 0.100))
    assert v.status == "not_reproduced" and v.value == pytest.approx(1.0)
    assert "a batch-2 step took 2.00x the batch-1 step" in full_text(v)
    assert "this is linear scaling, not a cliff" in full_text(v)
    assert "Peak memory with no memory cap: batch 1 3.0 GiB; batch 2 6.0 GiB; batch 4 12.0 GiB." in full_text(v)
    assert [r["per_sample_vs_bs1"] for r in v.breakdown] == pytest.approx([1.0, 1.0, 1.0])


def test_per_sample_slowdown_is_reproduced_and_names_retries_under_a_cap() -> None:
    v = _verdict(_variant(1, 0.025), _variant(2, 0.100, retries=37), cap=32.0)
    assert v.status == "reproduced" and v.value == pytest.approx(2.0)
    assert v.finding.startswith("Reproduced: per-sample time at batch 2 was 2.00x")
    assert "a real per-sample slowdown" in full_text(v)
    assert "under a 32 GiB cap" in full_text(v) and "batch 2 6.0 GiB, 37 allocator retries" in full_text(v)


def test_better_than_linear_says_batching_helped() -> None:
    v = _verdict(_variant(1, 0.025), _variant(2, 0.030))
    assert v.status == "not_reproduced" and v.value == pytest.approx(0.6)
    assert "cheaper" in full_text(v) and "linear scaling, not a cliff" not in full_text(v)


def test_batch_two_out_of_memory_under_a_cap_is_an_error_verdict() -> None:
    v = _verdict(_variant(1, 0.025), _variant(2, None), cap=32.0)
    assert v.status == "error" and v.value is None
    assert "under the 32 GiB cap" in full_text(v) and "out of memory" in full_text(v)
    assert v.breakdown[1]["status"] == "out of memory"


class _OomAtBatch2(Context):
    """A context whose batch-2 step runs out of memory, as it would under a tight cap."""

    def measure(self, name: str, fn: Any, **kw: Any) -> VariantResult:  # type: ignore[override]
        import torch

        if name == "bs2":
            fn()  # leave a half-built step behind, as a real OOM would
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB.")
        return super().measure(name, fn, **kw)


def test_out_of_memory_at_one_batch_is_an_error_variant_and_the_run_goes_on(fast: SamplingConfig) -> None:
    p = build_params(RID, Params, {"batches": "1,2,4"}, smoke=True)
    res = LoraBatchScaling().run(p, _OomAtBatch2(device="cpu", smoke=True, sampling=fast))
    assert [(v.name, v.status) for v in res.variants] == [("bs1", "ok"), ("bs2", "error"), ("bs4", "ok")]
    assert res.variants[1].reason == "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    assert res.variants[1].extra["per_sample_s"] is None
    v = LoraBatchScaling().verdict(p, res)
    assert v.status == "error" and v.value is None and "batch 2 error: OutOfMemoryError" in full_text(v)
    assert [r["status"] for r in v.breakdown] == ["ok", "out of memory", "ok"]
