"""One schedule of paired rounds for all of a repro's groups: the episodes and idle gaps are
shared, each group stops on its own rule, and every arm gets one profiled pass afterwards, all
in one profiler session (none in a quick run)."""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from repro.core import stats
from repro.core.context import Arm, SamplingConfig
from repro.core.order import round_order
from repro.core.results import Comparison, Kernel, StopReason, Timing, VariantResult
from repro.run.kernels import DEVICE_CATS, chrome_trace, kernels_from_trace, profiler_session, quiet_profiler_stderr
from repro.run.progress import Progress
from repro.run.sampling import paired_stop


class ScheduleContext(Protocol):
    """What the schedule uses of ``repro.run.context.RunContext`` (which imports this module)."""

    device: str
    quick: bool
    comparisons: Sequence[Comparison]
    spent: dict[str, float]
    progress: Progress

    @property
    def clock(self) -> Callable[[], float]: ...

    @property
    def sleep(self) -> Callable[[float], None]: ...

    @property
    def cuda(self) -> bool: ...

    def synchronize(self) -> None: ...

    def skipped(self, name: str, label: str, reason: str, **config: Any) -> VariantResult: ...

    def errored(self, name: str, label: str, exc: BaseException, **config: Any) -> VariantResult: ...

    def _setup_arm(self, arm: Arm, cfg: SamplingConfig) -> tuple[Callable[[], Any], Callable[[], float], int, int]: ...

    def _monitor(self, period_s: float | None = 0.05) -> Any: ...

    def _method(self, graph: bool) -> Literal["graph_replay", "cuda_events", "perf_counter"]: ...

    def _result(
        self, arm: Arm, timing: Timing, kernels: list[Kernel], iters: int, gpu_monitor: dict[str, Any] | None
    ) -> VariantResult: ...

    def _write_trace(self, name: str, raw: bytes) -> None: ...


__all__ = ["QUICK_ANSWERED", "QUICK_SKIP", "QUICK_UNPROFILED", "measure_groups", "split_trace"]

QUICK_SKIP = "not timed in a quick run: no headline comparison uses it"
# Under the "first" headline rule the first headline comparison with a ratio is the headline,
# so once one has both arms, a quick run times no later headline's arms.
QUICK_ANSWERED = "not timed in a quick run: headline comparison {comparison} answered first"
# A quick run gives no arm its profiled pass: no verdict reads the kernel table (fused-adam's
# per-kernel rounds are their own profiler sessions and still run), and a process's first
# profiled pass took 4.2-5.5 s in three of the five repros of the H200 bench
# (artifacts/reference/h200/bench/all, profile_s of each repro's first variant). The variants'
# kernel_source says so.
QUICK_UNPROFILED = "not profiled (a quick run takes no kernel table)"
_PROFILE_RANGE = "gpu_repro_profile_"


@dataclass
class _Arm:
    """One arm in the schedule: its setup, what it has collected, and how its block runs."""

    arm: Arm
    runner: Callable[[], Any]
    take: Callable[[], float]
    calls: int
    warm_calls: int
    warm_s: float
    rounds: list[float] = field(default_factory=list)
    samples: list[float] = field(default_factory=list)
    per_block: int = 0  # timed samples per block; 0 until the first round has shown the sample's length
    warm_call: bool = True  # an untimed call opens the block


@dataclass
class _Group:
    name: str
    arms: list[_Arm]
    comps: list[Comparison]
    reason: StopReason | None = None
    elapsed: float = 0.0
    error: Exception | None = None  # what took the group out of the schedule


