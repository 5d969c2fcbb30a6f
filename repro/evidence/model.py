"""The artifact as the evidence layer reads it: validated once, then frozen, typed dataclasses.

``load`` reads and validates a file (``repro.evidence.artifact.load``) and returns an ``Artifact``
(a repro run) or a ``Cliff`` (a ``repro cliff`` search); ``of`` builds the same from a document
already in memory. Reports, plots, scope, the re-run band and matrix collect read fields of these,
never string keys of the JSON.

The variants reuse the result types the harness writes (``repro.core.results``: ``VariantResult``,
``Timing``, ``Stats``, ``Kernel``, ``Work``, ``Achieved``, ``Plot``); every artifact version that
still validates fills them, since the fields later versions added have defaults. The verdict's
fields are described once, by ``results.VerdictOf``: the written ``results.Verdict`` carries its
breakdown rows, claim and not-run entries as the mappings ``repro.core.verdict`` builds (a row's
qualifiers beside its fixed keys), and ``Verdict`` here reads them as ``results.Row`` (qualifiers
split out), ``results.Claim`` and ``results.NotRun``.
The repro, run, validity and error blocks have no write-side class (``artifact.assemble`` takes
mappings) and get one here; their fields that older versions lack are optional, and
``ReproInfo.recorded`` says which of the declared-by-the-repro fields (1.2 and later) an artifact
carries, since a reader must tell "recorded as null" from "not recorded".

The fingerprint has its own schema (fingerprint.schema.json) and its own reader
(``repro.env.fingerprint.essentials``); it stays the mapping the schema describes, for what reads
it whole (compare's field diff, the grouping of machines), and what the evidence layer reads of it
field by field is typed in ``repro.evidence.model_machine`` (``Artifact.machine``, ``Cliff.machine``). So do the
free-form objects the schema leaves open: params, config, extra, gpu_monitor, a row's qualifiers.
A cliff search's own blocks (sweep, search, points, steps) are typed in ``repro.evidence.model_cliff``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.core.results import ROW_KEYS, Claim, NotRun, Plot, Row, VariantResult, VerdictOf, from_jsonable
from repro.evidence import artifact, model_cliff, model_machine
from repro.evidence.model_cliff import Point, Search, Step, Sweep
from repro.evidence.model_machine import Ceiling, Harness, Host, Library, MachineFacts, Nvml, Scheduler

__all__ = [
    "Artifact",
    "Ceiling",
    "Host",
    "Library",
    "Nvml",
    "Claim",
    "Cliff",
    "Point",
    "Search",
    "Step",
    "Sweep",
    "Doc",
    "ErrorInfo",
    "Harness",
    "MachineFacts",
    "NotRun",
    "ReproInfo",
    "Row",
    "Scheduler",
    "RunInfo",
    "Validity",
    "Verdict",
    "load",
    "artifacts",
    "cliff_of",
    "of",
    "of_run",
    "run_of",
]

# Fields a repro declares that artifacts carry since schema 1.2 (``untested`` since 1.5); before, the catalog
# supplies them.
DECLARABLE = ("impact", "seed_gpus", "plots", "script", "untested")


@dataclass(frozen=True)
class ReproInfo:
    """Which repro ran, with which params, and what it declares about itself."""

    id: str
    title: str
    upstream: tuple[str, ...]
    seed_claim: str
    params: Mapping[str, Any]
    source_sha256: str | None
    impact: str | None = None
    seed_gpus: tuple[str, ...] | None = None
    seed_source: str | None = None
    seed_experiment: str | None = None
    plots: tuple[Plot, ...] | None = None
    script: str | None = None
    claim_arch: tuple[str, ...] = ()  # compute capabilities the seed's claim is specific to (1.4)
    untested: tuple[str, ...] | None = None  # conditions the seed or the repro says matter, not covered here (1.5)
    recorded: frozenset[str] = frozenset()  # which of DECLARABLE the artifact carries (null included)


@dataclass(frozen=True)
class RunInfo:
    """When, how and where the run happened."""

    run_id: str
    created_utc: str
    command: tuple[str, ...]
    smoke: bool
    device: str | None
    duration_s: float
    harness_version: str
    rerun: str | None = None
    cpu_threads: int | None = None
    phases_s: Mapping[str, float] | None = None  # seconds per phase, in run order (1.2)
    measure_s: Mapping[str, float] | None = None  # the measure phase's split: warm-up, sampling, profiling (1.4)
    quick: bool = False  # a quick run (repro all --quick): headline comparisons only (1.4)
    gpu_busy_s: float | None = None  # the device's seconds on the timed work (1.9; artifact.gpu_busy)
    gpu_busy_share: float | None = None  # gpu_busy_s over duration_s (1.9)


@dataclass(frozen=True)
class Validity:
    flag: str
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class ErrorInfo:
    """Why a run failed: an exception, a crash, a timeout, running out of memory or disk, an interrupt."""

    kind: str
    message: str
    exit_code: int | None = None
    signal: str | None = None
    stderr_tail: str | None = None
    traceback: str | None = None


class Verdict(VerdictOf[Row, Claim, NotRun]):
    """The verdict as read: ``repro.core.results.VerdictOf``'s fields, its rows, claim and not-run
    entries typed. ``ci_level``, ``threshold`` and ``status`` are as recorded: the schema requires
    them, so only a document that skipped validation can lack them (None, or an empty status)."""


@dataclass(frozen=True)
class Artifact:
    """One repro run, as ``repro run`` wrote it."""

    schema_version: str
    kind: str
    repro: ReproInfo
    run: RunInfo
    variants: tuple[VariantResult, ...]
    verdict: Verdict
    validity: Validity
    fingerprint: Mapping[str, Any]
    extra: Mapping[str, Any]
    warnings: tuple[str, ...]
    error: ErrorInfo | None
    machine: MachineFacts = MachineFacts()  # read from ``fingerprint`` at load
    # The validated document itself, for what passes parts of it through unchanged (matrix collect's
    # JSON carries each cell's verdict as written) and for artifact.py's readers of a whole document
    # that `repro all` shares with the report (``artifact.format_busy``).
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def smoke(self) -> bool:
        """A smoke run (shrunken sizes, often on CPU): it proves the pipeline, never a cliff."""
        return self.run.smoke is True

    def variant(self, name: str) -> VariantResult | None:
        return next((v for v in self.variants if v.name == name), None)

    def timed_arms(self) -> frozenset[str]:
        """The variants the harness timed in rounds (a quick run's skipped arms are not among them)."""
        return frozenset(v.name for v in self.variants if v.timing is not None and v.timing.rounds)


def same_gpu(a: Artifact, b: Artifact) -> bool:
    """Whether two runs ran on one GPU: both fingerprints name the same uuid (neither unrecorded)."""
    return bool(a.machine.gpu_uuid) and a.machine.gpu_uuid == b.machine.gpu_uuid


@dataclass(frozen=True)
class Cliff:
    """A ``repro cliff`` search: where in a param's range a repro's time per call steps
    (``repro.evidence.cliff_report`` renders it)."""

    schema_version: str
    kind: str
    repro: ReproInfo
    run: RunInfo
    sweep: Sweep
    status: str  # step, no_step, skipped or error
    finding: str
    search: Search
    points: tuple[Point, ...]
    steps: tuple[Step, ...]
    validity: Validity
    fingerprint: Mapping[str, Any]
    warnings: tuple[str, ...]
    error: ErrorInfo | None
    machine: MachineFacts = MachineFacts()  # read from ``fingerprint`` at load
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)  # the document as read

    @property
    def key(self) -> str:
        """What identifies a sweep across machines: repro id and param (``solve-512-cliff.cliff-n``)."""
        return f"{self.repro.id}.cliff-{self.sweep.param}"


