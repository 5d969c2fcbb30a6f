"""Where a cliff starts: a coarse grid over an integer param, then bisection down to adjacent integers.

The search only sees a ``Measure`` function (values -> per-round times of each value, timed
together), so it is tested with synthetic curves and no torch; ``repro.cliff.run`` gives it
one built on ``Context.measure_paired``.

Every measurement is a *group* of values timed in the same interleaved rounds. Two neighbours
are compared by the median of their per-round ratios (``stats.paired_ratio_ci``), not by two
medians taken at different times: on the H200 a variant's median moved by up to 7% between
runs while its own CI claimed +-1%, so two points timed minutes apart could differ by more
than a small step. Timed in one group, drift hits both alike and cancels in each round's
ratio. Refining an interval (a, b) times the triple (a, mid, b) as a fresh group, so each
half is judged on paired rounds too.

The issue asks for neighbours "whose scaled times differ by more than the threshold and whose
CIs do not overlap". Two points of one group are judged by the paired version of that: the
CI of their per-round ratio must exclude 1. The unpaired version (each point's own CI over
rounds, compared with the other's) puts the shared drift back in: a slow round widens both
CIs though it cancels in the ratio, so under a per-round drift of 0.25 a x1.3 step was found
in 0 of 20 synthetic runs while the paired rule finds it in all of them (tests/unit/cliff/test_cliff.py).
Whether the unpaired CIs overlap is still recorded on each step (``points_apart``), for the
reader. The threshold is symmetric in log terms: a rise to more than ``1 + threshold`` or a
fall to below ``1 / (1 + threshold)`` (with 10%, a rise over 10% or a fall over 9.1%), so a
step and its reversal count alike.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from repro.core import stats

__all__ = [
    "Measure",
    "MeasuredPoint",
    "Pair",
    "Point",
    "Search",
    "SearchConfig",
    "Step",
    "coarse_grid",
    "compare_points",
    "find_steps",
]

# A change under this share of the scaled time is not called a step: on the H200 medians moved
# by up to 7% between runs of one unchanged stack, so 10% is the smallest change that a second
# machine or a re-run can be expected to see again.
DEFAULT_THRESHOLD = 0.10
# Nine grid points split a range into eight intervals; a step then costs about log2(range / 8)
# refinement groups (four over 480..560), far fewer points than the dense grid.
DEFAULT_GRID = 9
DEFAULT_MAX_POINTS = 40
# Each group keeps the paired rules (6 episodes with idle gaps), so a group costs seconds. On
# an H200 (2026-11-30) the 9-point grid alone took 49 s for solve-512-cliff under cuSOLVER at
# batch 64 (looped getrf, ~69 ms a call past 512), which a 45 s budget stopped before any
# refinement; the same grid under the default backend took 16 s, and 5090-linear's grid and
# three refinements 22 s. Three minutes hold the slow grid, the four refinements of a step
# and room for a second step.
DEFAULT_BUDGET_S = 180.0
# Kernel names kept per point and per side of a step (heaviest first). The names that set two
# sides apart need not be the heaviest (looped cuSOLVER's getrf_pivot is light beside its
# trsm and gemm), so a point keeps many, and a step lists those seen on only one side.
KERNELS_PER_POINT = 20
KERNELS_PER_SIDE = 5
KERNELS_CHANGED = 8


@dataclass(frozen=True)
class Point:
    """One value as timed in one group: seconds per call in each round, aligned with the group's other points."""

    value: int
    rounds: tuple[float, ...]
    episode_rounds: int | None = None
    kernels: tuple[str, ...] = ()  # names the profiler saw, heaviest first
    tag: str = ""  # what the repro reads off those names (solve: which LU path ran)


Measure = Callable[[Sequence[int]], Mapping[int, Point]]


@dataclass(frozen=True)
class SearchConfig:
    """The range, what counts as a step, and what bounds the search."""

    lo: int
    hi: int
    threshold: float = DEFAULT_THRESHOLD
    grid: int = DEFAULT_GRID
    max_points: int = DEFAULT_MAX_POINTS
    budget_s: float = DEFAULT_BUDGET_S
    level: float = 0.95
    # Work of one call at a value (any unit); times are scaled to the work at ``lo``.
    # None compares raw times.
    work: Callable[[int], float] | None = None

    def __post_init__(self) -> None:
        if not self.lo < self.hi:
            raise ValueError(f"range {self.lo}:{self.hi}: expected lo < hi")
        # The grid leaves one point of max_points free, so at least one refinement can run.
        if self.grid < 2 or self.max_points < 3:
            raise ValueError("grid must be at least 2 and max_points at least 3")

    @property
    def grid_points(self) -> int:
        """Points of the coarse grid asked for: ``grid``, but one short of ``max_points`` so refinement can start."""
        return min(self.grid, self.max_points - 1)

    def scale(self, value: int) -> float:
        """Factor that turns a time at ``value`` into the time at ``lo``'s work."""
        return 1.0 if self.work is None else self.work(self.lo) / self.work(value)


