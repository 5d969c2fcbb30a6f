"""Result types every layer shares: timings, kernels, work, variants, comparisons and the verdict.

The bottom of the package: it imports nothing from ``repro`` but errors, so statistics,
measurement, the repro contract and the artifact code can all depend on it without cycles.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

# "smoke": the pipeline ran (a --smoke or CPU run) and proves nothing about any GPU, so it
# never says reproduced or not_reproduced. "inconclusive": something was measured, but not the
# seed's subject (its library or GPU was absent), so the seed's claim was not tested.
# "undecided": a quick run (less evidence, a wider CI) whose CI straddles the threshold, where a
# full run may decide either way; its finding names the full command.
Status = Literal["reproduced", "not_reproduced", "inconclusive", "undecided", "smoke", "skipped", "error"]
STATUSES: tuple[str, ...] = typing.get_args(Status)
DECIDED: tuple[str, ...] = ("reproduced", "not_reproduced")
StopReason = Literal["ci_target", "decided", "time_budget", "max_samples", "max_rounds", "external"]
# How a verdict picks its headline among several headline comparisons (see Repro.headline_rule).
HeadlineRule = Literal["first", "worst"]
HEADLINE_RULES: tuple[str, ...] = typing.get_args(HeadlineRule)
# What a ratio compares: time per call, or the device time of matched kernels.
Basis = Literal["time", "kernel"]


def rel_halfwidth(value: float, low: float, high: float) -> float:
    """A CI's half-width over its value (inf for a value that is not positive)."""
    return (high - low) / 2 / value if value > 0 else float("inf")


@dataclass(frozen=True)
class Metric:
    """The cliff metric: a ratio that counts as reproduced when it reaches ``threshold``.

    ``threshold_why``: one line on why the threshold sits where it does (against what: the seed's
    number, the control's, run-to-run noise), recorded in the verdict and shown in the report.
    """

    name: str
    description: str
    threshold: float
    threshold_why: str = ""


@dataclass(frozen=True)
class Stats:
    """Summary of one sample set (seconds per call); the CI is for the median."""

    n: int
    median: float
    mean: float
    stdev: float
    min: float
    max: float
    q1: float
    q3: float
    iqr: float
    ci_low: float
    ci_high: float
    ci_level: float
    rel_ci_halfwidth: float


@dataclass(frozen=True)
class Timing:
    """How a variant was timed and what came out."""

    method: Literal["cuda_events", "graph_replay", "perf_counter", "external"]
    unit: Literal["s"]
    calls_per_sample: int
    warmup_calls: int
    stop_reason: StopReason
    target_rel_ci: float
    budget_s: float
    elapsed_s: float
    stats: Stats
    samples: tuple[float, ...]
    # Paired, interleaved timing: the variants of one ``group`` were timed in the same
    # rounds, and ``rounds[i]`` is this variant's time per call in round i (the median of
    # that round's samples). A ratio's CI is built from the per-round ratios.
    group: str | None = None
    rounds: tuple[float, ...] | None = None
    episode_rounds: int | None = None  # rounds per episode (idle gaps between episodes)
    # Where this variant's time went besides sampling (``elapsed_s``; for a paired group, the
    # whole group's rounds): warm-up and calibration (and graph capture), and the profiler run.
    warmup_s: float | None = None
    profile_s: float | None = None


@dataclass(frozen=True)
class Kernel:
    """One row of a variant's kernel table (totals over ``iterations`` profiled calls)."""

    name: str
    count: int
    total_us: float
    mean_us: float
    per_call: float  # launches of this kernel per timed call

    @property
    def us_per_call(self) -> float:
        """Its microseconds per call of the timed op: the mean launch times its launches per call."""
        return float(self.total_us) / max(float(self.count), 1.0) * float(self.per_call)


@dataclass(frozen=True)
class Work:
    """Work one call does, to turn time into achieved rates."""

    flops: float = 0.0
    bytes: float = 0.0
    ceiling: str | None = None  # which measured ceiling applies: fp32, tf32, bf16, copy


@dataclass(frozen=True)
class Achieved:
    """Achieved rate at the median time, and its share of the measured ceiling."""

    tflops: float | None
    gbps: float | None
    ceiling: str | None
    ceiling_value: float | None
    ceiling_unit: str | None
    pct_of_ceiling: float | None


