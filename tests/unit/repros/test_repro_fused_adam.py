"""fused-adam-capturable: CPU smoke run end to end, params, kernel matching and the verdict rule."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest
from helpers import TimingMethod, full_text, timing_for

from repro.core.context import SamplingConfig
from repro.core.errors import UsageError
from repro.core.spec import RunResult, VariantResult, Verdict, build_params
from repro.evidence.artifact import validation_errors
from repro.repros import fused_adam
from repro.repros.fused_adam import AdamParams, FusedAdamCapturable, kernel_plan, optimizer_kernel
from repro.run.context import RunContext
from repro.run.execute import RunRequest, execute
from repro.run.schedule import QUICK_ANSWERED

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
    # The two forms of one backend were timed in the same interleaved rounds; foreach's regular step alone.
    fused = [v["torch_fused_regular"]["timing"], v["torch_fused_capturable"]["timing"]]
    assert [t["group"] for t in fused] == ["torch_fused"] * 2 and len(fused[0]["rounds"]) == len(fused[1]["rounds"])
    assert v["torch_foreach_regular"]["timing"]["group"] is None
    assert "kernel_rounds_s" not in v["torch_fused_regular"]["extra"]  # no per-kernel timing on CPU
    # What cannot run on CPU is a skipped variant that says why, not a crash.
    assert v["torch_fused_capturable_graph"]["status"] == "skipped"
    assert "CUDA" in v["torch_fused_capturable_graph"]["reason"]
    assert v["torch_foreach_capturable"]["status"] == "skipped"
    assert {v[f"te_{m}"]["status"] for m in ("regular", "capturable", "capturable_graph")} == {"skipped"}
    verdict = doc["verdict"]
    assert verdict["status"] == "smoke"  # a CPU run never judges the cliff
    assert verdict["ci_low"] <= verdict["value"] <= verdict["ci_high"]
    assert verdict["finding"].startswith(
        "Smoke run on cpu, not evidence about any GPU: torch AdamW(fused=True): optimizer-kernel time per step"
    )
    assert "whole-step times were compared (no per-kernel timing on CPU)" in verdict["finding"]
    assert verdict["headline"] == "torch_fused" and verdict["paired"] is True
    (row,) = verdict["breakdown"]  # TE and foreach have no capturable step here: no ratio
    assert row["backend"] == "torch AdamW(fused=True)" and row["status"] == "smoke" and row["paired"] is True
    (details,) = verdict["details"]
    assert "TE FusedAdam not measured (TE FusedAdam runs only on CUDA)" in details
    assert "torch AdamW(foreach=True) not measured (torch's capturable foreach AdamW needs params" in details


def test_params_parse_and_reject() -> None:
    p = build_params(RID, AdamParams, {"backends": "torch_fused,te", "numel": "1048576", "graph": "false"})
    assert p.backends == ("torch_fused", "te") and p.numel == 1 << 20 and p.graph is False
    smoke = build_params(RID, AdamParams, {}, smoke=True)
    assert (smoke.n_tensors, smoke.numel) == (4, 4096)
    assert AdamParams().n_tensors == 201 and AdamParams().numel == 320 * 65536
    with pytest.raises(UsageError, match="unknown parameter 'tensors'"):
        build_params(RID, AdamParams, {"tensors": "3"})
    with pytest.raises(UsageError, match="expected >= 1"):
        build_params(RID, AdamParams, {"n_tensors": "0"})
    with pytest.raises(UsageError, match="expected one of te, torch_fused, torch_foreach"):
        build_params(RID, AdamParams, {"backends": "apex"})
    with pytest.raises(UsageError, match="expected >= 7"):
        build_params(RID, AdamParams, {"kernel_iters": "3"})


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

# A slow drift of the GPU over the rounds (+-22.5%, median 1), the same for both forms in a round.
DRIFT = [1 + 0.05 * (((i * 7) % 10) - 4.5) for i in range(30)]


def _samples(center: float, n: int = 21) -> list[float]:
    return [center * (1 + 0.004 * (k - n // 2)) for k in range(n)]  # +-4% around center, median = center


def _rounds(center: float, salt: int, drift: Sequence[float] = DRIFT) -> list[float]:
    """Paired round values: the common drift times a little jitter that differs between variants."""
    return [center * d * (1 + 0.003 * (((i + salt) % 3) - 1)) for i, d in enumerate(drift)]


def _variant(
    name: str,
    step_s: float,
    kernel_s: float | None = None,
    device: str = "cuda",
    status: Literal["ok", "skipped", "error"] = "ok",
    paired: bool = True,
) -> VariantResult:
    """One form of one backend. ``paired``: step and kernel times in rounds shared with the
    backend's other form (as run() records them); else plain samples (the older two-sample path)."""
    if status != "ok":
        return VariantResult(name=name, label=name, config={}, status=status, reason="not here")
    backend = name.rsplit("_", 1)[0].removesuffix("_capturable")
    salt = 1 if name.endswith("_capturable") else 0
    method: TimingMethod = "cuda_events" if device == "cuda" else "perf_counter"
    extra: dict[str, Any] = {}
    if paired and not name.endswith("_graph"):
        rounds = _rounds(step_s, salt)
        timing = dataclasses.replace(timing_for(rounds, method=method), group=backend, rounds=tuple(rounds))
        if kernel_s is not None:
            extra = {"kernel_rounds_s": _rounds(kernel_s, salt), "kernel_group": f"{backend}_kernels"}
    else:
        timing = timing_for(_samples(step_s), method=method, calls_per_sample=1, budget_s=5.0)
        if kernel_s is not None:
            extra = {"kernel_samples_s": _samples(kernel_s, 30)}
    return VariantResult(name=name, label=name, config={}, status="ok", device=device, timing=timing, extra=extra)


