"""Per-kernel rounds: the stop rule (kernel_enough) and RunContext.kernel_rounds' episodes, on CPU
with a stand-in profiler session and synthetic per-call times (not a GPU run)."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from repro.core.context import SamplingConfig
from repro.repros.fused_adam import MIN_KERNEL_SAMPLES, AdamParams, kernel_plan
from repro.run.context import RunContext
from repro.run.sampling import kernel_enough, kernel_episode


def _steady(n: int, value: float, spread: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [value * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


def test_kernel_enough_needs_the_floor_every_round_matched_and_the_target() -> None:
    tight = {"a": _steady(12, 1.9e-3, 0.001, 1), "b": _steady(12, 1e-3, 0.001, 2)}
    assert kernel_enough(tight, [("a", "b")], 2, 12, 0.01)
    assert not kernel_enough(tight, [("a", "b")], 2, 14, 0.01)  # under the floor
    assert not kernel_enough(tight, [], 2, 12, 0.01)  # no pair: nothing says the rounds are enough
    holed = {"a": [*tight["a"][:5], 0.0, *tight["a"][6:]], "b": tight["b"]}
    assert not kernel_enough(holed, [("a", "b")], 2, 12, 0.01)  # the verdict would drop that round
    noisy = {"a": _steady(12, 1.9e-3, 0.2, 3), "b": _steady(12, 1e-3, 0.2, 4)}
    assert not kernel_enough(noisy, [("a", "b")], 2, 12, 0.01)
    assert kernel_enough(noisy, [("a", "b")], 2, 12, 1.0)  # a looser target stops no later


@dataclass
class _Ctx(RunContext):
    """kernel_rounds with its profiler session replaced by per-call times from ``times``."""

    times: Callable[[str, int], float] = lambda name, r: 1e-3
    sessions: list[tuple[list[range], bool]] = field(default_factory=list)
    slept: list[float] = field(default_factory=list)

    def synchronize(self) -> None:
        pass

    def _kernel_session(
        self,
        fns: Mapping[str, Callable[[], Any]],
        episodes: Sequence[range],
        match: Callable[[str], bool],
        prepare: Mapping[str, Callable[[], None]] | None,
        warm: bool,
    ) -> dict[str, list[float]]:
        self.sessions.append((list(episodes), warm))
        self.slept += [self.sampling.episode_gap_s] * (len(episodes) - 1)  # the gaps inside the session
        return {name: [self.times(name, r) for rounds in episodes for r in rounds] for name in fns}


def _ctx(times: Callable[[str, int], float], target: float = 0.01) -> _Ctx:
    ctx = _Ctx(device="cuda", smoke=False, sampling=SamplingConfig(target_rel_ci=target), times=times)
    ctx.sleep = ctx.slept.append
    return ctx


def _run(ctx: _Ctx, **kw: Any) -> dict[str, list[float]]:
    fns = {"regular": lambda: None, "capturable": lambda: None}
    return ctx.kernel_rounds(fns, 36, lambda n: True, episodes=18, **kw)


def test_kernel_rounds_stop_at_the_floor_when_the_ci_is_on_target() -> None:
    rng = random.Random(7)
    ctx = _ctx(lambda name, r: (1.9e-3 if name == "capturable" else 1e-3) * (1 + rng.uniform(-1e-3, 1e-3)))
    out = _run(ctx, pairs=[("capturable", "regular")], min_iters=12)
    assert [len(xs) for xs in out.values()] == [12, 12]
    # one profiler session for the six episodes of 2 rounds the floor needs, the idle gaps inside it
    assert ctx.sessions == [([range(r, r + 2) for r in range(0, 12, 2)], False)]
    assert ctx.slept == [0.5] * 5 and "sampling" in ctx.spent


def test_kernel_rounds_go_on_while_the_ci_is_wide_and_without_pairs() -> None:
    rng = random.Random(8)
    ctx = _ctx(lambda name, r: (1.9e-3 if name == "capturable" else 1e-3) * (1 + rng.uniform(-0.3, 0.3)))
    out = _run(ctx, pairs=[("capturable", "regular")], min_iters=12)
    assert [len(xs) for xs in out.values()] == [36, 36] and len(ctx.slept) == 17
    # after the floor's session, one session per episode, each opened by warm calls, so the CI is read after each
    assert ctx.sessions[1:] == [([range(r, r + 2)], True) for r in range(12, 36, 2)]
    steady = _ctx(lambda name, r: 1e-3)
    assert [len(xs) for xs in _run(steady).values()] == [36, 36]  # no pairs: every round
    assert len(steady.sessions) == 1 and len(steady.sessions[0][0]) == 18 and len(steady.slept) == 17


def test_a_looser_target_stops_the_kernel_rounds_no_later() -> None:
    def times(seed: int) -> Callable[[str, int], float]:
        rng = random.Random(seed)
        return lambda name, r: (1.9e-3 if name == "capturable" else 1e-3) * (1 + rng.uniform(-0.02, 0.02))

    for seed in range(5):
        strict = _run(_ctx(times(seed), 0.01), pairs=[("capturable", "regular")], min_iters=12)
        loose = _run(_ctx(times(seed), 0.05), pairs=[("capturable", "regular")], min_iters=12)
        assert len(loose["regular"]) <= len(strict["regular"])
        assert len(loose["regular"]) == 12


def test_kernel_plan_keeps_six_episodes_and_whole_episodes() -> None:
    most, episodes, fewest = kernel_plan(AdamParams())
    assert (most, episodes, fewest) == (36, 18, 12)
    assert kernel_episode(most, episodes) == 2
    most, episodes, fewest = kernel_plan(AdamParams(kernel_iters=MIN_KERNEL_SAMPLES, kernel_episode_rounds=2))
    assert most == 8 and fewest == 8 and kernel_episode(most, episodes) == 2
    most, episodes, fewest = kernel_plan(AdamParams(kernel_episodes=1, kernel_episode_rounds=3))
    assert (most, fewest) == (36, MIN_KERNEL_SAMPLES) and kernel_episode(most, episodes) == 3


def test_cpu_context_still_refuses_kernel_rounds() -> None:
    with pytest.raises(RuntimeError, match="needs CUDA"):
        RunContext(device="cpu", smoke=True).kernel_rounds({"f": lambda: None}, 7, lambda n: True)
