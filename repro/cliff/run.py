"""Run ``repro cliff``: check the request, time a repro's sweep in paired rounds, write the artifact."""

from __future__ import annotations

import dataclasses
import math
import re
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro import __version__
from repro.cliff.search import (
    DEFAULT_BUDGET_S,
    DEFAULT_GRID,
    DEFAULT_MAX_POINTS,
    DEFAULT_THRESHOLD,
    Point,
    Search,
    SearchConfig,
    find_steps,
)
from repro.core import redact
from repro.core.context import SamplingConfig
from repro.core.errors import ReproError, UsageError
from repro.core.spec import Comparison, Repro, Sweep, VariantResult, build_params
from repro.env import fingerprint
from repro.evidence import artifact
from repro.run import catalog
from repro.run.progress import Progress, no_progress

CLIFF_KIND = artifact.CLIFF_KIND
CLIFF_SCHEMA_VERSION = "1.0"
METRICS = ("per-unit-of-work", "time")
# Every arm of a group is built at once (each holds its inputs on the GPU), and the grid is one
# group: thousands of values would not fit. 128 is far past what a search needs (9 + ~4 per step).
MAX_GRID = 128
MAX_POINTS_CAP = 128
_INT = re.compile(r"\s*-?[0-9]+\s*")  # ASCII digits only: int() also takes "3_0" and other scripts' digits

# Each group keeps the measurement rules of paired rounds (at least 20 rounds in 6 episodes
# with idle gaps, so the CI covers the GPU's power states); only the per-arm budget is short,
# since a sweep times many values and a step worth finding is far above a 1% CI.
SWEEP_SAMPLING = SamplingConfig(budget_s=0.3, warmup_s=0.1, profile_iters=1)
# --smoke: the pipeline, not the numbers (CPU, microsecond calls).
SMOKE_SAMPLING = SamplingConfig(
    budget_s=0.02, warmup_s=0.01, min_rounds=6, episode_s=0.005, episode_gap_s=0.0, profile_iters=1
)


@dataclass(frozen=True)
class CliffRequest:
    """Everything that decides one ``repro cliff`` run, checked before anything is written."""

    repro_id: str
    param: str
    range_text: str
    overrides: Mapping[str, str] = field(default_factory=dict)
    smoke: bool = False
    repro_paths: Sequence[Path] = ()
    metric: str = "per-unit-of-work"
    threshold: float = DEFAULT_THRESHOLD
    budget_s: float = DEFAULT_BUDGET_S
    max_points: int = DEFAULT_MAX_POINTS
    grid: int = DEFAULT_GRID
    command: Sequence[str] = ()
    collect_env: bool = True


@dataclass(frozen=True)
class Resolved:
    cls: type[Repro[Any]]
    params: Any
    sweep: Sweep
    lo: int
    hi: int


def parse_range(text: str) -> tuple[int, int]:
    """``LO:HI`` (inclusive) to two integers; anything else is a UsageError."""
    lo_s, sep, hi_s = text.partition(":")
    try:
        if not sep or not _INT.fullmatch(lo_s) or not _INT.fullmatch(hi_s):
            raise ValueError
        lo, hi = int(lo_s.strip()), int(hi_s.strip())
    except ValueError:
        raise UsageError(f"--range {text!r}: expected LO:HI, two integers (e.g. 480:560)") from None
    if not lo < hi:
        raise UsageError(f"--range {text}: expected LO < HI (an empty or reversed range has nothing to search)")
    return lo, hi


