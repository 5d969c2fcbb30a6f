"""Run one repro in this process: params, device, measurement, verdict, validity, artifact."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.core import redact, stats
from repro.core.claim import not_tested_here
from repro.core.context import SamplingConfig
from repro.core.order import order_warnings
from repro.core.results import HeadlineRule, achieved
from repro.core.spec import (
    Comparison,
    Repro,
    RunResult,
    VariantResult,
    Verdict,
    build_params,
    check_comparisons,
    params_to_dict,
)
from repro.core.validity import CLOCK_FLOOR, HARD_THROTTLE, POWER_CAP_FLOOR
from repro.core.verdict import CI_LEVEL, as_quick, as_smoke, headline_candidates, unavailable
from repro.env import fingerprint
from repro.evidence import artifact
from repro.evidence.clocks import clock_words
from repro.run import catalog
from repro.run.context import RunContext
from repro.run.progress import Progress, no_progress

# CPU timing (smoke runs) uses this many threads, whatever the machine has: a thread pool
# sized by the machine, and shared with anything else running, made CPU ratios swing by
# orders of magnitude between runs.
CPU_THREADS = 1


@dataclass(frozen=True)
class RunRequest:
    """Everything that decides one repro's run, checked before anything is written."""

    repro_id: str
    overrides: Mapping[str, str] = field(default_factory=dict)
    smoke: bool = False
    repro_paths: Sequence[Path] = ()
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    command: Sequence[str] = ()
    traces: bool = True
    collect_env: bool = True  # run torch.utils.collect_env after the repro (takes seconds)
    # Headline comparisons only, the arms no headline uses not timed; a straddling CI is
    # ``undecided`` (see repro.core.verdict.as_quick). The CI target comes with ``sampling``.
    quick: bool = False


def resolve(req: RunRequest) -> tuple[type[Repro[Any]], Any]:
    """The repro class and its params; every bad input surfaces here as a UsageError."""
    cls = catalog.get(req.repro_id, req.repro_paths)
    params = build_params(cls.id, cls.Params, req.overrides, smoke=req.smoke)
    check_comparisons(cls(), params)  # --set may change which variants are compared
    return cls, params


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a dotted name whose parent package is missing
        return False


def _torch_state() -> tuple[bool, bool, str | None]:
    """(torch importable, CUDA usable, reason when not)."""
    try:
        import torch
    except ModuleNotFoundError:
        return False, False, "torch is not installed in this environment"
    except Exception as exc:  # a broken install is a reason to skip, not to crash
        return False, False, f"torch failed to import ({type(exc).__name__}: {exc})"
    if not torch.cuda.is_available():
        return True, False, "no CUDA device is visible to torch"
    return True, True, None


@contextlib.contextmanager
def _timed(phases: dict[str, float], key: str) -> Iterator[None]:
    """Add the wall time of the block to ``phases[key]`` (also when it raises)."""
    t = time.perf_counter()
    try:
        yield
    finally:
        phases[key] = phases.get(key, 0.0) + time.perf_counter() - t


def _cuda_context() -> tuple[bool, str | None]:
    """Create the CUDA context now, so its cost is counted apart from the measurement."""
    import torch

    try:
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
    except Exception as exc:  # a broken driver is a reason to skip, not to crash
        return False, f"CUDA did not initialise ({type(exc).__name__}: {exc})".splitlines()[0]
    return True, None


def validity(variants: Sequence[VariantResult], gpu: Mapping[str, Any] | None) -> dict[str, Any]:
    """valid / suspect with reasons, from what NVML saw while each variant ran."""
    monitored = [v for v in variants if v.gpu_monitor]
    if not monitored:
        return {"flag": "not_applicable", "reasons": ["no GPU measurement was monitored (CPU, skipped or error)"]}
    max_clock = ((gpu or {}).get("nvml") or {}).get("sm_clock_max_mhz")
    reasons: list[str] = []
    for v in monitored:
        mon = v.gpu_monitor or {}
        seen = set(mon.get("throttled") or ())
        clock = mon.get("sm_clock_during_mhz")
        hard = sorted(seen & set(HARD_THROTTLE))
        if hard:
            reasons.append(f"{v.name}: clocks-event reasons {', '.join(hard)} while measuring")
        if "sw_power_cap" in seen and max_clock and clock and clock < POWER_CAP_FLOOR * max_clock:
            reasons.append(f"{v.name}: power cap, {clock_words(mon, max_clock)}")
        if mon.get("other_pids"):
            reasons.append(f"{v.name}: other processes on the GPU (pids {', '.join(map(str, mon['other_pids']))})")
        if max_clock and clock and clock < CLOCK_FLOOR * max_clock:
            reasons.append(
                f"{v.name}: {clock_words(mon, max_clock)}: the median is under {CLOCK_FLOOR:.0%} of the maximum"
            )
        if mon.get("ecc_new_errors"):
            reasons.append(f"{v.name}: {mon['ecc_new_errors']} new uncorrected ECC errors")
    return {"flag": "suspect" if reasons else "valid", "reasons": reasons}