def measure_groups(
    ctx: ScheduleContext, groups: Mapping[str, Sequence[Arm]], cfg: SamplingConfig, *, contain: bool = True
) -> dict[str, list[VariantResult]]:
    """Time every group's arms in one schedule of interleaved rounds (see ``Context.measure_groups``).

    A group whose warm-up or block raises (an out-of-memory, a backend error) leaves the
    schedule: with ``contain`` its arms come back as errors and the other groups go on;
    without it the exception is raised once the schedule is over.
    """
    names = [a.name for arms in groups.values() for a in arms]
    if len(set(names)) != len(names) or not names or any(not arms for arms in groups.values()):
        raise ValueError(f"paired arms need distinct names in non-empty groups; got {dict(groups)}")
    out: dict[str, list[VariantResult]] = {g: [] for g in groups}
    wanted = _wanted(ctx)
    timed: dict[str, list[Arm]] = {}
    for g, arms in groups.items():
        for a in arms:
            if wanted is None or a.name in wanted:
                timed.setdefault(g, []).append(a)
    # The warm-up's seconds are the schedule's, shared by its arms (each still gets at least three calls):
    # what it waits out, the clock ramp of an idle GPU, is the GPU's, not an arm's, and 24 arms of 0.2 s
    # each were solve's largest cost after sampling.
    arms_n = sum(len(arms) for arms in timed.values())
    warm_cfg = dataclasses.replace(cfg, warmup_s=cfg.warmup_s / arms_n) if arms_n > 1 else cfg
    sched: list[_Group] = []
    for g, arms in timed.items():
        ctx.progress("warm-up", g, 0, None)
        setups: list[_Arm] = []
        comps = [c for c in ctx.comparisons if c.basis == "time" and {c.num, c.den} <= {a.name for a in arms}]
        group = _Group(g, setups, comps)
        try:
            for a in arms:
                t = ctx.clock()
                runner, take, calls, warm = ctx._setup_arm(a, warm_cfg)
                setups.append(_Arm(a, runner, take, calls, warm, ctx.clock() - t))
                ctx.spent["warm-up"] = ctx.spent.get("warm-up", 0.0) + setups[-1].warm_s
        except Exception as exc:  # this group's error; the others are still timed
            group.error = exc
        sched.append(group)
    failed = [g for g in sched if g.error is not None]
    sched = [g for g in sched if g.error is None]
    budget = cfg.budget_s * sum(len(g.arms) for g in sched)
    monitor = ctx._monitor(period_s=None)
    t0 = ctx.clock()
    episode: int | None = None
    if sched:
        with monitor if monitor is not None else contextlib.nullcontext():
            episode = _rounds(ctx, sched, cfg, budget, t0, monitor)
        failed += [g for g in sched if g.error is not None]
        sched = [g for g in sched if g.error is None]
    ctx.spent["sampling"] = ctx.spent.get("sampling", 0.0) + ctx.clock() - t0
    every = [a for grp in sched for a in grp.arms]
    profiled = every and not ctx.quick  # a quick run takes no kernel table (QUICK_UNPROFILED)
    kernels = _profile_all(ctx, every, cfg, "+".join(grp.name for grp in sched)) if profiled else {}
    for grp in sched:
        for sa in grp.arms:
            st = stats.summarize_rounds(sa.rounds, episode)
            timing = Timing(
                method=ctx._method(sa.arm.graph),
                unit="s",
                calls_per_sample=sa.calls,
                warmup_calls=sa.warm_calls,
                stop_reason=grp.reason or "max_rounds",
                target_rel_ci=cfg.target_rel_ci,
                budget_s=budget,
                elapsed_s=grp.elapsed,
                stats=st,
                samples=tuple(sa.samples),
                group=grp.name,
                rounds=tuple(sa.rounds),
                episode_rounds=episode,
                warmup_s=sa.warm_s,
                profile_s=kernels[sa.arm.name][2] if profiled else None,
            )
            ks, iters, _ = kernels.get(sa.arm.name, ([], 0, 0.0))
            ctx.progress("done", sa.arm.name, st.n, st.rel_ci_halfwidth)
            # Each arm's monitor is the polls taken after its own blocks (Monitor.summary(arm)).
            mon = monitor.summary(sa.arm.name) if monitor is not None else None
            out[grp.name].append(ctx._result(sa.arm, timing, ks, iters, mon))
    for bad in failed:
        why = bad.error if bad.error is not None else RuntimeError("group failed")
        if not contain:
            raise why
        out[bad.name] = [ctx.errored(a.name, a.label or a.name, why, **a.config) for a in timed[bad.name]]
    for name, given in groups.items():  # back in the order the repro gave, skipped arms included
        done = {v.name: v for v in out[name]}
        out[name] = [done.get(a.name) or ctx.skipped(a.name, a.label or a.name, QUICK_SKIP, **a.config) for a in given]
    return out


def _wanted(ctx: ScheduleContext) -> set[str] | None:
    """The arms a quick run times: those its (headline) comparisons use; None times every arm."""
    if not ctx.quick or not ctx.comparisons:
        return None
    return {n for c in ctx.comparisons for n in (c.num, c.den)}


def _block(ctx: ScheduleContext, a: _Arm, cfg: SamplingConfig) -> None:
    """One arm's block of a round: an untimed call (unless the arm is slow), then its samples."""
    if a.arm.prepare is not None:
        a.arm.prepare()
    if a.warm_call:
        a.runner()  # the block's own short warm-up, untimed
        ctx.synchronize()
    xs = [a.take() for _ in range(a.per_block or cfg.samples_per_round)]
    if not a.per_block:  # the first block shows how long a sample is; a slow arm's later blocks are one sample
        slow = stats.quantile(sorted(xs), 0.5) * a.calls >= cfg.long_sample_s
        a.per_block = 1 if slow else cfg.samples_per_round
        a.warm_call = not slow
    a.samples += xs
    a.rounds.append(stats.quantile(sorted(xs), 0.5))


