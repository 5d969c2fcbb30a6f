"""One repro's variants as a reader sees them: which are shown, their times, the kernel diff, the comparisons."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from repro.core.kernelnames import short_names
from repro.core.results import Kernel, VariantResult
from repro.evidence.markdown import (
    NAME_CHARS,
    ci_label,
    code,
    fmt_num,
    fmt_pct,
    fmt_time,
    md_table,
    ratio_with_ci,
    text,
)
from repro.evidence.model import Artifact, Row

# Above this many variants only those the comparisons use (or only the verdict's pair) are tabled:
# the comparisons table gives every other ratio, and the artifact every variant (a whole report
# has to fit one screen).
MAX_VARIANTS_SHOWN = 2
# A smoke run proves the pipeline, not a cliff: its report stays short (the artifact has the rest).
MAX_VARIANTS_SHOWN_SMOKE = 4
# Kernel diffs beyond the verdict's own pair: the same contrast at other settings, at most this many.
MAX_RELATED_DIFFS = 2
# Below this share of its ceiling (in percent) a variant's rate says nothing about the hardware.
_NEGLIGIBLE_PCT = 0.01
# A comparison's status in the comparisons table: whether the effect held there ("held" column).
_HELD = {"reproduced": "yes", "not_reproduced": "no"}
# A kernel whose per-call time moved by more than this between variants is "changed".
_CHANGED = 0.10


def is_smoke(a: Artifact) -> bool:
    """True for a smoke run (shrunken sizes, often on CPU): it proves the pipeline, never a cliff."""
    return a.smoke


def shown_variants(a: Artifact) -> tuple[list[VariantResult], int]:
    """The variants a report shows in full, and how many it leaves to the artifact.

    A grid repro (solve-512-cliff has ~80 points) would bury its story in rows. Above the cap,
    the variants some comparison uses are shown when they fit, else the verdict's own pair; then
    variants that did not run, as room allows; the comparisons table summarises the rest.
    """
    variants = list(a.variants)
    cap = MAX_VARIANTS_SHOWN_SMOKE if a.smoke else MAX_VARIANTS_SHOWN
    if len(variants) <= cap:
        return variants, 0
    compared = {str(x) for r in a.verdict.breakdown for x in (r.num, r.den)}
    named = set(a.verdict.variants)
    if named <= compared and len([v for v in variants if v.name in compared]) <= cap:
        named = compared
    # Then variants that did not run, as room allows; in catalog order.
    room = max(cap - len(named), 0)
    extra = {id(v) for v in [v for v in variants if v.name not in named and v.status != "ok"][:room]}
    keep = [v for v in variants if v.name in named or id(v) in extra]
    if not any(v.name in named for v in keep):
        keep = [v for v in variants if v.status == "ok"][:2] + keep
    return keep, len(variants) - len(keep)


def _rate(v: VariantResult) -> tuple[str, str]:
    a = v.achieved
    if a is None:
        return "-", "-"
    if a.tflops is not None and (a.ceiling_unit in (None, "TFLOP/s")):
        rate = f"{a.tflops:.3g} TFLOP/s"
    elif a.gbps is not None:
        rate = f"{a.gbps:.4g} GB/s"
    else:
        rate = "-"
    pct = "-"
    if a.pct_of_ceiling is not None and a.pct_of_ceiling < _NEGLIGIBLE_PCT:
        return "-", "-"  # a 4-byte memset's "bandwidth": no rate worth a column
    if a.pct_of_ceiling is not None:
        pct = f"{fmt_pct(a.pct_of_ceiling)} of {text(a.ceiling, cell=True)}"
    return rate, pct


def _time_range(lo: float, hi: float) -> str:
    """``34.8-35.2 ms``; ``940 ns-1.02 us`` when the ends need different units."""
    a, b = fmt_time(lo), fmt_time(hi)
    ua, ub = a.rsplit(" ", 1)[-1], b.rsplit(" ", 1)[-1]
    return f"{a.rsplit(' ', 1)[0]}-{b}" if ua == ub else f"{a}-{b}"


def _count(v: VariantResult) -> str:
    """What the median is taken over, counted: ``102 rounds`` where each round's value is the median of
    its samples (306 of them in all), ``500 samples`` where the median is of the samples themselves."""
    t = v.timing
    if t is None:
        return "-"
    n = t.stats.n
    if t.rounds and n == len(t.rounds) and len(t.samples or ()) != n:
        return f"{n} rounds"
    return f"{n} samples" if t.samples and n == len(t.samples) else str(n)


def variants_table(a: Artifact) -> str:
    """The shown variants that ran: median and CI, samples, timer, achieved rate.

    Variants that did not run are in the report's "Not tested here", with why.
    """
    rows = []
    shown, hidden = shown_variants(a)
    for v in shown:
        t = v.timing
        if v.status != "ok" or not t:
            continue
        s = t.stats
        rate, pct = _rate(v)
        rows.append(
            [
                text(v.label, cell=True),
                f"{fmt_time(s.median)} ({_time_range(s.ci_low, s.ci_high)})",
                _count(v),
                text(t.method.replace("_", " "), cell=True),
                rate + (f" ({pct})" if pct != "-" else ""),
            ]
        )
    if not rows:
        return ""
    headers = ["variant", "median (95% CI)", "n", "timed by", "achieved (% of measured ceiling)"]
    if all(r[4] == "-" for r in rows):
        rows, headers = [r[:4] for r in rows], headers[:4]
    if len({r[3] for r in rows}) == 1:  # one timer for all: said in the header
        headers[1] = f"median (95% CI), {rows[0][3]}"
        rows = [r[:3] + r[4:] for r in rows]
        headers = headers[:3] + headers[4:]
    if hidden:
        headers[0] = f"variant ({hidden} more in the artifact)"
    return md_table(rows, headers)


def per_call_us(k: Kernel) -> float:
    """A kernel's microseconds per call of the timed op (``per_call``: its launches per call)."""
    return k.us_per_call