def _result(paired: bool = True, **ratios: Any) -> RunResult:
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
            _variant(f"{backend}_regular", 0.030, 0.025, paired=paired),
            _variant(f"{backend}_capturable", 0.030 * step_r, 0.025 * kern_r, paired=paired),
            _variant(f"{backend}_capturable_graph", 0.029, paired=paired),
        ]
    return RunResult(variants=tuple(out))


def test_comparisons_per_backend_on_kernel_time_in_headline_order() -> None:
    comps = FusedAdamCapturable().comparisons(build_params(RID, AdamParams, {"backends": "torch_foreach,te"}))
    assert [(c.name, c.num, c.den) for c in comps] == [
        ("te", "te_capturable", "te_regular"),
        ("torch_foreach", "torch_foreach_capturable", "torch_foreach_regular"),
    ]  # BACKENDS order, whatever order --set gave
    assert all(c.basis == "kernel" and c.headline and c.threshold == 1.3 for c in comps)
    assert FusedAdamCapturable.headline_rule == "first"


def _head_row_status(v: Verdict) -> str:
    """The headline comparison's own status (the repro's status answers the seed's claim)."""
    return str(next(r for r in v.breakdown if r["headline"])["status"])


def test_verdict_reproduced_when_the_whole_ci_clears_the_threshold() -> None:
    v = FusedAdamCapturable().verdict(AdamParams(), _result(torch_fused=1.9, torch_foreach=1.0))
    # torch's fused AdamW reproduces, but it only stands in for TE's FusedAdam: the claim is untested.
    assert v.status == "inconclusive" and _head_row_status(v) == "reproduced"
    assert v.headline == "torch_fused" and v.paired is True
    assert v.claim is not None and v.claim["tested"] is False and "TE FusedAdam" in v.claim["reason"]
    assert v.value == pytest.approx(1.9, rel=1e-2) and v.ci_low is not None and v.ci_low >= 1.3
    assert v.finding.startswith(
        "Inconclusive, the seed's claim was not tested (TE FusedAdam: optimizer-kernel time per step, "
        "capturable/regular: variant te_capturable was skipped: not here); instead: "
        "torch AdamW(fused=True): optimizer-kernel time per step, capturable/regular was "
        f"{v.value:.2f}x (95% CI {v.ci_low:.2f}-{v.ci_high:.2f}), the whole CI is above the 1.3 threshold; "
    )
    # A torch optimizer's number says nothing about TE's: the seed is named, not judged.
    assert "says nothing about the seed's ~1.9x (TE FusedAdam, GB300): TE FusedAdam was not measured here" in v.finding
    assert "torch AdamW(foreach=True) 1.00x" in full_text(v) and "TE FusedAdam not measured (not here)" in full_text(v)
    rows = {r["backend"]: r for r in v.breakdown}
    assert list(rows) == ["torch AdamW(fused=True)", "torch AdamW(foreach=True)"]  # TE had no ratio
    assert [r["headline"] for r in rows.values()] == [True, False]
    assert all(r["basis"] == "kernel" and r["paired"] is True and r["n"] == len(DRIFT) for r in rows.values())


