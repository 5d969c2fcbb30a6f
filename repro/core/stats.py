"""Distribution-free statistics: median CIs from order statistics and defended ratio intervals."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

from repro.core.results import Stats
from repro.core.results import rel_halfwidth as rel_halfwidth  # here too: the stats of a CI

# Below this many samples the exact binomial tail is summed; above it the normal
# approximation of the binomial is within a fraction of an order statistic.
_EXACT_LIMIT = 1000
# The fewest episodes whose min-max range covers a median at >= 95% (see paired_ratio_ci).
MIN_EPISODES = 6


def quantile(sorted_xs: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default) of already-sorted data."""
    if not sorted_xs:
        raise ValueError("quantile of no samples")
    pos = (len(sorted_xs) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def _binom_cdf_half(n: int, k: int) -> float:
    """P(B <= k) for B ~ Binomial(n, 1/2), summed in log space so large n cannot overflow."""
    if k < 0:
        return 0.0
    log_half_n = -n * math.log(2.0)
    total = 0.0
    for i in range(0, min(k, n) + 1):
        total += math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + log_half_n)
    return min(total, 1.0)


def median_ci_ranks(n: int, level: float) -> tuple[int, int] | None:
    """0-based ranks (lo, hi) of the order statistics bracketing the median at ``level``.

    Distribution-free: the median lies in [x_(j), x_(n-j+1)] with probability
    1 - 2 P(B <= j-1). Returns None when n is too small for any such interval.
    """
    alpha = 1.0 - level
    if n <= _EXACT_LIMIT:
        j = 0
        while _binom_cdf_half(n, j) <= alpha / 2:  # P(B <= j) <= alpha/2 means x_(j+1) is safe
            j += 1
        if j == 0:
            return None
        return j - 1, n - j
    z = statistics.NormalDist().inv_cdf(1 - alpha / 2)
    half = z * math.sqrt(n) / 2
    lo = max(0, math.floor(n / 2 - half) - 1)
    hi = min(n - 1, math.ceil(n / 2 + half))
    return lo, hi


def summarize(samples: Sequence[float], level: float = 0.95) -> Stats:
    """Median, IQR, extremes and the median's CI of one sample set."""
    if not samples:
        raise ValueError("cannot summarize an empty sample set")
    xs = sorted(samples)
    n = len(xs)
    med = quantile(xs, 0.5)
    ranks = median_ci_ranks(n, level)
    lo, hi = (xs[ranks[0]], xs[ranks[1]]) if ranks else (xs[0], xs[-1])
    q1, q3 = quantile(xs, 0.25), quantile(xs, 0.75)
    rel = rel_halfwidth(med, lo, hi)
    if ranks is None:
        rel = math.inf  # too few samples to claim any interval
    return Stats(
        n=n,
        median=med,
        mean=statistics.fmean(xs),
        stdev=statistics.stdev(xs) if n > 1 else 0.0,
        min=xs[0],
        max=xs[-1],
        q1=q1,
        q3=q3,
        iqr=q3 - q1,
        ci_low=lo,
        ci_high=hi,
        ci_level=level,
        rel_ci_halfwidth=rel,
    )


def summarize_rounds(rounds: Sequence[float], episode: int | None = None, level: float = 0.95) -> Stats:
    """``summarize`` over a variant's per-round values, its CI widened over the episodes' medians.

    A round (the median of its samples) is the unit that varies, not a sample: replays within
    a round share the GPU's state. Where the rounds came in episodes of ``episode`` rounds, the
    CI is widened to the order-statistic CI of the episodes' medians, as ``paired_ratio_ci``
    widens a ratio's, so a variant's CI and a ratio's cover the same spread.
    """
    st = summarize(rounds, level)
    lo, hi = episode_widened(rounds, st.ci_low, st.ci_high, episode, level)
    if (lo, hi) == (st.ci_low, st.ci_high):
        return st
    rel = rel_halfwidth(st.median, lo, hi)
    return replace(st, ci_low=lo, ci_high=hi, rel_ci_halfwidth=max(rel, st.rel_ci_halfwidth))


def family_level(k: int, level: float = 0.95) -> float:
    """The level each of ``k`` CIs needs when any one of them clearing a threshold decides: 1 - (1 - level) / k
    (Bonferroni), so the family's decision keeps ``level``."""
    return 1 - (1 - level) / k if k > 1 else level


def headline_level(k: int, rule: str, level: float = 0.95) -> float:
    """The level each of ``k`` headline CIs is judged at: ``family_level`` under the ``"worst"`` rule (any
    one of them decides), else ``level``. The verdict judges at it and the schedule samples for it."""
    return family_level(k, level) if rule == "worst" else level


