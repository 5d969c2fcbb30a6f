"""Timing: paired interleaved rounds for compared variants, adaptive sampling for the rest,
kernel capture via torch.profiler, NVML readings per variant."""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import json
import math
import os
import re
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from repro.core import stats
from repro.core.results import Achieved, Comparison, Kernel, Timing, VariantResult, Work
from repro.run.progress import Progress, no_progress

# CUDA events resolve ~0.5 us and a launch costs a few us, so a sample shorter
# than this would measure the harness. Calls are batched until a sample reaches it.
MIN_SAMPLE_S = 1e-3
MAX_CALLS_PER_SAMPLE = 10_000
# A distribution-free 95% CI on the median exists from n = 6; 20 keeps it a few
# order statistics wide, so one outlier cannot end sampling early.
MIN_SAMPLES = 20
# Kernel categories in a torch.profiler Chrome trace that are device work.
_DEVICE_CATS = ("kernel", "gpu_memset", "gpu_memcpy")


@dataclass(frozen=True)
class SamplingConfig:
    """When to stop sampling: CI target reached, time budget spent, or sample cap."""

    target_rel_ci: float = 0.01
    budget_s: float = 5.0
    warmup_s: float = 0.2
    min_samples: int = MIN_SAMPLES
    max_samples: int = 2000
    profile_iters: int = 3
    # Paired rounds: a distribution-free 95% CI of a median needs n >= 6 rounds; 20 keep
    # one odd round from deciding anything, and let the CI reflect between-round spread.
    min_rounds: int = 20
    max_rounds: int = 1000
    samples_per_round: int = 3
    # A comparison whose whole CI is on one side of its threshold may stop before the
    # target, once its CI is at most this wide (half-width over value): the verdict can no
    # longer change and the number is good to two digits.
    decided_rel_ci: float = 0.02
    # ... and the CI at this stricter level must already be on one side: the stop rule looks
    # after every episode, and stopping at the first look where a 95% CI happens to clear the
    # threshold would make a false "reproduced" about twice as likely as 2.5% (simulated with
    # the true ratio at the threshold: 5.1% of 700 runs).
    decided_level: float = 0.995
    # Paired rounds come in episodes separated by an idle gap: on the H200 the ratio of two
    # variants followed the GPU's power state, which held for a whole process (1.5 s of
    # rounds) but differed between processes; an idle gap lets the GPU pick its state
    # again, so the episodes sample states the way separate processes would, and the CI
    # (over episodes) covers them. At least min_episodes of at least episode_s each.
    min_episodes: int = 6
    episode_s: float = 0.3
    episode_gap_s: float = 0.5


