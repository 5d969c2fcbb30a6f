"""From measured variants to a defended verdict: every declared ratio with its CI, the status,
the lead of the finding, and the breakdown rows. Repros only explain; this module judges."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from repro.core import stats
from repro.core.errors import reason_only
from repro.core.results import (
    DECIDED,
    ROW_KEYS,
    Basis,
    Comparison,
    Finding,
    HeadlineRule,
    Metric,
    Ratio,
    RunResult,
    Status,
    VariantResult,
    Verdict,
)

Decided = Literal["reproduced", "not_reproduced"]

CI_LEVEL = 0.95
# The status of a breakdown row the threshold does not apply to (``Comparison.judged`` False).
INFORMATIONAL = "informational"
# A per-kernel ratio from fewer paired rounds than this cannot bound a median at 95%
# (the order-statistic interval needs n >= 6); below it the whole-call time is used.
MIN_KERNEL_ROUNDS = 7


# Most decimals a ratio is printed with: past four, a CI narrower than 0.0001 reads as a point.
MAX_PLACES = 4


def ratio_places(value: float, lo: float, hi: float) -> int:
    """Decimals for a ratio and its CI: two, or as many more (up to MAX_PLACES) as it takes for the
    CI's two ends to print as different numbers, so its width shows."""
    for places in range(2, MAX_PLACES + 1):
        if f"{lo:.{places}f}" != f"{hi:.{places}f}":
            return places
    return MAX_PLACES


def fmt_ratio(value: float | None, lo: float | None = None, hi: float | None = None, level: float = CI_LEVEL) -> str:
    """``1.93x (95% CI 1.90-1.95)``, ``1.002x (95% CI 1.002-1.003)``; ``n/a`` when there is no value.

    The one ratio format of findings and reports: decimals from ``ratio_places``.
    """
    if value is None:
        return "n/a"
    if lo is None or hi is None:
        return f"{value:.2f}x"
    places = ratio_places(value, lo, hi)
    return f"{value:.{places}f}x ({level * 100:.3g}% CI {lo:.{places}f}-{hi:.{places}f})"


def decide(lo: float, hi: float, threshold: float) -> tuple[Decided, str]:
    """(status, qualifier). Reproduced only when the whole CI clears the threshold.

    A point estimate over the threshold with a CI that straddles it is one lucky
    run, not evidence: it is reported as not reproduced, and the finding says so.
    """
    where = stats.classify((lo + hi) / 2, lo, hi, threshold)
    if where == "above":
        return "reproduced", "the whole CI is above"
    if where == "below":
        return "not_reproduced", "the whole CI is below"
    return "not_reproduced", "inconclusive: the CI straddles"


# --------------------------------------------------------------------------- one ratio


def _ok(v: VariantResult | None) -> bool:
    return v is not None and v.status == "ok" and v.timing is not None


def variant_ratio(
    num: VariantResult, den: VariantResult, scale: float = 1.0, basis: Basis = "time", level: float = CI_LEVEL
) -> tuple[float, float, float, bool, int, Basis]:
    """(value, lo, hi, paired, n, basis used) of t(num)/t(den) x scale.

    Paired when both were timed in the same interleaved rounds (or their kernels were
    profiled in the same rounds): the CI then comes from the per-round ratios. Otherwise
    the two-sample interval (each median at sqrt(level)) stands in.
    """
    assert num.timing is not None and den.timing is not None
    if basis == "kernel":
        ka, kb = num.extra.get("kernel_rounds_s"), den.extra.get("kernel_rounds_s")
        same = num.extra.get("kernel_group") is not None and num.extra.get("kernel_group") == den.extra.get(
            "kernel_group"
        )
        if same and ka and kb and len(ka) == len(kb):
            pairs = [(a, b) for a, b in zip(ka, kb, strict=True) if a > 0 and b > 0]
            if len(pairs) >= MIN_KERNEL_ROUNDS:
                # Episodes stay aligned only when no round was dropped.
                ep = num.extra.get("kernel_episode_rounds") if len(pairs) == len(ka) else None
                v, lo, hi = stats.paired_ratio_ci(
                    [a for a, _ in pairs], [b for _, b in pairs], level, scale, ep if isinstance(ep, int) else None
                )
                return v, lo, hi, True, len(pairs), "kernel"
        sa, sb = num.extra.get("kernel_samples_s") or [], den.extra.get("kernel_samples_s") or []
        if len(sa) >= MIN_KERNEL_ROUNDS and len(sb) >= MIN_KERNEL_ROUNDS:
            v, lo, hi = stats.ratio_ci(sa, sb, level, scale)
            return v, lo, hi, False, min(len(sa), len(sb)), "kernel"
    ta, tb = num.timing, den.timing
    if ta.rounds and tb.rounds and ta.group is not None and ta.group == tb.group and len(ta.rounds) == len(tb.rounds):
        v, lo, hi = stats.paired_ratio_ci(ta.rounds, tb.rounds, level, scale, ta.episode_rounds)
        return v, lo, hi, True, len(ta.rounds), "time"
    v, lo, hi = stats.ratio_ci(ta.samples, tb.samples, level, scale)
    return v, lo, hi, False, min(len(ta.samples), len(tb.samples)), "time"