def episodes_for(level: float) -> int:
    """The fewest episodes (at least MIN_EPISODES) whose medians' min-max range covers a median at ``level``:
    1 - 2 / 2**n >= level (6 for 95%, 8 for the 99.2% of one of six comparisons)."""
    n = MIN_EPISODES
    while 1 - 2 * 0.5**n < level:
        n += 1
    return n


def episodes(values: Sequence[float], episode: int | None) -> list[Sequence[float]]:
    """``values`` cut into episodes of ``episode`` values each, in order (the last may be shorter); [] without
    episodes or with fewer than two of them."""
    if not episode or episode < 1 or len(values) < 2 * episode:
        return []
    return [values[i : i + episode] for i in range(0, len(values), episode)]


def episode_medians(values: Sequence[float], episode: int | None) -> list[float]:
    """The medians of ``values``' episodes (``episodes``), in order; [] without episodes or with fewer than two."""
    return [quantile(sorted(ep), 0.5) for ep in episodes(values, episode)]


def episode_widened(
    values: Sequence[float], lo: float, hi: float, episode: int | None, level: float = 0.95
) -> tuple[float, float]:
    """(lo, hi) widened to the order-statistic CI of the medians of ``values``' episodes of
    ``episode`` values each, where there are at least MIN_EPISODES of them (see paired_ratio_ci)."""
    meds = episode_medians(values, episode)
    if len(meds) < MIN_EPISODES:
        return lo, hi
    ep = summarize(meds, level)
    return min(lo, ep.ci_low), max(hi, ep.ci_high)


def ratio_ci(
    num: Sequence[float], den: Sequence[float], level: float = 0.95, scale: float = 1.0
) -> tuple[float, float, float]:
    """Ratio of medians (times ``scale``) with a conservative CI from both sample sets.

    Each median gets a distribution-free interval at level sqrt(level); the two sets
    are independent, so both intervals hold at once with probability >= level, and
    then the ratio lies in [lo_num/hi_den, hi_num/lo_den]. No normality assumed.
    """
    per = math.sqrt(level)
    a, b = summarize(num, per), summarize(den, per)
    value = quantile(sorted(num), 0.5) / quantile(sorted(den), 0.5) * scale
    return value, a.ci_low / b.ci_high * scale, a.ci_high / b.ci_low * scale


def paired_ratios(num_rounds: Sequence[float], den_rounds: Sequence[float], scale: float = 1.0) -> list[float]:
    """The per-round ratios num[i]/den[i] times ``scale``, rounds with a non-positive denominator left out."""
    return [a / b * scale for a, b in zip(num_rounds, den_rounds, strict=True) if b > 0]


def paired_ratio_ci(
    num_rounds: Sequence[float],
    den_rounds: Sequence[float],
    level: float = 0.95,
    scale: float = 1.0,
    episode: int | None = None,
) -> tuple[float, float, float]:
    """Median of the per-round ratios num[i]/den[i] (times ``scale``) and its distribution-free CI.

    Both sides were timed in the same interleaved rounds, so a slow state of the GPU that
    lasts a round hits both alike and cancels in that round's ratio, while a state that
    changes between rounds shows up as spread between the ratios, and so in the CI. The
    rounds are taken as exchangeable; no normality is assumed.

    ``episode``: the rounds came in episodes of that many rounds, separated by idle gaps
    in which the GPU leaves its power state. The ratio depends on that state (a slower
    clock stretches compute-bound kernels more than memory-bound ones), and a state lasts
    through an episode, so episodes, not rounds, are the independent units: the CI is
    widened to the order-statistic CI of the episodes' medians (with 6 episodes, their
    min-max range, which covers the median with probability 1 - 2 * 0.5^6 = 96.9%).
    """
    if len(num_rounds) != len(den_rounds):
        raise ValueError(f"paired rounds differ in length: {len(num_rounds)} vs {len(den_rounds)}")
    ratios = paired_ratios(num_rounds, den_rounds, scale)
    if not ratios:
        raise ValueError("no paired round with a positive denominator")
    st = summarize(ratios, level)
    lo, hi = episode_widened(ratios, st.ci_low, st.ci_high, episode, level)
    return st.median, lo, hi


def cis_overlap(a_low: float, a_high: float, b_low: float, b_high: float) -> bool:
    """Whether two intervals share a point (touching ends count)."""
    return a_low <= b_high and b_low <= a_high


def classify(value: float, lo: float, hi: float, threshold: float) -> Literal["above", "below", "straddles"]:
    """Where the CI sits against the threshold, for the finding's wording."""
    if lo >= threshold:
        return "above"
    if hi < threshold:
        return "below"
    return "straddles"