def sample_adaptively(
    take: Callable[[], float],
    cfg: SamplingConfig,
    clock: Callable[[], float] = time.perf_counter,
    on_check: Callable[[int, float], None] | None = None,
) -> tuple[list[float], str, float]:
    """Call ``take`` (one sample, seconds per call) until a stopping rule fires.

    Returns (samples, stop_reason, elapsed_s). The CI is checked every few
    samples, not each one: summarize sorts, and that should not dominate.
    ``on_check(n, rel_ci)`` hears each check (for progress display).
    """
    samples: list[float] = []
    t0 = clock()
    check_every = 1
    while True:
        samples.append(take())
        n = len(samples)
        elapsed = clock() - t0
        if n >= cfg.max_samples:
            return samples, "max_samples", elapsed
        if n >= cfg.min_samples and n % check_every == 0:
            rel_ci = stats.summarize(samples).rel_ci_halfwidth
            if on_check is not None:
                on_check(n, rel_ci)
            if rel_ci <= cfg.target_rel_ci:
                return samples, "ci_target", elapsed
            check_every = max(1, n // 10)
        if elapsed >= cfg.budget_s and n >= cfg.min_samples:
            return samples, "time_budget", elapsed


# --------------------------------------------------------------------------- kernels


def kernels_from_trace(trace: Mapping[str, Any], device: str, calls: int) -> list[Kernel]:
    """Aggregate a Chrome trace into a kernel table.

    On CUDA the device categories are the kernels that ran. On CPU there are no
    kernels, so aten ops stand in, each charged only its self time (its duration
    minus the ops nested in it), which is where CPU work actually happened.
    """
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    if device == "cuda":
        picked = [(e.get("name", "?"), float(e.get("dur", 0.0))) for e in events if e.get("cat") in _DEVICE_CATS]
    else:
        picked = _self_times([e for e in events if e.get("cat") == "cpu_op"])
    agg: dict[str, list[float]] = {}
    for name, dur in picked:
        row = agg.setdefault(name, [0, 0.0])
        row[0] += 1
        row[1] += dur
    table = [
        Kernel(name=n, count=int(c), total_us=t, mean_us=t / c, per_call=c / max(calls, 1)) for n, (c, t) in agg.items()
    ]
    return sorted(table, key=lambda k: -k.total_us)


def _self_times(ops: list[dict[str, Any]]) -> list[tuple[str, float]]:
    """(name, self time in us) of each op: its duration less that of its direct children."""
    out: list[tuple[str, float]] = []
    by_tid: dict[Any, list[dict[str, Any]]] = {}
    for e in ops:
        by_tid.setdefault(e.get("tid"), []).append(e)
    for evs in by_tid.values():
        evs.sort(key=lambda e: (e["ts"], -e.get("dur", 0)))
        stack: list[list[Any]] = []  # [end, name, dur, children_dur]
        for e in evs:
            dur = float(e.get("dur", 0.0))
            while stack and e["ts"] >= stack[-1][0]:
                top = stack.pop()
                out.append((top[1], max(top[2] - top[3], 0.0)))
            if stack:
                stack[-1][3] += dur
            stack.append([e["ts"] + dur, e.get("name", "?"), dur, 0.0])
        out.extend((top[1], max(top[2] - top[3], 0.0)) for top in stack)
    return out


# --------------------------------------------------------------------------- paired rounds


@dataclass(frozen=True)
class Arm:
    """One variant of a paired measurement: what to call and how to describe it.

    ``prepare`` runs untimed before the arm's warm-up, before each of its blocks and
    before profiling: it puts back whatever global state the arm needs (a TF32 flag, the
    preferred linalg library) when arms that need different states are interleaved.
    """

    name: str
    fn: Callable[[], Any]
    label: str = ""
    config: Mapping[str, Any] = field(default_factory=dict)
    work: Work | None = None
    graph: bool = False
    calls_per_sample: int | None = None
    before_sample: Callable[[], None] | None = None
    prepare: Callable[[], None] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


def round_order(k: int, r: int) -> list[int]:
    """The order of ``k`` arms in round ``r``: rotated every other round, reversed in odd ones.

    For two arms that is AB BA BA AB AB BA ...: each arm is as often first as second, and
    each round pair is symmetric, so a trend over time cancels in the per-round ratios.
    """
    shift = (r // 2) % k
    order = [(i + shift) % k for i in range(k)]
    return order[::-1] if r % 2 else order


def _paired_stop(
    comps: Sequence[Comparison], rounds: Mapping[str, Sequence[float]], cfg: SamplingConfig, episode: int | None
) -> str | None:
    """The stop reason once every comparison is precise enough (or decided), else None.

    Without a comparison among the arms, each arm's median CI over its round values is
    held to the target instead.
    """
    if not comps:
        widths = [stats.summarize(xs).rel_ci_halfwidth for xs in rounds.values()]
        return "ci_target" if all(w <= cfg.target_rel_ci for w in widths) else None
    decided = True
    on_target = True
    for c in comps:
        value, lo, hi = stats.paired_ratio_ci(rounds[c.num], rounds[c.den], 0.95, c.scale, episode)
        width = (hi - lo) / 2 / value if value > 0 else math.inf
        on_target &= width <= cfg.target_rel_ci
        _, slo, shi = stats.paired_ratio_ci(rounds[c.num], rounds[c.den], cfg.decided_level, c.scale, episode)
        decided &= (slo >= c.threshold or shi < c.threshold) and width <= cfg.decided_rel_ci
    if on_target:
        return "ci_target"
    return "decided" if decided else None


def knob_state() -> dict[str, Any]:
    """The global torch switches a repro may set around a measurement (read, not changed)."""
    import torch

    b = torch.backends
    state: dict[str, Any] = {
        "grad": torch.is_grad_enabled(),
        "tf32": b.cuda.matmul.allow_tf32,
        "cudnn_tf32": b.cudnn.allow_tf32,
        "precision": torch.get_float32_matmul_precision(),
    }
    if torch.cuda.is_available():
        state["linalg"] = b.cuda.preferred_linalg_library()
    return state


def apply_knobs(state: Mapping[str, Any]) -> None:
    """Set the switches ``knob_state`` read; precision first, since it also moves the TF32 flag."""
    import torch

    b = torch.backends
    torch.set_float32_matmul_precision(state["precision"])
    b.cuda.matmul.allow_tf32 = state["tf32"]
    b.cudnn.allow_tf32 = state["cudnn_tf32"]
    torch.set_grad_enabled(state["grad"])
    if "linalg" in state:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the preference warns once that it is experimental
            b.cuda.preferred_linalg_library(state["linalg"])


def kernel_episode(iters: int, episodes: int) -> int | None:
    """Rounds per episode when ``iters`` kernel rounds come in ``episodes`` episodes, or
    None when they do not (one episode, or too few rounds for two per episode)."""
    if episodes <= 1 or iters < 2 * episodes:
        return None
    return -(-iters // episodes)


def _per_call_device_time(trace: Mapping[str, Any], calls: int, match: Callable[[str], bool]) -> list[float]:
    """Seconds of matching device work per profiler range ``gpu_repro_call_<i>``, i < ``calls``.

    A kernel belongs to the last range that started before it did: every call is
    followed by a synchronize, so no kernel of one call starts after the next begins.
    """
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    # Untimed warm-up calls run in ranges ``gpu_repro_warm_<i>``: they end the previous
    # call's range, and their own kernels count for nothing (index -1).
    starts = sorted(
        (e["ts"], int(e["name"].rsplit("_", 1)[1]) if e["name"].startswith("gpu_repro_call_") else -1)
        for e in events
        if str(e.get("name", "")).startswith(("gpu_repro_call_", "gpu_repro_warm_"))
        and e.get("cat") == "user_annotation"
    )
    stamps = [ts for ts, _ in starts]
    totals = [0.0] * calls
    for e in events:
        if e.get("cat") in _DEVICE_CATS and match(e.get("name", "")):
            k = bisect.bisect_right(stamps, e["ts"]) - 1
            if k >= 0 and 0 <= starts[k][1] < calls:
                totals[starts[k][1]] += float(e.get("dur", 0.0)) / 1e6
    return totals


# --------------------------------------------------------------------------- context


@dataclass
class Context:
    """What a repro's ``run`` gets: the device, the sampling rules and ``measure``."""

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
    # Older-API repros: every measured call is kept with the knobs in force when it was
    # measured, so the harness can time a judged pair again in paired rounds.
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
            stop_reason=reason,  # type: ignore[arg-type]
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
        reason = "max_rounds"
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
                    stop = _paired_stop(comps, rounds, cfg, episode)
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
                stop_reason=reason,  # type: ignore[arg-type]
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
        totals = _per_call_device_time(json.loads(_chrome_trace(prof)), len(calls), match)
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
                f"(SM clock {gpu_monitor['sm_clock_during_mhz']} MHz)"
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
        raw = _chrome_trace(prof)
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
# start and stop ("USDT:<date> <time> <pid>:<tid> SyncActivityProfilerHandler.cpp:52] profiler_start",
# and "STAGE: ..."), whatever KINETO_LOG_LEVEL says (0-5 tried with torch 2.13). They tell a user nothing.
_KINETO_CHATTER = re.compile(rb"^(USDT|STAGE):\S+ \S+ \d+:\d+ \S+\.cpp:\d+\] ")


@contextlib.contextmanager
def quiet_profiler_stderr() -> Iterator[None]:
    """Hold back fd 2 around a profiler session; afterwards pass on everything but Kineto's chatter.

    Redirecting the file descriptor (not ``sys.stderr``) is what reaches native code. Anything
    else written meanwhile (a real warning or error) still reaches stderr, only later.
    """
    try:
        saved = os.dup(2)
    except OSError:  # no fd 2 to redirect: nothing would be printed anyway
        yield
        return
    with tempfile.TemporaryFile() as held:
        sys.stderr.flush()
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            kept = [ln for ln in held.read().splitlines(keepends=True) if not _KINETO_CHATTER.match(ln)]
            if kept:
                os.write(2, b"".join(kept))


def _chrome_trace(prof: Any) -> bytes:
    """A finished profiler session as Chrome-trace JSON bytes (torch only writes it to a file)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        return path.read_bytes()


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
