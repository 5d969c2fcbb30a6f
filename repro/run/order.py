"""Whether a paired comparison's per-round ratios depend on the arms' order within a round (the headline's
makes a run suspect; another row's is a warning).

``round_order`` rotates a group's arms every other round and reverses them in odd rounds, so each arm of a pair
runs first as often as second and a trend over time cancels in the median. An order effect (the arm that runs
after another is slower or faster: heat, a power cap, a cache) splits the rounds into two clusters instead: the
rounds where the ratio's numerator ran before its denominator, and those where it ran after. The median of the
ratios can then sit anywhere between them, and the order-statistic CI does not cover that. This says so when the
two clusters' medians are further apart than the CI's own width.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from repro.core import stats
from repro.core.results import VariantResult
from repro.run.sampling import round_order

MIN_ROUNDS = 3  # per half: fewer say nothing about an order effect
FLOOR = 0.01  # a gap under 1% is not worth a warning, whatever the CI


def order_warnings(
    breakdown: Sequence[Mapping[str, Any]], variants: Sequence[VariantResult], headline: bool = True
) -> list[str]:
    """One warning per paired row whose forward rounds (its numerator ran before its denominator) and reversed
    ones (after) part by more than twice its CI's
    relative half-width (and FLOOR): the headline row, or with ``headline=False`` every other row; []
    when none does or the rounds are not recorded."""
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
    return out


def num_first(variants: Sequence[VariantResult], num: str, den: str, n: int) -> list[bool] | None:
    """For each of ``n`` rounds, whether arm ``num`` ran before arm ``den``: from their positions among the timed
    arms of their group (``timing.group``; the schedule keeps the repro's order) and ``round_order``; None when
    the two are not timed in one recorded group."""
    group = {v.name: v.timing.group for v in variants if v.timing is not None and v.timing.rounds}
    g = group.get(num)
    if g is None or group.get(den) != g:
        return None
    arms = [name for name, grp in group.items() if grp == g]
    i, j = arms.index(num), arms.index(den)
    return [(o := round_order(len(arms), r)).index(i) < o.index(j) for r in range(n)]
