"""`repro cliff`: the search on synthetic curves (known steps, noise, drift), and the sweeps it searches
(the declarations a repro may make, the request a command line resolves to).

Every curve here is synthetic: made-up seconds with a step placed at a known integer, never a
measurement. The command end to end on CPU is in test_cliff_command.py.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from repro.cliff.search import Point, SearchConfig, Step, coarse_grid, find_steps
from repro.core.errors import UsageError
from repro.core.spec import Repro

ROUNDS = 24


EPISODE = 4  # 6 episodes of 4 rounds, as measure_paired records them


def cube(n: int) -> float:
    return float(n) ** 3


def synthetic(
    curve: Callable[[int], float],
    seed: int,
    *,
    noise: float = 0.03,
    drift: float = 0.05,
    kernels: Callable[[int], tuple[str, ...]] = lambda v: ("gemm",),
    calls: list[Sequence[int]] | None = None,
) -> Callable[[Sequence[int]], Mapping[int, Point]]:
    """A Measure: each group gets per-round drift shared by its values, plus each value's own noise."""
    rng = random.Random(seed)

    def measure(values: Sequence[int]) -> Mapping[int, Point]:
        if calls is not None:
            calls.append(tuple(values))
        # A slow or fast state per group (as between processes) and per round (as within one).
        state = math.exp(rng.gauss(0, 0.10))
        drifts = [state * math.exp(rng.gauss(0, drift)) for _ in range(ROUNDS)]
        return {
            v: Point(v, tuple(curve(v) * d * math.exp(rng.gauss(0, noise)) for d in drifts), EPISODE, kernels(v))
            for v in values
        }

    return measure


def lu_time(step_at: int | None, factor: float = 1.3) -> Callable[[int], float]:
    """Seconds that grow as n^3 (flat once scaled by work), times ``factor`` from ``step_at`` up."""
    return lambda n: 1e-3 * (n / 480) ** 3 * (factor if step_at is not None and n >= step_at else 1.0)


CFG = SearchConfig(480, 560, work=cube)


def resolved(steps: Sequence[Step]) -> list[tuple[int, int]]:
    return [(s.lo, s.hi) for s in steps if s.resolved]


def test_coarse_grid_spreads_evenly_and_is_dense_on_small_ranges() -> None:
    assert coarse_grid(480, 560, 9) == (480, 490, 500, 510, 520, 530, 540, 550, 560)
    assert coarse_grid(700, 800, 9)[0] == 700 and coarse_grid(700, 800, 9)[-1] == 800
    assert coarse_grid(10, 14, 9) == (10, 11, 12, 13, 14)


def test_finds_a_known_step_exactly_in_19_of_20_noisy_runs() -> None:
    hits = 0
    for seed in range(20):
        found = find_steps(synthetic(lu_time(512), seed), CFG)
        hits += resolved(found.steps) == [(511, 512)] and len(found.steps) == 1
    assert hits >= 19


def test_reports_no_step_on_a_smooth_curve_in_19_of_20_noisy_runs() -> None:
    # Scaled time drifts up by 8% over the range (0.1% per unit): smooth, nowhere a step.
    def smooth(n: int) -> float:
        return lu_time(None)(n) * (1 + 0.001 * (n - 480))

    clean = sum(not find_steps(synthetic(smooth, seed), CFG).steps for seed in range(20))
    assert clean >= 19


def test_large_round_to_round_drift_does_not_fake_a_step() -> None:
    # Rounds swing by 20% (shared by the values timed together): far more than the 10% threshold.
    clean = sum(not find_steps(synthetic(lu_time(None), s, drift=0.20), CFG).steps for s in range(20))
    assert clean >= 19


def smooth_rise(n: int) -> float:
    """Scaled time drifts up by 8% over 480..560 (0.1% per unit): smooth, nowhere a step."""
    return lu_time(None)(n) * (1 + 0.001 * (n - 480))


def test_very_noisy_smooth_curve_gives_no_step_in_19_of_20_runs() -> None:
    # 20% noise per value and round: a median ratio over the threshold alone calls a step in
    # about a quarter of these runs; the paired CI's condition keeps them clean.
    clean = sum(not find_steps(synthetic(smooth_rise, seed, noise=0.2), CFG).steps for seed in range(20))
    assert clean >= 19


def test_a_step_under_large_shared_drift_is_found_in_19_of_20_runs() -> None:
    # Per-round drift of 0.25, shared by the values timed together: it widens each point's own
    # CI over rounds far past a x1.3 step (so unpaired CIs overlap) but cancels in the paired ratio.
    hits = 0
    for seed in range(20):
        found = find_steps(synthetic(lu_time(512), seed, drift=0.25), CFG)
        hits += resolved(found.steps) == [(511, 512)] and len(found.steps) == 1
    assert hits >= 19
    clean = sum(not find_steps(synthetic(smooth_rise, s, noise=0.2, drift=0.25), CFG).steps for s in range(20))
    assert clean >= 19


