"""The typed contract a repro implements: params, requirements, declared comparisons, run and explain.

A repro subclasses ``Repro[Params]``, declares the comparisons it judges (``comparisons``) and the
variants they name (``variants``), measures its variants in ``run`` (compared variants in paired
rounds via ``ctx.measure_paired``) and explains the outcome in ``explain``. The harness computes
every ratio, its CI, the status and the lead of the finding (``repro.core.verdict.judge``). A
repro that judges itself overrides ``verdict`` instead of declaring comparisons.
``check_declarations`` refuses a declaration mistake when the repro is registered.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from repro.core.context import Arm, Context
from repro.core.errors import UsageError

# Re-exported: the harness and plugins that judge themselves import these from repro.core.spec.
from repro.core.results import (
    DECIDED,
    HEADLINE_RULES,
    STATUSES,
    Achieved,
    Comparison,
    Finding,
    HeadlineRule,
    Kernel,
    Metric,
    Plot,
    Ratio,
    RunResult,
    Stats,
    Status,
    Timing,
    VariantResult,
    Verdict,
    Work,
    from_jsonable,
)
from repro.core.verdict import Outcome, judge

__all__ = [
    "DECIDED",
    "HEADLINE_RULES",
    "STATUSES",
    "Achieved",
    "Comparison",
    "Finding",
    "HeadlineRule",
    "Kernel",
    "Metric",
    "Ratio",
    "Repro",
    "Requirements",
    "RunResult",
    "Stats",
    "Plot",
    "Status",
    "Sweep",
    "Timing",
    "VariantResult",
    "Verdict",
    "Work",
    "build_params",
    "check_comparisons",
    "check_declarations",
    "check_presets",
    "from_jsonable",
    "param",
    "params_help",
    "params_to_dict",
    "parse_assignments",
]

P = TypeVar("P")

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


SWEEP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


@dataclass(frozen=True)
class Sweep:
    """An integer knob ``repro cliff`` may sweep: its limits, the seed's value and how work scales.

    ``work(params, value)`` is the work of one call at ``value`` in any unit (only ratios are
    used), so times can be scaled to equal work and smooth scaling reads flat. ``single``
    names tuple params that must hold exactly one value while sweeping (one backend, one batch).
    ``tag`` reads a point's kernel names into a word or two (which implementation ran).
    ``replaces`` names params the swept value stands in for (besides a param named ``name``),
    so a ``--set`` of them is refused rather than recorded and ignored. ``derive`` gives them
    values from the user's ``--set`` (raw text), where the params' own checks tie them to a
    param the sweep does use (solve: n_min and n_max must bracket cliff_n).
    """

    name: str
    help: str
    min: int
    max: int
    default: int
    work: Callable[[Any, int], float]
    single: tuple[str, ...] = ()
    # What a point's kernel names say ran (solve: which LU path), shown beside each step.
    tag: Callable[[Sequence[str]], str] | None = None
    replaces: tuple[str, ...] = ()
    derive: Callable[[Mapping[str, str]], Mapping[str, str]] | None = None

    def __post_init__(self) -> None:
        # The name goes into file names (<id>.cliff-<name>.json) and reports: an identifier only.
        if not isinstance(self.name, str) or not SWEEP_NAME.fullmatch(self.name):
            raise UsageError(f"Sweep name {self.name!r}: expected an identifier ({SWEEP_NAME.pattern})")
        if not self.min <= self.default <= self.max or self.min == self.max:
            raise UsageError(
                f"Sweep {self.name}: expected min < max and min <= default <= max, got "
                f"min={self.min} default={self.default} max={self.max}"
            )

    def check_params(self, params_cls: type) -> None:
        """``single`` and ``replaces`` must name fields of ``params_cls`` (``single``: tuple-typed ones)."""
        hints = _hints(params_cls)
        for name in (*self.single, *self.replaces):
            if name not in hints:
                raise UsageError(f"Sweep {self.name}: {name!r} is not a param of {params_cls.__name__}")
        for name in self.single:
            if typing.get_origin(hints[name]) is not tuple:
                raise UsageError(f"Sweep {self.name}: single={name!r} names a param that is not a tuple")


class Repro(Generic[P]):
    """Base class of every repro; subclasses are registered with ``@register``.

    ``class MyRepro(Repro[MyParams])`` names the params class once: the harness reads it from
    there (``Params``), and mypy checks ``run`` and ``explain`` against it. A plain
    ``class MyRepro(Repro)`` sets ``Params`` itself.
    """

    id: ClassVar[str]
    title: ClassVar[str]
    upstream: ClassVar[tuple[str, ...]]
    seed_claim: ClassVar[str]
    Params: ClassVar[type[Any]]
    requires: ClassVar[Requirements]
    metric: ClassVar[Metric]
    # How the headline is chosen among comparisons marked ``headline=True``, in declared
    # order: "first" takes the first whose both variants were measured (a preference
    # fixed before any number is seen); "worst" reproduces when any of them does and
    # shows the largest ratio among those that did, else the largest overall.
    headline_rule: ClassVar[HeadlineRule] = "first"
    # One sentence for the report: where this shape or setting occurs in real workloads and
    # what it costs there (the report adds what it cost in this run, from the headline pair).
    impact: ClassVar[str] = ""
    # Where in the software stack the evidence puts the cliff, and what it does not show; the
    # report opens it with the kernels that appear and disappear across the headline pair.
    stack: ClassVar[str] = ""
    # The GPUs the seed reported numbers on; the report names those this run did not have.
    seed_gpus: ClassVar[tuple[str, ...]] = ()
    # Where the seed was posted when ``upstream`` has no link (a forum thread's title, an article).
    seed_source: ClassVar[str] = ""
    # The seed's experiment as posted (sizes, dtype, launch shape, timing method, or that it gave
    # no program) against what this repro measures, and why the two numbers may differ.
    seed_experiment: ClassVar[str] = ""
    # The compute capabilities ("12.0" for sm_120) the seed's claim is specific to: a claim about one
    # GPU architecture is not tested on another, so there a decided status becomes inconclusive
    # (``repro.core.claim.not_tested_here``). Empty: the claim holds for any GPU.
    claim_arch: ClassVar[tuple[str, ...]] = ()
    # What runs in place of the seed's subject when this repro never runs the subject itself (a
    # stand-in model for an article's pipeline), in a few words: a decided status is then
    # inconclusive on every GPU, this the reason. Empty: the headline measures the seed's subject.
    stand_in: ClassVar[str] = ""
    # Conditions the seed or this repro says matter that a run on one machine cannot cover (a torch
    # release, a build option, a driver), each a few words; the report lists them under "Not tested here".
    untested: ClassVar[tuple[str, ...]] = ()
    # Plots the report draws from the variants (time against a config value, CI as a band).
    plots: ClassVar[tuple[Plot, ...]] = ()
    # The keys of the variants' ``config`` (``Arm.config``, ``ctx.skipped(..., **config)``)
    # that a plot may use as its x or group_by.
    config_keys: ClassVar[tuple[str, ...]] = ()
    # Integer knobs ``repro cliff`` may sweep; a repro that declares any implements ``sweep_arm``.
    sweeps: ClassVar[tuple[Sweep, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "Params" not in cls.__dict__:
            inferred = _params_of(cls)
            if inferred is not None:
                cls.Params = inferred

    def comparisons(self, params: P) -> Sequence[Comparison]:
        """The ratios this repro judges for ``params``; none for a repro that judges itself."""
        return ()

    def variants(self, params: P) -> Sequence[str] | None:
        """The names of the variants ``run`` may return for ``params`` (measured, skipped or errored).

        Registration refuses a comparison that names any other. None: not declared, and then
        comparisons are not checked against it.
        """
        return None

    def run(self, params: P, ctx: Context) -> RunResult:
        raise NotImplementedError

    def builds(self, params: P, arch: str) -> Sequence[Callable[[], object]]:
        """What ``run`` would compile for a GPU of ``arch`` (``sm_90``), as calls that each build into
        the cache ``run`` reads, with no GPU and no torch. ``repro all`` runs them while its fork server
        starts; a failed one costs nothing (``run`` builds again). None by default."""
        return ()

    def sweep_arm(self, params: P, sweep: str, value: int, ctx: Context) -> Arm:
        """One workload of ``repro cliff``: the call to time with ``sweep`` set to ``value``.

        The harness times arms of neighbouring values in paired rounds (``ctx.measure_paired``)
        and profiles their kernels; the repro only builds the inputs and says what to call.
        """
        raise NotImplementedError(f"{type(self).__name__} declares no sweepable params")

    def explain(self, params: P, result: RunResult, outcome: Outcome) -> Finding:
        """The finding after the harness's lead ("Reproduced: ..."): one sentence and details."""
        head = outcome.headline
        if head is None:
            return Finding(f"no comparison could be computed ({outcome.why_not})")
        return Finding(f"{head.comparison.label or head.comparison.name} was {outcome.fmt(head)}")

    def script(self, params: P, only: str | None = None) -> str | None:
        """A standalone torch script for the headline comparison(s) with ``params`` (see
        ``repro.evidence.standalone``); ``only`` narrows it to one comparison. None: this repro has none."""
        return None

    def judged_comparisons(self, params: P, result: RunResult) -> Sequence[Comparison]:
        """The comparisons the verdict judges: those declared. A repro may override it to report a row, not judge
        it, by which variants ran (never by any number)."""
        return self.comparisons(params)

    def verdict(self, params: P, result: RunResult) -> Verdict:
        """The verdict from the declared comparisons; a repro that judges itself overrides this."""
        return judge(
            self.judged_comparisons(params, result),
            self.headline_rule,
            self.metric,
            result,
            lambda out: self.explain(params, result, out),
        )