def test_verdict_not_reproduced_without_te_says_te_was_not_measured() -> None:
    v = FusedAdamCapturable().verdict(AdamParams(), _result(torch_fused=1.0, torch_foreach=1.05))
    assert v.status == "inconclusive" and _head_row_status(v) == "not_reproduced"
    assert v.value == pytest.approx(1.0, rel=1e-2)
    assert v.ci_high is not None and v.ci_high < 1.3
    assert v.finding.startswith("Inconclusive, the seed's claim was not tested (TE FusedAdam")
    assert "instead: torch AdamW(fused=True): optimizer-kernel time per step" in v.finding
    assert [r["comparison"] for r in v.not_run] == ["te"]
    assert "the whole CI is below the 1.3 threshold" in v.finding
    assert "TE FusedAdam was not measured here" in v.finding
    assert "Graph replay of the capturable step took 0.97x the eager regular step." in v.details
    rows = {r["backend"]: r for r in v.breakdown}
    assert "TE FusedAdam" not in rows
    assert rows["torch AdamW(foreach=True)"]["ratio"] == pytest.approx(1.05, rel=1e-2)
    assert rows["torch AdamW(foreach=True)"]["status"] == "not_reproduced"


def test_verdict_uses_kernel_rounds_not_step_times() -> None:
    # Whole steps equal, optimizer kernels 1.9x: the per-kernel number is the metric.
    res = _result(torch_fused=(1.0, 1.9))
    v = FusedAdamCapturable().verdict(AdamParams(), res)
    assert v.value == pytest.approx(1.9, rel=1e-2) and _head_row_status(v) == "reproduced" and v.paired is True
    assert res.variant("torch_fused_capturable").median == pytest.approx(res.variant("torch_fused_regular").median)
    assert "per-kernel samples were missing" not in full_text(v)


def test_paired_kernel_rounds_cancel_drift_that_would_sink_a_two_sample_ci() -> None:
    paired = _result(torch_fused=(1.0, 1.45))
    v = FusedAdamCapturable().verdict(AdamParams(), paired)
    assert _head_row_status(v) == "reproduced" and v.ci_low is not None and v.ci_low >= 1.3
    # The same kernel times as unpaired samples: the drift widens the two-sample CI past the threshold.
    loose = RunResult(
        variants=tuple(
            dataclasses.replace(
                x, extra={"kernel_samples_s": x.extra["kernel_rounds_s"]} if "kernel_rounds_s" in x.extra else {}
            )
            for x in paired.variants
        )
    )
    u = FusedAdamCapturable().verdict(AdamParams(), loose)
    assert u.paired is False and u.ci_low is not None and u.ci_high is not None
    assert u.ci_low < 1.3 <= u.ci_high and _head_row_status(u) == "not_reproduced" and u.status == "inconclusive"
    assert "instead: torch AdamW(fused=True)" in u.finding
    assert "so this run can neither confirm nor rule out" not in u.finding  # that wording is TE's alone


def test_unpaired_samples_still_give_a_verdict() -> None:
    # Older artifacts and older-API timing: plain samples and kernel_samples_s, no rounds.
    v = FusedAdamCapturable().verdict(AdamParams(), _result(paired=False, torch_fused=(1.0, 1.9)))
    assert _head_row_status(v) == "reproduced" and v.paired is False and v.value == pytest.approx(1.9)
    assert v.breakdown[0]["paired"] is False and v.breakdown[0]["n"] == 30


def _regroup_kernels(res: RunResult, name: str, group: str) -> RunResult:
    v = res.variant(name)
    moved = dataclasses.replace(v, extra={**v.extra, "kernel_group": group})
    return RunResult(variants=tuple(moved if x.name == name else x for x in res.variants))


def test_kernel_rounds_of_another_group_are_not_paired() -> None:
    res = _regroup_kernels(_result(torch_fused=(1.0, 1.9)), "torch_fused_capturable", "elsewhere")
    v = FusedAdamCapturable().verdict(AdamParams(), res)
    # No kernel pairing and no kernel samples: the paired step times (equal) are what is left.
    assert v.value == pytest.approx(1.0, rel=1e-2) and v.paired is True and _head_row_status(v) == "not_reproduced"


