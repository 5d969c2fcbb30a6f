"""Turning two sample sets into a defended verdict, and the plain wording of findings."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from repro import stats
from repro.spec import Metric, VariantResult, Verdict

CI_LEVEL = 0.95


def fmt_ratio(value: float | None, lo: float | None = None, hi: float | None = None) -> str:
    """``1.93x (95% CI 1.90-1.95)``; ``n/a`` when there is no value."""
    if value is None:
        return "n/a"
    if lo is None or hi is None:
        return f"{value:.2f}x"
    return f"{value:.2f}x (95% CI {lo:.2f}-{hi:.2f})"


def decide(lo: float, hi: float, threshold: float) -> tuple[str, str]:
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


def ratio_verdict(
    metric: Metric,
    num: VariantResult,
    den: VariantResult,
    *,
    scale: float = 1.0,
    finding: Callable[[float, float, float, str, str], str],
    breakdown: Sequence[Mapping[str, Any]] = (),
) -> Verdict:
    """Verdict on median(num)/median(den) * scale; ``finding(value, lo, hi, status, qualifier)``."""
    for v in (num, den):
        if v.status != "ok" or v.timing is None:
            status = "error" if v.status == "error" else "skipped"
            return unavailable(metric, f"variant {v.name} was {v.status}: {v.reason}", status=status)
    value, lo, hi = stats.ratio_ci(num.timing.samples, den.timing.samples, CI_LEVEL, scale)  # type: ignore[union-attr]
    status, qualifier = decide(lo, hi, metric.threshold)
    return measured(
        metric, value, lo, hi, status, finding(value, lo, hi, status, qualifier), breakdown, (num.name, den.name)
    )


def measured(
    metric: Metric,
    value: float,
    lo: float,
    hi: float,
    status: str,
    finding: str,
    breakdown: Sequence[Mapping[str, Any]] = (),
    variants: Sequence[str] = (),
) -> Verdict:
    """A decided verdict on ``metric``: its value and CI, the status and the finding.

    The finding is one sentence; anything a repro wrote after it goes to ``details``.
    """
    finding, *details = split_sentences(finding)
    return Verdict(
        metric=metric.name,
        description=metric.description,
        value=value,
        ci_low=lo,
        ci_high=hi,
        ci_level=CI_LEVEL,
        threshold=metric.threshold,
        status=status,  # type: ignore[arg-type]
        finding=finding,
        breakdown=tuple(breakdown),
        variants=tuple(variants),
        details=tuple(details),
    )


# A sentence ends at . ! or ? before a capital letter, or at ")." before any word;
# "e.g. void ..." inside a kernel list and decimals match neither.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])|(?<=\)\.)\s+(?=[a-z])")


def split_sentences(text: str) -> list[str]:
    """The sentences of a finding, in order (a text without a boundary is one sentence)."""
    return [s for s in _SENTENCE_END.split(text.strip()) if s]


def unavailable(metric: Metric, reason: str, status: str = "skipped") -> Verdict:
    """A verdict with no value: the repro was skipped (or errored) and says why."""
    return Verdict(
        metric=metric.name,
        description=metric.description,
        value=None,
        ci_low=None,
        ci_high=None,
        ci_level=CI_LEVEL,
        threshold=metric.threshold,
        status=status,  # type: ignore[arg-type]
        finding=f"Not measured: {reason}",
    )


def top_kernel(v: VariantResult) -> str:
    """The kernel that took most of a variant's device time, for findings."""
    return v.kernels[0].name if v.kernels else "(no kernels captured)"


def short_kernel(name: str, limit: int = 80) -> str:
    """Kernel names from templates run to hundreds of characters; keep the telling head."""
    name = name.split("(")[0] if "(" in name and not name.startswith("void ") else name
    return name if len(name) <= limit else name[: limit - 3] + "..."