def kernel_diff(base: VariantResult, other: VariantResult) -> list[str]:
    """Lines saying which kernels appear, disappear or change time from ``base`` to ``other``, the
    largest change in time per call first.

    Kernels present in both count as much as new or removed ones: a step that doubles because the
    same GEMMs take twice as long is told by those GEMMs, not by the small kernels that are new.
    """
    a = {k.name: per_call_us(k) for k in base.kernels}
    b = {k.name: per_call_us(k) for k in other.kernels}
    launches = {k.name: (float(k.per_call), float(k.mean_us)) for k in base.kernels}
    launches_b = {k.name: (float(k.per_call), float(k.mean_us)) for k in other.kernels}
    short = short_names([*a, *b], NAME_CHARS)

    def c(name: str) -> str:
        return code(short[name], 2 * NAME_CHARS)

    moved = [n for n in {*a, *b} if n not in a or n not in b or (a[n] > 0 and abs(b[n] - a[n]) / a[n] > _CHANGED)]
    out = []
    for name in sorted(moved, key=lambda n: (-abs(b.get(n, 0.0) - a.get(n, 0.0)), n)):
        if name not in a:
            out.append(f"+ {c(name)} appears ({b[name]:.1f} us/call{_launches(launches_b[name][0])})")
        elif name not in b:
            out.append(f"- {c(name)} disappears (was {a[name]:.1f} us/call{_launches(launches[name][0])})")
        else:
            line = f"~ {c(name)} {a[name]:.1f} -> {b[name]:.1f} us/call"
            (na, ea), (nb, eb) = launches[name], launches_b[name]
            if na != nb:
                # Another launch count means another call mix (cuBLAS picks kernels per shape): the
                # time per launch says how much slower each launch got.
                line += f" ({na:g} -> {nb:g} launches/call, {ea:.1f} -> {eb:.1f} us each)"
            out.append(line)
    return out


def _launches(per_call: float) -> str:
    """``, 128 launches/call`` for a kernel launched more than once per call (a loop shows as its count)."""
    return f", {per_call:g} launches/call" if per_call > 1 else ""


