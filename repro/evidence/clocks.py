"""What the GPU's clocks did while a variant was measured, in words taken from the recorded monitor numbers.

A monitor (``repro.env.nvml.Monitor.summary``) records the SM clock's minimum and maximum over every
reading, the median of the polls taken while the work ran, and the clocks-event reasons seen. Every
sentence about clocks (a suspect reason, a warning, the environment's summary) is built here from
those fields, so a sentence never names one number where the record holds another.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from repro.core.order import group_arms, order_warnings, orders_of
from repro.evidence.markdown import unprefixed

if TYPE_CHECKING:
    from repro.evidence.model import Artifact

__all__ = [
    "FOUND",
    "checked",
    "order_rounds",
    "clock_words",
    "during_measurement",
    "is_order",
    "order_about",
    "order_split",
    "restate",
    "unrecorded_orders",
    "whose",
    "without_held_clause",
]


def clock_words(mon: Mapping[str, Any], max_clock: Any = None) -> str:
    """``SM clock 1365-1785 MHz (median 1710)`` plus ``of 1980 MHz max`` when the maximum is known."""
    lo, hi, mid = mon.get("sm_clock_min_mhz"), mon.get("sm_clock_max_mhz"), mon.get("sm_clock_during_mhz")
    if not isinstance(lo, int | float) or not isinstance(hi, int | float):
        return "SM clock not recorded"
    span = f"{lo:g} MHz" if lo == hi else f"{lo:g}-{hi:g} MHz"
    median = f" (median {mid:g})" if isinstance(mid, int | float) and lo != hi else ""
    top = f" of {max_clock:g} MHz max" if isinstance(max_clock, int | float) else ""
    return f"SM clock {span}{median}{top}"


def _max_clock(doc: Artifact) -> float | None:
    return doc.machine.sm_clock_max_mhz


# How artifacts written before this module worded the clock: one number, the median of the polls.
_OLD_REASON = re.compile(r"^(?P<who>[\w.-]+): power cap held the SM clock at \d+ of \d+ MHz$")
_OLD_WARNING = re.compile(
    r"^(?P<who>[\w.-]+): (?P<what>clocks-event reasons while measuring: [\w, ]+) \(SM clock \d+ MHz\)$"
)


# How every order check's warning begins after its comparison's name and ": " (repro.core.order).
ORDER_WORDS = "the per-round ratios depend on the arms' order within a round: "

# The order check's reason as repro.core.order records it, and its shorter form in a report.
_ORDER = re.compile(
    r"^(?P<who>.+?): the per-round ratios depend on the arms' order within a round: (?P<f>\S+) in forward rounds, "
    r"(?P<r>\S+) in reversed ones \((?:forward: (?P<num>\S+) ran before (?P<den>\S+); )?(?P<gap>\S+) apart, beyond "
    r"twice the CI's ±(?P<half>\S+)\); the median \S+ sits "
    r"between them and the CI does not cover this$"
)


# The order check's reason over whole orders (repro.core.order.orders_words), in a group of three or more arms.
_ORDERS = re.compile(
    r"^(?P<who>.+?): the per-round ratios depend on the arms' order within a round: (?P<lo>\S+) with "
    r"\((?P<lo_order>.*?)\) to (?P<hi>\S+) with \((?P<hi_order>.*?)\) over its (?P<k>\d+) orders \((?P<n>\d+)\+ "
    r"rounds each; (?P<gap>\S+) apart, beyond twice the CI's ±(?P<half>\S+); Kruskal-Wallis permutation p "
    r"(?P<p>\S+)\); the median \S+ sits between them and the CI does not cover this$"
)


def _orders_words(m: re.Match[str], brief: bool = False) -> str:
    """The whole-orders check's warning (an ``_ORDERS`` match) in a report's shorter words: the arms' names
    without the prefix they all share up to an underscore, said once; ``brief``: without which orders, with their
    number and their fewest rounds."""
    if brief:
        return (
            f"its rounds split by the arms' order: medians {m['lo']}-{m['hi']} over {m['k']} orders of {m['n']}+ "
            f"rounds (permutation p {m['p']}), past the CI's ±{m['half']}"
        )
    lo, hi = m["lo_order"].split(", "), m["hi_order"].split(", ")
    names, shared = unprefixed(lo + hi)
    lo, hi = names[: len(lo)], names[len(lo) :]
    arms = f"arms {shared}*; " if shared else ""
    return (
        f"the arms' order split the rounds: {m['lo']} in rounds run {', '.join(lo)} to {m['hi']} run "
        f"{', '.join(hi)} ({arms}{m['k']} orders, {m['n']}+ rounds each, Kruskal-Wallis permutation p {m['p']}; "
        f"{m['gap']} apart, over twice the CI's ±{m['half']})"
    )


# What a report says before an order check's words that it made itself on the run's rounds (``checked``), and
# what it adds where there is room.
FOUND = "by this report's check: "
FOUND_WHY = "by this report's check (the run's harness split rounds only by which arm ran first): "


def _order_match(line: str, brief: bool = False) -> str | None:
    """``line`` (an order check's warning) in a report's shorter words, without whose it is; None for another."""
    line = line.removeprefix(FOUND)
    if m := _ORDER.match(line):
        return _order_words(m)
    if m := _ORDERS.match(line):
        return _orders_words(m, brief)
    return None


def _order_words(m: re.Match[str]) -> str:
    """The order check's warning (an ``_ORDER`` match) in a report's shorter words, without whose it is."""
    # Older artifacts split by round parity ("forward", "reversed"); newer ones by which arm ran first.
    split = (
        f"{m['f']} with {m['num']} first, {m['r']} with {m['den']} first"
        if m["num"]
        else (f"{m['f']} forward, {m['r']} reversed")
    )
    return (
        f"the arms' order split the rounds: {split} ({m['gap']} apart, over twice the CI's ±{m['half']}, which does "
        "not cover it)"
    )


def restate(line: str, doc: Artifact, brief: bool = False) -> str:
    """A recorded suspect reason or warning about clocks, reworded from its variant's monitor numbers; the order
    check's, shorter (``brief``: the whole-orders check's without which orders, and this report's own without
    why it made it)."""
    if line.startswith(FOUND):
        return (FOUND if brief else FOUND_WHY) + restate(line.removeprefix(FOUND), doc, brief)
    if (said := _order_match(line, brief)) is not None:
        return f"{line.split(': ', 1)[0]}: {said}{_one_side(line, doc)}"
    monitors = {v.name: v.gpu_monitor for v in doc.variants}
    if (m := _OLD_REASON.match(line)) and isinstance(mon := monitors.get(m["who"]), Mapping):
        return f"{m['who']}: power cap, {clock_words(mon, _max_clock(doc))}"
    if (m := _OLD_WARNING.match(line)) and isinstance(mon := monitors.get(m["who"]), Mapping):
        return f"{m['who']}: {m['what']} ({clock_words(mon)})"
    return line


def unrecorded_orders(doc: Artifact) -> list[str]:
    """The order check's warnings (``repro.core.order.order_warnings``, the headline's and every other row's) on
    this run's rounds that the run itself did not record: its harness made no such check, or not over whole orders.
    """
    rows = doc.raw.get("verdict", {}).get("breakdown") if isinstance(doc.raw.get("verdict"), Mapping) else None
    if not isinstance(rows, list):
        return []
    said = (*doc.warnings, *doc.validity.reasons)
    # A row is checked where nothing recorded (or found here) says its rounds split already; a smoke run's other
    # rows are not checked at all, as its harness does not (order noise is normal there).
    rows = [
        r
        for r in rows
        if isinstance(r, Mapping)
        and (r.get("headline") or not doc.smoke)
        and not any(order_about(ln, str(r.get("comparison"))) for ln in said)
    ]
    return order_warnings(rows, doc.variants) + order_warnings(rows, doc.variants, headline=False)


def order_about(line: str, comparison: str | None) -> bool:
    """Whether ``line``, a reason or warning (recorded, or this report's own after FOUND), is the order check's
    about ``comparison`` (never where there is none, as for a run without a headline)."""
    return comparison is not None and line.removeprefix(FOUND).startswith(f"{comparison}: {ORDER_WORDS}")


def whose(line: str) -> str:
    """What a reason or warning is about: the words before its first colon, after any FOUND."""
    return line.removeprefix(FOUND).split(":", 1)[0]


def order_split(doc: Artifact, comparison: str) -> str:
    """``the arms' order split the rounds: ...`` (``restate``'s words) where the order check warned about this
    comparison, one other than the headline (whose split is a suspect reason, not a warning), in a run from
    ``checked`` (so the check made here on its rounds is among its warnings); "" where it did not."""
    for line in doc.warnings:
        if order_about(line, comparison) and (said := _order_match(line.removeprefix(FOUND), brief=True)) is not None:
            return FOUND + said if line.startswith(FOUND) else said
    return ""


def _one_side(line: str, doc: Artifact) -> str:
    """``, all above the 1.5 threshold``: where the whole-orders check's lowest and highest orders of the
    headline lie on one side of its threshold, so the split cannot turn its status; "" otherwise."""
    if (m := _ORDERS.match(line.removeprefix(FOUND))) is None or m["who"] != doc.verdict.headline:
        return ""
    if not isinstance(t := doc.verdict.threshold, int | float) or isinstance(t, bool):
        return ""
    try:
        lo, hi = float(m["lo"]), float(m["hi"])
    except ValueError:  # a recorded line whose numbers do not read as numbers: nothing to say
        return ""
    side = "above" if lo > t else "below" if hi < t else ""
    return f", all {side} the {t:g} threshold" if side else ""


def is_order(line: str) -> bool:
    """Whether ``line`` is an order check's reason or warning (recorded, or this report's own)."""
    return _order_match(line) is not None


def checked(doc: Artifact) -> Artifact:
    """The run with the order check made on its rounds where its harness made none (``unrecorded_orders``), each
    found line after FOUND: a headline's as a suspect reason (as a run records it), another row's as a warning."""
    found = unrecorded_orders(doc)
    if not found:
        return doc
    # A headline's makes the run suspect, as a run records it, unless validity does not apply to the run at all.
    mine = doc.validity.flag != "not_applicable"
    head = tuple(FOUND + w for w in found if mine and order_about(w, doc.verdict.headline))
    rows = tuple(FOUND + w for w in found if not (mine and order_about(w, doc.verdict.headline)))
    validity = replace(doc.validity, flag="suspect", reasons=(*doc.validity.reasons, *head)) if head else None
    return replace(doc, validity=validity or doc.validity, warnings=(*doc.warnings, *rows))


# A finding's clause on clocks held down (repro.repros._lora_finding.clocks_clause), with its medians:
# "; sw_power_cap held the SM clock down during bs1 and bs2's rounds (median MHz: bs1 1635, bs2 1650)".
_HELD = re.compile(r"; [\w, ]+ held the SM clock down during [^;]*?'s rounds \(median MHz: [^)]*\)")


def without_held_clause(finding: str) -> str:
    """The finding without its clause on clocks held down: for a status whose suspect note gives the same
    medians (``report``'s), so the section says them once."""
    return _HELD.sub("", finding)


def during_measurement(docs: Sequence[Artifact]) -> str:
    """One sentence: which repros' variants saw clocks-event reasons while measuring, with their clocks."""
    parts = []
    for d in docs:
        seen: dict[str, list[str]] = {}
        for v in d.variants:
            mon = v.gpu_monitor
            if isinstance(mon, Mapping) and mon.get("throttled"):
                key = f"{', '.join(mon['throttled'])}, {clock_words(mon)}"
                seen.setdefault(key, []).append(v.name)
        parts += [f"{d.repro.id} ({', '.join(names)}: {what})" for what, names in seen.items()]
    if not parts:
        monitored = any(isinstance(v.gpu_monitor, Mapping) for d in docs for v in d.variants)
        return "While measuring: no clock events." if monitored else "While measuring: no GPU monitor recorded."
    return "While measuring, clock events: " + "; ".join(parts) + "."


def with_power_peak(doc: Artifact, reasons: Sequence[str]) -> list[str]:
    """``reasons`` with the highest power NVML's polls read during the power-capped variants' rounds added to the
    first power-cap reason (``..., power up to 694.8 W of a 700 W limit``): the 1 s readings' median can sit far
    below the limit while the cap acts on peaks. Unchanged without a power-cap reason or the readings."""
    out = list(reasons)
    at = next((i for i, r in enumerate(out) if r.startswith("power cap")), None)
    capped = {r.split(":", 1)[0] for r in doc.validity.reasons if "power cap" in r}
    peaks = [
        float(p)
        for v in doc.variants
        if v.name in capped or not capped
        if isinstance(v.gpu_monitor, Mapping)
        and isinstance(p := v.gpu_monitor.get("power_max_w"), (int, float))
        and not isinstance(p, bool)
    ]
    if at is None or not peaks:
        return out
    limit = doc.machine.nvml.power_limit_w
    of = f" of a {limit:g} W limit" if isinstance(limit, (int, float)) else ""
    out[at] += f", power up to {max(peaks):.1f} W{of} in NVML's polls"
    return out


# How many rounds of an order ``order_rounds`` lists before it counts the rest.
ROUNDS_LISTED = 12


def order_rounds(line: str, doc: Artifact) -> str:
    """``; rounds (number from 1: ratio) run bs4, bs2, bs1: 2: 0.8296, 8: 0.5077, ...; run bs1, bs4, bs2: ...; the
    lowest's, each arm against its median: bs2 +5%, ...; bs1 +20%, +88%, ...``: where ``line`` is the whole-orders
    check's reason or warning, the per-round ratios of its lowest and highest orders and how far each arm lay from
    its median in the lowest's rounds, so a reader sees whether a few rounds, and which arm, set the split; "" where
    they cannot be rebuilt."""
    m = _ORDERS.match(line.removeprefix(FOUND))
    if m is None:
        return ""
    row = next((r for r in doc.verdict.breakdown if r.comparison == m["who"] and r.num and r.den), None)
    arms = group_arms(doc.variants, row.num, row.den) if row is not None and row.num and row.den else None
    have = {v.name: v.timing.rounds for v in doc.variants if v.timing is not None and v.timing.rounds}
    if row is None or arms is None or row.num not in have or row.den not in have:
        return ""
    a, b = have[row.num], have[row.den]
    if len(a) != len(b) or not all(x > 0 for x in b):
        return ""
    orders = orders_of(arms, len(a))
    said = []
    low = tuple(m["lo_order"].split(", "))
    at = [i for i, o in enumerate(orders) if o == low]
    # Which arm set the lowest order's rounds apart: each arm's time in those rounds against its median of all.
    names = unprefixed([row.num, row.den])[0]
    moved = [
        f"{n} " + ", ".join(f"{xs[i] / statistics.median(xs) - 1:+.0%}" for i in at[:ROUNDS_LISTED])
        for n, xs in zip(names, (a, b), strict=True)
    ]
    for wanted in (m["lo_order"], m["hi_order"]):
        order = tuple(wanted.split(", "))
        got = [
            f"{i + 1}: {x / y * float(row.scale or 1.0):.4g}"
            for i, (x, y, o) in enumerate(zip(a, b, orders, strict=True))
            if o == order
        ]
        more = f", and {len(got) - ROUNDS_LISTED} more" if len(got) > ROUNDS_LISTED else ""
        said += [f"run {', '.join(unprefixed(list(order))[0])}: {', '.join(got[:ROUNDS_LISTED])}{more}"] if got else []
    if len(said) != 2:
        return ""
    each = f"the lowest's, each arm against its median: {'; '.join(moved)}"
    return f"; rounds (number from 1: ratio) {'; '.join(said)}; {each}"