@dataclass(frozen=True)
class MeasuredPoint:
    """A point as recorded: its median and CI, raw and scaled, and where in the search it was timed."""

    value: int
    phase: str  # "grid" or "refine"
    group: int
    median_s: float
    ci_low_s: float
    ci_high_s: float
    scaled_s: float
    scaled_ci_low_s: float
    scaled_ci_high_s: float
    rounds: int
    kernels: tuple[str, ...]
    tag: str = ""


@dataclass(frozen=True)
class Pair:
    """Two values timed in one group: the paired ratio of their scaled times and whether it is a step."""

    lo: int
    hi: int
    ratio: float
    ci_low: float
    ci_high: float
    before: MeasuredPoint
    after: MeasuredPoint
    is_step: bool
    # The points' own CIs over rounds do not overlap (unpaired; recorded, not required).
    points_apart: bool = False

    @property
    def size(self) -> float:
        """How far from flat, either way (a 2x rise and a 2x fall rank alike)."""
        return abs(math.log(self.ratio)) if self.ratio > 0 else math.inf


@dataclass(frozen=True)
class Step:
    """A step in scaled time between ``lo`` and ``hi`` (adjacent integers when ``resolved``)."""

    lo: int
    hi: int
    resolved: bool
    ratio: float
    ci_low: float
    ci_high: float
    before_s: float
    after_s: float
    kernels_before: tuple[str, ...]
    kernels_after: tuple[str, ...]
    only_before: tuple[str, ...]  # kernels seen on this side only
    only_after: tuple[str, ...]
    tag_before: str = ""
    tag_after: str = ""
    note: str = ""
    points_apart: bool = False  # the two points' unpaired CIs do not overlap (not required for a step)


@dataclass(frozen=True)
class Search:
    """Everything the search did and found."""

    config: SearchConfig
    grid: tuple[int, ...]
    points: tuple[MeasuredPoint, ...]
    steps: tuple[Step, ...]
    stop_reason: str  # "done", "budget", "max_points", "error"
    groups: int
    elapsed_s: float
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def points_measured(self) -> int:
        """Distinct values timed (a value re-timed in a refinement group counts once)."""
        return len({p.value for p in self.points})

    @property
    def measurements(self) -> int:
        return len(self.points)

    @property
    def dense_points(self) -> int:
        return self.config.hi - self.config.lo + 1

    @property
    def resolution(self) -> int:
        """The widest gap between grid neighbours: a change narrower than this may hide between them."""
        return max((b - a for a, b in zip(self.grid, self.grid[1:], strict=False)), default=0)


def coarse_grid(lo: int, hi: int, n: int) -> tuple[int, ...]:
    """``n`` integers spread evenly over [lo, hi], both ends included (every integer when the range is small)."""
    if hi - lo + 1 <= n:
        return tuple(range(lo, hi + 1))
    return tuple(sorted({lo + round(i * (hi - lo) / (n - 1)) for i in range(n)}))


def _measured(p: Point, cfg: SearchConfig, phase: str, group: int) -> MeasuredPoint:
    st = stats.summarize(p.rounds, cfg.level)
    s = cfg.scale(p.value)
    return MeasuredPoint(
        value=p.value,
        phase=phase,
        group=group,
        median_s=st.median,
        ci_low_s=st.ci_low,
        ci_high_s=st.ci_high,
        scaled_s=st.median * s,
        scaled_ci_low_s=st.ci_low * s,
        scaled_ci_high_s=st.ci_high * s,
        rounds=st.n,
        kernels=p.kernels[:KERNELS_PER_POINT],
        tag=p.tag,
    )


def compare_points(a: MeasuredPoint, b: MeasuredPoint, pa: Point, pb: Point, cfg: SearchConfig) -> Pair:
    """Is there a step from ``a`` to ``b``? Both conditions below, on paired rounds.

    A step needs (1) the scaled times to differ by more than the threshold (a ratio above
    ``1 + threshold`` or below ``1 / (1 + threshold)``), read off the median of the per-round
    ratios, and (2) the paired ratio's CI to exclude 1: the paired form of "the CIs do not
    overlap", which drift cannot fake nor hide (see the module docstring).
    """
    value, lo, hi = stats.paired_ratio_ci(
        pb.rounds, pa.rounds, cfg.level, cfg.scale(b.value) / cfg.scale(a.value), pa.episode_rounds
    )
    big = value >= 1 + cfg.threshold or value <= 1 / (1 + cfg.threshold)
    apart = a.scaled_ci_high_s < b.scaled_ci_low_s or b.scaled_ci_high_s < a.scaled_ci_low_s
    excludes_one = lo > 1 or hi < 1
    return Pair(a.value, b.value, value, lo, hi, a, b, big and excludes_one, apart)