def achieved(work: Work | None, seconds: float, ceilings: Mapping[str, Any]) -> Achieved | None:
    """Achieved TFLOP/s and GB/s at ``seconds`` per call, and the share of the applicable ceiling."""
    if work is None or seconds <= 0:
        return None
    tflops = work.flops / seconds / 1e12 if work.flops else None
    gbps = work.bytes / seconds / 1e9 if work.bytes else None
    ceiling = ceilings.get(work.ceiling) if work.ceiling else None
    value = unit = pct = None
    if isinstance(ceiling, Mapping) and ceiling.get("value"):
        value, unit = float(ceiling["value"]), str(ceiling["unit"])
        rate = tflops if unit == "TFLOP/s" else gbps
        pct = 100.0 * rate / value if rate is not None else None
    return Achieved(
        tflops=tflops, gbps=gbps, ceiling=work.ceiling, ceiling_value=value, ceiling_unit=unit, pct_of_ceiling=pct
    )


@dataclass(frozen=True)
class VariantResult:
    """One measured (or skipped) variant of a repro."""

    name: str
    label: str
    config: Mapping[str, Any]
    status: Literal["ok", "skipped", "error"]
    reason: str | None = None
    device: str | None = None
    timing: Timing | None = None
    kernels: tuple[Kernel, ...] = ()
    kernel_source: str | None = None  # "cuda" kernels, "cpu" leaf ops, or another tool's name
    profiled_iterations: int = 0
    work: Work | None = None
    achieved: Achieved | None = None
    gpu_monitor: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    @property
    def median(self) -> float:
        if self.timing is None:
            raise ValueError(f"variant {self.name!r} has no timing (status {self.status})")
        return self.timing.stats.median


@dataclass(frozen=True)
class Row:
    """One breakdown row of a verdict, as read: a comparison's ratio, CI and status, and its qualifiers.

    ``repro.core.verdict.breakdown_row`` writes a row as one mapping, these fields (``ROW_KEYS``)
    first and the comparison's qualifiers after them. The schema leaves rows open, so every field is
    optional and a reader fills one only when the row holds a value of the expected type.
    """

    comparison: str | None = None
    label: str | None = None
    num: str | None = None
    den: str | None = None
    ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    threshold: Any = None  # shown as recorded, whatever it is
    ci_level: float | None = None
    status: str | None = None
    where: str | None = None
    paired: bool | None = None
    n: int | None = None
    scale: float | None = None
    basis: str | None = None
    headline: bool = False
    qualifiers: Mapping[str, Any] = field(default_factory=dict)


# A written row's fixed keys; every other key of a row is a qualifier.
ROW_KEYS = frozenset(f.name for f in dataclasses.fields(Row) if f.name != "qualifiers")


@dataclass(frozen=True)
class Claim:
    """Whether the seed's own subject ran (written as ``{"tested": bool, "reason": str | None}``)."""

    tested: bool
    reason: str | None


@dataclass(frozen=True)
class NotRun:
    """A declared comparison that got no ratio, and why (written as a mapping of these fields)."""

    comparison: str
    label: str
    reason: str


RowT = TypeVar("RowT")
ClaimT = TypeVar("ClaimT")
NotRunT = TypeVar("NotRunT")


@dataclass(frozen=True)
class VerdictOf(Generic[RowT, ClaimT, NotRunT]):
    """The answer: metric value with its CI against the threshold, and one plain sentence.

    The one description of a verdict's fields. ``Verdict`` (below) is the verdict a run writes, its
    rows, claim and not-run entries the mappings ``repro.core.verdict`` builds;
    ``repro.evidence.model.Verdict`` is the one a report reads, the same entries as ``Row``,
    ``Claim`` and ``NotRun``.
    """

    metric: str
    description: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    ci_level: float
    threshold: float
    status: Status
    finding: str
    breakdown: tuple[RowT, ...] = ()
    variants: tuple[str, ...] = ()  # the (numerator, denominator) variants of the headline ratio
    details: tuple[str, ...] = ()  # further sentences: other backends, side measurements, caveats
    headline: str | None = None  # the name of the comparison the status rests on
    paired: bool | None = None  # the headline CI came from paired per-round ratios
    # Whether the seed's own subject ran (``Claim``); None when the repro has nothing to say (a
    # skipped or errored run).
    claim: ClaimT | None = None
    # Declared comparisons that got no ratio, each with why (``NotRun``).
    not_run: tuple[NotRunT, ...] = ()
    threshold_why: str | None = None  # the metric's reason for its threshold (``Metric.threshold_why``)