def compute(c: Comparison, have: Mapping[str, VariantResult], level: float = CI_LEVEL) -> Ratio | str:
    """The comparison's ratio with its CI at ``level``, or why it could not be computed."""
    for name in (c.num, c.den):
        v = have.get(name)
        if v is None:
            return f"variant {name} was not measured"
        if not _ok(v):
            return f"variant {name} was {v.status}: {reason_only(v.reason)}"
    if c.basis == "kernel" and isinstance(why := have[c.num].extra.get("kernel_rounds_skipped"), str):
        return why  # the repro chose not to time these per kernel, and says why
    value, lo, hi, paired, n, basis = variant_ratio(have[c.num], have[c.den], c.scale, c.basis, level)
    status, _ = decide(lo, hi, c.threshold)
    where = stats.classify(value, lo, hi, c.threshold)
    return Ratio(
        comparison=c,
        value=value,
        ci_low=lo,
        ci_high=hi,
        status=status,
        where=where,
        paired=paired,
        n=n,
        basis=basis,
        level=level,
    )


# --------------------------------------------------------------------------- the outcome


@dataclass(frozen=True)
class Outcome:
    """Every declared comparison computed, and the headline the status rests on."""

    ratios: tuple[Ratio, ...]
    headline: Ratio | None
    missing: tuple[tuple[str, str], ...]  # (comparison name, why it has no ratio)
    smoke: bool  # a --smoke or CPU run: the pipeline ran, nothing is judged
    device: str | None

    def get(self, name: str) -> Ratio | None:  # the computed ratio of the comparison called ``name``
        return next((r for r in self.ratios if r.comparison.name == name), None)

    @staticmethod
    def fmt(r: Ratio | None) -> str:
        """``1.93x (95% CI 1.90-1.95)``."""
        return "n/a" if r is None else fmt_ratio(r.value, r.ci_low, r.ci_high, r.level)

    @property
    def why_not(self) -> str:
        return "; ".join(why for _, why in self.missing) or "no comparison was declared"


def headline_candidates(comparisons: Sequence[Comparison]) -> list[Comparison]:
    """The comparisons a verdict may rest on, in declared order: those marked headline, else all judged ones."""
    return [c for c in comparisons if c.headline and c.judged] or [c for c in comparisons if c.judged]


def outcome(
    comparisons: Sequence[Comparison],
    variants: Sequence[VariantResult],
    rule: HeadlineRule = "first",
) -> Outcome:
    """Compute each comparison and pick the headline by ``rule`` (see ``Repro.headline_rule``)."""
    have = {v.name: v for v in variants}
    ratios: list[Ratio] = []
    missing: list[tuple[str, str]] = []
    heads = headline_candidates(comparisons)
    # "worst" reproduces when any headline does: with k of them each at 95%, a false
    # "reproduced" would come k times as often, so each gets 1 - 0.05/k (Bonferroni) and the
    # verdict keeps its 95% as a whole.
    head_level = stats.headline_level(len(heads), rule, CI_LEVEL)
    for c in comparisons:
        r = compute(c, have, head_level if c in heads else CI_LEVEL)
        if isinstance(r, str):
            missing.append((c.name, r))
        else:
            ratios.append(r)
    cands = [r for c in heads for r in ratios if r.comparison.name == c.name]
    head: Ratio | None = None
    if cands and rule == "worst":
        hits = [r for r in cands if r.status == "reproduced"]
        head = max(hits or cands, key=lambda r: r.value)
    elif cands:
        head = cands[0]
    ran = [v for v in variants if _ok(v)]
    devices = {v.device for v in ran}
    smoke = bool(ran) and devices != {"cuda"}
    return Outcome(
        ratios=tuple(ratios),
        headline=head,
        missing=tuple(missing),
        smoke=smoke,
        device=next(iter(devices)) if len(devices) == 1 else None,
    )


