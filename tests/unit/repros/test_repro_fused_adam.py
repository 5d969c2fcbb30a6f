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
from repro.repros._adam_steps import multi_tensor_kernel, step_kernel
from repro.repros._adam_words import NO_CONTROL_KERNELS
from repro.repros.fused_adam import AdamParams, FusedAdamCapturable, kernel_plan
from repro.run.context import RunContext
from repro.run.execute import RunRequest, execute
from repro.run.schedule import QUICK_SKIP

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
        "Smoke run on cpu, not evidence about any GPU: torch AdamW(fused=True): kernel time per step"
    )
    assert "whole-step times were compared (no per-kernel timing on CPU)" in verdict["finding"]
    assert verdict["headline"] == "torch_fused" and verdict["paired"] is True
    # TE and foreach have no capturable step here: no ratio; torch fused's kernel and whole-step rows
    rows = verdict["breakdown"]
    assert [r["comparison"] for r in rows] == ["torch_fused", "torch_fused_step"]
    assert all(r["backend"] == "torch AdamW(fused=True)" and r["status"] == "smoke" and r["paired"] for r in rows)
    assert rows[0]["role"] == "control: the same kernels in both forms"
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


def test_te_is_the_only_headline_and_every_backend_has_a_kernel_and_a_step_comparison() -> None:
    comps = FusedAdamCapturable().comparisons(build_params(RID, AdamParams, {"backends": "torch_foreach,te"}))
    assert [(c.name, c.num, c.den, c.basis) for c in comps] == [
        ("te", "te_capturable", "te_regular", "kernel"),
        ("te_step", "te_capturable", "te_regular", "time"),
        ("torch_foreach", "torch_foreach_capturable", "torch_foreach_regular", "kernel"),
        ("torch_foreach_step", "torch_foreach_capturable", "torch_foreach_regular", "time"),
    ]  # BACKENDS order, whatever order --set gave
    assert [c.name for c in comps if c.headline] == ["te"]
    assert [c.name for c in comps if c.tests_claim] == ["te", "te_step"]
    assert all(c.threshold == 1.3 for c in comps)
    assert FusedAdamCapturable.headline_rule == "first"
    # Left out by --set, TE's comparison is still the headline (unmeasured): torch's never becomes it.
    torch_only = FusedAdamCapturable().comparisons(build_params(RID, AdamParams, {"backends": "torch_fused"}))
    assert [(c.name, c.headline) for c in torch_only] == [
        ("te", True),
        ("te_step", False),
        ("torch_fused", False),
        ("torch_fused_step", False),
    ]


def _head_row_status(v: Verdict) -> str:
    """The headline comparison's own status (the repro's status answers the seed's claim)."""
    return str(next(r for r in v.breakdown if r["headline"])["status"])


def test_verdict_reproduced_when_te_clears_the_threshold() -> None:
    v = FusedAdamCapturable().verdict(AdamParams(), _result(te=1.9, torch_fused=1.0, torch_foreach=1.2))
    assert v.status == "reproduced" and v.headline == "te" and v.paired is True
    assert v.claim == {"tested": True, "reason": None}
    assert v.value == pytest.approx(1.9, rel=1e-2) and v.ci_low is not None and v.ci_low >= 1.3
    assert v.finding.startswith(
        "Reproduced: TE FusedAdam: kernel time per step, capturable/regular was "
        f"{v.value:.2f}x (95% CI {v.ci_low:.2f}-{v.ci_high:.2f}), the whole CI is above the 1.3 threshold; "
        "TE FusedAdam's capturable kernels are slower, as the seed saw (~1.9x on a GB300)."
    )
    # torch's comparisons are side rows, each with its role; the headline is TE's alone
    others = next(d for d in v.details if d.startswith("Other comparisons: "))
    assert "torch AdamW(fused=True): kernel time per step, capturable/regular 1.00x" in others
    assert "torch AdamW(foreach=True): whole step (CUDA events), capturable/regular 1.2" in others
    rows = {r["comparison"]: r for r in v.breakdown}
    assert [n for n, r in rows.items() if r["headline"]] == ["te"]
    assert rows["torch_fused"]["role"] == "control: the same kernels in both forms"
    assert all(rows[n]["basis"] == "kernel" and rows[n]["n"] == len(DRIFT) for n in ("te", "torch_fused"))