def _rounds(
    ctx: ScheduleContext, sched: list[_Group], cfg: SamplingConfig, budget: float, t0: float, monitor: Any
) -> int | None:
    """Run rounds until every group has stopped; returns the rounds per episode."""
    min_rounds, min_s = cfg.episode_floor(budget)
    episode: int | None = None  # rounds per episode, fixed by the first episode's length
    first_end = t0  # when the first round ended
    episodes = 0
    r = 0
    live = list(sched)
    label = "+".join(g.name for g in sched)
    while live:
        # Groups rotate like arms do; each group's arms stay together, so a comparison's two
        # arms run back to back in every round.
        for gi in round_order(len(live), r):
            g = live[gi]
            try:
                for i in round_order(len(g.arms), r):
                    _block(ctx, g.arms[i], cfg)
                    if monitor is not None:
                        # Read right after this arm's block, so each arm's clocks and power are its own.
                        monitor.poll(g.arms[i].arm.name)
            except Exception as exc:  # this group's error; the others go on
                g.error, g.reason = exc, "max_rounds"
        live = [g for g in live if g.error is None]
        if not live:
            break
        r += 1
        ctx.progress("paired rounds", label, r, None)
        if episode is None:
            # The first round, and the monitor's start before it, carry one-off costs: the episode's seconds
            # are judged from the rounds after it. Judged from the start, a loose run's graph-memset on an
            # H200 (speed/run6) fixed its episodes at that one round, each later one ~26 ms beside a 0.5 s gap.
            first_end = ctx.clock() if r == 1 else first_end
            steady = (ctx.clock() - first_end) * r / (r - 1) if r > 1 else 0.0
            if r < min_rounds or steady < min_s:
                continue
            episode = r
        if r % episode:
            continue
        episodes += 1
        if episodes >= cfg.min_episodes:
            now = ctx.clock() - t0
            for g in live:
                if r >= cfg.max_rounds:
                    g.reason = "max_rounds"
                else:
                    rounds = {a.arm.name: a.rounds for a in g.arms}
                    g.reason = paired_stop(g.comps, rounds, cfg, episode)
                    if g.reason is None and now >= budget:
                        g.reason = "time_budget"
                if g.reason is not None:
                    g.elapsed = now
            live = [g for g in live if g.reason is None]
            if not live:
                break
        if ctx.cuda and cfg.episode_gap_s > 0:
            ctx.synchronize()
            ctx.sleep(cfg.episode_gap_s)  # idle, once for every group: the GPU leaves its power state
    return episode


def _profile_all(
    ctx: ScheduleContext, arms: Sequence[_Arm], cfg: SamplingConfig, name: str
) -> dict[str, tuple[list[Kernel], int, float]]:
    """One short profiled pass per arm, all in one profiler session (CUPTI starts once):
    arm name -> (kernel table, profiled iterations, its share of the session's seconds)."""
    from torch.profiler import record_function

    t = ctx.clock()
    plan = [(a, 1 if a.arm.graph else cfg.profile_iters) for a in arms]
    ctx.progress("profiling", name, 0, None)
    ctx.synchronize()
    with quiet_profiler_stderr(), profiler_session(ctx.cuda) as prof:
        for i, (a, iters) in enumerate(plan):
            if a.arm.prepare is not None:
                a.arm.prepare()
            ctx.synchronize()
            with record_function(f"{_PROFILE_RANGE}{i}"):
                for _ in range(iters):
                    a.runner()
                ctx.synchronize()
    raw = chrome_trace(prof)
    ctx._write_trace(name, raw)
    parts = split_trace(json.loads(raw), len(plan))
    seconds = ctx.clock() - t
    ctx.spent["profiling"] = ctx.spent.get("profiling", 0.0) + seconds
    out: dict[str, tuple[list[Kernel], int, float]] = {}
    for (a, iters), part in zip(plan, parts, strict=True):
        calls = iters * (a.calls if a.arm.graph else 1)
        out[a.arm.name] = (kernels_from_trace(part, ctx.device, calls), iters, seconds / len(plan))
    return out


def split_trace(trace: Mapping[str, Any], n: int) -> list[dict[str, Any]]:
    """The events of each profiled range ``gpu_repro_profile_<i>``, i < ``n``, as a trace of its own.

    Device work belongs to the last range that started before it did (every range ends in a
    synchronize, so no kernel of one range starts after the next begins); a CPU op belongs to
    the range whose span holds its start.
    """
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    spans: list[tuple[float, float, int]] = []
    for e in events:
        name = str(e.get("name", ""))
        if name.startswith(_PROFILE_RANGE) and e.get("cat") == "user_annotation":
            with contextlib.suppress(ValueError):
                start = float(e["ts"])
                spans.append((start, start + float(e.get("dur", 0.0)), int(name[len(_PROFILE_RANGE) :])))
    spans.sort()
    starts = [start for start, _, _ in spans]
    parts: list[list[dict[str, Any]]] = [[] for _ in range(n)]
    for e in events:
        cat = e.get("cat")
        if cat not in DEVICE_CATS and cat != "cpu_op":
            continue
        ts = float(e.get("ts", 0.0))
        k = bisect.bisect_right(starts, ts) - 1
        if k < 0 or (cat == "cpu_op" and ts > spans[k][1]):
            continue
        if 0 <= spans[k][2] < n:
            parts[spans[k][2]].append(e)
    return [{"traceEvents": p} for p in parts]