def lead(r: Ratio, smoke: bool, device: str | None) -> str:
    """The harness's opening words of every finding; repros never write them."""
    if smoke:
        return f"Smoke run on {device or 'CPU'}, not evidence about any GPU"
    if r.status == "reproduced":
        return "Reproduced"
    if r.where == "straddles":
        return "Not reproduced (inconclusive)"
    return "Not reproduced"


def qualifier(r: Ratio) -> str:
    """Where the CI sits against the threshold, in words."""
    t = f"{r.comparison.threshold:g}"
    return {
        "above": f"the whole CI is above the {t} threshold",
        "below": f"the whole CI is below the {t} threshold",
        "straddles": f"the CI straddles the {t} threshold",
    }[r.where]


def breakdown_row(
    r: Ratio, smoke: bool, head: Ratio | None, measured: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """One row of the verdict's breakdown: the comparison, its ratio and CI, its status.

    ``measured``: qualifiers only the run knows (a memory cap it actually applied), from
    ``RunResult.extra["row_qualifiers"]``; they override the declared ones.
    """
    c = r.comparison
    quals = {**c.qualifiers, **(measured or {})}
    return {
        "comparison": c.name,
        "label": c.label or c.name,
        "num": c.num,
        "den": c.den,
        "ratio": r.value,
        "ci_low": r.ci_low,
        "ci_high": r.ci_high,
        "threshold": c.threshold,
        "ci_level": r.level,
        "status": "smoke" if smoke else (r.status if c.judged else INFORMATIONAL),
        "where": r.where,
        "paired": r.paired,
        "n": r.n,
        "scale": c.scale,
        "basis": r.basis,
        "headline": head is not None and r is head,
        **{k: v for k, v in quals.items() if k not in ROW_KEYS},
    }


def judge(
    comparisons: Sequence[Comparison],
    rule: HeadlineRule,
    metric: Metric,
    result: RunResult,
    explain: Callable[[Outcome], Finding],
) -> Verdict:
    """The verdict of a repro that declares its comparisons: the harness's side of the contract.

    ``explain`` is the repro's own words on the outcome (``Repro.explain`` with its params and result).
    """
    comps = list(comparisons)
    out = outcome(comps, result.variants, rule)
    head = out.headline
    heads = headline_candidates(comps)
    have = {v.name: v for v in result.variants}
    names = {n for c in heads for n in (c.num, c.den)}
    errored = any(have[n].status == "error" for n in names if n in have)
    # The seed's subject (a headline comparison) did not run and nothing errored, while side
    # comparisons ran or the subject's variants were skipped with a reason (a quick run times
    # headlines only, so it has no side ratios): the claim is untested, whatever else ran.
    said_why = any(have[n].status == "skipped" for n in names if n in have)
    subject_missing = head is None and not errored and any(c.tests_claim for c in heads) and (out.ratios or said_why)
    if subject_missing and out.smoke and out.ratios:
        head = out.ratios[0]  # a smoke run judges nothing: a side ratio shows the pipeline ran
        out = dataclasses.replace(out, headline=head)
    if head is None:
        explained = explain(out)
        if subject_missing:
            return _subject_not_run(comps, metric, result, out, explained)
        why = "; ".join(w for name, w in out.missing if name in {c.name for c in heads}) or out.why_not
        v = unavailable(metric, why, status="error" if errored else "skipped")
        # Ratios that were computed (side comparisons) stay in the breakdown.
        rows = tuple(breakdown_row(r, out.smoke, None, result.extra.get("row_qualifiers")) for r in out.ratios)
        return Verdict(
            **{**_fields(v), "details": explained.details, "breakdown": rows, "not_run": _not_run(comps, out)}
        )
    finding = explain(out)
    label = head.comparison.label or head.comparison.name
    claim = _claim(comps, out)
    if out.smoke:
        status: Status = "smoke"
    elif not claim["tested"]:
        status = "inconclusive"
    else:
        status = head.status
    lead_words = (
        f"Inconclusive, the seed's claim was not tested ({claim['reason']}); instead"
        if status == "inconclusive"
        else lead(head, out.smoke, out.device)
    )
    words = f"{lead_words}: {label} was {out.fmt(head)}"
    words += "" if out.smoke else f", {qualifier(head)}"
    sentence = f"{words}; {finding.sentence.rstrip('.')}." if finding.sentence else f"{words}."
    return Verdict(
        metric=metric.name,
        description=metric.description,
        value=head.value,
        ci_low=head.ci_low,
        ci_high=head.ci_high,
        ci_level=head.level,
        threshold=head.comparison.threshold,
        status=status,
        finding=sentence,
        breakdown=tuple(breakdown_row(r, out.smoke, head, result.extra.get("row_qualifiers")) for r in out.ratios),
        variants=(head.comparison.num, head.comparison.den),
        details=tuple(finding.details),
        headline=head.comparison.name,
        paired=head.paired,
        claim=claim,
        not_run=_not_run(comps, out),
        threshold_why=metric.threshold_why or None,
    )


def _subject_not_run(
    comps: Sequence[Comparison], metric: Metric, result: RunResult, out: Outcome, explained: Finding
) -> Verdict:
    """The verdict when the headline (the seed's subject) did not run but side comparisons did:
    ``inconclusive`` with no headline value, since no number here answers the claim; the finding
    says why the subject did not run, then the repro's words on what ran instead."""
    heads = headline_candidates(comps)
    why = (
        "; ".join(f"{c.label or c.name}: {reason}" for c in heads for name, reason in out.missing if name == c.name)
        or out.why_not
    )
    words = f"Inconclusive, the seed's claim was not tested ({why})"
    sentence = f"{words}; instead: {explained.sentence.rstrip('.')}." if explained.sentence else f"{words}."
    return Verdict(
        metric=metric.name,
        description=metric.description,
        value=None,
        ci_low=None,
        ci_high=None,
        ci_level=CI_LEVEL,
        threshold=metric.threshold,
        status="inconclusive",
        finding=sentence,
        breakdown=tuple(breakdown_row(r, out.smoke, None, result.extra.get("row_qualifiers")) for r in out.ratios),
        details=tuple(explained.details),
        headline=heads[0].name,
        paired=None,
        claim={"tested": False, "reason": why},
        not_run=_not_run(comps, out),
        threshold_why=metric.threshold_why or None,
    )


def _claim(comparisons: Sequence[Comparison], out: Outcome) -> dict[str, Any]:
    """Whether the headline tests the seed's subject, and if not, why the subject did not run."""
    head = out.headline
    if head is None or head.comparison.tests_claim:
        return {"tested": True, "reason": None}
    subject = [c for c in comparisons if c.tests_claim]
    why = [f"{c.label or c.name}: {reason}" for c in subject for name, reason in out.missing if name == c.name]
    if why:
        reason = "; ".join(why)
    elif subject:
        reason = "its comparisons gave no ratio"
    else:
        reason = "no comparison of this run measures the seed's subject"
    return {"tested": False, "reason": reason}


def _not_run(comparisons: Sequence[Comparison], out: Outcome) -> tuple[dict[str, Any], ...]:
    by_name = {c.name: c for c in comparisons}
    return tuple(
        {"comparison": name, "label": by_name[name].label or name, "reason": reason}
        for name, reason in out.missing
        if name in by_name
    )


def _fields(v: Verdict) -> dict[str, Any]:
    return {k: getattr(v, k) for k in Verdict.__dataclass_fields__}


def as_smoke(v: Verdict, device: str | None) -> Verdict:
    """A self-judged repro's decided verdict from a smoke or CPU run, relabelled: nothing is judged.

    The repro's own wording (which may say "Reproduced") moves to the details.
    """
    if v.status not in DECIDED:
        return v
    sentence = (
        f"Smoke run on {device or 'CPU'}, not evidence about any GPU: {v.metric} was "
        f"{fmt_ratio(v.value, v.ci_low, v.ci_high)}."
    )
    rows = tuple({**r, "status": "smoke"} if r.get("status") in DECIDED else r for r in v.breakdown)
    return Verdict(
        **{
            **_fields(v),
            "status": "smoke",
            "finding": sentence,
            "details": (f"The repro's own words: {v.finding}", *v.details),
            "breakdown": rows,
        }
    )


def as_quick(v: Verdict, full_command: str) -> Verdict:
    """A quick run's verdict: a not-reproduced whose CI (or a headline comparison's) straddles the
    threshold becomes ``undecided``, since the full run's narrower CI may land on either side; the
    finding names the full command. Every other verdict stands as it is."""
    straddles = v.status == "not_reproduced" and (
        (v.ci_low is not None and v.ci_high is not None and v.ci_low < v.threshold <= v.ci_high)
        or any(r.get("where") == "straddles" and r.get("status") != INFORMATIONAL for r in v.breakdown)
    )
    if not straddles:
        return v
    sentence = (
        f"Undecided in a quick run: {v.metric} was {fmt_ratio(v.value, v.ci_low, v.ci_high)}, a CI that "
        f"straddles the threshold {v.threshold:g}; the full run decides: `{full_command}`."
    )
    rows = tuple(
        {**r, "status": "undecided"} if r.get("where") == "straddles" and r.get("status") != INFORMATIONAL else r
        for r in v.breakdown
    )
    return Verdict(
        **{
            **_fields(v),
            "status": "undecided",
            "finding": sentence,
            "details": (f"The quick run's words: {v.finding}", *v.details),
            "breakdown": rows,
        }
    )


# --------------------------------------------------------------------------- repros that judge themselves


def ratio_verdict(
    metric: Metric,
    num: VariantResult,
    den: VariantResult,
    *,
    scale: float = 1.0,
    finding: Callable[[float, float, float, str, str], str],
    breakdown: Sequence[Mapping[str, Any]] = (),
) -> Verdict:
    """Verdict on t(num)/t(den) * scale; ``finding(value, lo, hi, status, qualifier)``.

    For a repro with a ``verdict`` method of its own. The CI is paired when the harness timed
    both variants in the same rounds (it re-times such a repro's pair so, see ``repro.run.execute``).
    """
    for v in (num, den):
        if not _ok(v):
            why = f"variant {v.name} was {v.status}: {v.reason}"
            return unavailable(metric, why, status="error" if v.status == "error" else "skipped")
    value, lo, hi, paired, _, _ = variant_ratio(num, den, scale)
    decided, qual = decide(lo, hi, metric.threshold)
    out = measured(
        metric, value, lo, hi, decided, finding(value, lo, hi, decided, qual), breakdown, (num.name, den.name)
    )
    return Verdict(**{**_fields(out), "paired": paired})


def measured(
    metric: Metric,
    value: float,
    lo: float,
    hi: float,
    status: Status,
    finding: str,
    breakdown: Sequence[Mapping[str, Any]] = (),
    variants: Sequence[str] = (),
    details: Sequence[str] = (),
) -> Verdict:
    """A verdict on ``metric`` from a repro that judges itself: its value and CI, the status and the finding."""
    return Verdict(
        metric=metric.name,
        description=metric.description,
        value=value,
        ci_low=lo,
        ci_high=hi,
        ci_level=CI_LEVEL,
        threshold=metric.threshold,
        status=status,
        finding=finding,
        breakdown=tuple(breakdown),
        variants=tuple(variants),
        details=tuple(details),
        threshold_why=metric.threshold_why or None,
    )


def unavailable(metric: Metric, reason: str, status: Literal["skipped", "error"] = "skipped") -> Verdict:
    """A verdict with no value: the repro was skipped (or errored) and says why."""
    return Verdict(
        metric=metric.name,
        description=metric.description,
        value=None,
        ci_low=None,
        ci_high=None,
        ci_level=CI_LEVEL,
        threshold=metric.threshold,
        status=status,
        finding=f"Not measured: {reason}",
        threshold_why=metric.threshold_why or None,
    )


def top_kernel(v: VariantResult) -> str:
    """The kernel that took most of a variant's device time, for findings."""
    return v.kernels[0].name if v.kernels else "(no kernels captured)"


def short_kernel(name: str, limit: int = 80) -> str:
    """Kernel names from templates run to hundreds of characters; keep what tells kernels apart
    (namespaces, parameter lists and scalar template arguments go; see ``repro.core.kernelnames``)."""
    from repro.core.kernelnames import short_names

    return short_names([name], limit)[name]


__all__ = [
    "CI_LEVEL",
    "INFORMATIONAL",
    "Finding",
    "Outcome",
    "Ratio",
    "breakdown_row",
    "fmt_ratio",
    "lead",
    "short_kernel",
    "top_kernel",
    "variant_ratio",
    "as_smoke",
    "compute",
    "decide",
    "judge",
    "measured",
    "outcome",
    "ratio_places",
    "ratio_verdict",
    "unavailable",
]