def repro_section(cls: type[Repro[Any]], params: Any) -> dict[str, Any]:
    return {
        "id": cls.id,
        "title": cls.title,
        "upstream": list(cls.upstream),
        "seed_claim": cls.seed_claim,
        "params": params_to_dict(params),
        "source_sha256": artifact.source_sha256(catalog.source_file(cls.id)),
        **story(cls, params),
    }


def story(cls: type[Repro[Any]], params: Any) -> dict[str, Any]:
    """What a repro declares for the report: impact, seed GPUs, the seed's source and experiment, the conditions
    it could not cover, plots, script."""
    try:
        script = cls().script(params)
    except Exception:  # a broken script generator costs the script, never the run
        script = None
    return {
        "impact": cls.impact or None,
        "seed_gpus": list(cls.seed_gpus),
        "seed_source": cls.seed_source or None,
        "seed_experiment": cls.seed_experiment or None,
        "claim_arch": list(cls.claim_arch),
        "untested": list(cls.untested),
        "plots": [dataclasses.asdict(s) for s in cls.plots],
        "script": script,
    }


def full_command(req: RunRequest) -> str:
    """The command of the same run with the full evidence (no --quick, the default CI target)."""
    parts = ["repro", "run", req.repro_id, *(f"--set {k}={v}" for k, v in req.overrides.items())]
    return " ".join(parts)


def rerun_command(req: RunRequest) -> str:
    parts = ["repro", "run", req.repro_id]
    parts += [f"--set {k}={v}" for k, v in req.overrides.items()]
    if req.smoke:
        parts.append("--smoke")
    if req.quick:
        parts.append("--quick")
    return " ".join(parts)