def episodic(curve: Callable[[int], float], seed: int, spread: float) -> Callable[[Sequence[int]], Mapping[int, Point]]:
    """A Measure whose points each keep a state per episode (not shared with the other points)."""
    rng = random.Random(seed)

    def measure(values: Sequence[int]) -> Mapping[int, Point]:
        out = {}
        for v in values:
            states = [math.exp(rng.gauss(0, spread)) for _ in range(ROUNDS // EPISODE)]
            rounds = tuple(curve(v) * states[i // EPISODE] * math.exp(rng.gauss(0, 0.005)) for i in range(ROUNDS))
            out[v] = Point(v, rounds, EPISODE, ("gemm",))
        return out

    return measure


def test_states_that_last_an_episode_do_not_fake_a_step() -> None:
    # Rounds within an episode agree closely; each point's episodes differ by ~30%. Taken round
    # by round the ratio's CI is too narrow (about 9 of 20 runs then call a step); the episodes
    # are the independent units.
    clean = sum(not find_steps(episodic(lu_time(None), s, 0.3), CFG).steps for s in range(20))
    assert clean >= 19


def test_max_points_3_still_refines_once() -> None:
    found = find_steps(synthetic(lu_time(512), 0), SearchConfig(480, 560, work=cube, max_points=3))
    assert found.grid == (480, 560) and found.groups == 2 and found.points_measured == 3
    (step,) = found.steps
    assert (step.lo, step.hi, step.resolved) == (480, 520, False) and "max-points" in step.note


def test_refinement_times_far_fewer_points_than_the_dense_grid() -> None:
    calls: list[Sequence[int]] = []
    found = find_steps(synthetic(lu_time(512), 1, calls=calls), CFG)
    assert resolved(found.steps) == [(511, 512)]
    assert found.dense_points == 81
    # 9 grid points, then one new value per bisection of 510..520 (515, 512/513, 511/512...).
    assert found.points_measured <= 14 < found.dense_points // 4
    assert tuple(calls[0]) == coarse_grid(480, 560, 9)
    assert all(len(c) == 3 for c in calls[1:])  # each refinement re-times both ends with the middle


def test_step_reports_its_paired_ci_and_the_kernels_on_each_side() -> None:
    def names(n: int) -> tuple[str, ...]:
        return ("getrf_panel",) if n < 512 else ("getrf_pivot", "ipiv_lower_small")

    (step,) = find_steps(synthetic(lu_time(512, 5.0), 3, kernels=names), CFG).steps
    assert (step.lo, step.hi, step.resolved) == (511, 512, True)
    assert step.ci_low <= step.ratio <= step.ci_high and step.ci_low > 4.0 and step.ci_high < 6.0
    assert step.kernels_before == ("getrf_panel",) and step.kernels_after == ("getrf_pivot", "ipiv_lower_small")
    assert (step.only_before, step.only_after) == (("getrf_panel",), ("getrf_pivot", "ipiv_lower_small"))


def test_kernels_that_differ_are_named_even_when_they_are_not_the_heaviest() -> None:
    common = tuple(f"trsm_{i}" for i in range(6))  # heavier than the LU kernels on both sides

    def names(n: int) -> tuple[str, ...]:
        return (*common, "getrf_panel" if n < 512 else "getrf_pivot")

    (step,) = find_steps(synthetic(lu_time(512, 5.0), 4, kernels=names), CFG).steps
    assert step.kernels_before == common[:5] == step.kernels_after
    assert (step.only_before, step.only_after) == (("getrf_panel",), ("getrf_pivot",))


def test_finds_a_step_down_and_a_step_up_in_one_range() -> None:
    def two(n: int) -> float:
        return lu_time(None)(n) * (0.6 if 497 <= n < 541 else 1.0)

    found = find_steps(synthetic(two, 5), CFG)
    assert resolved(found.steps) == [(496, 497), (540, 541)]
    down, up = found.steps
    assert down.ratio < 1 < up.ratio


def test_a_gradual_ramp_is_not_called_a_step_between_adjacent_values() -> None:
    # +3% per unit from 505 to 515: every adjacent pair is under the threshold.
    def ramp(n: int) -> float:
        return lu_time(None)(n) * (1 + 0.03 * min(max(n - 505, 0), 10))

    found = find_steps(synthetic(ramp, 2, noise=0.01, drift=0.01), CFG)
    assert resolved(found.steps) == []
    assert any("spread over" in s.note for s in found.steps)


def test_without_work_scaling_a_cubic_curve_steps() -> None:
    # The same curve, compared as raw time: n^3 grows ~6-7% per 2 units, >10% per grid interval.
    # n^3 grows 6-7% per 10 units: over a 5% threshold as raw time, flat once scaled by work.
    raw = SearchConfig(480, 560, threshold=0.05, work=None, max_points=12)
    scaled = SearchConfig(480, 560, threshold=0.05, work=cube, max_points=12)
    assert find_steps(synthetic(lu_time(None), 0, noise=0.005, drift=0.005), raw).steps
    assert not find_steps(synthetic(lu_time(None), 0, noise=0.005, drift=0.005), scaled).steps


def test_budget_stops_refinement_and_leaves_the_interval_unnarrowed() -> None:
    now = [0.0]

    def clock() -> float:
        return now[0]

    inner = synthetic(lu_time(512), 0)

    def slow(values: Sequence[int]) -> Mapping[int, Point]:
        now[0] += 10.0
        return inner(values)

    found = find_steps(slow, SearchConfig(480, 560, work=cube, budget_s=25), clock=clock)
    assert found.stop_reason == "budget" and found.groups == 3
    (step,) = found.steps
    assert not step.resolved and step.lo <= 511 and step.hi >= 512 and "budget" in step.note


def test_max_points_caps_distinct_values() -> None:
    found = find_steps(synthetic(lu_time(512), 0), SearchConfig(480, 560, work=cube, max_points=10))
    assert found.stop_reason == "max_points" and found.points_measured == 10
    assert [(s.lo, s.hi, s.resolved) for s in found.steps] == [(510, 515, False)]


def test_a_failing_measurement_ends_the_search_with_what_it_found() -> None:
    inner = synthetic(lu_time(512), 0)
    calls = []

    def flaky(values: Sequence[int]) -> Mapping[int, Point]:
        calls.append(values)
        if len(calls) == 2:
            raise RuntimeError("CUDA out of memory")
        return inner(values)

    found = find_steps(flaky, CFG)
    assert found.stop_reason == "error" and "out of memory" in found.notes[-1]
    assert [(s.lo, s.hi, s.resolved) for s in found.steps] == [(510, 520, False)]


# --------------------------------------------------------------------------- sweeps: their declaration and request


def test_rerun_command_is_shell_quoted_and_uses_the_parsed_range() -> None:
    import shlex

    from repro.cliff.run import CliffRequest, rerun_command

    req = CliffRequest("solve-512-cliff", "n", " 0480:560", overrides={"backends": "a b;rm -rf x"})
    argv = shlex.split(rerun_command(req))
    assert argv[:7] == ["repro", "cliff", "solve-512-cliff", "--param", "n", "--range", "480:560"]
    assert argv[7:] == ["--set", "backends=a b;rm -rf x"]


def _work(p: object, v: int) -> float:
    return 1.0


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"name": "n x"}, "expected an identifier"),
        ({"name": "n.x"}, "expected an identifier"),
        ({"default": 11}, "min <= default <= max"),
        ({"min": 5, "max": 5, "default": 5}, "min < max"),
    ],
)
def test_a_bad_sweep_declaration_is_refused(kwargs: dict[str, Any], expected: str) -> None:
    from repro.core.spec import Sweep

    args: dict[str, object] = {"name": "k", "help": "h", "min": 1, "max": 10, "default": 5, "work": _work, **kwargs}
    with pytest.raises(UsageError, match=expected):
        Sweep(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("sweep_kwargs", "expected"),
    [
        ({"single": ("nope",)}, "'nope' is not a param"),
        ({"single": ("k",)}, "single='k' names a param that is not a tuple"),
        ({"replaces": ("nope",)}, "'nope' is not a param"),
    ],
)
def test_register_refuses_a_sweep_naming_params_it_cannot_use(sweep_kwargs: dict[str, Any], expected: str) -> None:
    from repro.core.spec import Metric, Requirements, Sweep
    from repro.run import catalog

    @dataclass(frozen=True)
    class KParams:
        k: int = 1
        ks: tuple[int, ...] = (1,)

    class Bad(Repro[KParams]):
        id = "bad-sweep-decl"
        title = "t"
        upstream = ()
        seed_claim = "synthetic"
        Params = KParams
        requires = Requirements(cuda=False)
        metric = Metric(name="t", description="t", threshold=1.5)
        sweeps = (Sweep("k", "h", min=1, max=10, default=5, work=_work, **sweep_kwargs),)

    with pytest.raises(UsageError, match=expected):
        catalog.register(Bad)
    assert "bad-sweep-decl" not in catalog.load()


def test_batch_sweep_at_another_cliff_n_needs_no_n_min_or_n_max() -> None:
    from repro.cliff.run import CliffRequest, resolve

    for smoke in (False, True):
        one = {"backends": "default"}
        r = resolve(CliffRequest("solve-512-cliff", "batch", "1:8", {"cliff_n": "700", **one}, smoke=smoke))
        assert (r.params.n_min, r.params.cliff_n, r.params.n_max) == (699, 700, 700)
    r = resolve(CliffRequest("solve-512-cliff", "batch", "1:8", {"backends": "default"}, smoke=True))
    assert (r.params.n_min, r.params.cliff_n, r.params.n_max) == (30, 32, 33)  # the smoke preset, untouched
