"""When to stop timing: adaptive sampling of one call, the order of paired rounds, and the
paired stop rule (every comparison precise enough, or decided)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from repro.core import stats
from repro.core.context import SamplingConfig
from repro.core.results import Comparison, StopReason

__all__ = ["kernel_enough", "kernel_episode", "paired_stop", "sample_adaptively"]


def sample_adaptively(
    take: Callable[[], float],
    cfg: SamplingConfig,
    clock: Callable[[], float] = time.perf_counter,
    on_check: Callable[[int, float], None] | None = None,
) -> tuple[list[float], StopReason, float]:
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


def paired_stop(
    comps: Sequence[Comparison], rounds: Mapping[str, Sequence[float]], cfg: SamplingConfig, episode: int | None
) -> StopReason | None:
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
        width = stats.rel_halfwidth(value, lo, hi)
        on_target &= width <= cfg.target_rel_ci
        _, slo, shi = stats.paired_ratio_ci(rounds[c.num], rounds[c.den], cfg.decided_level, c.scale, episode)
        decided &= (slo >= c.threshold or shi < c.threshold) and width <= cfg.decided_rel_ci
    if on_target:
        return "ci_target"
    return "decided" if decided else None


def kernel_episode(iters: int, episodes: int) -> int | None:
    """Rounds per episode when ``iters`` kernel rounds come in ``episodes`` episodes, or
    None when they do not (one episode, or too few rounds for two per episode)."""
    if episodes <= 1 or iters < 2 * episodes:
        return None
    return -(-iters // episodes)


def kernel_enough(
    rounds: Mapping[str, Sequence[float]],
    pairs: Sequence[tuple[str, str]],
    episode: int | None,
    min_rounds: int,
    target_rel_ci: float,
) -> bool:
    """Whether per-kernel rounds may stop: at least ``min_rounds`` rounds, and for every
    (numerator, denominator) pair a matched kernel in every round and a paired-ratio CI
    (95%, widened over the episodes' medians as the verdict widens it) within the target.

    A round without a matched kernel never stops the rounds early: the verdict would drop
    it, and the episodes with it, so the CI seen here would not be the verdict's.
    """
    done = min((len(xs) for xs in rounds.values()), default=0)
    if not pairs or done < min_rounds:
        return False
    for num, den in pairs:
        a, b = rounds[num][:done], rounds[den][:done]
        if not all(x > 0 for x in (*a, *b)):
            return False
        value, lo, hi = stats.paired_ratio_ci(a, b, 0.95, 1.0, episode)
        if (hi - lo) / 2 / value > target_rel_ci:
            return False
    return True