def execute(
    req: RunRequest,
    run_dir: Path,
    log: Callable[[str], None] = lambda m: None,
    progress: Progress = no_progress,
) -> tuple[dict[str, Any], Path]:
    """Run one repro and write its artifact to ``run_dir/<id>.json``; returns (doc, path).

    ``log`` hears one-line messages, ``progress`` each variant's measurement phases.

    Exceptions inside the repro become an ``error`` artifact; only bad input
    (UsageError, raised before any work) and write failures escape.
    """
    cls, params = resolve(req)
    t0 = time.monotonic()
    phases: dict[str, float] = {}
    with _timed(phases, "torch_import"):
        has_torch, has_cuda, why_not = _torch_state()
    if has_cuda:
        with _timed(phases, "cuda_init"):
            has_cuda, why_not = _cuda_context()
    knobs = fingerprint.knobs() if has_torch else {"error": why_not}
    device: str | None = "cuda" if has_cuda else None
    if device is None and has_torch and (not cls.requires.cuda or (req.smoke and cls.requires.cpu_smoke)):
        device = "cpu"
    missing = [m for m in cls.requires.python_modules if not _importable(m)]

    result: RunResult | None = None
    spent: dict[str, float] = {}
    verdict: Verdict
    error: dict[str, Any] | None = None
    ceilings: dict[str, Any] | None = None
    if device is None or missing:
        if missing:
            reason = f"needs Python module(s) {', '.join(missing)}, not importable here"
        elif not has_torch:
            reason = str(why_not)
        else:
            reason = f"{why_not}; this repro needs a CUDA GPU"
            if cls.requires.cpu_smoke:
                reason += " (--smoke exercises it on CPU)"
        verdict = unavailable(cls.metric, reason)
    else:
        repro = cls()
        ctx = _context(req, device, run_dir, log, progress, cls.headline_rule)
        try:
            ctx.comparisons = tuple(c for c in repro.comparisons(params) if c.headline or not req.quick)
            ctx.sampling = enough_episodes(ctx.sampling, ctx.comparisons, cls.headline_rule)
            legacy = not ctx.comparisons and type(repro).verdict is not Repro.verdict
            ctx.record_arms = legacy
            log(f"{cls.id}: running on {device}")
            with _cpu_threads(device), _knobs_kept():
                with _timed(phases, "measure"):
                    result = repro.run(params, ctx)
                    verdict = repro.verdict(params, result)
                if legacy:
                    with _timed(phases, "legacy_pairing"):
                        result, verdict = _pair_legacy(repro, params, result, verdict, ctx)
        except Exception as exc:  # the repro failed; the artifact says how, the batch goes on
            error = _error_of(exc)
            verdict = unavailable(cls.metric, error["message"], status="error")
        if ctx.cuda:
            # After the measurement, never before it: the ceilings' 8192^3 matmuls leave the
            # GPU hot and power-capped for seconds, which moved the first variants' times.
            log("this GPU's ceilings: measured once per run, after the first repro's measurement, then reused")
            with _timed(phases, "ceilings"):
                ceilings = _ceilings(run_dir)
            if result is not None:
                result = dataclasses.replace(
                    result, variants=tuple(_with_achieved(v, ceilings) for v in result.variants)
                )
        if req.smoke or device != "cuda":
            verdict = as_smoke(verdict, device)
        if req.quick:  # after as_smoke: a smoke verdict is never undecided, it decides nothing
            verdict = as_quick(verdict, full_command(req))
        spent = dict(ctx.spent)
    # After the measurement, never beside it (see fingerprint.collect_env_in_process).
    with _timed(phases, "collect_env"):
        env = fingerprint.collect_env_for_run(run_dir) if has_torch and req.collect_env else None
    with _timed(phases, "fingerprint"):
        fp = fingerprint.collect(
            knobs_at_start=knobs,
            collect_env=env,
            ceilings=ceilings,
        )
    if isinstance(fp.get("software"), dict):
        fp["software"]["packages_sha256"] = fingerprint.packages_digest(run_dir)
    if isinstance(fp.get("gpu"), dict):
        fp["gpu"]["state_at_run_start"] = fingerprint.run_start_state(run_dir, fp["gpu"].get("uuid"))
    cc = (fp.get("gpu") or {}).get("compute_capability")
    verdict = not_tested_here(verdict, cls.claim_arch, cc, (fp.get("gpu") or {}).get("name"), cls.stand_in)
    variants = result.variants if result else ()
    doc = document(
        req,
        cls,
        params,
        run_dir,
        seconds=time.monotonic() - t0,
        device=device,
        variants=variants,
        verdict=verdict,
        fp=fp,
        extra=result.extra if result else {},
        warnings=_warnings(variants, result),
        order=order_warnings(verdict.breakdown, variants),
        error=error,
        phases=phases,
        measure=spent,
    )
    path = artifact.write_artifact(doc, run_dir / f"{cls.id}.json")
    return doc, path


def document(
    req: RunRequest,
    cls: type[Repro[Any]],
    params: Any,
    run_dir: Path,
    *,
    seconds: float,
    device: str | None,
    variants: Sequence[VariantResult],
    verdict: Verdict,
    fp: Mapping[str, Any],
    extra: Mapping[str, Any] | None = None,
    warnings: Sequence[str] = (),
    error: Mapping[str, Any] | None = None,
    phases: Mapping[str, float] | None = None,
    measure: Mapping[str, float] | None = None,
    order: Sequence[str] = (),
) -> dict[str, Any]:
    """The artifact of one run of ``req``, redacted: the one place an artifact document is put together.

    ``phases``: seconds spent in each phase of the run (see ``execute``), in the order they ran;
    ``measure``: the measurement's own split (warm-up, sampling, profiling; ``RunContext.spent``);
    ``order``: a headline whose rounds split by the arms' order (``repro.core.order``): a warning, and the
    run is suspect. A side row's split is a warning only, and not on a smoke run (order noise is normal there).
    """
    judged = validity(variants, fp.get("gpu"))
    if order and judged["flag"] != "not_applicable":
        judged = {"flag": "suspect", "reasons": [*judged["reasons"], *order]}
    doc = artifact.assemble(
        repro=repro_section(cls, params),
        run={
            "run_id": run_dir.name,
            "created_utc": artifact.utc_now(),
            "command": list(req.command) or rerun_command(req).split(),
            "rerun": rerun_command(req),
            "smoke": req.smoke,
            "device": device,
            "duration_s": seconds,
            "cpu_threads": CPU_THREADS if device == "cpu" else None,
            **({"phases_s": dict(phases)} if phases else {}),
            **({"measure_s": dict(measure)} if measure else {}),
            **({"quick": True} if req.quick else {}),
        },
        variants=variants,
        verdict=verdict,
        validity=judged,
        fingerprint=fp,
        extra=extra or {},
        warnings=[
            *warnings,
            *order,
            *(() if req.smoke else order_warnings(verdict.breakdown, variants, headline=False)),
        ],
        error=error,
    )
    busy = artifact.gpu_busy(doc)  # the floor a faster harness could reach with the same samples
    if busy is not None:
        doc["run"].update(gpu_busy_s=round(busy[0], 3), gpu_busy_share=round(busy[1], 4))
    return dict(redact.redactor()(doc))


