"""Per-claim status: a verdict answers the seed's claim, and says so when the seed's subject did not run."""

from __future__ import annotations

from helpers import timing_for

from repro.core.results import Comparison, Finding, Metric, RunResult, VariantResult, Verdict
from repro.core.verdict import Outcome, judge

METRIC = Metric("t(a)/t(b)", "a over b", 1.5)
COMPS = [
    Comparison("subject", "s_a", "s_b", 1.5, label="the seed's library", headline=True),
    Comparison("stand-in", "t_a", "t_b", 1.5, label="another library", headline=True, tests_claim=False),
]


def _v(name: str, median: float | None, device: str) -> VariantResult:
    if median is None:
        return VariantResult(name=name, label=name, config={}, status="skipped", reason="the library is absent")
    samples = [median * (1 + 0.001 * (k - 10)) for k in range(21)]
    return VariantResult(name=name, label=name, config={}, status="ok", device=device, timing=timing_for(samples))


def _judge(device: str = "cuda", **medians: float | None) -> Verdict:
    def explain(out: Outcome) -> Finding:
        return Finding("")

    variants = tuple(_v(n, m, device) for n, m in medians.items())
    return judge(COMPS, "first", METRIC, RunResult(variants=variants), explain)


def _head_status(v: Verdict) -> str:
    return str(next(r for r in v.breakdown if r["headline"])["status"])


def test_the_subject_decides_when_it_ran() -> None:
    v = _judge(s_a=2.0, s_b=1.0, t_a=1.0, t_b=1.0)
    assert v.status == "reproduced" and v.headline == "subject"
    assert v.claim == {"tested": True, "reason": None} and v.not_run == ()
    assert _judge(s_a=1.0, s_b=1.0, t_a=2.0, t_b=1.0).status == "not_reproduced"


def test_a_stand_in_never_refutes_or_confirms_the_claim() -> None:
    for stand_in, own in ((1.0, "not_reproduced"), (2.0, "reproduced")):
        v = _judge(s_a=None, s_b=None, t_a=stand_in, t_b=1.0)
        assert v.status == "inconclusive" and v.headline == "stand-in" and _head_status(v) == own
        assert v.claim is not None and v.claim["tested"] is False
        assert "the seed's library: variant s_a was skipped: the library is absent" in v.claim["reason"]
        assert v.finding.startswith("Inconclusive, the seed's claim was not tested (")
        assert [(r["comparison"], r["reason"]) for r in v.not_run] == [
            ("subject", "variant s_a was skipped: the library is absent")
        ]


def test_a_subject_that_did_not_run_is_inconclusive_whatever_else_ran_and_a_cpu_run_is_smoke() -> None:
    # A quick run times headlines only: with the subject absent nothing is measured, and the
    # status must still be the full run's (whose stand-in ran): the claim was not tested.
    v = _judge(s_a=None, s_b=None, t_a=None, t_b=None)
    assert v.status == "inconclusive" and v.value is None and len(v.not_run) == 2
    assert v.claim is not None and v.claim["tested"] is False
    # No variant at all (nothing ran, no reason given): the repro was skipped, not judged.
    empty = judge(COMPS, "first", METRIC, RunResult(variants=()), lambda out: Finding(""))
    assert empty.status == "skipped"
    assert _judge("cpu", s_a=None, s_b=None, t_a=2.0, t_b=1.0).status == "smoke"


def test_a_claim_about_another_architecture_is_inconclusive_with_what_was_measured() -> None:
    from repro.core.claim import not_tested_here
    from repro.repros.linear_5090 import Linear5090

    decided = _judge(s_a=1.0, s_b=1.0, t_a=1.0, t_b=1.0)
    assert decided.status == "not_reproduced"
    v = not_tested_here(decided, ("12.0",), "9.0", "NVIDIA H200")
    assert v.status == "inconclusive" and v.claim is not None and v.claim["tested"] is False
    assert v.claim["reason"] == ("not on this architecture: the claim is about sm_120; NVIDIA H200 is sm_90")
    assert v.finding.startswith("Inconclusive, the seed's claim was not tested (not on this architecture: ")
    assert "); instead, on this GPU: the seed's library was 1.00x (95% CI " in v.finding
    assert v.not_run[-1] == {
        "comparison": "subject",
        "label": "the seed's library",
        "reason": "not on this architecture",
    }
    assert v.value == decided.value and v.breakdown == decided.breakdown  # what was measured stays
    # On the claim's own architecture, with no architecture declared, or undecided: unchanged.
    assert not_tested_here(decided, ("12.0",), "12.0") is decided
    assert not_tested_here(decided, (), "9.0") is decided
    smoke = _judge("cpu", s_a=2.0, s_b=1.0, t_a=1.0, t_b=1.0)
    assert not_tested_here(smoke, ("12.0",), "9.0") is smoke
    assert Linear5090.claim_arch == ("12.0",)  # the RTX 5090 (sm_120); the RTX 4090 read ~1.0x
    from repro.repros.lora_batch import LoraBatchScaling

    assert LoraBatchScaling.claim_arch == ("12.0",)  # the article's RTX 5090 only, as 5090-linear