def _step(pair: Pair, *, resolved: bool, note: str = "") -> Step:
    before, after = pair.before.kernels, pair.after.kernels
    return Step(
        lo=pair.lo,
        hi=pair.hi,
        resolved=resolved,
        ratio=pair.ratio,
        ci_low=pair.ci_low,
        ci_high=pair.ci_high,
        before_s=pair.before.scaled_s,
        after_s=pair.after.scaled_s,
        kernels_before=before[:KERNELS_PER_SIDE],
        kernels_after=after[:KERNELS_PER_SIDE],
        only_before=tuple(k for k in before if k not in set(after))[:KERNELS_CHANGED],
        only_after=tuple(k for k in after if k not in set(before))[:KERNELS_CHANGED],
        tag_before=pair.before.tag,
        tag_after=pair.after.tag,
        note=note,
        points_apart=pair.points_apart,
    )


def find_steps(
    measure: Measure,
    cfg: SearchConfig,
    clock: Callable[[], float] = time.monotonic,
    log: Callable[[str], None] = lambda msg: None,
) -> Search:
    """Coarse grid, then bisect every interval that steps until the step is between adjacent integers.

    Intervals are refined largest step first, so a budget or point cap that runs out leaves
    the smallest ones unnarrowed (reported as steps with ``resolved=False``). A measurement that
    raises ends the search with what was found so far; the caller records the error.
    """
    t0 = clock()
    grid = coarse_grid(cfg.lo, cfg.hi, cfg.grid_points)
    points: list[MeasuredPoint] = []
    steps: list[Step] = []
    notes: list[str] = []
    groups = 0

    def run_group(values: Sequence[int], phase: str) -> dict[int, tuple[Point, MeasuredPoint]]:
        nonlocal groups
        log(f"timing {', '.join(map(str, values))} ({phase})")
        got = measure(values)
        missing = [v for v in values if v not in got]
        if missing:
            raise RuntimeError(f"the measurement returned no point for {missing}")
        groups += 1
        out = {v: (got[v], _measured(got[v], cfg, phase, groups)) for v in values}
        points.extend(m for _, m in out.values())
        return out

    def pair(g: Mapping[int, tuple[Point, MeasuredPoint]], a: int, b: int) -> Pair:
        return compare_points(g[a][1], g[b][1], g[a][0], g[b][0], cfg)

    # Max-heap on step size; the counter breaks ties in the order intervals were found.
    queue: list[tuple[float, int, Pair]] = []
    order = itertools.count()

    def consider(p: Pair) -> None:
        if not p.is_step:
            return
        if p.hi - p.lo == 1:
            steps.append(_step(p, resolved=True))
        else:
            heapq.heappush(queue, (-p.size, next(order), p))

    stop = "done"
    try:
        g = run_group(grid, "grid")
        for a, b in zip(grid, grid[1:], strict=False):
            consider(pair(g, a, b))
        while queue:
            measured = {p.value for p in points}
            _, _, iv = queue[0]
            mid = (iv.lo + iv.hi) // 2
            if mid not in measured and len(measured) >= cfg.max_points:
                stop = "max_points"
                break
            if clock() - t0 >= cfg.budget_s:
                stop = "budget"
                break
            g = run_group((iv.lo, mid, iv.hi), "refine")
            heapq.heappop(queue)  # only now: an interval whose group failed is reported unnarrowed
            halves = [pair(g, iv.lo, mid), pair(g, mid, iv.hi)]
            for h in halves:
                consider(h)
            if not any(h.is_step for h in halves):
                whole = pair(g, iv.lo, iv.hi)
                if whole.is_step:
                    steps.append(
                        _step(
                            whole,
                            resolved=False,
                            note=f"spread over {iv.lo}..{iv.hi}: neither half ({iv.lo}..{mid}, {mid}..{iv.hi}) "
                            "steps by the threshold",
                        )
                    )
                else:
                    notes.append(
                        f"{iv.lo} -> {iv.hi} looked like a step on the grid but was equal within the "
                        "threshold or CIs when timed again"
                    )
    except Exception as exc:  # the caller records the error; what was found so far is kept
        stop = "error"
        notes.append(f"measurement failed: {type(exc).__name__}: {exc}".splitlines()[0][:300])
    why = {
        "budget": "the time budget ran out",
        "max_points": "--max-points was reached",
        "error": "a measurement failed",
    }
    for _, _, iv in sorted(queue, key=lambda q: (q[2].lo, q[2].hi)):
        steps.append(_step(iv, resolved=False, note=f"not narrowed further: {why.get(stop, stop)}"))
    steps.sort(key=lambda s: (s.lo, s.hi))
    return Search(
        config=cfg,
        grid=grid,
        points=tuple(points),
        steps=tuple(steps),
        stop_reason=stop,
        groups=groups,
        elapsed_s=clock() - t0,
        notes=tuple(notes),
    )
