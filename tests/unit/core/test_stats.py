"""Statistics: order-statistic CIs, ratio intervals that hold their coverage, adaptive stopping."""

from __future__ import annotations

import random

import pytest

from repro.core import stats
from repro.core.context import SamplingConfig
from repro.run.sampling import sample_adaptively


def test_median_ci_ranks_match_exact_binomial() -> None:
    # n=10 at 95%: x_(2)..x_(9), the textbook distribution-free interval (coverage 97.9%).
    assert stats.median_ci_ranks(10, 0.95) == (1, 8)
    assert stats.median_ci_ranks(5, 0.95) is None  # 2 * 0.5^5 = 6.25% > 5%: no interval exists
    assert stats.median_ci_ranks(6, 0.95) == (0, 5)


def test_large_n_uses_normal_approximation_near_exact() -> None:
    ranks = stats.median_ci_ranks(1001, 0.95)
    assert ranks is not None
    lo, hi = ranks
    # 1.96 * sqrt(1001) / 2 ~ 31 ranks either side of the middle
    assert 465 <= lo <= 470 and 530 <= hi <= 536


def test_summarize_known_values() -> None:
    s = stats.summarize([5.0, 1.0, 3.0, 2.0, 4.0, 6.0, 7.0, 8.0, 9.0, 10.0])
    assert (s.n, s.median, s.min, s.max) == (10, 5.5, 1.0, 10.0)
    assert (s.q1, s.q3, s.iqr) == (3.25, 7.75, 4.5)
    assert (s.ci_low, s.ci_high) == (2.0, 9.0)
    assert s.rel_ci_halfwidth == pytest.approx(3.5 / 5.5)


def test_too_few_samples_claim_no_precision() -> None:
    assert stats.summarize([1.0, 1.0, 1.0]).rel_ci_halfwidth == float("inf")
    with pytest.raises(ValueError):
        stats.summarize([])


def test_ratio_ci_brackets_the_ratio() -> None:
    rng = random.Random(1)
    a = [2.0 + rng.gauss(0, 0.05) for _ in range(200)]
    b = [1.0 + rng.gauss(0, 0.02) for _ in range(200)]
    value, lo, hi = stats.ratio_ci(a, b)
    assert lo < value < hi
    assert lo > 1.9 and hi < 2.1
    v2, lo2, hi2 = stats.ratio_ci(a, b, scale=0.5)
    assert (v2, lo2, hi2) == pytest.approx((value / 2, lo / 2, hi / 2))


def test_ratio_ci_coverage_is_at_least_nominal() -> None:
    # Skewed (lognormal) timings, true median ratio exactly 1.5.
    rng = random.Random(7)
    trials, hits = 300, 0
    for _ in range(trials):
        a = [1.5 * rng.lognormvariate(0, 0.3) for _ in range(30)]
        b = [rng.lognormvariate(0, 0.3) for _ in range(30)]
        _, lo, hi = stats.ratio_ci(a, b)
        hits += lo <= 1.5 <= hi
    assert hits / trials >= 0.93


class FakeClock:
    def __init__(self, step: float) -> None:
        self.t, self.step = 0.0, step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


def test_sampling_stops_on_ci_target() -> None:
    samples, reason, _ = sample_adaptively(lambda: 1.0, SamplingConfig(min_samples=10), FakeClock(0.001))
    assert reason == "ci_target" and len(samples) == 10


def test_sampling_stops_on_budget_when_noisy() -> None:
    rng = random.Random(3)
    cfg = SamplingConfig(target_rel_ci=0.0001, budget_s=1.0, max_samples=10_000)
    samples, reason, elapsed = sample_adaptively(lambda: rng.uniform(1, 3), cfg, FakeClock(0.01))
    assert reason == "time_budget" and elapsed >= 1.0 and 90 <= len(samples) <= 110


def test_sampling_stops_at_max_samples() -> None:
    rng = random.Random(3)
    cfg = SamplingConfig(target_rel_ci=0.0001, budget_s=1e9, max_samples=50)
    samples, reason, _ = sample_adaptively(lambda: rng.uniform(1, 3), cfg, FakeClock(0.01))
    assert reason == "max_samples" and len(samples) == 50


def test_summarize_rounds_widens_the_ci_over_the_episodes_medians() -> None:
    """60 rounds in 12 episodes of 5: each episode holds its own level (819-925 style swings), the
    rounds within it barely move. The rounds' own CI misses the episodes' spread; the widened one
    covers the episodes' order-statistic CI, as a paired ratio's does."""
    levels = [1.0 + 0.03 * (e % 5) for e in range(12)]
    rounds = [levels[i // 5] * (1 + 0.0005 * (i % 3)) for i in range(60)]
    flat = stats.summarize(rounds)
    wide = stats.summarize_rounds(rounds, 5)
    meds = stats.summarize([stats.quantile(sorted(rounds[i : i + 5]), 0.5) for i in range(0, 60, 5)])
    assert wide.n == 60 and wide.median == flat.median
    assert wide.ci_low == min(flat.ci_low, meds.ci_low) and wide.ci_high == max(flat.ci_high, meds.ci_high)
    assert wide.ci_high - wide.ci_low > 2 * (flat.ci_high - flat.ci_low)
    assert wide.rel_ci_halfwidth > flat.rel_ci_halfwidth
    # Without episodes, or with fewer than MIN_EPISODES of them, it is summarize over the rounds.
    assert stats.summarize_rounds(rounds) == flat and stats.summarize_rounds(rounds, 12) == flat


def test_the_episodes_a_level_needs_cover_it_with_their_min_max_range() -> None:
    assert stats.episodes_for(0.95) == stats.MIN_EPISODES == 6
    one_of_six = stats.family_level(6)
    assert one_of_six == pytest.approx(1 - 0.05 / 6) and stats.family_level(1) == 0.95
    assert stats.episodes_for(one_of_six) == 8
    for level in (0.9, 0.95, 0.99, one_of_six, 0.999):
        n = stats.episodes_for(level)
        # The min-max of n episode medians covers the median with probability 1 - 2 / 2**n; one fewer
        # episode would not (or n is the floor of six).
        assert 1 - 2 * 0.5**n >= level and (n == 6 or 1 - 2 * 0.5 ** (n - 1) < level)
        assert stats.median_ci_ranks(n, level) == (0, n - 1)


def test_a_worst_of_six_repro_is_scheduled_for_eight_episodes_and_a_first_rule_one_for_six() -> None:
    from repro.core.context import SamplingConfig
    from repro.core.spec import Comparison
    from repro.run.execute import enough_episodes

    six = [Comparison(f"c{i}", f"a{i}", f"b{i}", 1.5) for i in range(6)]
    assert enough_episodes(SamplingConfig(), six, "worst").min_episodes == 8
    assert enough_episodes(SamplingConfig(), six, "first").min_episodes == 6
    assert enough_episodes(SamplingConfig(), six[:1], "worst").min_episodes == 6
    assert enough_episodes(SamplingConfig(min_episodes=10), six, "worst").min_episodes == 10


def test_cis_overlap_counts_touching_ends_and_is_symmetric() -> None:
    assert stats.cis_overlap(1.0, 2.0, 2.0, 3.0) and stats.cis_overlap(2.0, 3.0, 1.0, 2.0)
    assert stats.cis_overlap(1.0, 4.0, 2.0, 3.0) and stats.cis_overlap(2.0, 3.0, 1.0, 4.0)
    assert not stats.cis_overlap(1.0, 1.99, 2.0, 3.0) and not stats.cis_overlap(2.0, 3.0, 1.0, 1.99)