class Verdict(VerdictOf[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]]):
    """A verdict as a run writes it: each row a mapping of ``ROW_KEYS`` then qualifiers, the claim and
    each not-run entry a mapping of ``Claim``'s and ``NotRun``'s fields."""


@dataclass(frozen=True)
class Comparison:
    """One ratio a repro judges: t(num) / t(den) x ``scale`` against ``threshold``.

    ``scale`` turns a time ratio into a work-scaled one (solve's ((n-1)/n)^3), so that
    smooth scaling reads 1.0. ``basis="kernel"`` compares per-call device time of the
    variants' matched kernels (``extra["kernel_rounds_s"]``) instead of whole-call time.
    ``qualifiers`` are the facts a reader needs beside the number (backend, batch, source)
    and reach the breakdown row and the report's summary. ``tests_claim=False`` marks a
    stand-in for the seed's subject (torch's AdamW where the seed is about TE's FusedAdam): a
    verdict resting on it is ``inconclusive``, since the claim itself was not tested.
    ``judged=False`` marks a context row whose ratio the threshold does not apply to (a ratio of
    whole calls diluted by other work in each call): its row is written with the status
    ``"informational"``, it is never a headline, and where it holds is not said.
    """

    name: str
    num: str
    den: str
    threshold: float
    label: str = ""
    scale: float = 1.0
    headline: bool = False
    basis: Basis = "time"
    qualifiers: Mapping[str, Any] = field(default_factory=dict)
    tests_claim: bool = True
    judged: bool = True


@dataclass(frozen=True)
class Ratio:
    """A computed comparison: value, CI, where it sits against the threshold."""

    comparison: Comparison
    value: float
    ci_low: float
    ci_high: float
    status: Literal["reproduced", "not_reproduced"]
    where: Literal["above", "below", "straddles"]
    paired: bool
    n: int  # paired rounds, or the smaller sample count of an unpaired ratio
    basis: Basis = "time"  # what was compared: "time" per call, or "kernel" device time (may fall back to time)
    level: float = 0.95  # the CI's confidence level (higher when several comparisons share one verdict)

    @property
    def rel_halfwidth(self) -> float:
        return rel_halfwidth(self.value, self.ci_low, self.ci_high)


@dataclass(frozen=True)
class Plot:
    """A plot the report draws from the variants: median time (CI as a band) against config value ``x``,
    one line per group (``group_by``).

    ``per_x`` divides time by x (per-sample time against batch); ``log_y`` suits plots whose
    groups differ by orders of magnitude.
    """

    name: str
    x: str
    x_label: str
    group_by: tuple[str, ...] = ()
    per_x: bool = False
    log_y: bool = False
    y_label: str = "median time per call"


@dataclass(frozen=True)
class Finding:
    """A repro's explanation of its outcome: one sentence, then any further details."""

    sentence: str
    details: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunResult:
    """What ``Repro.run`` returns: the variants plus any repro-specific tables."""

    variants: tuple[VariantResult, ...]
    extra: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def variant(self, name: str) -> VariantResult:
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(f"no variant {name!r}; have {', '.join(v.name for v in self.variants)}")


_RESULT_TYPES: dict[str, type] = {}


def from_jsonable(tp: Any, data: Any) -> Any:
    """Rebuild a result dataclass (nested, with tuples and optionals) from its JSON form."""
    if data is None:
        return None
    if isinstance(tp, str):
        tp = _RESULT_TYPES[tp]
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        build: Any = tp
        return build(
            **{f.name: from_jsonable(hints[f.name], data[f.name]) for f in dataclasses.fields(tp) if f.name in data}
        )
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is tuple:
        return tuple(from_jsonable(args[0], x) for x in data)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        dc = [a for a in inner if dataclasses.is_dataclass(a)]
        return from_jsonable(dc[0], data) if dc and isinstance(data, dict) else data
    return data


_RESULT_TYPES.update({c.__name__: c for c in (Stats, Timing, Kernel, Work, Achieved, VariantResult, Verdict)})