def _params_of(cls: type) -> type | None:
    """``X`` of ``class C(Repro[X])`` (or of a generic Repro subclass), if ``X`` is a class."""
    for base in cls.__dict__.get("__orig_bases__", ()):
        origin = typing.get_origin(base)
        if isinstance(origin, type) and issubclass(origin, Repro):
            args = typing.get_args(base)
            if args and isinstance(args[0], type):
                return args[0]
    return None


# --------------------------------------------------------------------------- declarations


def _listed(names: Sequence[str], limit: int = 12) -> str:
    """``a, b, c`` (the first ``limit``, then how many in all); ``(none)`` when empty."""
    shown = ", ".join(names[:limit]) or "(none)"
    return shown if len(names) <= limit else f"{shown}, ... ({len(names)} in all)"


def check_comparisons(repro: Repro[Any], params: Any) -> None:
    """The comparisons for ``params`` have distinct names and name declared, distinct variants."""
    rid = repro.id
    comps = list(repro.comparisons(params))
    declared = repro.variants(params)
    seen: set[str] = set()
    for c in comps:
        if c.name in seen:
            raise UsageError(f"repro {rid!r}: comparison name {c.name!r} is declared twice; expected distinct names")
        seen.add(c.name)
        if c.num == c.den:
            raise UsageError(f"repro {rid!r}: comparison {c.name!r} divides variant {c.num!r} by itself")
        if declared is None:
            continue
        for variant in (c.num, c.den):
            if variant not in declared:
                raise UsageError(
                    f"repro {rid!r}: comparison {c.name!r} names variant {variant!r}; "
                    f"expected one of its variants: {_listed(list(declared))}"
                )


