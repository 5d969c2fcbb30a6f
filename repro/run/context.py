"""The harness's ``Context``: warm-up, calibration and graph capture, adaptive and paired timing,
kernel capture via torch.profiler, NVML readings per variant."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from repro.core import stats
from repro.core.context import Arm, SamplingConfig, T
from repro.core.order import round_order
from repro.core.results import Comparison, HeadlineRule, Kernel, Timing, VariantResult, Work, achieved
from repro.evidence.clocks import clock_words
from repro.run.kernels import (
    chrome_trace,
    kernels_from_trace,
    per_call_device_time,
    profiler_session,
    quiet_profiler_stderr,
)
from repro.run.knobs import apply_knobs, knob_state
from repro.run.progress import Progress, no_progress
from repro.run.sampling import kernel_enough, kernel_episode, sample_adaptively
from repro.run.schedule import QUICK_ANSWERED, QUICK_SKIP, QUICK_UNPROFILED, measure_groups

if TYPE_CHECKING:
    from repro.core.context import Context

__all__ = ["RunContext"]

# A timer resolves ~0.5 us (CUDA events) and a call costs a few us of Python, so a sample shorter
# than this would measure the harness. Calls are batched until a sample reaches it. A CUDA sample
# starts from an idle queue, so its median also holds the time from the start event to the first
# kernel (about 0.08 ms of a 1.2 ms GEMM on an H200). A 10 ms floor held an H200 at its power cap
# instead (artifacts/reference/h200/evidence5/README.md).
MIN_SAMPLE_S = 1e-3
MAX_CALLS_PER_SAMPLE = 10_000


@dataclass
class RunContext:
    """What a repro's ``run`` gets (``repro.core.context.Context``), and what the harness keeps to itself."""

    device: str  # "cuda" or "cpu"
    smoke: bool
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    ceilings: Mapping[str, Any] = field(default_factory=dict)
    trace_dir: Path | None = None
    nvml: tuple[Any, Any] | None = None  # (pynvml, handle) when NVML answered
    log: Callable[[str], None] = lambda msg: None
    # The comparisons the repro declared for this run's params: paired timing stops when
    # those among its arms are decided or precise enough.
    comparisons: Sequence[Comparison] = ()
    # Repros that judge themselves (a ``verdict`` method of their own): every measured call is
    # kept with the knobs in force when it was measured, so the harness can time the judged
    # pair again in paired rounds.
    record_arms: bool = False
    recorded_arms: dict[str, Arm] = field(default_factory=dict)
    # Structured progress (phase, variant, samples so far, current relative CI half-width);
    # repro.run.progress.Display renders it. Measurement code reports here and prints nothing itself.
    progress: Progress = no_progress
    # A quick run (``repro all --quick``): the comparisons are the headline ones only, and an arm
    # none of them uses is not timed (see repro.run.schedule).
    quick: bool = False
    # How the verdict picks its headline (``Repro.headline_rule``); a quick run under "first"
    # leaves untimed what cannot become the headline (see ``untimed``).
    headline_rule: HeadlineRule = "first"
    # Seconds spent so far in warm-up, sampling (paired rounds, unpaired samples, kernel rounds)
    # and profiling, over every measurement of the run; each counted once.
    spent: dict[str, float] = field(default_factory=dict)
    # The clock and the idle wait of the measurement loops (tests give synthetic ones).
    clock: Callable[[], float] = time.perf_counter
    sleep: Callable[[float], None] = time.sleep

    @property
    def cuda(self) -> bool:
        return self.device == "cuda"

    def skipped(
        self, name: str, label: str, reason: str, *, extra: Mapping[str, Any] | None = None, **config: Any
    ) -> VariantResult:
        """A variant that could not run here, with the reason (e.g. an optional backend is absent)."""
        return VariantResult(
            name=name, label=label, config=config, status="skipped", reason=reason, extra=dict(extra or {})
        )

    def errored(
        self, name: str, label: str, exc: BaseException, *, extra: Mapping[str, Any] | None = None, **config: Any
    ) -> VariantResult:
        """A variant that failed (e.g. ran out of memory) while the repro carries on."""
        return VariantResult(
            name=name,
            label=label,
            config=config,
            status="error",
            reason=f"{type(exc).__name__}: {exc}".splitlines()[0][:500],
            extra=dict(extra or {}),
        )

    def synchronize(self) -> None:
        if self.cuda:
            import torch

            torch.cuda.synchronize()

    def monitored(self, run: Callable[[], T]) -> tuple[T, Mapping[str, Any] | None]:
        monitor = self._monitor()
        if monitor is None:
            return run(), None
        with monitor:
            out = run()
        summary = dict(monitor.summary())
        # The work ran in a process this one started, so a compute process that appeared only
        # while it ran is that process; one already on the GPU before it started is another's.
        before = set(monitor.before.get("compute_pids") or ())
        summary["other_pids"] = [p for p in summary["other_pids"] if p in before]
        return out, summary

    def untimed(self, name: str, done: Sequence[VariantResult] = ()) -> str | None:
        """QUICK_SKIP in a quick run for an arm no (headline) comparison of the run uses;
        under the "first" headline rule, QUICK_ANSWERED for an arm of a later headline once
        both arms of an earlier one are ok in ``done``; else None."""
        if not self.quick or not self.comparisons:
            return None
        if all(name not in (c.num, c.den) for c in self.comparisons):
            return QUICK_SKIP
        if self.headline_rule == "first":
            ok = {v.name for v in done if v.status == "ok"}
            for c in self.comparisons:
                if name in (c.num, c.den):
                    return None  # this headline comes before any that answered
                if c.num in ok and c.den in ok:
                    return QUICK_ANSWERED.format(comparison=c.name)
        return None

    def measure(
        self,
        name: str,
        fn: Callable[[], Any],
        *,
        label: str = "",
        config: Mapping[str, Any] | None = None,
        work: Work | None = None,
        graph: bool = False,
        calls_per_sample: int | None = None,
        before_sample: Callable[[], None] | None = None,
        extra: Mapping[str, Any] | None = None,
        sampling: SamplingConfig | None = None,
    ) -> VariantResult:
        """Warm up, time ``fn`` until the CI target or budget, capture kernels, read NVML.

        ``graph=True`` captures ``calls_per_sample`` calls into one CUDA graph and
        times its replays, so launch overhead drops out. ``before_sample`` runs
        outside the timed region (e.g. to flush L2 or rotate inputs). ``sampling``
        overrides the run's rules for a repro with many small variants.
        """
        cfg = sampling or self.sampling
        why = self.untimed(name)
        if why is not None:
            return self.skipped(name, label or name, why, extra=extra, **dict(config or {}))
        self.progress("warm-up", name, 0, None)
        arm = Arm(
            name=name,
            fn=fn,
            label=label,
            config=dict(config or {}),
            work=work,
            graph=graph,
            calls_per_sample=calls_per_sample,
            before_sample=before_sample,
            extra=dict(extra or {}),
        )
        if self.record_arms:
            snap = knob_state()
            self.recorded_arms[name] = dataclasses.replace(arm, prepare=lambda: apply_knobs(snap))
        t_warm = self.clock()
        runner, take, calls, warm_calls = self._setup_arm(arm, cfg)
        warm_s = self.clock() - t_warm
        self._spend("warm-up", warm_s)
        monitor = self._monitor()
        self.progress("sampling", name, 0, None)

        def on_check(n: int, rel_ci: float) -> None:
            self.progress("sampling", name, n, rel_ci)

        with monitor if monitor is not None else contextlib.nullcontext():
            samples, reason, elapsed = sample_adaptively(take, cfg, clock=self.clock, on_check=on_check)
        self._spend("sampling", elapsed)
        timing = Timing(
            method=self._method(graph),
            unit="s",
            calls_per_sample=calls,
            warmup_calls=warm_calls,
            stop_reason=reason,
            target_rel_ci=cfg.target_rel_ci,
            budget_s=cfg.budget_s,
            elapsed_s=elapsed,
            stats=stats.summarize(samples),
            samples=tuple(samples),
            warmup_s=warm_s,
        )
        kernels: list[Kernel] = []
        iters = 0
        if not self.quick:  # a quick run takes no kernel table (see QUICK_UNPROFILED)
            self.progress("profiling", name, timing.stats.n, timing.stats.rel_ci_halfwidth)
            t_prof = self.clock()
            kernels, iters = self._profile(name, runner, 1 if graph else cfg.profile_iters, calls if graph else 1)
            timing = dataclasses.replace(timing, profile_s=self.clock() - t_prof)
            self._spend("profiling", timing.profile_s or 0.0)
        self.progress("done", name, timing.stats.n, timing.stats.rel_ci_halfwidth)
        return self._result(arm, timing, kernels, iters, monitor.summary() if monitor is not None else None)

    def measure_paired(
        self,
        arms: Sequence[Arm],
        *,
        group: str | None = None,
        sampling: SamplingConfig | None = None,
    ) -> list[VariantResult]:
        """Time ``arms`` in interleaved rounds (A B, B A, ...) so drift hits every arm alike:
        ``measure_groups`` with one group."""
        name = group or "+".join(a.name for a in arms)
        return measure_groups(self, {name: arms}, sampling or self.sampling, contain=False)[name]

    def measure_groups(
        self, groups: Mapping[str, Sequence[Arm]], *, sampling: SamplingConfig | None = None
    ) -> dict[str, list[VariantResult]]:
        """Time every group's arms in one schedule of interleaved rounds; one result per arm, by group.

        Each arm is warmed up and calibrated once. Every round runs each group's arms as one
        block apiece (an untimed call, then ``samples_per_round`` samples; an arm whose sample
        takes ``long_sample_s`` or more: one sample, no untimed call), the groups and the arms
        within a group in orders that alternate between rounds, and records each block's
        median as that arm's round value; a comparison's two arms come from the same round.
        Rounds come in episodes with one idle gap between episodes, shared by all groups. A
        group stops when each declared comparison among its arms has a paired-ratio CI under
        the target, or is decided with a CI under ``decided_rel_ci``, or when the schedule's
        budget (the per-variant budget times the number of arms) is spent; the others go on
        without it. NVML is read between rounds, never beside the timed work. After the
        rounds, every arm gets one short profiled pass, all in one profiler session (none in a
        quick run). A group whose warm-up or blocks raise leaves the schedule, its arms errors;
        the others go on.
        """
        return measure_groups(self, groups, sampling or self.sampling)

    def kernel_rounds(
        self,
        fns: Mapping[str, Callable[[], Any]],
        iters: int,
        match: Callable[[str], bool],
        prepare: Mapping[str, Callable[[], None]] | None = None,
        episodes: int = 1,
        pairs: Sequence[tuple[str, str]] = (),
        min_iters: int = 0,
    ) -> dict[str, list[float]]:
        """Per-call device time (seconds) of the kernels whose names ``match``, for each fn,
        in up to ``iters`` interleaved rounds.

        ``out[name][i]`` is round i's call of ``name``; the lists align by round, so a
        ratio of two of them is paired. A call with no matching kernel gives 0.0.
        ``episodes`` > 1 splits the rounds into episodes of ``kernel_episode(iters, episodes)``
        rounds, separated by the sampling's idle gap and each after the first opened by one
        untimed call of every fn (see ``SamplingConfig``). The episodes that ``min_iters`` rounds need
        share one profiler session, the idle gaps inside it (a session costs about half a second to
        start and read on an H200, more than an episode of steps); each later episode is a session of
        its own, so its times are known when it ends: with ``pairs`` ((numerator, denominator) names),
        the rounds stop at the first session's end where ``kernel_enough`` holds (at least
        ``min_iters`` rounds, every pair's paired CI within the sampling's target), and the lists hold
        the rounds done. Without ``pairs`` every round is in the first session.
        """
        if not self.cuda:
            raise RuntimeError("kernel_rounds needs CUDA")
        names = list(fns)
        episode = kernel_episode(iters, episodes)
        step = episode or iters
        starts = list(range(0, iters, step))
        first = max(1, sum(1 for s in starts if s < min_iters)) if pairs else len(starts)
        sessions = [starts[:first], *([s] for s in starts[first:])]
        out: dict[str, list[float]] = {n: [] for n in names}
        self.synchronize()
        t0 = self.clock()
        with quiet_profiler_stderr():
            for k, batch in enumerate(sessions):
                if k:
                    self.sleep(self.sampling.episode_gap_s)  # idle: the GPU leaves its power state
                spans = [range(s, min(s + step, iters)) for s in batch]
                got = self._kernel_session(fns, spans, match, prepare, bool(k))
                for name in names:
                    out[name] += got[name]
                if pairs and kernel_enough(out, pairs, episode, min_iters, self.sampling.target_rel_ci):
                    break
        self._spend("sampling", self.clock() - t0)
        return out

    def _kernel_session(
        self,
        fns: Mapping[str, Callable[[], Any]],
        episodes: Sequence[range],
        match: Callable[[str], bool],
        prepare: Mapping[str, Callable[[], None]] | None,
        warm: bool,
    ) -> dict[str, list[float]]:
        """One profiler session of ``episodes`` of rounds: the sampling's idle gap before each after the
        first, and one untimed call of every fn opening each (the first too when ``warm``); the
        matched kernels' device time of each call, by fn, in round order."""
        from torch.profiler import record_function

        names = list(fns)
        calls: list[tuple[str, int]] = []
        warms = 0

        def call(name: str, label: str) -> None:  # one profiled call in its own range
            if prepare and name in prepare:
                prepare[name]()
            with record_function(label):
                fns[name]()
            self.synchronize()

        done = 0
        with profiler_session(cuda=True) as prof:
            for e, rounds in enumerate(episodes):
                if e:
                    self.sleep(self.sampling.episode_gap_s)  # idle inside the session: nothing is recorded
                if warm or e:
                    for name in names:
                        call(name, f"gpu_repro_warm_{warms}")
                        warms += 1
                for r in rounds:
                    for i in round_order(len(names), r):
                        call(names[i], f"gpu_repro_call_{len(calls)}")
                        calls.append((names[i], done + r - rounds.start))
                done += len(rounds)
        totals = per_call_device_time(json.loads(chrome_trace(prof)), len(calls), match)
        out: dict[str, list[float]] = {n: [0.0] * done for n in names}
        for (name, r), t in zip(calls, totals, strict=True):
            out[name][r] = t
        return out

    def _method(self, graph: bool) -> Literal["graph_replay", "cuda_events", "perf_counter"]:
        """How a variant is timed: graph replay, CUDA events, or the host clock on CPU."""
        return "graph_replay" if graph else ("cuda_events" if self.cuda else "perf_counter")

    def _setup_arm(self, arm: Arm, cfg: SamplingConfig) -> tuple[Callable[[], Any], Callable[[], float], int, int]:
        """Warm up, calibrate and (for graph arms) capture one arm: (runner, take, calls, warm-up calls)."""
        if arm.prepare is not None:
            arm.prepare()
        warm = self._warmup(arm.fn, cfg.warmup_s)
        calls = arm.calls_per_sample or self._calibrate(arm.fn)
        if arm.graph:
            if not self.cuda:
                raise RuntimeError("graph replay needs CUDA")
            runner = self._capture(arm.fn, calls)
            return runner, self._sampler(runner, 1, calls, arm.before_sample), calls, warm
        return arm.fn, self._sampler(arm.fn, calls, calls, arm.before_sample), calls, warm

    def _result(
        self,
        arm: Arm,
        timing: Timing,
        kernels: list[Kernel],
        iters: int,
        gpu_monitor: dict[str, Any] | None,
    ) -> VariantResult:
        """A measured variant, with warnings for throttling and a missed CI target."""
        notes: list[str] = []
        if gpu_monitor and gpu_monitor["throttled"]:
            notes.append(
                f"clocks-event reasons while measuring: {', '.join(gpu_monitor['throttled'])} "
                f"({clock_words(gpu_monitor)})"
            )
        # A paired variant is judged by its comparison's CI (the verdict's), not its own.
        unpaired = timing.group is None
        if unpaired and timing.stop_reason != "ci_target" and timing.stats.rel_ci_halfwidth > timing.target_rel_ci:
            notes.append(
                f"median CI half-width {timing.stats.rel_ci_halfwidth:.2%} did not reach the "
                f"{timing.target_rel_ci:.2%} target before the {timing.stop_reason.replace('_', ' ')}"
            )
        return VariantResult(
            name=arm.name,
            label=arm.label or arm.name,
            config=dict(arm.config),
            status="ok",
            device=self.device,
            timing=timing,
            kernels=tuple(kernels),
            kernel_source=QUICK_UNPROFILED if self.quick else ("cuda" if self.cuda else "cpu"),
            profiled_iterations=iters,
            work=arm.work,
            achieved=achieved(arm.work, timing.stats.median, self.ceilings),
            gpu_monitor=gpu_monitor,
            extra=dict(arm.extra),
            warnings=tuple(notes),
        )

    # -- pieces of measure(), each a seam ---------------------------------------------

    def kernel_samples(self, fn: Callable[[], Any], iters: int, match: Callable[[str], bool]) -> list[float]:
        """Per-call device time (seconds) of the kernels whose names ``match``, one sample per call.

        Each call is bracketed by a synchronize and a profiler range, so the kernels
        that start between one range's start and the next belong to that call.
        Needs CUDA; this is how a repro gets a sample set for a per-kernel metric.
        """
        return [t for t in self.kernel_rounds({"fn": fn}, iters, match)["fn"] if t > 0]

    def _warmup(self, fn: Callable[[], Any], warmup_s: float) -> int:
        calls, t0 = 0, time.perf_counter()
        while calls < 3 or time.perf_counter() - t0 < warmup_s:
            fn()
            calls += 1
            self.synchronize()
            if calls >= 10_000:
                break
        return calls

    def _calibrate(self, fn: Callable[[], Any]) -> int:
        self.synchronize()
        t0 = time.perf_counter()
        fn()
        self.synchronize()
        one = max(time.perf_counter() - t0, 1e-7)
        return int(min(MAX_CALLS_PER_SAMPLE, max(1, math.ceil(MIN_SAMPLE_S / one))))

    def _capture(self, fn: Callable[[], Any], calls: int) -> Callable[[], Any]:
        import torch

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up on a side stream, as CUDA graph capture requires
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(calls):
                fn()
        torch.cuda.synchronize()
        return g.replay

    def _sampler(
        self,
        runner: Callable[[], Any],
        repeats: int,
        calls_in_run: int,
        before: Callable[[], None] | None,
    ) -> Callable[[], float]:
        if self.cuda:
            import torch

            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

            def take_cuda() -> float:
                if before is not None:
                    before()
                start.record()
                for _ in range(repeats):
                    runner()
                end.record()
                end.synchronize()
                return float(start.elapsed_time(end)) / 1e3 / calls_in_run

            return take_cuda

        def take_cpu() -> float:
            if before is not None:
                before()
            t0 = time.perf_counter()
            for _ in range(repeats):
                runner()
            return (time.perf_counter() - t0) / calls_in_run

        return take_cpu

    def _monitor(self, period_s: float | None = 0.05) -> Any:
        if self.nvml is None:
            return None
        from repro.env.nvml import Monitor

        return Monitor(*self.nvml, own_pid=os.getpid(), period_s=period_s)

    def _profile(
        self, name: str, runner: Callable[[], Any], iters: int, calls_per_iter: int
    ) -> tuple[list[Kernel], int]:
        self.synchronize()
        with quiet_profiler_stderr(), profiler_session(self.cuda) as prof:
            for _ in range(iters):
                runner()
            self.synchronize()
        raw = chrome_trace(prof)
        self._write_trace(name, raw)
        return kernels_from_trace(json.loads(raw), self.device, iters * calls_per_iter), iters

    def _write_trace(self, name: str, raw: bytes) -> None:
        """The profiler's Chrome trace as ``<trace_dir>/<name>.trace.json.gz``, redacted (when there is a trace_dir)."""
        if self.trace_dir is None:
            return
        from repro.core.fsio import NoSpace, write_new_gzip
        from repro.core.redact import redactor

        safe = "".join(c if c.isalnum() or c in "-_.+" else "_" for c in name)[:120]
        path = self.trace_dir / f"{safe}.trace.json.gz"
        try:  # atomic: the trace appears whole or not at all
            write_new_gzip(path, redactor()(raw.decode(errors="replace")).encode())
        except (OSError, NoSpace) as exc:  # a trace is a side file: a full disk must not cost the measurement
            self.log(f"{name}: Chrome trace not written ({exc})")

    def _spend(self, part: str, seconds: float) -> None:
        self.spent[part] = self.spent.get(part, 0.0) + seconds


# Kineto (torch.profiler's native backend) writes these from C++ straight to fd 2 at every session


if TYPE_CHECKING:

    def _is_a_context(ctx: RunContext) -> Context:
        """mypy checks here that RunContext offers everything the Context protocol promises repros."""
        return ctx