Doc = Artifact | Cliff


# --------------------------------------------------------------------------- building


_num, _str, _map = model_machine.number, model_machine.string, model_machine.mapping


def _list(value: Any) -> Sequence[Any]:
    return value if isinstance(value, list | tuple) else ()


def _as_recorded(value: Any) -> Any:
    """A value whose type the schema guarantees, passed through unchecked (see ``Verdict``)."""
    return value


def _strs(value: Any) -> tuple[str, ...]:
    return tuple(str(x) for x in _list(value))


def _row(raw: Mapping[str, Any]) -> Row:
    n, paired, level = raw.get("n"), raw.get("paired"), raw.get("ci_level")
    return Row(
        comparison=_str(raw.get("comparison")),
        label=_str(raw.get("label")),
        num=_str(raw.get("num")),
        den=_str(raw.get("den")),
        ratio=_num(raw.get("ratio")),
        ci_low=_num(raw.get("ci_low")),
        ci_high=_num(raw.get("ci_high")),
        threshold=raw.get("threshold"),
        ci_level=_num(level),
        status=_str(raw.get("status")),
        where=_str(raw.get("where")),
        paired=paired if isinstance(paired, bool) else None,
        n=n if isinstance(n, int) and not isinstance(n, bool) else None,
        scale=_num(raw.get("scale")),
        basis=_str(raw.get("basis")),
        headline=bool(raw.get("headline")),
        qualifiers={k: v for k, v in raw.items() if k not in ROW_KEYS},
    )