def kernel_total_us(v: VariantResult) -> float:
    """The device time of all of a variant's kernels per call, in microseconds."""
    return sum(per_call_us(k) for k in v.kernels)


def _contrast(a: VariantResult, b: VariantResult) -> dict[str, tuple[Any, Any]]:
    """The config keys whose values differ from variant ``a`` to ``b``, with both values."""
    ca, cb = a.config or {}, b.config or {}
    return {k: (ca.get(k), cb.get(k)) for k in sorted(set(ca) | set(cb)) if ca.get(k) != cb.get(k)}


def diff_pairs(doc: Artifact) -> list[tuple[VariantResult, VariantResult]]:
    """The (base, other) variant pairs whose kernels a report diffs.

    First the verdict's own pair (denominator -> numerator). Then the same contrast at other
    settings: pairs that differ in exactly the config values the verdict's pair differs in (n=511
    -> 512 at another batch, say). Without a named pair, only variants that differ in one config
    value are paired. Unrelated variants (another batch *and* another size) are never paired.
    """
    shown = list(doc.variants)
    measured = [v for v in shown if v.kernels]
    by_name = {v.name: v for v in measured}
    named = list(doc.verdict.variants)
    pairs: list[tuple[VariantResult, VariantResult]] = []
    if len(named) == 2 and all(n in by_name for n in named):
        base, other = by_name[named[1]], by_name[named[0]]
        pairs.append((base, other))
        want = _contrast(base, other)
        related = [
            (a, b)
            for a in measured
            for b in measured
            if a is not b and (a, b) != (base, other) and want and _contrast(a, b) == want
        ]
        return _once(pairs + related)[: 1 + MAX_RELATED_DIFFS]
    shown_names = {v.name: v for v in shown}
    external = bool(named) and all(n in shown_names and not shown_names[n].kernels for n in named)
    if named and not external:  # the verdict's pair is not among the shown, measured variants: pair nothing else
        return []
    # No pair named, or a pair timed outside the profiler (a pure CUDA twin): variants one config value apart.
    singles = [(a, b) for i, a in enumerate(measured) for b in measured[i + 1 :] if len(_contrast(a, b)) == 1]
    return singles[: 1 + MAX_RELATED_DIFFS]


def _once(pairs: Sequence[tuple[VariantResult, VariantResult]]) -> list[tuple[VariantResult, VariantResult]]:
    """Each unordered pair once: A -> B and B -> A say the same thing mirrored."""
    seen: set[frozenset[str]] = set()
    out = []
    for a, b in pairs:
        key = frozenset((str(a.name), str(b.name)))
        if key not in seen:
            seen.add(key)
            out.append((a, b))
    return out


def comparisons_table(doc: Artifact) -> str:
    """Every comparison the verdict computed: its ratio and CI, its status, its rounds; the headline in bold.

    The CI level is in the header when every row has the same one (the verdict's own label: "99.2%
    CI, worst of 6"), else in each cell; a threshold column appears only when rows differ in it.
    """
    rows_in = doc.verdict.breakdown
    if not rows_in:
        return ""
    one_level = len({repr(x.ci_level) for x in rows_in}) == 1
    thresholds = len({repr(x.threshold) for x in rows_in}) > 1
    rows = []
    for r in rows_in:
        name = text(r.comparison or r.label or "-", cell=True)
        level = float(r.ci_level) if r.ci_level is not None else 0.95
        label = "" if one_level else f"{level * 100:.3g}% CI"
        row = [
            f"**{name}**" if r.headline else name,
            ratio_with_ci(r.ratio, r.ci_low, r.ci_high, label) + _whole_cell(doc, r),
            _HELD.get(str(r.status), text(str(r.status or "-").replace("_", " "), cell=True)),
            str(r.n) if r.n is not None else "-",
        ]
        if thresholds:
            row.append(text(fmt_num(r.threshold), cell=True))
        rows.append(row)
    level_words = ci_label(rows_in[0].ci_level, [x.ci_level for x in rows_in]) if one_level else "CI"
    headers = ["comparison", f"ratio ({level_words})", "held", "rounds"] + (["threshold"] if thresholds else [])
    return md_table(rows, headers) + _basis_note(doc, rows_in)