def error_info(
    kind: str,
    message: str,
    *,
    exit_code: int | None = None,
    signal: str | None = None,
    stderr_tail: str | None = None,
    traceback: str | None = None,
) -> dict[str, Any]:
    """The artifact's ``error`` section (kind: exception, crash, timeout, oom, interrupted, no_space)."""
    return {
        "kind": kind,
        "message": message,
        "exit_code": exit_code,
        "signal": signal,
        "stderr_tail": stderr_tail,
        "traceback": traceback,
    }


def error_document(
    req: RunRequest, run_dir: Path, error: Mapping[str, Any], seconds: float, device: str | None = None
) -> dict[str, Any]:
    """The ``error`` artifact of a run that produced no artifact of its own (crash, timeout, interrupt).

    Built without importing torch: the batch runner writes it for a child that died.
    """
    cls, params = resolve(req)
    return document(
        req,
        cls,
        params,
        run_dir,
        seconds=seconds,
        device=device,
        variants=[],
        verdict=unavailable(cls.metric, str(error["message"]), status="error"),
        fp=fingerprint.collect(with_torch=False),
        error=error,
    )


@contextlib.contextmanager
def _knobs_kept() -> Iterator[None]:
    """Whatever a repro (or the shim) sets globally (TF32, precision, grad mode, linalg
    backend) is put back as it was before the run, so nothing leaks into the caller's process."""
    from repro.run.knobs import apply_knobs, knob_state

    saved = knob_state()
    try:
        yield
    finally:
        apply_knobs(saved)


@contextlib.contextmanager
def _cpu_threads(device: str) -> Iterator[None]:
    """Pin torch's intra-op threads for CPU timing, and give the user's setting back after."""
    if device != "cpu":
        yield
        return
    import torch

    saved = torch.get_num_threads()
    torch.set_num_threads(CPU_THREADS)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def _pair_legacy(
    repro: Repro[Any], params: Any, result: RunResult, verdict: Verdict, ctx: RunContext
) -> tuple[RunResult, Verdict]:
    """The shim that gives a repro that judges itself (its own ``verdict``) a paired CI.

    Such a repro times each variant in its own block and judges t(a)/t(b) in its own
    ``verdict``. The harness learns the pair from that first verdict, times the two
    recorded calls again in interleaved rounds (each with the knobs that were in force
    when the repro measured it), swaps the paired timings in and asks for the verdict
    again. Where that fails, the blocked timings stand and a warning says why.
    """
    if verdict.status not in ("reproduced", "not_reproduced") or len(verdict.variants) != 2:
        return result, verdict
    names = list(verdict.variants)
    arms = [ctx.recorded_arms.get(n) for n in names]
    if any(a is None for a in arms):
        return result, verdict
    num, den = (result.variant(n) for n in names)
    if num.timing is None or den.timing is None or verdict.value is None:
        return result, verdict
    # The repro's own scale (e.g. work-scaled ratios), read off its first verdict, so the
    # stop rule can tell when the paired CI is decided against the threshold.
    scale = verdict.value / (num.timing.stats.median / den.timing.stats.median)
    ctx.comparisons = (Comparison("legacy", names[0], names[1], verdict.threshold, scale=scale),)
    try:
        paired = {v.name: v for v in ctx.measure_paired([a for a in arms if a is not None], group="+".join(names))}
    except Exception as exc:  # the repro's calls no longer run (freed state): keep its blocked timings
        note = f"paired re-timing of {' and '.join(names)} failed ({type(exc).__name__}: {exc}); CI is unpaired"
        return dataclasses.replace(result, notes=(*result.notes, note.splitlines()[0])), verdict
    # The recorded calls run again after run() returned: a call that reads state the repro
    # changed since (a loop variable, a freed or resized tensor, a context it exited) times
    # something else. On a GPU only a re-timing that agrees with the repro's own measurement
    # is used. On CPU (a smoke run, never judged) blocked medians of microsecond calls were
    # off by 2x from warm-up alone, so there the check would only throw the pairing away.
    moved = shim_disagrees(names, paired, result) if ctx.cuda else []
    if moved:
        note = (
            f"paired re-timing of {' and '.join(names)} disagreed with the repro's own timing of "
            f"{', '.join(moved)} (outside {_SHIM_AGREE[0]:g}-{_SHIM_AGREE[1]:g}x): the calls no longer time what "
            "the repro measured, so its blocked timings and unpaired CI stand"
        )
        return dataclasses.replace(result, notes=(*result.notes, note)), verdict
    variants = tuple(_merge_paired(v, paired[v.name]) if v.name in paired else v for v in result.variants)
    result = dataclasses.replace(result, variants=variants)
    return result, repro.verdict(params, result)


