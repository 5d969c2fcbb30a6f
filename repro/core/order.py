"""The arms' order within a round, and whether a paired comparison's per-round ratios depend on it.

``round_order`` rotates a group's arms every other round and reverses them in odd rounds, so each arm runs in
each position equally often and a trend over time cancels in the median. With three or more arms that gives
``2k`` orders, and an arm can follow a different one in each: a carry-over (the arm after a heavy one runs under
a power cap that arm set off, or with a cache it warmed) makes the per-round ratio depend on the order, and the
median of the ratios is then a mix of the orders' values that the order-statistic CI does not describe.
``order_effect`` groups the rounds by their order and says so where the orders' medians lie further apart than
twice the CI's half-width, and the orders' ranks further apart than shuffling the same ratios across the orders
puts them (a permutation test of Kruskal-Wallis's statistic).

``order_warnings`` is the check a run records (the headline's makes a run suspect; another row's is a warning): the
rounds where the ratio's numerator ran before its denominator against those where it ran after, whose medians an
order effect splits into two clusters the median can sit anywhere between; and in a group of three or more arms,
where that split finds nothing, whole orders (``order_effect``), as a carry-over from a third arm can hide in it.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from repro.core import stats
from repro.core.results import VariantResult

__all__ = [
    "FLOOR",
    "MIN_ROUNDS",
    "OrderEffect",
    "num_first",
    "order_effect",
    "order_warnings",
    "orders_of",
    "orders_words",
    "round_order",
]

MIN_ROUNDS = 3  # per order: fewer say nothing about an order effect
FLOOR = 0.01  # orders less than 1% apart are not worth a word, whatever the CI
ALPHA = 0.01  # the permutation test's level: a spread of the orders' medians this unlikely by chance
PERMUTATIONS = 2000


def round_order(k: int, r: int) -> list[int]:
    """The order of ``k`` arms in round ``r``: rotated every other round, reversed in odd ones.

    For two arms that is AB BA BA AB AB BA ...: each arm is as often first as second, and
    each round pair is symmetric, so a trend over time cancels in the per-round ratios.
    """
    shift = (r // 2) % k
    order = [(i + shift) % k for i in range(k)]
    return order[::-1] if r % 2 else order


def orders_of(arms: Sequence[str], n: int) -> list[tuple[str, ...]]:
    """The arms of one group (in the group's own order) as they ran in each of ``n`` rounds."""
    return [tuple(arms[i] for i in round_order(len(arms), r)) for r in range(n)]


@dataclass(frozen=True)
class OrderEffect:
    """The lowest and highest of the orders' median per-round ratios, the orders they came from, how many orders
    and rounds there were (the fewest rounds any order had), how far apart the two lie (relative to the lower)
    and the permutation p-value of that spread."""

    low: float
    low_order: tuple[str, ...]
    high: float
    high_order: tuple[str, ...]
    orders: int
    rounds: int
    gap: float
    p: float


def _spread(groups: Sequence[Sequence[float]]) -> float:
    meds = [statistics.median(g) for g in groups]
    return max(meds) / min(meds) - 1 if min(meds) > 0 else 0.0


def _ranks(xs: Sequence[float]) -> list[float]:
    """Each value's rank among ``xs`` (1-based, ties sharing their mean rank)."""
    at = sorted(range(len(xs)), key=lambda i: xs[i])
    out = [0.0] * len(xs)
    i = 0
    while i < len(at):
        j = i
        while j + 1 < len(at) and xs[at[j + 1]] == xs[at[i]]:
            j += 1
        for k in range(i, j + 1):
            out[at[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def _between(ranks: Sequence[float], sizes: Sequence[int]) -> float:
    """How far the groups' mean ranks lie from the overall mean (Kruskal-Wallis's H, up to its constant factor):
    the groups are consecutive runs of ``sizes`` in ``ranks``."""
    mid, total, at = (len(ranks) + 1) / 2, 0.0, 0
    for n in sizes:
        total += n * (sum(ranks[at : at + n]) / n - mid) ** 2
        at += n
    return total


def order_effect(
    num: Sequence[float],
    den: Sequence[float],
    orders: Sequence[tuple[str, ...]],
    half: float,
    scale: float = 1.0,
    seed: int = 0,
) -> OrderEffect | None:
    """Where the per-round ratios ``num[i] / den[i] * scale`` depend on the round's order (``orders[i]``): the
    orders' medians span more than twice ``half`` (the CI's relative half-width) and FLOOR, with a permutation
    p-value under ALPHA; None otherwise, or with fewer than two orders of MIN_ROUNDS rounds each."""
    if not len(num) == len(den) == len(orders):
        return None
    by: dict[tuple[str, ...], list[float]] = {}
    for a, b, o in zip(num, den, orders, strict=True):
        if b > 0:
            by.setdefault(o, []).append(a / b * scale)
    if len(by) < 2 or min(len(v) for v in by.values()) < MIN_ROUNDS:
        return None
    gap = _spread(list(by.values()))
    if not gap > max(2 * half, FLOOR):  # NaN never passes
        return None
    # How unlikely the orders' ranks part this far by chance: the rounds' ratios shuffled across the orders.
    sizes = [len(v) for v in by.values()]
    ranks = _ranks([x for v in by.values() for x in v])
    seen = _between(ranks, sizes)
    rng = random.Random(seed)
    beyond = 0
    for _ in range(PERMUTATIONS):
        rng.shuffle(ranks)
        beyond += _between(ranks, sizes) >= seen - 1e-9
        if beyond + 1 >= ALPHA * (PERMUTATIONS + 1):
            return None  # p can no longer fall under ALPHA
    p = (beyond + 1) / (PERMUTATIONS + 1)
    meds = {o: statistics.median(v) for o, v in by.items()}
    lo, hi = min(meds, key=lambda o: meds[o]), max(meds, key=lambda o: meds[o])
    return OrderEffect(meds[lo], lo, meds[hi], hi, len(by), min(sizes), gap, p)


def orders_words(e: OrderEffect, value: float, half: float) -> str:
    """How the order check records an order effect over whole orders (``value``: the row's ratio, ``half``: its
    CI's relative half-width); ``repro.evidence.clocks`` reads these words back."""
    return (
        f"the per-round ratios depend on the arms' order within a round: {e.low:.4g} with ({', '.join(e.low_order)})"
        f" to {e.high:.4g} with ({', '.join(e.high_order)}) over its {e.orders} orders ({e.rounds}+ rounds each; "
        f"{e.gap:.1%} apart, beyond twice the CI's ±{half:.1%}; Kruskal-Wallis permutation p {e.p:.2g}); the median "
        f"{value:.4g} sits between them and the CI does not cover this"
    )


def order_warnings(
    breakdown: Sequence[Mapping[str, Any]], variants: Sequence[VariantResult], headline: bool = True
) -> list[str]:
    """One warning per paired row whose forward rounds (its numerator ran before its denominator) and reversed
    ones (after) part by more than twice its CI's relative half-width (and FLOOR), or, in a group of three or more
    arms, whose whole orders do (``order_effect``): the headline row, or with ``headline=False`` every other row;
    [] when none does or the rounds are not recorded."""
    have = {v.name: v for v in variants}
    out = []
    for row in breakdown:
        if bool(row.get("headline")) != headline or not row.get("paired"):
            continue
        num, den = have.get(str(row.get("num"))), have.get(str(row.get("den")))
        a = (num.timing.rounds if num is not None and num.timing is not None else None) or ()
        b = (den.timing.rounds if den is not None and den.timing is not None else None) or ()
        value, lo, hi = row.get("ratio"), row.get("ci_low"), row.get("ci_high")
        if len(a) != len(b) or len(a) < 2 * MIN_ROUNDS:
            continue
        if not isinstance(value, float) or not isinstance(lo, float) or not isinstance(hi, float):
            continue
        if not all(x > 0 for x in b):
            continue  # a round left out of the ratios would shift every later round's order
        ratios = stats.paired_ratios(a, b, float(row.get("scale") or 1.0))
        first = num_first(variants, str(row.get("num")), str(row.get("den")), len(ratios))
        if first is None:
            continue  # not one recorded group: which ran first is not known
        ahead = [x for x, f in zip(ratios, first, strict=True) if f]
        behind = [x for x, f in zip(ratios, first, strict=True) if not f]
        if len(ahead) < MIN_ROUNDS or len(behind) < MIN_ROUNDS:
            continue
        forward, reversed_ = statistics.median(ahead), statistics.median(behind)
        gap = abs(forward / reversed_ - 1) if reversed_ > 0 else 0.0
        half = (hi - lo) / 2 / value if value else 0.0
        if gap > max(2 * half, FLOOR):
            out.append(
                f"{row.get('comparison')}: the per-round ratios depend on the arms' order within a round: "
                f"{forward:.4g} in forward rounds, {reversed_:.4g} in reversed ones (forward: {row.get('num')} ran "
                f"before {row.get('den')}; {gap:.1%} apart, beyond twice "
                f"the CI's ±{half:.1%}); the median {value:.4g} sits between them and the CI does not cover this"
            )
            continue
        arms = group_arms(variants, str(row.get("num")), str(row.get("den")))
        if arms is not None and len(arms) > 2:
            scale = float(row.get("scale") or 1.0)
            if (e := order_effect(a, b, orders_of(arms, len(a)), half, scale)) is not None:
                out.append(f"{row.get('comparison')}: {orders_words(e, value, half)}")
    return out


def group_arms(variants: Sequence[VariantResult], num: str, den: str) -> list[str] | None:
    """The timed arms of the group that holds ``num`` and ``den`` (``timing.group``), in the group's order (the
    schedule keeps the repro's); None when the two are not timed in one recorded group of the harness's own
    schedule."""
    # An external program (graph-memset's CUDA twin) orders its own rounds, not by round_order: no group here.
    group = {
        v.name: v.timing.group
        for v in variants
        if v.timing is not None and v.timing.rounds and v.timing.method != "external"
    }
    g = group.get(num)
    if g is None or group.get(den) != g:
        return None
    return [name for name, grp in group.items() if grp == g]


def num_first(variants: Sequence[VariantResult], num: str, den: str, n: int) -> list[bool] | None:
    """For each of ``n`` rounds, whether arm ``num`` ran before arm ``den``: from their positions among the timed
    arms of their group and ``round_order``; None when the two are not timed in one recorded group."""
    arms = group_arms(variants, num, den)
    if arms is None:
        return None
    i, j = arms.index(num), arms.index(den)
    return [(o := round_order(len(arms), r)).index(i) < o.index(j) for r in range(n)]