SIDE = [
    Comparison("subject", "s_a", "s_b", 1.5, label="the seed's library", headline=True),
    Comparison("control", "t_a", "t_b", 1.5, label="a same-kernels control", tests_claim=False),
]


def _judge_side(device: str = "cuda", errored: bool = False, **medians: float | None) -> Verdict:
    def explain(out: Outcome) -> Finding:
        return Finding("the control read " + ", ".join(f"{r.value:.1f}" for r in out.ratios))

    variants = [_v(n, m, device) for n, m in medians.items()]
    if errored:
        variants = [
            VariantResult(name=v.name, label=v.name, config={}, status="error", reason="boom")
            if v.name.startswith("s_")
            else v
            for v in variants
        ]
    return judge(SIDE, "first", METRIC, RunResult(variants=tuple(variants)), explain)


def test_a_headline_whose_subject_did_not_run_has_no_value_and_says_what_ran() -> None:
    v = _judge_side(s_a=None, s_b=None, t_a=2.0, t_b=1.0)
    assert v.status == "inconclusive" and v.value is None and v.ci_low is None and v.paired is None
    assert v.headline == "subject" and not any(r["headline"] for r in v.breakdown)
    assert v.claim == {"tested": False, "reason": "the seed's library: variant s_a was skipped: the library is absent"}
    assert v.finding == (
        "Inconclusive, the seed's claim was not tested (the seed's library: variant s_a was skipped: the library "
        "is absent); instead: the control read 2.0."
    )
    # A side ratio is never promoted to the headline, however it reads
    assert [r["comparison"] for r in v.breakdown] == ["control"] and v.breakdown[0]["status"] == "reproduced"
    # On CPU nothing is judged: the side ratio shows the pipeline ran
    smoke = _judge_side("cpu", s_a=None, s_b=None, t_a=2.0, t_b=1.0)
    assert smoke.status == "smoke" and smoke.value is not None
    # A subject that errored is an error, not an untested claim
    assert _judge_side(errored=True, s_a=1.0, s_b=1.0, t_a=2.0, t_b=1.0).status == "error"


def test_a_subject_that_did_not_run_keeps_the_thresholds_reason() -> None:
    metric = Metric("t(a)/t(b)", "a over b", 1.5, threshold_why="halfway between the seeds' two GPUs")
    variants = tuple(_v(n, m, "cuda") for n, m in {"s_a": None, "s_b": None, "t_a": 1.0, "t_b": 1.0}.items())
    v = judge(COMPS, "first", metric, RunResult(variants=variants), lambda out: Finding(""))
    assert v.status == "inconclusive" and v.threshold_why == "halfway between the seeds' two GPUs"


def test_a_skip_reason_is_said_without_the_exception_that_repeats_it() -> None:
    from repro.core.errors import reason_only

    said = "transformer_engine.pytorch is not importable: ModuleNotFoundError: No module named 'transformer_engine'"
    assert reason_only(said) == "transformer_engine.pytorch is not importable"
    assert reason_only("the library is absent") == "the library is absent" and reason_only(None) == ""
    skipped = VariantResult(name="s_a", label="s_a", config={}, status="skipped", reason=said)
    v = judge(SIDE, "first", METRIC, RunResult(variants=(skipped, _v("s_b", 1.0, "cuda"))), lambda out: Finding(""))
    assert v.claim is not None and v.claim["reason"].endswith(
        "variant s_a was skipped: transformer_engine.pytorch is not importable"
    )