# How far a paired re-timing may sit from the repro's own blocked median and still be taken as
# the same call: GPU state moved medians by up to ~7% between runs on the H200; a call that now
# reads different data is off by far more.
_SHIM_AGREE = (0.8, 1.25)


def shim_disagrees(names: Sequence[str], paired: Mapping[str, VariantResult], result: RunResult) -> list[str]:
    """The variants whose paired re-timing is off their blocked median by more than ``_SHIM_AGREE``."""
    out = []
    for n in names:
        ratio = paired[n].median / result.variant(n).median
        if not _SHIM_AGREE[0] <= ratio <= _SHIM_AGREE[1]:
            out.append(n)
    return out


def _merge_paired(blocked: VariantResult, paired: VariantResult) -> VariantResult:
    """The repro's variant with the paired timing in place of its blocked one (kept in extra)."""
    assert blocked.timing is not None
    return dataclasses.replace(
        paired,
        extra={**blocked.extra, "blocked_timing_median_s": blocked.timing.stats.median},
        warnings=paired.warnings,  # the blocked timing's warnings describe samples no longer in it
    )


def enough_episodes(sampling: SamplingConfig, comparisons: Sequence[Comparison], rule: HeadlineRule) -> SamplingConfig:
    """``sampling`` with at least the episodes whose medians cover the headline CIs' level: a ratio's CI
    is widened to its episodes' medians (``stats.episode_widened``), and under the ``"worst"`` rule each
    of k headlines is judged at 1 - 0.05/k, which six episodes cannot cover (eight can, for six)."""
    need = stats.episodes_for(stats.headline_level(len(headline_candidates(comparisons)), rule, CI_LEVEL))
    return dataclasses.replace(sampling, min_episodes=need) if need > sampling.min_episodes else sampling


def _context(
    req: RunRequest,
    device: str,
    run_dir: Path,
    log: Callable[[str], None],
    progress: Progress = no_progress,
    headline_rule: HeadlineRule = "first",
) -> RunContext:
    nv = _nvml_or_none() if device == "cuda" else None
    return RunContext(
        device=device,
        smoke=req.smoke,
        sampling=req.sampling,
        trace_dir=(run_dir / "traces" / req.repro_id) if req.traces else None,
        nvml=nv,
        log=log,
        progress=progress,
        quick=req.quick,
        headline_rule=headline_rule,
    )


def _ceilings(run_dir: Path) -> dict[str, Any] | None:
    """This GPU's measured ceilings, shared by every repro of the run; None if they failed."""
    from repro.env import ceilings as ceil

    try:
        return dict(ceil.for_run(run_dir))
    except Exception:  # no ceiling: the variants keep their rates without a share of one
        return None


def _with_achieved(v: VariantResult, ceilings: Mapping[str, Any] | None) -> VariantResult:
    """The variant's achieved rate against the ceilings measured after it ran."""
    if v.timing is None or v.work is None or not ceilings:
        return v
    return dataclasses.replace(v, achieved=achieved(v.work, v.timing.stats.median, ceilings))


def _nvml_or_none() -> tuple[Any, Any] | None:
    try:
        import torch

        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        return fingerprint.nvml_handle(fingerprint.pci_bus_id(props))
    except Exception:  # no NVML: measure anyway, the validity flag will say it was not monitored
        return None


def _error_of(exc: BaseException) -> dict[str, Any]:
    oom = type(exc).__name__ in ("OutOfMemoryError", "MemoryError") or "out of memory" in str(exc).lower()
    return error_info(
        "oom" if oom else "exception",
        f"{type(exc).__name__}: {exc}".splitlines()[0][:500],
        traceback="".join(traceback.format_exception(exc))[-4000:],
    )


def _warnings(variants: Sequence[VariantResult], result: RunResult | None) -> list[str]:
    out = [f"{v.name}: {w}" for v in variants for w in v.warnings]
    if result:
        out += list(result.notes)
    return out


def stderr_log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
