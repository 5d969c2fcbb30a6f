"""Inert GitHub markdown from untrusted text: escaping, code spans and fences, tables, details blocks, number formats.

Every string an artifact carries passes through ``text``, ``html_text``, ``code`` or ``fence``
before it reaches a report, so it renders literally in its context and mentions no one: GitHub
links no ``@name`` or ``#123`` in it (code spans and fences link none anyway).
"""

from __future__ import annotations

import html
import math
import os
import re
from collections.abc import Sequence
from typing import Any

from tabulate import tabulate

from repro.core.verdict import CI_LEVEL, fmt_ratio, ratio_places
from repro.evidence.model import Verdict

# GitHub rejects issue and comment bodies over 65,536 characters; stay well under.
REPORT_LIMIT = 60_000
# What a run's report may take when pasted into an issue: about one screen of summary and sections
# a maintainer reads, the rest one click away in <details> or in the bundle (DESIGN: Evidence principles).
PASTE_LIMIT = 20_000
PASTE_LINES = 250
# Kernel names and other long identifiers in a code span are cut at this many characters.
NAME_CHARS = 90


def md_cell(text: Any) -> str:
    """Make already-safe markdown safe inside a GFM table cell: no pipe splits it, no newline ends the row."""
    s = "" if text is None else str(text)
    return s.replace("|", "\\|").replace("\r", " ").replace("\n", " ")


# Inline markdown that could turn text into structure: emphasis, links/images, code spans, strikethrough,
# escapes. (<, > and & become entities first.)
_INLINE = re.compile(r"([\\`*\[\]~])")
# An underscore between two letters or digits can neither open nor close emphasis (GFM), so
# snake_case names stay readable; any other underscore is escaped.
_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
# GitHub makes "@name" a mention (a notification to that user or team) and "#123", "org/repo#123" and
# "GH-123" references (a back-link on that issue or pull request). A zero-width joiner after the "@",
# "#" or "GH-" breaks each of them and reads the same; "x @ w" or "# of runs" link nothing and stay as
# they are. (The text cannot spell "@" another way: "&" and "\\" are escaped.)
ZWJ = "\u200d"
_REFERENCE = re.compile(r"@(?=[A-Za-z0-9_-])|#(?=[0-9])|\bGH-(?=[0-9])", re.IGNORECASE)
# What may open a block when it starts a line (a heading, a quote, a list, a rule, a setext underline).
_BLOCK_START = re.compile(r"^([#>+=-]|\d{1,9}(?=[.)](?:\s|$)))")


def text(value: Any, *, cell: bool = False) -> str:
    """Untrusted text (anything from an artifact) as inert inline markdown on one line.

    HTML is escaped (&, <, >), markdown punctuation is backslash-escaped, newlines become
    spaces and a leading block marker is escaped, so the text renders literally wherever
    inline content goes: a paragraph, a list item, a quote, a heading, a table cell. Pipes
    are escaped here unless ``cell`` (then ``md_cell``, which every table cell passes, does it).
    """
    s = "" if value is None else str(value)
    s = unlinked(" ".join(s.replace("\r", "\n").split("\n")).strip())
    s = html.escape(s, quote=False)
    s = _INLINE.sub(r"\\\1", s)
    s = _UNDERSCORE.sub(r"\\_", s)
    if not cell:
        s = s.replace("|", "\\|")
    if m := _BLOCK_START.match(s):
        end = m.end()
        s = (s[:end] + "\\" + s[end:]) if s[:end].isdigit() else "\\" + s
    return s


def html_text(value: Any) -> str:
    """Untrusted text inside an HTML element (a details summary): entities only, one line, no mention."""
    s = "" if value is None else str(value)
    return html.escape(unlinked(" ".join(s.replace("\r", "\n").split("\n"))), quote=True)


