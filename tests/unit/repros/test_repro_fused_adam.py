"""fused-adam-capturable: CPU smoke run end to end, params, and the verdict rule on synthetic results.

Kernel matching, kernel time and the CUDA branch of run() are in test_repro_fused_adam_cuda.py.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from fused_adam_variants import DRIFT, _variant
from helpers import full_text

from repro.core.context import SamplingConfig
from repro.core.errors import UsageError
from repro.core.spec import RunResult, Verdict, build_params
from repro.evidence.artifact import validation_errors
from repro.repros.fused_adam import AdamParams, FusedAdamCapturable
from repro.run.execute import RunRequest, execute

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


# --------------------------------------------------------------------------- verdict on synthetic results


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