def test_a_step_time_fallback_is_reported_as_such() -> None:
    # kernel_rounds gives 0.0 for a call where no kernel matched KERNEL_KEYS (e.g. a TE build whose
    # kernels are named otherwise): no usable pair is left, and the ratio is of whole-step times.
    res = _result(torch_fused=(1.0, 1.9))
    zeroed = [
        dataclasses.replace(x, extra={**x.extra, "kernel_rounds_s": [0.0] * len(DRIFT)})
        if "kernel_rounds_s" in x.extra
        else x
        for x in res.variants
    ]
    v = FusedAdamCapturable().verdict(AdamParams(), RunResult(variants=tuple(zeroed)))
    assert v.value == pytest.approx(1.0, rel=1e-2)  # the step times were compared
    assert "whole-step times were compared" in v.finding
    assert v.breakdown[0]["basis"] == "time"


def test_missing_kernel_rounds_fall_back_to_step_time_and_say_so() -> None:
    res = _result(torch_fused=(1.0, 1.9))
    bare = RunResult(variants=tuple(dataclasses.replace(x, extra={}) for x in res.variants))
    v = FusedAdamCapturable().verdict(AdamParams(), bare)
    assert v.value == pytest.approx(1.0, rel=1e-2) and _head_row_status(v) == "not_reproduced"
    assert "per-kernel samples were missing, so whole-step times were compared" in v.finding


def test_headline_is_te_whenever_te_ran() -> None:
    worse = FusedAdamCapturable().verdict(AdamParams(), _result(te=1.9, torch_fused=1.0))
    assert worse.value == pytest.approx(1.9, rel=1e-2) and worse.headline == "te"
    assert worse.finding.startswith("Reproduced: TE FusedAdam: optimizer-kernel time per step")
    assert "TE FusedAdam's capturable kernels are slower, as the seed saw (~1.9x on a GB300)" in worse.finding
    assert "torch AdamW(fused=True) 1.00x" in full_text(worse)
    better = FusedAdamCapturable().verdict(AdamParams(), _result(te=0.8, torch_fused=1.5))
    # TE speaks even when another backend looks worse: the rule is fixed before any number.
    assert better.value == pytest.approx(0.8, rel=1e-2) and better.headline == "te"
    assert better.status == "not_reproduced" and better.claim == {"tested": True, "reason": None}
    assert "so the seed's ~1.9x (TE FusedAdam, GB300) does not hold here" in better.finding


def test_without_te_the_finding_does_not_judge_the_seed() -> None:
    v = FusedAdamCapturable().verdict(AdamParams(), _result(torch_fused=1.0))
    # Never "not_reproduced": what ran is not what the seed is about.
    assert v.value == pytest.approx(1.0, rel=1e-2) and v.status == "inconclusive"
    assert "TE FusedAdam was not measured here" in full_text(v)
    assert "does not hold" not in full_text(v)


def test_verdict_without_any_pair_is_not_measured() -> None:
    v = FusedAdamCapturable().verdict(AdamParams(), _result())
    assert v.status == "skipped" and v.value is None and v.breakdown == ()
    assert v.finding.startswith("Not measured: variant te_capturable was skipped: not here")
    assert "torch_fused_capturable was skipped" in v.finding