def whole_steps(doc: Artifact, row: Row) -> float | None:
    """For a ratio of filtered kernel time (basis "kernel"): the same two variants' whole-call medians,
    numerator over denominator (a ratio of medians, not paired); None for any other row, and when the
    breakdown already pairs those two variants' whole calls (a row of theirs on another basis)."""
    have = {v.name: v for v in doc.variants}
    a, b = have.get(str(row.num)), have.get(str(row.den))
    if row.basis != "kernel" or a is None or b is None or a.timing is None or b.timing is None:
        return None
    if any(r.num == row.num and r.den == row.den and r.basis != "kernel" for r in doc.verdict.breakdown):
        return None
    return a.median / b.median if b.median else None


def _ratio(w: float) -> str:
    return f"{w:.3f}x" if abs(w - 1.0) < 0.01 else f"{w:.2f}x"  # 1.003x, not a bare 1.00x


def _whole_cell(doc: Artifact, row: Row) -> str:
    w = whole_steps(doc, row)
    return f"; whole steps {_ratio(w)}" if w is not None else ""


def with_whole_steps(doc: Artifact, said: str) -> str:
    """``said`` with each filtered-kernel ratio (as ``ratio_with_ci`` writes it) followed by the whole-step
    ratio of medians, so a kernel filter's ratio is never read alone."""
    for r in doc.verdict.breakdown:
        w = whole_steps(doc, r)
        shown = ratio_with_ci(r.ratio, r.ci_low, r.ci_high)
        if w is not None and shown in said:
            said = said.replace(shown, f"{shown}, whole steps {_ratio(w)} (ratio of medians)")
    return said


def _left_out(doc: Artifact, rows: Sequence[Row], keys: Sequence[str]) -> str:
    """The kernels of the rows' variants that the filter dropped, largest time per call first."""
    have = {v.name: v for v in doc.variants}
    dropped: dict[str, tuple[float, str]] = {}  # kernel -> (its largest time per step, in which variant)
    for r in rows:
        for name in (r.num, r.den):
            v = have.get(str(name))
            if v is None or r.basis != "kernel":
                continue
            for k in v.kernels:
                if not any(key in k.name.lower() for key in keys) and per_call_us(k) > dropped.get(k.name, (0.0,))[0]:
                    dropped[k.name] = (per_call_us(k), str(v.label or v.name))
    if not dropped:
        return ""
    short = short_names(dropped, NAME_CHARS)
    most = sorted(dropped, key=lambda n: -dropped[n][0])
    said = ", ".join(
        f"{code(short[n])} ({dropped[n][0] / 1000:.1f} ms/step in {text(dropped[n][1])})" for n in most[:2]
    )
    return f", leaving out {said}" + (f" and {len(most) - 2} more" if len(most) > 2 else "")


def _basis_note(doc: Artifact, rows: Sequence[Row]) -> str:
    """Ratios of profiler kernel time (basis "kernel") say which kernels count and which the filter dropped;
    the medians above are whole steps, and so is each row's "whole steps" ratio."""
    if not any(r.basis == "kernel" for r in rows):
        return ""
    match = doc.extra.get("kernel_match")  # the repro's own extra: which kernel names a kernel basis counts
    keys = [str(m).lower() for m in match] if isinstance(match, list) and match else []
    which = f"kernels whose names contain {text(', '.join(keys))} (kernel_match)" if keys else "the profiled kernels"
    left = _left_out(doc, rows, keys) if keys else ""
    counted = doc.extra.get("kernel_counted")  # or the repro's words for what counts, with no name filter
    if not keys and isinstance(counted, str) and counted.strip():
        which = f"{text(counted)} (kernel_counted)"
    return (
        f"\n\n_Ratios on basis kernel: profiler time per step of {which}{left}; the medians above and "
        '"whole steps" (their ratio, not paired) time whole steps._'
    )
