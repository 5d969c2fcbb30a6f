"""fused-adam-capturable: CPU smoke run end to end, params, kernel matching and the verdict rule."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from helpers import full_text, timing_for

from repro.artifact import validation_errors
from repro.errors import UsageError
from repro.execute import RunRequest, execute
from repro.measure import Context, SamplingConfig
from repro.repros import fused_adam
from repro.repros.fused_adam import FusedAdamCapturable, Params, optimizer_kernel
from repro.spec import RunResult, VariantResult, build_params

RID = "fused-adam-capturable"


def test_smoke_run_on_cpu_writes_a_valid_artifact(run_dir: Path, fast: SamplingConfig) -> None:
    doc, path = execute(RunRequest(RID, smoke=True, sampling=fast), run_dir)
    assert path.is_file()
    assert validation_errors(doc) == []
    assert doc["run"]["device"] == "cpu" and doc["error"] is None
    v = {x["name"]: x for x in doc["variants"]}
    for name in ("torch_fused_regular", "torch_fused_capturable", "torch_foreach_regular"):
        assert v[name]["status"] == "ok", v[name]["reason"]
        assert v[name]["kernel_source"] == "cpu" and v[name]["kernels"]
        assert v[name]["work"]["bytes"] == 7 * 4 * 4 * 4096  # smoke: 4 tensors of 4096 fp32
        assert v[name]["achieved"]["gbps"] > 0
    assert any("fused_adamw" in k["name"] for k in v["torch_fused_regular"]["kernels"])
    # What cannot run on CPU is a skipped variant that says why, not a crash.
    assert v["torch_fused_capturable_graph"]["status"] == "skipped"
    assert "CUDA" in v["torch_fused_capturable_graph"]["reason"]
    assert v["torch_foreach_capturable"]["status"] == "skipped"
    assert {v[f"te_{m}"]["status"] for m in ("regular", "capturable", "capturable_graph")} == {"skipped"}
    verdict = doc["verdict"]
    assert verdict["status"] == "smoke"  # a CPU run never judges the cliff
    assert verdict["ci_low"] <= verdict["value"] <= verdict["ci_high"]
    assert "not evidence about any GPU" in verdict["finding"]
    assert "1.9x" in verdict["finding"] and "torch AdamW(fused=True)" in verdict["finding"]
    rows = {r["backend"]: r for r in verdict["breakdown"]}
    assert rows["torch AdamW(fused=True)"]["basis"] == "step"
    assert rows["TE FusedAdam"]["status"].startswith("skipped")


def test_params_parse_and_reject() -> None:
    p = build_params(RID, Params, {"backends": "torch_fused,te", "numel": "1048576", "graph": "false"})
    assert p.backends == ("torch_fused", "te") and p.numel == 1 << 20 and p.graph is False
    smoke = build_params(RID, Params, {}, smoke=True)
    assert (smoke.n_tensors, smoke.numel) == (4, 4096)
    assert Params().n_tensors == 201 and Params().numel == 320 * 65536
    with pytest.raises(UsageError, match="unknown parameter 'tensors'"):
        build_params(RID, Params, {"tensors": "3"})
    with pytest.raises(UsageError, match="expected >= 1"):
        build_params(RID, Params, {"n_tensors": "0"})
    with pytest.raises(UsageError, match="expected one of te, torch_fused, torch_foreach"):
        build_params(RID, Params, {"backends": "apex"})
    with pytest.raises(UsageError, match="expected >= 7"):
        build_params(RID, Params, {"kernel_iters": "3"})


def test_kernel_matcher_keeps_optimizer_kernels_only() -> None:
    torch_fused = (
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
        "FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, "
        "(at::native::ADAM_MODE)1, false>, double*, double, double, double, double, double, bool, float*, float*>"
    )
    te = "void multi_tensor_apply_kernel<TensorListMetadata<4, false>, AdamCapturableFunctor<float, float>, float*>"
    fill = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, std::array<char*, 1ul>>"
    assert optimizer_kernel(torch_fused) and optimizer_kernel(te)
    assert not optimizer_kernel(fill)
    assert not optimizer_kernel("void at::native::elementwise_kernel<128, 2, ne_kernel_cuda>")


# --------------------------------------------------------------------------- verdict on synthetic results


def _samples(center: float, n: int = 21) -> list[float]:
    return [center * (1 + 0.004 * (k - n // 2)) for k in range(n)]  # +-4% around center, median = center


def _variant(
    name: str, step_s: float, kernel_s: float | None = None, device: str = "cuda", status: str = "ok"
) -> VariantResult:
    if status != "ok":
        return VariantResult(name=name, label=name, config={}, status=status, reason="not here")  # type: ignore[arg-type]
    samples = _samples(step_s)
    timing = timing_for(
        samples, method="cuda_events" if device == "cuda" else "perf_counter", calls_per_sample=1, budget_s=5.0
    )
    extra: dict[str, Any] = {"kernel_samples_s": _samples(kernel_s, 30)} if kernel_s is not None else {}
    return VariantResult(name=name, label=name, config={}, status="ok", device=device, timing=timing, extra=extra)


def _result(**ratios: Any) -> RunResult:
    """Variants per backend: ratio None means skipped; else (step ratio, kernel ratio) or one ratio."""
    out = []
    for backend in ("te", "torch_fused", "torch_foreach"):
        r = ratios.get(backend)
        if r is None:
            out += [
                _variant(f"{backend}_{m}", 0, status="skipped") for m in ("regular", "capturable", "capturable_graph")
            ]
            continue
        step_r, kern_r = r if isinstance(r, tuple) else (r, r)
        out += [
            _variant(f"{backend}_regular", 0.030, 0.025),
            _variant(f"{backend}_capturable", 0.030 * step_r, 0.025 * kern_r),
            _variant(f"{backend}_capturable_graph", 0.029),
        ]
    return RunResult(variants=tuple(out))


def test_verdict_reproduced_when_the_whole_ci_clears_the_threshold() -> None:
    v = FusedAdamCapturable().verdict(Params(), _result(torch_fused=1.9, torch_foreach=1.0))
    assert v.status == "reproduced"
    assert v.value == pytest.approx(1.9) and v.ci_low is not None and v.ci_low >= 1.3
    assert v.finding.startswith("Reproduced: with torch AdamW(fused=True), the capturable step's optimizer kernels")
    assert "1.9x with TE FusedAdam on GB300" in full_text(v)
    assert "TE FusedAdam not measured" in full_text(v) and "torch AdamW(foreach=True) 1.00x" in full_text(v)


def test_verdict_not_reproduced_without_te_says_te_was_not_measured() -> None:
    v = FusedAdamCapturable().verdict(Params(), _result(torch_fused=1.0, torch_foreach=1.05))
    assert v.status == "not_reproduced" and v.value == pytest.approx(1.0)
    assert v.ci_high is not None and v.ci_high < 1.3
    assert v.finding.startswith("Not reproduced: with torch AdamW(fused=True)")
    assert "TE FusedAdam was not measured here" in full_text(v)
    assert "Graph replay of the capturable step took 0.97x the eager regular step" in full_text(v)
    rows = {r["backend"]: r for r in v.breakdown}
    assert rows["TE FusedAdam"]["status"] == "skipped: not here" and rows["TE FusedAdam"]["ratio"] is None
    assert rows["torch AdamW(foreach=True)"]["ratio"] == pytest.approx(1.05)
    assert rows["torch AdamW(fused=True)"]["graph_vs_regular"] == pytest.approx(0.029 / 0.030)


def test_verdict_uses_kernel_samples_not_step_times() -> None:
    # Whole steps equal, optimizer kernels 1.9x: the per-kernel number is the metric.
    v = FusedAdamCapturable().verdict(Params(), _result(torch_fused=(1.0, 1.9)))
    assert v.value == pytest.approx(1.9) and v.status == "reproduced"
    (row,) = (r for r in v.breakdown if r["backend"] == "torch AdamW(fused=True)")
    assert row["basis"] == "kernel" and row["capturable_ms"] == pytest.approx(row["regular_ms"])


def test_headline_is_te_whenever_te_ran() -> None:
    worse = FusedAdamCapturable().verdict(Params(), _result(te=1.9, torch_fused=1.0))
    assert worse.value == pytest.approx(1.9) and "with TE FusedAdam" in full_text(worse)
    assert "torch AdamW(fused=True) 1.00x" in full_text(worse)
    better = FusedAdamCapturable().verdict(Params(), _result(te=0.8, torch_fused=1.0))
    assert better.value == pytest.approx(0.8) and "with TE FusedAdam" in full_text(better)
    assert "does not hold here" in full_text(better)


def test_without_te_the_finding_does_not_judge_the_seed() -> None:
    v = FusedAdamCapturable().verdict(Params(), _result(torch_fused=1.0))
    assert v.value == pytest.approx(1.0) and v.status == "not_reproduced"
    assert "TE FusedAdam was not measured here" in full_text(v)
    assert "does not hold" not in full_text(v)


def test_verdict_without_any_pair_is_not_measured() -> None:
    v = FusedAdamCapturable().verdict(Params(), _result())
    assert v.status == "skipped" and v.value is None
    assert v.finding.startswith("Not measured:") and "te_regular skipped" in full_text(v)


def test_cpu_smoke_verdict_falls_back_to_step_time_and_says_so() -> None:
    res = RunResult(
        variants=(
            _variant("torch_fused_regular", 0.001, device="cpu"),
            _variant("torch_fused_capturable", 0.001, device="cpu"),
        )
    )
    v = FusedAdamCapturable().verdict(Params(), res)
    assert v.value == pytest.approx(1.0)
    assert v.finding.startswith("Smoke run on cpu, not evidence about any GPU")
    assert "the capturable step took" in full_text(v)


# --------------------------------------------------------------------------- the CUDA branch, through a seam


@dataclass
class _FakeCudaContext(Context):
    """Takes the CUDA branch of run() on CPU tensors: measure and kernel_samples are stand-ins."""

    calls: list[tuple[str, bool]] = field(default_factory=list)

    @property
    def cuda(self) -> bool:
        return True

    def measure(self, name: str, fn: Any, **kw: Any) -> VariantResult:  # type: ignore[override]
        fn()
        fn()
        step = 0.0019 if "capturable" in name else 0.001
        self.calls.append((name, bool(kw.get("graph"))))
        return dataclasses.replace(_variant(name, step), work=kw.get("work"), config=kw.get("config") or {})

    def kernel_samples(self, fn: Any, iters: int, match: Any) -> list[float]:
        fn()
        return _samples(0.0019 if self.calls[-1][0].endswith("capturable") else 0.001, iters)


def test_cuda_branch_measures_graphs_and_kernel_samples_and_contains_failures(
    fast: SamplingConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    why = "transformer_engine.pytorch is not importable: ModuleNotFoundError: No module named 'transformer_engine'"
    monkeypatch.setattr(fused_adam, "_te_fused_adam", lambda: (None, why))
    ctx = _FakeCudaContext(device="cpu", smoke=True, sampling=fast)
    p = build_params(RID, Params, {}, smoke=True)
    res = FusedAdamCapturable().run(p, ctx)
    v = {x.name: x for x in res.variants}
    assert [v[f"te_{m}"].reason for m in ("regular", "capturable", "capturable_graph")] == [why] * 3
    assert ctx.calls == [
        ("torch_fused_regular", False),
        ("torch_fused_capturable", False),
        ("torch_fused_capturable_graph", True),
        ("torch_foreach_regular", False),
    ]
    assert len(v["torch_fused_regular"].extra["kernel_samples_s"]) == p.kernel_iters
    assert "kernel_samples_s" not in v["torch_fused_capturable_graph"].extra
    # The foreach capturable step asserts on CPU tensors: that backend's variants are errors, the run goes on.
    assert v["torch_foreach_capturable"].status == "error" and v["torch_foreach_capturable_graph"].status == "error"
    verdict = FusedAdamCapturable().verdict(p, res)
    assert verdict.status == "reproduced" and verdict.value == pytest.approx(1.9)
    assert "optimizer kernels took 1.90x" in full_text(verdict)


def test_too_little_gpu_memory_skips_every_variant_with_a_hint(
    monkeypatch: pytest.MonkeyPatch, run_dir: Path, fast: SamplingConfig
) -> None:
    import repro.repros.fused_adam as fa
    from repro.measure import Context

    monkeypatch.setattr(fa, "_free_gpu_bytes", lambda: 8 * 2**30)
    ctx = Context(device="cuda", smoke=False, sampling=fast)
    result = FusedAdamCapturable().run(Params(), ctx)  # the seed's size: ~84 GB needed
    assert result.variants and all(v.status == "skipped" for v in result.variants)
    assert "GiB of GPU memory, 8 GiB free; try --set numel=" in result.variants[0].reason