def unlinked(s: str) -> str:
    """``s`` with a zero-width joiner after each ``@``, ``#`` and ``GH-`` that starts a mention or an issue
    reference."""
    return _REFERENCE.sub(lambda m: m.group() + ZWJ, s)


def fence(body: str, lang: str = "") -> str:
    """A fenced code block that nothing in ``body`` can close: the fence outruns every backtick run."""
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{body}\n{ticks}"


def _cut_words(s: str, limit: int) -> str:
    """``s`` in at most ``limit`` characters, cut where a word (letters and digits) ends, then ``...``."""
    if len(s) <= limit:
        return s
    end = limit - 3
    while end > 0 and s[end - 1].isalnum() and s[end].isalnum():
        end -= 1
    return (s[:end] if end > 0 else s[: limit - 3]).rstrip() + "..."


def code(value: Any, limit: int = NAME_CHARS) -> str:
    """An inline code span (safe in a table cell too); backticks inside become quotes; a long value is
    cut between words."""
    s = " ".join(str(value).replace("\r", "\n").split("\n"))
    s = _cut_words(s, limit)
    s = s.replace("`", "'").strip() or "-"
    return f"`{md_cell(s)}`"


def listed(items: Sequence[str]) -> str:
    """``a and b``; ``a, b, and c`` from three on."""
    return " and ".join(items) if len(items) < 3 else f"{', '.join(items[:-1])}, and {items[-1]}"


def fmt_time(seconds: float | None) -> str:
    """``1.5 ms``, ``820 ns``: three significant digits in the largest unit that keeps the value at least 1."""
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def fmt_pct(value: float) -> str:
    """``96%``, ``4.2%``, ``0.21%``: two significant digits below 10%, so a small share never reads 0%."""
    if value == 0:
        return "0%"
    if value >= 10:
        return f"{value:.0f}%"
    return f"{value:.2g}%"


def _level_pct(level: float) -> str:
    return f"{level * 100:.3g}%"


def ci_label(level: object, row_levels: Sequence[object] = ()) -> str:
    """The headline CI's own level as the artifact records it: ``95% CI``, ``99.2% CI, worst of 6``.

    A "worst of k" headline is Bonferroni-corrected (``repro.core.verdict.outcome``): each of its
    k candidates gets 1 - 0.05/k. k is read from the breakdown rows' levels (``row_levels``) at that
    level; an artifact without them gives it from the level alone when that comes out whole.
    """
    if not isinstance(level, int | float) or not 0 < level < 1:
        level = CI_LEVEL
    if abs(level - CI_LEVEL) < 1e-9:
        return "95% CI"
    k = sum(1 for x in row_levels if isinstance(x, int | float) and abs(x - level) < 1e-9)
    if k < 2:
        guess = (1 - CI_LEVEL) / (1 - level)
        k = round(guess) if abs(guess - round(guess)) < 1e-6 else 0
    return f"{_level_pct(level)} CI" + (f", worst of {k}" if k >= 2 else "")


def verdict_label(v: Verdict) -> str:
    """``ci_label`` of a verdict: its level, and its rows' levels."""
    return ci_label(v.ci_level, [r.ci_level for r in v.breakdown])


def side_places(value: float, lo: float, hi: float, start: int = 3, most: int = 7) -> int:
    """Decimals, from ``start``, at which ``value`` prints on its own side of ``lo``-``hi`` as printed (within, or
    outside) and equal to neither end; ``most`` where none under it does."""
    inside = lo <= value <= hi
    for d in range(start, most):
        v, a, b = round(value, d), round(lo, d), round(hi, d)
        if (a <= v <= b) == inside and v not in (a, b):
            return d
    return most