def resolve(req: CliffRequest) -> Resolved:
    """The repro, its params, the sweep and the range; every bad input surfaces here as a UsageError."""
    cls = catalog.get(req.repro_id, req.repro_paths)
    sweeps = {s.name: s for s in cls.sweeps}
    if not sweeps:
        raise UsageError(f"--param {req.param}: {cls.id} declares no sweepable params; expected a repro that does")
    if req.param not in sweeps:
        raise UsageError(f"--param {req.param!r} for {cls.id}: not sweepable; expected one of {', '.join(sweeps)}")
    sweep = sweeps[req.param]
    # A --set of what the sweep stands in for would be recorded in repro.params but never used.
    fields = {f.name for f in dataclasses.fields(cls.Params)}
    replaced = [n for n in (sweep.name, *sweep.replaces) if n in fields]
    for name in replaced:
        if name in req.overrides:
            raise UsageError(
                f"--set {name}={req.overrides[name]} for {cls.id}: the sweep of {sweep.name} sets it; "
                f"expected no --set of {', '.join(replaced)} with --param {sweep.name}"
            )
    overrides = dict(req.overrides)
    if sweep.derive is not None:
        try:
            derived = sweep.derive(overrides)
        except ValueError:  # a malformed --set value: build_params names it
            derived = {}
        overrides.update({k: v for k, v in derived.items() if k in replaced})
    params = build_params(cls.id, cls.Params, overrides, smoke=req.smoke)
    lo, hi = parse_range(req.range_text)
    if lo < sweep.min or hi > sweep.max:
        raise UsageError(
            f"--range {lo}:{hi} for {cls.id} {sweep.name}: expected values within {sweep.min}..{sweep.max}"
        )
    for name in sweep.single:
        value = getattr(params, name)
        if len(value) != 1:
            shown = ",".join(map(str, value))
            raise UsageError(
                f"--set {name}={shown} for {cls.id}: expected exactly one value when sweeping {sweep.name}"
            )
    if req.metric not in METRICS:
        raise UsageError(f"--metric {req.metric!r}: expected one of {', '.join(METRICS)}")
    if not 0 < req.threshold < 10:
        raise UsageError(f"--threshold {req.threshold:g}: expected a fraction > 0 and < 10 (0.1 = a 10% step)")
    if not (math.isfinite(req.budget_s) and req.budget_s > 0):
        raise UsageError(f"--budget {req.budget_s:g}: expected a finite number of seconds > 0")
    if not 3 <= req.max_points <= MAX_POINTS_CAP:
        raise UsageError(
            f"--max-points {req.max_points}: expected 3..{MAX_POINTS_CAP} (a grid of at least 2 and one refinement)"
        )
    if not 2 <= req.grid <= MAX_GRID:
        raise UsageError(f"--grid {req.grid}: expected 2..{MAX_GRID} points")
    return Resolved(cls, params, sweep, lo, hi)


def rerun_command(req: CliffRequest) -> str:
    """The command that reruns this search, shell-quoted (the range as parsed, not as typed)."""
    lo, hi = parse_range(req.range_text)
    parts = ["repro", "cliff", req.repro_id, "--param", req.param, "--range", f"{lo}:{hi}"]
    for k, v in req.overrides.items():
        parts += ["--set", f"{k}={v}"]
    if req.metric != "per-unit-of-work":
        parts += ["--metric", req.metric]
    for flag, value, default in (
        ("--threshold", req.threshold, DEFAULT_THRESHOLD),
        ("--grid", req.grid, DEFAULT_GRID),
        ("--max-points", req.max_points, DEFAULT_MAX_POINTS),
        ("--budget", req.budget_s, DEFAULT_BUDGET_S),
    ):
        if value != default:
            parts += [flag, f"{value:g}"]
    if req.smoke:
        parts.append("--smoke")
    return shlex.join(parts)


def search_config(req: CliffRequest, r: Resolved) -> SearchConfig:
    work: Callable[[int], float] | None = None
    if req.metric == "per-unit-of-work":

        def work(value: int) -> float:
            return float(r.sweep.work(r.params, value))

    return SearchConfig(
        lo=r.lo,
        hi=r.hi,
        threshold=req.threshold,
        grid=req.grid,
        max_points=req.max_points,
        budget_s=req.budget_s,
        work=work,
    )