def test_cpu_smoke_verdict_falls_back_to_step_time_and_says_so() -> None:
    res = RunResult(
        variants=(
            _variant("torch_fused_regular", 0.001, device="cpu"),
            _variant("torch_fused_capturable", 0.001, device="cpu"),
        )
    )
    v = FusedAdamCapturable().verdict(AdamParams(), res)
    assert v.status == "smoke" and v.value == pytest.approx(1.0, rel=1e-2)
    assert v.finding.startswith("Smoke run on cpu, not evidence about any GPU")
    assert "whole-step times were compared (no per-kernel timing on CPU)" in v.finding
    assert "Reproduced" not in full_text(v) and v.breakdown[0]["status"] == "smoke"


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
        self.calls.append(("kernel_rounds", sorted(fns), iters, episodes, list(pairs), min_iters))
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
    p = build_params(RID, AdamParams, {}, smoke=True)
    res = FusedAdamCapturable().run(p, ctx)
    v = {x.name: x for x in res.variants}
    assert [v[f"te_{m}"].reason for m in ("regular", "capturable", "capturable_graph")] == [why] * 3
    most, episodes, fewest = kernel_plan(p)
    assert ctx.calls == [
        ("paired", "torch_fused", ["torch_fused_regular", "torch_fused_capturable"]),
        ("kernel_rounds", ["capturable", "regular"], most, episodes, [("capturable", "regular")], fewest),
        ("measure", "torch_fused_capturable_graph", True),
    ]
    for name in ("torch_fused_regular", "torch_fused_capturable"):
        assert len(v[name].extra["kernel_rounds_s"]) == p.kernel_iters
        assert v[name].extra["kernel_episode_rounds"] == 2  # episodes of kernel_episode_rounds
        assert v[name].extra["kernel_group"] == "torch_fused_kernels"
    assert "kernel_rounds_s" not in v["torch_fused_capturable_graph"].extra
    # The foreach capturable optimizer fails on CPU tensors when it first steps: that backend's
    # variants are errors (regular and capturable live at once), and the run goes on.
    assert {v[f"torch_foreach_{m}"].status for m in ("regular", "capturable", "capturable_graph")} == {"error"}
    verdict = FusedAdamCapturable().verdict(p, res)
    assert _head_row_status(verdict) == "reproduced" and verdict.value == pytest.approx(1.9, rel=1e-2)
    assert verdict.paired is True and verdict.headline == "torch_fused"
    assert "per-kernel samples were missing" not in verdict.finding
    assert "Graph replay of the capturable step took 0.95x the eager regular step." in verdict.details


def test_a_quick_run_times_no_backend_after_the_one_that_answers_the_headline(
    fast: SamplingConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fused_adam, "_te_fused_adam", lambda: (None, "no TE here"))
    p = build_params(RID, AdamParams, {}, smoke=True)
    ctx = _FakeCudaContext(device="cpu", smoke=True, sampling=fast, quick=True)
    ctx.comparisons = tuple(FusedAdamCapturable().comparisons(p))  # all three are headline comparisons
    res = FusedAdamCapturable().run(p, ctx)
    assert [c[:2] for c in ctx.calls] == [
        ("paired", "torch_fused"),
        ("kernel_rounds", ["capturable", "regular"]),
        ("measure", "torch_fused_capturable_graph"),
    ]
    foreach = [res.variant(f"torch_foreach_{m}") for m in ("regular", "capturable", "capturable_graph")]
    assert {(x.status, x.reason) for x in foreach} == {("skipped", QUICK_ANSWERED.format(comparison="torch_fused"))}
    assert FusedAdamCapturable().verdict(p, res).headline == "torch_fused"  # the headline a full run takes too


def test_cuda_branch_keeps_step_timing_when_kernel_rounds_fail(
    fast: SamplingConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fused_adam, "_te_fused_adam", lambda: (None, "no TE here"))
    ctx = _FakeCudaContext(device="cpu", smoke=True, sampling=fast)
    ctx.kernel_rounds_error = RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")
    p = build_params(RID, AdamParams, {"backends": "torch_fused"}, smoke=True)
    res = FusedAdamCapturable().run(p, ctx)
    eager = [res.variant(f"torch_fused_{m}") for m in ("regular", "capturable")]
    assert all(x.status == "ok" and "kernel_rounds_s" not in x.extra for x in eager)
    assert all(x.warnings == ("per-kernel rounds failed (RuntimeError: CUPTI_ERROR_NOT_INITIALIZED)",) for x in eager)
    verdict = FusedAdamCapturable().verdict(p, res)
    assert verdict.value == pytest.approx(1.0, rel=1e-2) and _head_row_status(verdict) == "not_reproduced"
    assert "per-kernel samples were missing, so whole-step times were compared" in verdict.finding


def test_too_little_gpu_memory_skips_every_variant_with_a_hint(
    monkeypatch: pytest.MonkeyPatch, run_dir: Path, fast: SamplingConfig
) -> None:
    import repro.repros.fused_adam as fa
    from repro.run.context import RunContext

    monkeypatch.setattr(fa, "_free_gpu_bytes", lambda: 8 * 2**30)
    ctx = RunContext(device="cuda", smoke=False, sampling=fast)
    result = FusedAdamCapturable().run(AdamParams(), ctx)  # the seed's size: ~84 GB needed
    assert result.variants and all(v.status == "skipped" for v in result.variants)
    assert "GiB of GPU memory, 8 GiB free; try --set numel=" in (result.variants[0].reason or "")