def test_without_te_there_is_no_headline_and_the_finding_says_what_ran_instead() -> None:
    v = FusedAdamCapturable().verdict(AdamParams(), _result(torch_fused=1.0, torch_foreach=(1.16, 1.18)))
    # No number answers the claim: inconclusive, no value, the headline named as TE's comparison
    assert v.status == "inconclusive" and v.value is None and v.ci_low is None and v.ci_high is None
    assert v.headline == "te" and v.paired is None
    assert v.claim is not None and v.claim["tested"] is False
    assert (
        v.claim["reason"]
        == "TE FusedAdam: kernel time per step, capturable/regular: variant te_capturable was skipped: not here"
    )
    assert [r["comparison"] for r in v.not_run] == ["te", "te_step"]
    assert v.finding.startswith(f"Inconclusive, the seed's claim was not tested ({v.claim['reason']}); instead: ")
    instead = v.finding.split("; instead: ", 1)[1]
    rows = {r["comparison"]: r for r in v.breakdown}
    assert not any(r["headline"] for r in rows.values())
    fe, fe_step = rows["torch_foreach"], rows["torch_foreach_step"]
    assert fe["ratio"] == pytest.approx(1.18, rel=1e-2) and fe_step["ratio"] == pytest.approx(1.16, rel=1e-2)
    assert instead.startswith(
        "torch AdamW(foreach=True) (reference: its capturable form launches extra kernels): kernel time per step "
        f"{fe['ratio']:.2f}x (95% CI {fe['ci_low']:.2f}-{fe['ci_high']:.2f}), whole step "
        f"{fe_step['ratio']:.2f}x (95% CI {fe_step['ci_low']:.2f}-{fe_step['ci_high']:.2f}); "
        "torch AdamW(fused=True) (control: the same kernels in both forms): kernel time per step 1.00x"
    )
    assert instead.endswith(
        "none of these is TE's FusedAdam, so they say nothing about the seed's ~1.9x (TE FusedAdam, GB300)."
    )
    assert "does not hold" not in full_text(v) and "Other comparisons" not in full_text(v)
    assert (
        "torch AdamW(fused=True): graph replay of the capturable step took 0.97x the eager regular step." in v.details
    )


def test_a_reproducing_torch_ratio_without_te_is_still_no_headline() -> None:
    v = FusedAdamCapturable().verdict(AdamParams(), _result(torch_fused=1.9))
    assert v.status == "inconclusive" and v.value is None
    assert "kernel time per step 1.9" in v.finding and "Reproduced" not in v.finding


def test_verdict_uses_kernel_rounds_not_step_times() -> None:
    # Whole steps equal, kernels 1.9x: the kernel time is the metric; the whole step is its own row.
    res = _result(te=(1.0, 1.9))
    v = FusedAdamCapturable().verdict(AdamParams(), res)
    assert v.value == pytest.approx(1.9, rel=1e-2) and v.status == "reproduced" and v.paired is True
    step = next(r for r in v.breakdown if r["comparison"] == "te_step")
    assert step["ratio"] == pytest.approx(1.0, rel=1e-2) and step["basis"] == "time"
    assert "per-kernel samples were missing" not in full_text(v)


def test_paired_kernel_rounds_cancel_drift_that_would_sink_a_two_sample_ci() -> None:
    paired = _result(te=(1.0, 1.45))
    v = FusedAdamCapturable().verdict(AdamParams(), paired)
    assert v.status == "reproduced" and v.ci_low is not None and v.ci_low >= 1.3
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
    assert u.ci_low < 1.3 <= u.ci_high and u.status == "not_reproduced"
    assert "so this run can neither confirm nor rule out the seed's ~1.9x" in u.finding


def test_unpaired_samples_still_give_a_verdict() -> None:
    # Older artifacts and older-API timing: plain samples and kernel_samples_s, no rounds.
    v = FusedAdamCapturable().verdict(AdamParams(), _result(paired=False, te=(1.0, 1.9)))
    assert v.status == "reproduced" and v.paired is False and v.value == pytest.approx(1.9)
    assert v.breakdown[0]["paired"] is False and v.breakdown[0]["n"] == 30


def _regroup_kernels(res: RunResult, name: str, group: str) -> RunResult:
    v = res.variant(name)
    moved = dataclasses.replace(v, extra={**v.extra, "kernel_group": group})
    return RunResult(variants=tuple(moved if x.name == name else x for x in res.variants))


def test_kernel_rounds_of_another_group_are_not_paired() -> None:
    res = _regroup_kernels(_result(te=(1.0, 1.9)), "te_capturable", "elsewhere")
    v = FusedAdamCapturable().verdict(AdamParams(), res)
    # No kernel pairing and no kernel samples: the paired step times (equal) are what is left.
    assert v.value == pytest.approx(1.0, rel=1e-2) and v.paired is True and v.status == "not_reproduced"


