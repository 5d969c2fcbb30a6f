"""Whether a paired comparison's per-round ratios depend on the arms' order within a round (the headline's
makes a run suspect; another row's is a warning).

``round_order`` runs the arms forward in even rounds and reversed in odd ones, so a trend over time
cancels in the median. An order effect (the arm that runs after another is slower or faster: heat,
a power cap, a cache) splits the rounds into two clusters instead, and the median of the ratios can
then sit anywhere between them: the order-statistic CI does not cover that. This says so when the
two halves' medians are further apart than the CI's own width.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from repro.core import stats
from repro.core.results import VariantResult

MIN_ROUNDS = 3  # per half: fewer say nothing about an order effect
FLOOR = 0.01  # a gap under 1% is not worth a warning, whatever the CI


def order_warnings(
    breakdown: Sequence[Mapping[str, Any]], variants: Sequence[VariantResult], headline: bool = True
) -> list[str]:
    """One warning per paired row whose forward and reversed rounds part by more than twice its CI's
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
        forward, reversed_ = statistics.median(ratios[0::2]), statistics.median(ratios[1::2])
        gap = abs(forward / reversed_ - 1) if reversed_ > 0 else 0.0
        half = (hi - lo) / 2 / value if value else 0.0
        if gap > max(2 * half, FLOOR):
            out.append(
                f"{row.get('comparison')}: the per-round ratios depend on the arms' order within a round: "
                f"{forward:.4g} in forward rounds, {reversed_:.4g} in reversed ones ({gap:.1%} apart, beyond twice "
                f"the CI's ±{half:.1%}); the median {value:.4g} sits between them and the CI does not cover this"
            )
    return out