def ratio_with_ci(value: Any, lo: Any, hi: Any, label: str = "95% CI", places: int | None = None) -> str:
    """``9.55x (99.2% CI 9.51-9.59, worst of 6)``; ``n/a`` without a value.

    ``places``: decimals; None (the default everywhere a ratio is shown) gives
    ``repro.core.verdict.ratio_places``, the same digits as the finding: ``1.002x (95% CI 1.002-1.003)``
    where two decimals would print both ends as one number.
    """
    if not isinstance(value, int | float):
        return "n/a"
    if not isinstance(lo, int | float) or not isinstance(hi, int | float):
        return f"{value:.2f}x"
    places = ratio_places(value, lo, hi) if places is None else places
    level, _, rest = label.partition(", ")
    more = f", {rest}" if rest else ""
    said = f"{level} " if level else ""
    return f"{value:.{places}f}x ({said}{lo:.{places}f}-{hi:.{places}f}{more})"


def verdict_cell(v: Verdict, places: int | None = None) -> str:
    """The verdict's ratio with its CI at the level the artifact records, as a table cell shows it."""
    return ratio_with_ci(v.value, v.ci_low, v.ci_high, verdict_label(v), places)


def fmt_num(value: Any) -> Any:
    """Floats at four significant digits; everything else as it is."""
    return f"{value:.4g}" if isinstance(value, float) else value


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    """A GFM table; cells and headers must be safe markdown already (``text(..., cell=True)`` for raw strings).

    disable_numparse: cells are shown as given; tabulate would otherwise read "13.0" (a CUDA
    version) as a number and print it as 13.
    """
    return str(
        tabulate(
            [[md_cell(c) for c in r] for r in rows],
            headers=[md_cell(h) for h in headers],
            tablefmt="github",
            disable_numparse=True,
        )
    )


def md_table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    """A GFM table without column padding: the same table to a renderer, a third smaller in a
    report that must fit GitHub's size limit (cells must be safe markdown, as for ``table``)."""
    lines = ["| " + " | ".join(md_cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(md_cell(c) or " " for c in r) + " |" for r in rows]
    return "\n".join(lines)


def details(summary: str, body: str, lang: str = "") -> str:
    """A collapsed block: ``summary`` is plain text (escaped here), ``body`` goes verbatim into a code fence."""
    # The blank line after </summary> is what makes GitHub render the body as markdown.
    return f"<details><summary>{html_text(summary)}</summary>\n\n{fence(body, lang)}\n\n</details>\n"


def _two_places(value: float, lo: float, hi: float, level: float) -> str:
    return f"{value:.2f}x ({level * 100:.3g}% CI {lo:.2f}-{hi:.2f})"


def current_ratios(words: str, v: Verdict) -> str:
    """``words`` (a finding or detail an artifact recorded) with each ratio of the verdict and its
    breakdown in the one format (``fmt_ratio``): artifacts written before it printed every ratio at
    two decimals, so ``1.00x (95% CI 1.00-1.00)`` hid a CI the tables show as 1.002-1.003."""
    rows: list[tuple[float | None, float | None, float | None, float | None]] = [
        (v.value, v.ci_low, v.ci_high, v.ci_level)
    ]
    rows += [(r.ratio, r.ci_low, r.ci_high, r.ci_level) for r in v.breakdown]
    for value, lo, hi, level in rows:
        if value is None or lo is None or hi is None:
            continue
        at = float(level) if level is not None else CI_LEVEL
        words = words.replace(_two_places(value, lo, hi, at), fmt_ratio(value, lo, hi, at))
    return words


def finite(x: object) -> float | None:
    """A number an artifact gives as a finite int or float (not a bool, NaN or infinity), else None."""
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
        return None
    return float(x)


def unprefixed(names: Sequence[str]) -> tuple[list[str], str]:
    """``names`` without the prefix they all share up to an underscore, and that prefix ("" where none, or where
    an arm would be left without a name): ``cusolver_b128_n512``, ``cusolver_b128_n511`` -> n512, n511."""
    shared = os.path.commonprefix(list(names))
    shared = shared[: shared.rfind("_") + 1]
    if not shared or not all(len(x) > len(shared) for x in names):
        return list(names), ""
    return [x.removeprefix(shared) for x in names], shared