def test_a_step_time_fallback_is_reported_as_such() -> None:
    # kernel_rounds gives 0.0 for a call with no device work in its range: no usable pair is
    # left, and the ratio is of whole-step times.
    res = _result(te=(1.0, 1.9))
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
    res = _result(te=(1.0, 1.9))
    bare = RunResult(variants=tuple(dataclasses.replace(x, extra={}) for x in res.variants))
    v = FusedAdamCapturable().verdict(AdamParams(), bare)
    assert v.value == pytest.approx(1.0, rel=1e-2) and v.status == "not_reproduced"
    assert "per-kernel samples were missing, so whole-step times were compared" in v.finding
    # without TE a torch ratio that fell back to whole steps says so in the words on what ran instead
    torch_only = _result(torch_fused=(1.0, 1.9))
    bare = RunResult(variants=tuple(dataclasses.replace(x, extra={}) for x in torch_only.variants))
    w = FusedAdamCapturable().verdict(AdamParams(), bare)
    assert "kernel time per step 1.00x (95% CI" in w.finding and "(whole steps: no kernel samples)" in w.finding


def test_headline_is_te_whatever_the_other_backends_read() -> None:
    better = FusedAdamCapturable().verdict(AdamParams(), _result(te=0.8, torch_fused=1.5))
    # TE speaks even when another backend looks worse: the rule is fixed before any number.
    assert better.value == pytest.approx(0.8, rel=1e-2) and better.headline == "te"
    assert better.status == "not_reproduced" and better.claim == {"tested": True, "reason": None}
    assert "so the seed's ~1.9x (TE FusedAdam, GB300) does not hold here" in better.finding


def test_verdict_without_any_pair_is_inconclusive_with_the_reason() -> None:
    v = FusedAdamCapturable().verdict(AdamParams(), _result())
    assert v.status == "inconclusive" and v.value is None and v.breakdown == ()
    assert v.finding.startswith("Inconclusive, the seed's claim was not tested (")
    assert "variant te_capturable was skipped: not here" in v.finding


def test_an_errored_te_is_an_error_not_an_inconclusive() -> None:
    res = _result(torch_fused=1.0)
    te = [_variant(f"te_{m}", 0, status="error") for m in ("regular", "capturable", "capturable_graph")]
    mixed = RunResult(variants=(*te, *(x for x in res.variants if not x.name.startswith("te_"))))
    v = FusedAdamCapturable().verdict(AdamParams(), mixed)
    assert v.status == "error" and v.value is None


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


def test_without_te_torch_gets_no_kernel_rounds_but_the_seeds_method_and_says_why(
    fast: SamplingConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fused_adam, "_te_fused_adam", lambda: (None, "no TE here"))
    ctx = _FakeCudaContext(device="cpu", smoke=True, sampling=fast)
    p = build_params(RID, AdamParams, {}, smoke=True)
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


def test_too_little_gpu_memory_skips_every_variant_with_a_hint(
    monkeypatch: pytest.MonkeyPatch, run_dir: Path, fast: SamplingConfig
) -> None:
    import repro.repros.fused_adam as fa
    from repro.run.context import RunContext

    monkeypatch.setattr(fa, "free_gpu_bytes", lambda: 8 * 2**30)
    ctx = RunContext(device="cuda", smoke=False, sampling=fast)
    result = FusedAdamCapturable().run(AdamParams(), ctx)  # the seed's size: ~84 GB needed
    assert result.variants and all(v.status == "skipped" for v in result.variants)
    assert "GiB of GPU memory, 8 GiB free; try --set numel=" in (result.variants[0].reason or "")


# --------------------------------------------------------------------------- kernel time on synthetic traces


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


def test_the_seed_method_profiles_six_steps_of_each_form_and_divides_by_six(fast: SamplingConfig) -> None:
    from repro.repros._adam_steps import SEED_STEPS, seed_method

    ctx = _FakeCudaContext(device="cpu", smoke=True, sampling=fast)
    steps = {"capturable": lambda: None, "regular": lambda: None}
    got = seed_method(ctx, steps)
    cap, reg = _rounds(0.0019, 0, DRIFT[:SEED_STEPS]), _rounds(0.001, 0, DRIFT[:SEED_STEPS])
    assert got["capturable_s"] == pytest.approx(sum(cap) / 6) and got["regular_s"] == pytest.approx(sum(reg) / 6)
    assert got["ratio"] == pytest.approx(sum(cap) / sum(reg))
    assert [c[1:3] for c in ctx.calls] == [(["capturable"], 6), (["regular"], 6)]