def check_declarations(cls: type[Repro[Any]]) -> None:
    """Refuse a declaration mistake as one UsageError naming the value and what was expected.

    Checked: the required attributes, ``headline_rule``, ``untested``, each sweep against the params and
    each plot's keys against ``config_keys``. ``check_presets`` checks the comparisons.
    """
    rid = getattr(cls, "id", None)
    if not isinstance(rid, str) or not rid:
        raise UsageError(f"{cls.__name__}: id {rid!r}; expected a non-empty string")
    for attr in ("title", "upstream", "seed_claim", "requires", "metric"):
        if not hasattr(cls, attr):
            raise UsageError(f"repro {rid!r} ({cls.__name__}) lacks {attr!r}")
    params_cls = getattr(cls, "Params", None)
    if not (isinstance(params_cls, type) and dataclasses.is_dataclass(params_cls)):
        raise UsageError(
            f"repro {rid!r}: Params {params_cls!r}; expected a params dataclass, "
            f"named in the class line: class {cls.__name__}(Repro[MyParams])"
        )
    if cls.headline_rule not in HEADLINE_RULES:
        raise UsageError(
            f"repro {rid!r}: headline_rule {cls.headline_rule!r}; expected one of {', '.join(HEADLINE_RULES)}"
        )
    if not isinstance(cls.untested, tuple) or not all(isinstance(u, str) and u.strip() for u in cls.untested):
        raise UsageError(f"repro {rid!r}: untested {cls.untested!r}; expected a tuple of non-empty strings")
    names = [s.name for s in cls.sweeps]
    if len(set(names)) != len(names):
        raise UsageError(f"repro {rid!r}: sweeps {names} declare a name twice; expected distinct names")
    for sweep in cls.sweeps:
        if not isinstance(sweep, Sweep):
            raise UsageError(f"repro {rid!r}: sweep {sweep!r}; expected a Sweep")
        try:
            sweep.check_params(params_cls)
        except UsageError as exc:
            raise UsageError(f"repro {rid!r}: {exc}") from None
    if cls.sweeps and cls.sweep_arm is Repro.sweep_arm:
        raise UsageError(f"repro {rid!r}: declares sweeps {', '.join(names)}; expected a sweep_arm method too")
    for plot in cls.plots:
        for key in (plot.x, *plot.group_by):
            if key not in cls.config_keys:
                raise UsageError(
                    f"repro {rid!r}: plot {plot.name!r} uses config key {key!r}; "
                    f"expected one of its config_keys: {_listed(list(cls.config_keys))}"
                )


def check_presets(cls: type[Repro[Any]]) -> None:
    """``check_comparisons`` at the default params and at the ``--smoke`` preset."""
    repro = cls()
    for smoke in (False, True):
        check_comparisons(repro, build_params(cls.id, cls.Params, {}, smoke=smoke))


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
    fields = {f.name: f for f in dataclasses.fields(params_cls)}
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