def _verdict(raw: Mapping[str, Any]) -> Verdict:
    claim = raw.get("claim")
    return Verdict(
        metric=str(raw.get("metric") or ""),
        description=str(raw.get("description") or ""),
        value=_num(raw.get("value")),
        ci_low=_num(raw.get("ci_low")),
        ci_high=_num(raw.get("ci_high")),
        ci_level=_as_recorded(_num(raw.get("ci_level"))),
        threshold=_as_recorded(_num(raw.get("threshold"))),
        status=_as_recorded(str(raw.get("status") or "")),
        finding=str(raw.get("finding") or ""),
        breakdown=tuple(_row(r) for r in _list(raw.get("breakdown")) if isinstance(r, Mapping)),
        variants=_strs(raw.get("variants")),
        details=_strs(raw.get("details")),
        headline=_str(raw.get("headline")),
        paired=raw.get("paired") if isinstance(raw.get("paired"), bool) else None,
        claim=Claim(bool(claim.get("tested")), _str(claim.get("reason"))) if isinstance(claim, Mapping) else None,
        not_run=tuple(
            NotRun(str(x.get("comparison")), str(x.get("label")), str(x.get("reason")))
            for x in _list(raw.get("not_run"))
            if isinstance(x, Mapping)
        ),
        threshold_why=_str(raw.get("threshold_why")),
    )


def _repro(raw: Mapping[str, Any]) -> ReproInfo:
    plots = raw.get("plots")
    gpus, untested = raw.get("seed_gpus"), raw.get("untested")
    return ReproInfo(
        id=str(raw.get("id")),
        title=str(raw.get("title") or ""),
        upstream=_strs(raw.get("upstream")),
        seed_claim=str(raw.get("seed_claim") or ""),
        params=_map(raw.get("params")),
        source_sha256=_str(raw.get("source_sha256")),
        impact=_str(raw.get("impact")),
        seed_gpus=_strs(gpus) if isinstance(gpus, list | tuple) else None,
        seed_source=_str(raw.get("seed_source")),
        seed_experiment=raw.get("seed_experiment") if isinstance(raw.get("seed_experiment"), str) else None,
        plots=tuple(from_jsonable(Plot, p) for p in plots if isinstance(p, Mapping))
        if isinstance(plots, list | tuple)
        else None,
        script=_str(raw.get("script")),
        claim_arch=_strs(raw.get("claim_arch")),
        untested=_strs(untested) if isinstance(untested, list | tuple) else None,
        recorded=frozenset(k for k in DECLARABLE if k in raw),
    )


def _seconds(value: Any) -> Mapping[str, float] | None:
    return {str(k): float(v) for k, v in value.items() if _num(v) is not None} if isinstance(value, Mapping) else None