def context_measure(
    repro: Repro[Any], r: Resolved, ctx: Any, cfg: SearchConfig, sampling: SamplingConfig, seen: list[VariantResult]
) -> Callable[[Sequence[int]], dict[int, Point]]:
    """A ``Measure`` that times the repro's sweep arms of one group in paired rounds and profiles them."""

    def measure(values: Sequence[int]) -> dict[int, Point]:
        name = r.sweep.name
        arms = [
            dataclasses.replace(a, name=f"{name}={v}", config={**a.config, name: v}, label=a.label or f"{name}={v}")
            for v in values
            for a in [repro.sweep_arm(r.params, name, v, ctx)]
        ]
        # Neighbours as declared comparisons: the paired stop rule then ends the group once
        # each neighbouring ratio is decided against a step or precise enough.
        ctx.comparisons = tuple(
            Comparison(f"{a}->{b}", f"{name}={b}", f"{name}={a}", 1 + cfg.threshold, scale=cfg.scale(b) / cfg.scale(a))
            for a, b in zip(values, values[1:], strict=False)
        )
        results = ctx.measure_paired(arms, group=f"{name} {','.join(map(str, values))}", sampling=sampling)
        seen.extend(results)
        out: dict[int, Point] = {}
        for v, res in zip(values, results, strict=True):
            t = res.timing
            if t is None or not t.rounds:
                raise RuntimeError(f"{name}={v}: no paired rounds were recorded")
            names = tuple(k.name for k in res.kernels)
            # On CPU the names are aten ops, not kernels: nothing for the repro to read.
            tag = r.sweep.tag(names) if r.sweep.tag is not None and ctx.cuda else ""
            out[v] = Point(v, tuple(t.rounds), t.episode_rounds, names, tag)
        return out

    return measure


def run(
    req: CliffRequest,
    run_dir: Path,
    log: Callable[[str], None] = lambda m: None,
    progress: Progress = no_progress,
) -> tuple[dict[str, Any], Path]:
    """Search the sweep and write ``run_dir/<id>.cliff-<param>.json``; returns (doc, path).

    A repro that cannot run here gives a ``skipped`` artifact; one that fails mid-search an
    ``error`` artifact with the points and steps found before the failure.
    """
    from repro.run.context import RunContext
    from repro.run.execute import _cpu_threads, _knobs_kept, _nvml_or_none, _torch_state, validity

    r = resolve(req)
    t0 = time.monotonic()
    cfg = search_config(req, r)
    has_torch, has_cuda, why_not = _torch_state()
    device: str | None = "cuda" if has_cuda else None
    if device is None and has_torch and (not r.cls.requires.cuda or (req.smoke and r.cls.requires.cpu_smoke)):
        device = "cpu"
    search: Search | None = None
    error: dict[str, Any] | None = None
    variants: list[VariantResult] = []
    reason = ""
    if device is None:
        reason = str(why_not) if not has_torch else f"{why_not}; this repro needs a CUDA GPU"
    else:
        repro = r.cls()
        sampling = SMOKE_SAMPLING if device == "cpu" or req.smoke else SWEEP_SAMPLING
        ctx = RunContext(
            device=device, smoke=req.smoke, sampling=sampling, nvml=_nvml_or_none() if device == "cuda" else None
        )
        ctx.log, ctx.progress = log, progress
        measure = context_measure(repro, r, ctx, cfg, sampling, variants)
        log(f"{r.cls.id}: searching {r.sweep.name} over {r.lo}..{r.hi} on {device}")
        with _cpu_threads(device), _knobs_kept():
            search = find_steps(measure, cfg, log=log)
        if search.stop_reason == "error":
            error = {"kind": "exception", "message": search.notes[-1]}
    env = fingerprint.collect_env_in_process() if has_torch and req.collect_env else None
    fp = fingerprint.collect(collect_env=env)
    doc = document(
        req,
        r,
        run_dir,
        search=search,
        device=device,
        seconds=time.monotonic() - t0,
        validity=validity(variants, fp.get("gpu")),
        fp=fp,
        reason=reason,
        error=error,
        warnings=[f"{v.name}: {w}" for v in variants for w in v.warnings],
    )
    path = write(doc, run_dir / f"{r.cls.id}.cliff-{r.sweep.name}.json")
    return doc, path


