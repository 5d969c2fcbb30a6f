"""fused-adam-capturable on the GPU side: which kernels count toward a step, kernel time on synthetic
traces, and the CUDA branch of run() through a fake context (paired forms, kernel rounds, the seed's
method, graph timing, failures)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fused_adam_variants import DRIFT, _rounds, _variant
from helpers import timing_for

from repro.core.context import SamplingConfig
from repro.core.spec import VariantResult, build_params
from repro.repros import fused_adam
from repro.repros._adam_steps import multi_tensor_kernel, step_kernel
from repro.repros._adam_words import CONTROLS_WITHOUT_TE, NO_CONTROL_KERNELS
from repro.repros.fused_adam import AdamParams, FusedAdamCapturable, kernel_plan
from repro.run.context import RunContext
from repro.run.schedule import QUICK_SKIP

RID = "fused-adam-capturable"


# --------------------------------------------------------------------------- kernels: matching and synthetic traces


def test_a_step_counts_every_kernel_and_the_multi_tensor_names_are_kept_apart() -> None:
    torch_fused = (
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
        "FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, "
        "(at::native::ADAM_MODE)1, false>, double*, double, double, double, double, double, bool, float*, float*>"
    )
    te = "void multi_tensor_apply_kernel<TensorListMetadata<4, false>, AdamCapturableFunctor<float, float>, float*>"
    fill = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, std::array<char*, 1ul>>"
    div = (
        "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor"
        "<float, float, float, at::native::binary_internal::DivFunctor<float> > >(at::TensorIteratorBase&)>"
    )
    assert all(step_kernel(k) for k in (torch_fused, te, fill, div))
    assert multi_tensor_kernel(torch_fused) and multi_tensor_kernel(te)
    assert not multi_tensor_kernel(fill) and not multi_tensor_kernel(div)


def _trace(*calls: list[tuple[str, float]]) -> dict[str, Any]:
    """A Chrome trace of profiled calls as RunContext records them: a gpu_repro_call_<i> range each, then
    its device work (name, us), one after another; 1000 us between calls."""
    events: list[dict[str, Any]] = []
    for i, kernels in enumerate(calls):
        t = 1000.0 * i
        events.append({"ph": "X", "cat": "user_annotation", "name": f"gpu_repro_call_{i}", "ts": t, "dur": 900.0})
        for name, dur in kernels:
            t += 1.0
            cat = "gpu_memset" if name == "Memset (Device)" else "kernel"
            events.append({"ph": "X", "cat": cat, "name": name, "ts": t, "dur": dur})
    return {"traceEvents": events}


_FOREACH = "void at::native::multi_tensor_apply_kernel<TensorListMetadata<2>, BinaryOpScalarFunctor<float, 2>>"


_DIV = "void at::native::elementwise_kernel<128, 2, gpu_kernel_impl_nocast<BinaryFunctor<DivFunctor<float>>>>"


_TE = "void multi_tensor_apply_kernel<TensorListMetadata<4, false>, AdamCapturableFunctor<float, float>, float*>"


_FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, std::array<char*, 1ul>>"


def test_a_division_kernel_inside_the_step_counts_toward_its_kernel_time() -> None:
    from repro.run.kernels import per_call_device_time

    regular = [(_FOREACH, 400.0)]
    capturable = [(_FOREACH, 360.0), (_DIV, 120.0), (_DIV, 120.0)]  # foreach's capturable step divides per tensor
    trace = _trace(regular, capturable)
    steps = per_call_device_time(trace, 2, step_kernel)
    assert steps == pytest.approx([400e-6, 600e-6])
    assert steps[1] / steps[0] == pytest.approx(1.5)  # the whole step is slower
    named = per_call_device_time(trace, 2, multi_tensor_kernel)
    assert named[1] / named[0] == pytest.approx(0.9)  # the name filter alone reads it faster
    # TE's capturable bookkeeping (a fill and a memset) is device work of the step too
    te = per_call_device_time(_trace([(_TE, 100.0), (_FILL, 2.0), ("Memset (Device)", 1.0)]), 1, step_kernel)
    assert te == pytest.approx([103e-6])


def test_the_kernel_split_reports_all_kernels_against_the_multi_tensor_ones() -> None:
    from repro.core.results import Kernel
    from repro.repros._adam_steps import kernel_split, per_step_us

    kernels = (
        Kernel(_FOREACH, count=402, total_us=79_410.0, mean_us=79_410.0 / 402, per_call=402.0),
        Kernel(_DIV, count=402, total_us=25_375.0, mean_us=25_375.0 / 402, per_call=402.0),
    )
    v = VariantResult(
        name="torch_foreach_capturable", label="x", config={}, status="ok", kernels=kernels, kernel_source="cuda"
    )
    split = kernel_split(v)
    assert split["step_kernels_us"] == pytest.approx(104_785.0)
    assert split["multi_tensor_kernels_us"] == pytest.approx(79_410.0)
    assert split["other_launches_per_step"] == 402 and split["other_kernels"] == 1
    # What the extra launches mostly are: the other kernel with the most time a step, by its short name.
    from repro.api import short_kernel
    from repro.repros._adam_steps import seed_method_note

    assert split["other_top"] == short_kernel(_DIV) and split["other_top_launches"] == 402
    assert split["other_top_us"] == pytest.approx(25_375.0)
    entry = {
        "label": "torch AdamW(foreach=True)",
        "other_launches": 402.0,
        **{k: split[k] for k in split if "top" in k},
    }
    note = seed_method_note([entry])
    assert f"torch AdamW(foreach=True) (402 per capturable step, most of their time 402 x {short_kernel(_DIV)} " in note
    assert "(25.4 ms a step))" in note
    cpu = dataclasses.replace(v, kernel_source="cpu")
    assert per_step_us(cpu) is None  # aten ops on CPU are not a step's device time


# --------------------------------------------------------------------------- the CUDA branch, through a seam


@dataclass
class _FakeCudaContext(RunContext):
    """Takes the CUDA branch of run() on CPU tensors: paired timing, kernel rounds and graph
    timing are stand-ins that really call the steps and report known times."""

    calls: list[tuple[Any, ...]] = field(default_factory=list)
    kernel_rounds_error: Exception | None = None

    @property
    def cuda(self) -> bool:
        return True

    def measure_paired(self, arms: Any, *, group: str | None = None, sampling: Any = None) -> list[VariantResult]:
        self.calls.append(("paired", group, [a.name for a in arms]))
        out = []
        for salt, arm in enumerate(arms):
            arm.fn()
            arm.fn()
            rounds = _rounds(0.001, salt)  # whole steps equal
            timing = dataclasses.replace(timing_for(rounds), group=group, rounds=tuple(rounds))
            out.append(
                VariantResult(
                    name=arm.name,
                    label=arm.label,
                    config=dict(arm.config),
                    status="ok",
                    device="cuda",
                    timing=timing,
                    work=arm.work,
                    extra=dict(arm.extra),
                )
            )
        return out

    def kernel_rounds(
        self,
        fns: Any,
        iters: int,
        match: Any,
        prepare: Any = None,
        episodes: int = 1,
        pairs: Any = (),
        min_iters: int = 0,
    ) -> dict[str, list[float]]:
        self.calls.append(("kernel_rounds", sorted(fns), iters, episodes, list(pairs), min_iters, match.__name__))
        if self.kernel_rounds_error is not None:
            raise self.kernel_rounds_error
        for fn in fns.values():
            fn()
        return {
            name: _rounds(0.0019 if name == "capturable" else 0.001, i, DRIFT[:iters]) for i, name in enumerate(fns)
        }

    def measure(self, name: str, fn: Any, **kw: Any) -> VariantResult:
        fn()
        self.calls.append(("measure", name, bool(kw.get("graph"))))
        return dataclasses.replace(
            _variant(name, 0.00095, paired=False), work=kw.get("work"), config=kw.get("config") or {}
        )


def test_cuda_branch_pairs_the_forms_times_kernel_rounds_and_graphs_and_contains_failures(
    fast: SamplingConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    why = "transformer_engine.pytorch is not importable: ModuleNotFoundError: No module named 'transformer_engine'"
    monkeypatch.setattr(fused_adam, "_te_fused_adam", lambda: (None, why))
    ctx = _FakeCudaContext(device="cpu", smoke=True, sampling=fast)
    p = build_params(RID, AdamParams, {"control_kernels": "true"}, smoke=True)
    res = FusedAdamCapturable().run(p, ctx)
    v = {x.name: x for x in res.variants}
    assert [v[f"te_{m}"].reason for m in ("regular", "capturable", "capturable_graph")] == [why] * 3
    most, episodes, fewest = kernel_plan(p)
    assert ctx.calls == [
        ("paired", "torch_fused", ["torch_fused_regular", "torch_fused_capturable"]),
        # every kernel of the step counts; then the seed's method: 6 steps of one form, then of the other
        (
            "kernel_rounds",
            ["capturable", "regular"],
            most,
            episodes,
            [("capturable", "regular")],
            fewest,
            "step_kernel",
        ),
        ("kernel_rounds", ["capturable"], 6, 1, [], 0, "multi_tensor_kernel"),
        ("kernel_rounds", ["regular"], 6, 1, [], 0, "multi_tensor_kernel"),
        ("measure", "torch_fused_capturable_graph", True),
    ]
    for name in ("torch_fused_regular", "torch_fused_capturable"):
        assert len(v[name].extra["kernel_rounds_s"]) == p.kernel_iters
        assert v[name].extra["kernel_episode_rounds"] == 2  # episodes of kernel_episode_rounds
        assert v[name].extra["kernel_group"] == "torch_fused_kernels"
        assert v[name].extra["kernel_counted"] == res.extra["kernel_counted"]
    assert "kernel_rounds_s" not in v["torch_fused_capturable_graph"].extra
    # The seed's method, recorded for the report beside our comparison of the same backend
    (seed,) = res.extra["seed_method"]
    expect = sum(_rounds(0.0019, 0, DRIFT[:6])) / sum(_rounds(0.001, 0, DRIFT[:6]))
    assert seed["comparison"] == "torch_fused" and seed["subject"] is False and seed["steps"] == 6
    assert seed["ratio"] == pytest.approx(expect) and seed["ratio"] == pytest.approx(1.9, rel=1e-2)
    assert res.extra["seed_method_how"].startswith("6 consecutive steps of one form profiled")
    assert res.extra["seed_method_note"].startswith(
        "The seed's program averages the device time per launch of the kernels named adam"
    )
    assert res.extra["claim_needs"]["pip"] == "transformer_engine[pytorch]"
    # The foreach capturable optimizer fails on CPU tensors when it first steps: that backend's
    # variants are errors (regular and capturable live at once), and the run goes on.
    assert {v[f"torch_foreach_{m}"].status for m in ("regular", "capturable", "capturable_graph")} == {"error"}
    verdict = FusedAdamCapturable().verdict(p, res)
    assert verdict.status == "inconclusive" and verdict.value is None and verdict.headline == "te"
    row = next(r for r in verdict.breakdown if r["comparison"] == "torch_fused")
    assert row["ratio"] == pytest.approx(1.9, rel=1e-2) and row["basis"] == "kernel" and row["paired"] is True
    assert "whole steps: no kernel samples" not in verdict.finding
    assert "torch AdamW(fused=True): graph replay of the capturable step took 0.95x the eager regular step." in (
        verdict.details
    )


def test_without_te_on_a_gpu_the_torch_controls_are_not_timed_and_the_finding_says_how_to_time_them(
    fast: SamplingConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fused_adam, "_te_fused_adam", lambda: (None, "no TE here"))
    ctx = _FakeCudaContext(device="cpu", smoke=True, sampling=fast)
    p = build_params(RID, AdamParams, {}, smoke=True)
    res = FusedAdamCapturable().run(p, ctx)
    assert ctx.calls == []
    torch_side = [x for x in res.variants if not x.name.startswith("te_")]
    assert len(torch_side) == 6 and {(x.status, x.reason) for x in torch_side} == {("skipped", CONTROLS_WITHOUT_TE)}
    verdict = FusedAdamCapturable().verdict(p, res)
    assert verdict.status == "inconclusive" and verdict.value is None and not verdict.breakdown
    assert verdict.finding.startswith("Inconclusive, the seed's claim was not tested (")
    assert (
        "; instead: nothing was timed: each of torch's AdamW backends is a control of TE's FusedAdam, timed "
        "beside it only (--set controls_without_te=true times it anyway)." in verdict.finding
    )
    assert "no backend has both" not in verdict.finding
    # Leaving TE out of --set backends asks for torch's alone: they run.
    ctx = _FakeCudaContext(device="cpu", smoke=True, sampling=fast)
    FusedAdamCapturable().run(build_params(RID, AdamParams, {"backends": "torch_fused"}, smoke=True), ctx)
    assert [c[0] for c in ctx.calls][:1] == ["paired"]


def test_without_te_torch_gets_no_kernel_rounds_but_the_seeds_method_and_says_why(
    fast: SamplingConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fused_adam, "_te_fused_adam", lambda: (None, "no TE here"))
    ctx = _FakeCudaContext(device="cpu", smoke=True, sampling=fast)
    p = build_params(RID, AdamParams, {"controls_without_te": "true"}, smoke=True)
    res = FusedAdamCapturable().run(p, ctx)
    assert [c[0] for c in ctx.calls] == ["paired", "kernel_rounds", "kernel_rounds", "measure"]
    assert [c[4:7] for c in ctx.calls if c[0] == "kernel_rounds"] == [([], 0, "multi_tensor_kernel")] * 2
    eager = [res.variant(f"torch_fused_{m}") for m in ("regular", "capturable")]
    assert all(x.extra["kernel_rounds_skipped"] == NO_CONTROL_KERNELS for x in eager)
    assert all("kernel_rounds_s" not in x.extra and not x.warnings for x in eager)
    (seed,) = res.extra["seed_method"]
    assert seed["comparison"] == "torch_fused" and seed["ratio"] == pytest.approx(1.9, rel=1e-2)
    verdict = FusedAdamCapturable().verdict(p, res)
    rows = {r["comparison"]: r for r in verdict.breakdown}
    assert "torch_fused" not in rows and rows["torch_fused_step"]["basis"] == "time"
    # the control's sentence names its whole step only: no kernel-time ratio, no fallback wording
    assert "instead: torch AdamW(fused=True) (control: the same kernels in both forms): whole step 1.00x" in (
        verdict.finding
    )
    assert "whole steps: no kernel samples" not in verdict.finding
    assert (
        "whole step 1.00x (95% CI 0.99-1.00) (no per-kernel rounds without TE (--set control_kernels=true adds them))"
        in (verdict.finding)
    )
    assert verdict.status == "inconclusive" and verdict.claim is not None and verdict.claim["tested"] is False


def test_with_te_the_torch_controls_get_their_kernel_rounds_too(
    fast: SamplingConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    class FakeTE(torch.optim.AdamW):  # TE's keywords, torch's fused kernels (they run on CPU)
        def __init__(self, params: Any, adam_w_mode: bool, capturable: bool, **kw: Any) -> None:
            assert adam_w_mode
            super().__init__(params, fused=True, capturable=capturable, **kw)

    monkeypatch.setattr(fused_adam, "_te_fused_adam", lambda: (FakeTE, None))
    ctx = _FakeCudaContext(device="cpu", smoke=True, sampling=fast)
    p = build_params(RID, AdamParams, {"backends": "te,torch_fused"}, smoke=True)
    res = FusedAdamCapturable().run(p, ctx)
    rounds = [c for c in ctx.calls if c[0] == "kernel_rounds" and c[-1] == "step_kernel"]
    assert len(rounds) == 2  # TE's, then the control's
    assert all("kernel_rounds_s" in res.variant(f"{b}_regular").extra for b in ("te", "torch_fused"))
    verdict = FusedAdamCapturable().verdict(p, res)
    rows = {r["comparison"]: r for r in verdict.breakdown}
    assert rows["te"]["basis"] == rows["torch_fused"]["basis"] == "kernel" and verdict.value is not None


def test_a_quick_run_times_only_the_headline_so_without_te_it_times_nothing_and_is_inconclusive(
    fast: SamplingConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fused_adam, "_te_fused_adam", lambda: (None, "no TE here"))
    p = build_params(RID, AdamParams, {}, smoke=True)
    ctx = _FakeCudaContext(device="cpu", smoke=True, sampling=fast, quick=True)
    ctx.comparisons = tuple(c for c in FusedAdamCapturable().comparisons(p) if c.headline)  # as execute sets it
    res = FusedAdamCapturable().run(p, ctx)
    assert ctx.calls == []
    torch_side = [x for x in res.variants if not x.name.startswith("te_")]
    assert {(x.status, x.reason) for x in torch_side} == {("skipped", QUICK_SKIP)}
    v = FusedAdamCapturable().verdict(p, res)
    # The full run's status (its torch backends ran as stand-ins): the claim was not tested.
    assert v.status == "inconclusive" and v.finding.startswith("Inconclusive, the seed's claim was not tested (")
    assert "variant te_capturable was skipped: no TE here" in v.finding


def test_cuda_branch_keeps_step_timing_when_kernel_rounds_fail(
    fast: SamplingConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fused_adam, "_te_fused_adam", lambda: (None, "no TE here"))
    ctx = _FakeCudaContext(device="cpu", smoke=True, sampling=fast)
    ctx.kernel_rounds_error = RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")
    p = build_params(RID, AdamParams, {"backends": "torch_fused", "control_kernels": "true"}, smoke=True)
    res = FusedAdamCapturable().run(p, ctx)
    eager = [res.variant(f"torch_fused_{m}") for m in ("regular", "capturable")]
    assert all(x.status == "ok" and "kernel_rounds_s" not in x.extra for x in eager)
    assert all(x.warnings == ("per-kernel rounds failed (RuntimeError: CUPTI_ERROR_NOT_INITIALIZED)",) for x in eager)
    verdict = FusedAdamCapturable().verdict(p, res)
    row = next(r for r in verdict.breakdown if r["comparison"] == "torch_fused")
    assert row["ratio"] == pytest.approx(1.0, rel=1e-2) and row["basis"] == "time"
    assert (
        "kernel time per step 1.00x (95% CI" in verdict.finding
        and "(whole steps: no kernel samples)" in verdict.finding
    )
    assert "seed_method" not in res.extra  # the rounds failed before the seed's method ran
    assert verdict.claim is not None and verdict.claim["tested"] is False
    assert "variant te_capturable was not measured" in verdict.finding


def test_without_te_nothing_is_allocated_and_a_small_card_is_not_told_to_shrink(
    monkeypatch: pytest.MonkeyPatch, run_dir: Path, fast: SamplingConfig
) -> None:
    import repro.repros._adam_steps as steps
    from repro.run.context import RunContext

    monkeypatch.setattr(fused_adam, "_te_fused_adam", lambda: (None, "no TE here"))
    monkeypatch.setattr(steps, "free_gpu_bytes", lambda: 8 * 2**30)
    ctx = RunContext(device="cuda", smoke=False, sampling=fast)
    result = FusedAdamCapturable().run(AdamParams(), ctx)  # the seed's size, on CPU tensors were it allocated
    reasons = {v.reason for v in result.variants}
    assert reasons == {"no TE here", CONTROLS_WITHOUT_TE}


def test_too_little_gpu_memory_skips_every_variant_with_a_hint(
    monkeypatch: pytest.MonkeyPatch, run_dir: Path, fast: SamplingConfig
) -> None:
    import repro.repros._adam_steps as steps
    from repro.run.context import RunContext

    monkeypatch.setattr(steps, "free_gpu_bytes", lambda: 8 * 2**30)
    ctx = RunContext(device="cuda", smoke=False, sampling=fast)
    # The seed's size, ~84 GB needed, with torch's backends asked for (without TE nothing would be timed).
    result = FusedAdamCapturable().run(AdamParams(controls_without_te=True), ctx)
    assert result.variants and all(v.status == "skipped" for v in result.variants)
    assert "GiB of GPU memory, 8 GiB free; try --set numel=" in (result.variants[0].reason or "")


def test_the_seed_method_profiles_six_steps_of_each_form_and_divides_by_six(fast: SamplingConfig) -> None:
    from repro.repros._adam_steps import SEED_STEPS, seed_method

    ctx = _FakeCudaContext(device="cpu", smoke=True, sampling=fast)
    steps = {"capturable": lambda: None, "regular": lambda: None}
    got = seed_method(ctx, steps)
    cap, reg = _rounds(0.0019, 0, DRIFT[:SEED_STEPS]), _rounds(0.001, 0, DRIFT[:SEED_STEPS])
    assert got["capturable_s"] == pytest.approx(sum(cap) / 6) and got["regular_s"] == pytest.approx(sum(reg) / 6)
    assert got["ratio"] == pytest.approx(sum(cap) / sum(reg))
    assert [c[1:3] for c in ctx.calls] == [(["capturable"], 6), (["regular"], 6)]
