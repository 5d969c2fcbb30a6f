"""The typed contract a repro implements: params, requirements, variant results and the verdict."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from repro.errors import UsageError

if TYPE_CHECKING:
    from repro.measure import Context

Status = Literal["reproduced", "not_reproduced", "skipped", "error"]
STATUSES: tuple[str, ...] = ("reproduced", "not_reproduced", "skipped", "error")

_MISSING: Any = dataclasses.MISSING


def param(
    default: Any,
    *,
    help: str,
    smoke: Any = _MISSING,
    min: float | None = None,
    max: float | None = None,
    choices: Sequence[str] | None = None,
) -> Any:
    """A params-dataclass field carrying its help text, smoke-preset value and allowed range."""
    meta = {"help": help, "smoke": smoke, "min": min, "max": max, "choices": choices}
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class Requirements:
    """What a repro needs to produce a meaningful measurement."""

    cuda: bool = True
    cpu_smoke: bool = False  # the op exists on CPU, so --smoke can exercise the pipeline there
    python_modules: tuple[str, ...] = ()  # hard requirements (optional backends are recorded per variant)
    tools: tuple[str, ...] = ()  # executables on PATH that some variants use (e.g. nvcc)

    def describe(self) -> str:
        parts = ["CUDA GPU" if self.cuda else "any device"]
        if self.cpu_smoke:
            parts.append("CPU smoke")
        parts += [f"module {m}" for m in self.python_modules]
        parts += [f"{t} (optional)" for t in self.tools]
        return ", ".join(parts)


@dataclass(frozen=True)
class Metric:
    """The cliff metric: a ratio that counts as reproduced when it reaches ``threshold``."""

    name: str
    description: str
    threshold: float


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
    stop_reason: Literal["ci_target", "time_budget", "max_samples", "external"]
    target_rel_ci: float
    budget_s: float
    elapsed_s: float
    stats: Stats
    samples: tuple[float, ...]


@dataclass(frozen=True)
class Kernel:
    """One row of a variant's kernel table (totals over ``iterations`` profiled calls)."""

    name: str
    count: int
    total_us: float
    mean_us: float
    per_call: float  # launches of this kernel per timed call


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
class Verdict:
    """The answer: metric value with its CI against the threshold, and one plain sentence."""

    metric: str
    description: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    ci_level: float
    threshold: float
    status: Status
    finding: str
    breakdown: tuple[Mapping[str, Any], ...] = ()
    variants: tuple[str, ...] = ()  # the (numerator, denominator) variants of the headline ratio
    details: tuple[str, ...] = ()  # further sentences: other backends, side measurements, caveats


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


class Repro:
    """Base class of every repro; subclasses are registered with ``@catalog.register``."""

    id: ClassVar[str]
    title: ClassVar[str]
    upstream: ClassVar[tuple[str, ...]]
    seed_claim: ClassVar[str]
    Params: ClassVar[type]
    requires: ClassVar[Requirements]
    metric: ClassVar[Metric]

    def run(self, params: Any, ctx: Context) -> RunResult:
        raise NotImplementedError

    def verdict(self, params: Any, result: RunResult) -> Verdict:
        raise NotImplementedError


def from_jsonable(tp: Any, data: Any) -> Any:
    """Rebuild a result dataclass (nested, with tuples and optionals) from its JSON form."""
    if data is None:
        return None
    if isinstance(tp, str):
        tp = _RESULT_TYPES[tp]
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        return tp(
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

# --------------------------------------------------------------------------- params


def params_fields(params_cls: type) -> list[dataclasses.Field[Any]]:
    return list(dataclasses.fields(params_cls))


def _hints(params_cls: type) -> dict[str, Any]:
    return typing.get_type_hints(params_cls)


def describe_type(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is tuple:
        inner = typing.get_args(tp)[0]
        return f"comma-separated {describe_type(inner)}s"
    return {int: "integer", float: "number", bool: "boolean", str: "string"}.get(tp, str(tp))


def _coerce_scalar(tp: Any, raw: str) -> Any:
    if tp is bool:
        low = raw.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ValueError
    if tp is int:
        return int(raw.strip())
    if tp is float:
        value = float(raw.strip())
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError
        return value
    if tp is str:
        return raw
    raise TypeError(f"unsupported param type {tp!r}")


def _check_range(repro_id: str, f: dataclasses.Field[Any], value: Any, shown: str) -> None:
    lo, hi, choices = f.metadata.get("min"), f.metadata.get("max"), f.metadata.get("choices")
    items = value if isinstance(value, tuple) else (value,)
    for item in items:
        if choices is not None and item not in choices:
            raise UsageError(f"--set {f.name}={shown} for {repro_id}: expected one of {', '.join(choices)}")
        if lo is not None and item < lo:
            raise UsageError(f"--set {f.name}={shown} for {repro_id}: expected >= {lo:g}")
        if hi is not None and item > hi:
            raise UsageError(f"--set {f.name}={shown} for {repro_id}: expected <= {hi:g}")
    if isinstance(value, tuple) and not value:
        raise UsageError(f"--set {f.name}={shown} for {repro_id}: expected at least one value")


def parse_assignments(assignments: Sequence[str]) -> dict[str, str]:
    """Split ``key=value`` strings; a malformed one is a UsageError naming it."""
    out: dict[str, str] = {}
    for item in assignments:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set {item!r}: expected key=value")
        out[key.strip()] = raw
    return out


def build_params(repro_id: str, params_cls: type, overrides: Mapping[str, str], *, smoke: bool = False) -> Any:
    """Defaults, then the smoke preset, then ``--set`` overrides, each checked against its field."""
    fields = {f.name: f for f in params_cls.__dataclass_fields__.values()}
    hints = _hints(params_cls)
    values: dict[str, Any] = {}
    if smoke:
        values.update(
            {n: f.metadata["smoke"] for n, f in fields.items() if f.metadata.get("smoke", _MISSING) is not _MISSING}
        )
    for key, raw in overrides.items():
        if key not in fields:
            raise UsageError(f"unknown parameter {key!r} for {repro_id}; known: {', '.join(sorted(fields))}")
        tp = hints[key]
        try:
            if typing.get_origin(tp) is tuple:
                inner = typing.get_args(tp)[0]
                value: Any = tuple(_coerce_scalar(inner, p) for p in raw.split(",") if p.strip())
            else:
                value = _coerce_scalar(tp, raw)
        except ValueError:
            raise UsageError(f"--set {key}={raw} for {repro_id}: expected {describe_type(tp)}") from None
        _check_range(repro_id, fields[key], value, raw)
        values[key] = value
    return params_cls(**values)


def params_to_dict(params: Any) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(params).items()}


def params_help(params_cls: type) -> list[dict[str, Any]]:
    """Rows describing each param, for ``repro list`` and the README."""
    hints = _hints(params_cls)
    rows = []
    for f in dataclasses.fields(params_cls):
        smoke = f.metadata.get("smoke", _MISSING)
        rows.append(
            {
                "name": f.name,
                "type": describe_type(hints[f.name]),
                "default": f.default,
                "smoke": None if smoke is _MISSING else smoke,
                "help": f.metadata.get("help", ""),
            }
        )
    return rows