def status_and_finding(search: Search | None, smoke: bool, reason: str) -> tuple[str, str]:
    """(status, one sentence) for the artifact; ``smoke``: the run proves the pipeline only."""
    if search is None:
        return "skipped", f"not run: {reason}"
    cfg = search.config
    resolved = [s for s in search.steps if s.resolved]
    if search.steps:
        parts = []
        for s in search.steps:
            where = f"{s.lo} -> {s.hi}" if s.resolved else f"somewhere in {s.lo}..{s.hi}"
            parts.append(f"{where} x{s.ratio:.2f} (95% CI {s.ci_low:.2f}-{s.ci_high:.2f})")
        sentence = f"{len(search.steps)} step(s) over {cfg.threshold:.0%} ({len(resolved)} down to adjacent values): "
        sentence += "; ".join(parts)
    else:
        sentence = (
            f"no step over {cfg.threshold:.0%} between neighbouring grid points {search.resolution} apart over "
            f"{cfg.lo}..{cfg.hi} (a change and its reversal within {search.resolution} could hide between them)"
        )
    sentence += f"; {search.points_measured} of {search.dense_points} values timed"
    if search.stop_reason not in ("done",):
        sentence += f" (stopped: {search.stop_reason.replace('_', ' ')})"
    if search.stop_reason == "error":
        return "error", sentence
    if smoke:
        return "smoke", "smoke run (proves the pipeline, not the boundary): " + sentence
    return ("step" if search.steps else "no_step"), sentence


def document(
    req: CliffRequest,
    r: Resolved,
    run_dir: Path,
    *,
    search: Search | None,
    device: str | None,
    seconds: float,
    validity: Mapping[str, Any],
    fp: Mapping[str, Any],
    reason: str = "",
    error: Mapping[str, Any] | None = None,
    warnings: Sequence[str] = (),
) -> dict[str, Any]:
    """The cliff artifact, redacted."""
    from repro.run.execute import repro_section

    # A smoke or CPU run proves the pipeline, never the boundary (as with `repro run`).
    status, finding = status_and_finding(search, req.smoke or device != "cuda", reason)
    doc: dict[str, Any] = artifact.to_jsonable(
        {
            "schema_version": CLIFF_SCHEMA_VERSION,
            "kind": CLIFF_KIND,
            "repro": repro_section(r.cls, r.params),
            "run": {
                "harness_version": __version__,
                "run_id": run_dir.name,
                "created_utc": artifact.utc_now(),
                "command": list(req.command) or shlex.split(rerun_command(req)),
                "rerun": rerun_command(req),
                "smoke": req.smoke,
                "device": device,
                "duration_s": seconds,
            },
            "sweep": {
                "param": r.sweep.name,
                "help": r.sweep.help,
                "range": [r.lo, r.hi],
                "limits": [r.sweep.min, r.sweep.max],
                "default": r.sweep.default,
                "metric": req.metric,
                "work_reference": r.lo,
                "threshold": req.threshold,
                # The grid used (one short of --max-points at most), not the one asked for.
                "grid_points": len(search.grid) if search else min(req.grid, req.max_points - 1),
                "max_points": req.max_points,
                "budget_s": req.budget_s,
            },
            "status": status,
            "finding": finding,
            "search": {
                "grid": list(search.grid) if search else [],
                "stop_reason": search.stop_reason if search else "not_run",
                "points_measured": search.points_measured if search else 0,
                "measurements": search.measurements if search else 0,
                "dense_points": r.hi - r.lo + 1,
                "groups": search.groups if search else 0,
                "resolution": search.resolution if search else None,
                "elapsed_s": search.elapsed_s if search else 0.0,
                "notes": list(search.notes) if search else [],
            },
            "points": [dataclasses.asdict(p) for p in search.points] if search else [],
            "steps": [dataclasses.asdict(s) for s in (search.steps if search else ())],
            "validity": dict(validity),
            "fingerprint": dict(fp),
            "warnings": list(dict.fromkeys(warnings)),
            "error": dict(error) if error else None,
        }
    )
    return dict(redact.redactor()(doc))


def write(doc: Mapping[str, Any], path: Path) -> Path:
    """Validate against the cliff schema, then write atomically (never overwriting)."""
    import json

    errors = artifact.validation_errors(doc, artifact.schema_name(doc))
    if errors:
        # A search can take minutes: keep what it measured, under a name that no folder walk
        # reads as an artifact, and say where, rather than lose it to a traceback.
        kept = artifact.write_new(
            path.with_name(f"{path.name}.invalid"), (json.dumps(doc, indent=2, default=str) + "\n").encode()
        )
        first = errors[0].splitlines()[0][:300]
        raise ReproError(f"cliff artifact for {path.name} fails its schema: {first}; its data is kept in {kept}")
    return artifact.write_new(path, (json.dumps(doc, indent=2, allow_nan=False) + "\n").encode())