def of_run(raw: Any) -> RunInfo:
    """A document's ``run`` block (artifacts and cliff searches share it)."""
    raw = _map(raw)
    phases, split = raw.get("phases_s"), raw.get("measure_s")
    threads = raw.get("cpu_threads")
    return RunInfo(
        run_id=str(raw.get("run_id")),
        created_utc=str(raw.get("created_utc") or ""),
        command=_strs(raw.get("command")),
        smoke=raw.get("smoke") is True,
        device=_str(raw.get("device")),
        duration_s=float(_num(raw.get("duration_s")) or 0.0),
        harness_version=str(raw.get("harness_version") or ""),
        rerun=_str(raw.get("rerun")),
        cpu_threads=threads if isinstance(threads, int) and not isinstance(threads, bool) else None,
        phases_s=_seconds(phases),
        measure_s=_seconds(split),
        quick=raw.get("quick") is True,
        gpu_busy_s=_num(raw.get("gpu_busy_s")),
        gpu_busy_share=_num(raw.get("gpu_busy_share")),
    )


def _variant(raw: Mapping[str, Any]) -> VariantResult:
    v: VariantResult = from_jsonable(VariantResult, raw)
    return v


def _error(raw: Any) -> ErrorInfo | None:
    if not isinstance(raw, Mapping):
        return None
    code = raw.get("exit_code")
    return ErrorInfo(
        kind=str(raw.get("kind")),
        message=str(raw.get("message")),
        exit_code=code if isinstance(code, int) and not isinstance(code, bool) else None,
        signal=_str(raw.get("signal")),
        stderr_tail=_str(raw.get("stderr_tail")),
        traceback=_str(raw.get("traceback")),
    )


def of(doc: Doc | Mapping[str, Any]) -> Doc:
    """The typed form of a document already read (and validated: ``load`` does both)."""
    if isinstance(doc, Artifact | Cliff):
        return doc
    validity = _map(doc.get("validity"))
    if artifact.is_cliff(doc):
        return Cliff(
            schema_version=str(doc.get("schema_version")),
            kind=artifact.CLIFF_KIND,
            repro=_repro(_map(doc.get("repro"))),
            run=of_run(doc.get("run")),
            sweep=model_cliff.sweep(doc.get("sweep")),
            status=str(doc.get("status") or ""),
            finding=str(doc.get("finding") or ""),
            search=model_cliff.search(doc.get("search")),
            points=model_cliff.points(doc.get("points")),
            steps=model_cliff.steps(doc.get("steps")),
            validity=Validity(str(validity.get("flag") or ""), _strs(validity.get("reasons"))),
            fingerprint=_map(doc.get("fingerprint")),
            warnings=_strs(doc.get("warnings")),
            error=_error(doc.get("error")),
            machine=model_machine.facts(_map(doc.get("fingerprint"))),
            raw=doc,
        )
    return Artifact(
        schema_version=str(doc.get("schema_version")),
        kind=str(doc.get("kind") or artifact.ARTIFACT_KIND),
        repro=_repro(_map(doc.get("repro"))),
        run=of_run(doc.get("run")),
        variants=tuple(_variant(v) for v in _list(doc.get("variants")) if isinstance(v, Mapping)),
        verdict=_verdict(_map(doc.get("verdict"))),
        validity=Validity(str(validity.get("flag") or ""), _strs(validity.get("reasons"))),
        fingerprint=_map(doc.get("fingerprint")),
        extra=_map(doc.get("extra")),
        warnings=_strs(doc.get("warnings")),
        error=_error(doc.get("error")),
        machine=model_machine.facts(_map(doc.get("fingerprint"))),
        raw=doc,
    )


def cliff_of(doc: Doc | Mapping[str, Any]) -> Cliff:
    """The typed form of a cliff search's document; a repro run is a ValueError."""
    c = of(doc)
    if not isinstance(c, Cliff):
        raise ValueError(f"run {c.run.run_id}: a repro run, not a cliff search")
    return c


def run_of(doc: Doc | Mapping[str, Any]) -> Artifact:
    """The typed form of a repro run's document; a cliff search is a ValueError (it has no verdict)."""
    a = of(doc)
    if not isinstance(a, Artifact):
        raise ValueError(f"run {a.run.run_id}: a cliff search, not a repro run")
    return a


def artifacts(docs: Sequence[Doc | Mapping[str, Any]]) -> list[Artifact]:
    """The repro runs among ``docs`` (cliff searches left out), typed."""
    return [d for d in map(of, docs) if isinstance(d, Artifact)]


def load(path: Path) -> Doc:
    """Read, validate and type one artifact file; any problem is a UsageError naming the file."""
    return of(artifact.load(path))
