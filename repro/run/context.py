"""The harness's ``Context``: warm-up, calibration and graph capture, adaptive and paired timing,
kernel capture via torch.profiler, NVML readings per variant."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from repro.core import stats
from repro.core.context import Arm, SamplingConfig
from repro.core.results import Comparison, Kernel, StopReason, Timing, VariantResult, Work, achieved
from repro.evidence.clocks import clock_words
from repro.run.kernels import chrome_trace, kernels_from_trace, per_call_device_time, quiet_profiler_stderr
from repro.run.knobs import apply_knobs, knob_state
from repro.run.progress import Progress, no_progress
from repro.run.sampling import kernel_episode, paired_stop, round_order, sample_adaptively

if TYPE_CHECKING:
    from repro.core.context import Context

__all__ = ["RunContext"]

# CUDA events resolve ~0.5 us and a launch costs a few us, so a sample shorter
# than this would measure the harness. Calls are batched until a sample reaches it.
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
        self.progress("warm-up", name, 0, None)
        cfg = sampling or self.sampling
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
        t_warm = time.perf_counter()
        runner, take, calls, warm_calls = self._setup_arm(arm, cfg)
        warm_s = time.perf_counter() - t_warm
        monitor = self._monitor()
        self.progress("sampling", name, 0, None)

        def on_check(n: int, rel_ci: float) -> None:
            self.progress("sampling", name, n, rel_ci)

        with monitor if monitor is not None else contextlib.nullcontext():
            samples, reason, elapsed = sample_adaptively(take, cfg, on_check=on_check)
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
        self.progress("profiling", name, timing.stats.n, timing.stats.rel_ci_halfwidth)
        t_prof = time.perf_counter()
        kernels, iters = self._profile(name, runner, 1 if graph else cfg.profile_iters, calls if graph else 1)
        timing = dataclasses.replace(timing, profile_s=time.perf_counter() - t_prof)
        self.progress("done", name, timing.stats.n, timing.stats.rel_ci_halfwidth)
        return self._result(arm, timing, kernels, iters, monitor.summary() if monitor is not None else None)

    def measure_paired(
        self,
        arms: Sequence[Arm],
        *,
        group: str | None = None,
        sampling: SamplingConfig | None = None,
    ) -> list[VariantResult]:
        """Time ``arms`` in interleaved rounds (A B, B A, ...) so drift hits every arm alike.

        Each arm is warmed up and calibrated once; then every round runs each arm's block
        (one untimed call, then ``samples_per_round`` samples) in an order that alternates
        between rounds, and records the block's median as that arm's round value. Sampling
        stops when each declared comparison among the arms has a paired-ratio CI under the
        target, or is decided with a CI under ``decided_rel_ci``, or the budget (the
        per-variant budget times the number of arms) is spent. NVML is read between rounds,
        never beside the timed work. Kernels are profiled after all rounds.
        """
        cfg = sampling or self.sampling
        names = [a.name for a in arms]
        if len(set(names)) != len(names) or not arms:
            raise ValueError(f"paired arms need distinct names; got {names}")
        group = group or "+".join(names)
        self.progress("warm-up", group, 0, None)
        setups, warm_s = [], []
        for a in arms:
            t_warm = time.perf_counter()
            setups.append(self._setup_arm(a, cfg))
            warm_s.append(time.perf_counter() - t_warm)
        comps = [c for c in self.comparisons if c.basis == "time" and c.num in names and c.den in names]
        rounds: dict[str, list[float]] = {n: [] for n in names}
        samples: dict[str, list[float]] = {n: [] for n in names}
        monitor = self._monitor(period_s=None)
        budget = cfg.budget_s * len(arms)
        reason: StopReason = "max_rounds"
        t0 = time.perf_counter()
        episode: int | None = None  # rounds per episode, fixed by the first episode's length
        episodes = 0
        with monitor if monitor is not None else contextlib.nullcontext():
            r = 0
            while True:
                for i in round_order(len(arms), r):
                    arm, (runner, take, _, _) = arms[i], setups[i]
                    if arm.prepare is not None:
                        arm.prepare()
                    runner()  # the block's own short warm-up, untimed
                    self.synchronize()
                    xs = [take() for _ in range(cfg.samples_per_round)]
                    samples[arm.name] += xs
                    rounds[arm.name].append(stats.quantile(sorted(xs), 0.5))
                if monitor is not None:
                    monitor.poll()
                r += 1
                self.progress("paired rounds", group, r, None)
                if episode is None:
                    floor = max(1, -(-cfg.min_rounds // cfg.min_episodes))
                    if r < floor or time.perf_counter() - t0 < min(cfg.episode_s, budget / cfg.min_episodes):
                        continue
                    episode = r
                if r % episode:
                    continue
                episodes += 1
                if episodes >= cfg.min_episodes:
                    if r >= cfg.max_rounds:
                        break
                    stop = paired_stop(comps, rounds, cfg, episode)
                    if stop is not None:
                        reason = stop
                        break
                    if time.perf_counter() - t0 >= budget:
                        reason = "time_budget"
                        break
                if self.cuda and cfg.episode_gap_s > 0:
                    self.synchronize()
                    time.sleep(cfg.episode_gap_s)  # idle: the GPU leaves its power state
        elapsed = time.perf_counter() - t0
        gpu_monitor = monitor.summary() if monitor is not None else None
        out = []
        for arm, (runner, _, calls, warm_calls), arm_warm_s in zip(arms, setups, warm_s, strict=True):
            st = stats.summarize(rounds[arm.name])
            timing = Timing(
                method=self._method(arm.graph),
                unit="s",
                calls_per_sample=calls,
                warmup_calls=warm_calls,
                stop_reason=reason,
                target_rel_ci=cfg.target_rel_ci,
                budget_s=budget,
                elapsed_s=elapsed,
                stats=st,
                samples=tuple(samples[arm.name]),
                group=group,
                rounds=tuple(rounds[arm.name]),
                episode_rounds=episode,
                warmup_s=arm_warm_s,
            )
            if arm.prepare is not None:
                arm.prepare()
            self.progress("profiling", arm.name, len(rounds[arm.name]), None)
            t_prof = time.perf_counter()
            kernels, iters = self._profile(
                arm.name, runner, 1 if arm.graph else cfg.profile_iters, calls if arm.graph else 1
            )
            timing = dataclasses.replace(timing, profile_s=time.perf_counter() - t_prof)
            self.progress("done", arm.name, st.n, st.rel_ci_halfwidth)
            out.append(self._result(arm, timing, kernels, iters, gpu_monitor))
        return out

    def kernel_rounds(
        self,
        fns: Mapping[str, Callable[[], Any]],
        iters: int,
        match: Callable[[str], bool],
        prepare: Mapping[str, Callable[[], None]] | None = None,
        episodes: int = 1,
    ) -> dict[str, list[float]]:
        """Per-call device time (seconds) of the kernels whose names ``match``, for each fn,
        in ``iters`` interleaved rounds inside one profiler session (CUPTI starts once).

        ``out[name][i]`` is round i's call of ``name``; the lists align by round, so a
        ratio of two of them is paired. A call with no matching kernel gives 0.0.
        ``episodes`` > 1 splits the rounds into that many episodes of
        ``kernel_episode(iters, episodes)`` rounds, separated by the sampling's idle gap
        and each opened by one untimed call of every fn (see ``SamplingConfig``).
        """
        from torch.profiler import ProfilerActivity, profile, record_function

        if not self.cuda:
            raise RuntimeError("kernel_rounds needs CUDA")
        names = list(fns)
        self.synchronize()
        calls: list[tuple[str, int]] = []
        with warnings.catch_warnings(), quiet_profiler_stderr():
            warnings.filterwarnings("ignore", message=".*Profiler clears events", category=UserWarning)
            episode = kernel_episode(iters, episodes)
            warm = 0

            def call(name: str, label: str) -> None:  # one profiled call in its own range
                if prepare and name in prepare:
                    prepare[name]()
                with record_function(label):
                    fns[name]()
                self.synchronize()

            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for r in range(iters):
                    if episode and r and r % episode == 0:
                        time.sleep(self.sampling.episode_gap_s)  # idle: the GPU leaves its power state
                        for name in names:
                            call(name, f"gpu_repro_warm_{warm}")
                            warm += 1
                    for i in round_order(len(names), r):
                        call(names[i], f"gpu_repro_call_{len(calls)}")
                        calls.append((names[i], r))
        totals = per_call_device_time(json.loads(chrome_trace(prof)), len(calls), match)
        out: dict[str, list[float]] = {n: [0.0] * iters for n in names}
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
            kernel_source="cuda" if self.cuda else "cpu",
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
        from torch.profiler import ProfilerActivity, profile

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        self.synchronize()
        with warnings.catch_warnings(), quiet_profiler_stderr():
            # torch warns that a profiler cycle clears its events; one cycle is all we keep.
            warnings.filterwarnings("ignore", message=".*Profiler clears events", category=UserWarning)
            with profile(activities=acts) as prof:
                for _ in range(iters):
                    runner()
                self.synchronize()
        raw = chrome_trace(prof)
        trace = json.loads(raw)
        if self.trace_dir is not None:
            from repro.core.fsio import NoSpace, write_new_gzip
            from repro.core.redact import redactor

            safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
            path = self.trace_dir / f"{safe}.trace.json.gz"
            try:  # atomic: the trace appears whole or not at all
                write_new_gzip(path, redactor()(raw.decode(errors="replace")).encode())
            except (OSError, NoSpace) as exc:  # a trace is a side file: a full disk must not cost the measurement
                self.log(f"{name}: Chrome trace not written ({exc})")
        return kernels_from_trace(trace, self.device, iters * calls_per_iter), iters


# Kineto (torch.profiler's native backend) writes these from C++ straight to fd 2 at every session


if TYPE_CHECKING:

    def _is_a_context(ctx: RunContext) -> Context:
        """mypy checks here that RunContext offers everything the Context protocol promises repros."""
        return ctx
