"""What leaves the machine from a ``repro cliff`` artifact: its report section, its plot, and cross-machine boundaries.

Works on the artifact alone (no torch), read through ``repro.evidence.model.Cliff``; every function
also takes the document as read. The plot needs matplotlib and is skipped without it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from repro.core.verdict import fmt_ratio
from repro.env.fingerprint import essentials
from repro.evidence.machines import essentials_line
from repro.evidence.markdown import code, fmt_time, table, text
from repro.evidence.model import Cliff, cliff_of
from repro.evidence.model_cliff import Point, Step

# Points tabled in the report; the artifact and the plot hold every one.
MAX_POINT_ROWS = 40
KERNELS_SHOWN = 3
# What a plot file name may hold of an artifact's repro id and param (the schema says as much;
# this guards the file name against any document that reaches here unchecked).
_SAFE_KEY = re.compile(r"[a-z0-9][a-z0-9-]{0,99}\.cliff-[A-Za-z_][A-Za-z0-9_]{0,63}")


CliffDoc = Cliff | Mapping[str, Any]


def key(doc: CliffDoc) -> str:
    """What identifies a sweep across machines: repro id and param (``solve-512-cliff.cliff-n``)."""
    return cliff_of(doc).key


def plot_name(stem: str, doc: CliffDoc) -> str | None:
    """``<stem>.<key>.png`` for the plot beside a report, or None when the key is not a plain file name part."""
    k = key(doc)
    name = f"{stem}.{k}.png"
    return name if _SAFE_KEY.fullmatch(k) and len(name.encode()) <= 255 else None  # 255: NAME_MAX


def threshold_words(threshold: float) -> str:
    """What the threshold means: symmetric in log terms, so a rise and its reversal count alike."""
    return f"rises by more than {threshold:.0%} or falls to below 1/{1 + threshold:g} ({1 / (1 + threshold) - 1:.1%})"


def latest_points(doc: CliffDoc) -> list[Point]:
    """One point per value, the last timed (refinement groups re-time the ends of an interval)."""
    by_value: dict[int, Point] = {}
    for p in cliff_of(doc).points:
        by_value[int(p.value)] = p
    return [by_value[v] for v in sorted(by_value)]


def step_where(s: Step) -> str:
    return f"{s.lo} -> {s.hi}" if s.resolved else f"in {s.lo}..{s.hi} (not narrowed)"


def _kernels(names: Sequence[str]) -> str:
    return "<br>".join(code(n) for n in names[:KERNELS_SHOWN]) or "-"


def _side(tag: str, names: Sequence[str]) -> str:
    return (f"{text(tag, cell=True)}<br>" if tag else "") + _kernels(names)


def section(doc: CliffDoc, plot_link: str | None = None) -> str:
    """The report section of one cliff artifact: finding, steps with kernels on each side, the points."""
    c = cliff_of(doc)
    sw, se = c.sweep, c.search
    lo, hi = sw.range
    scaled = sw.metric == "per-unit-of-work"
    lines = [
        f"## {code(c.repro.id)}: where the cliff starts in {code(sw.param)} ({lo}..{hi})",
        "",
        f"**{text(c.status)}** - {text(c.finding)}",
        "",
        (
            "Each point: median of paired rounds with its 95% CI, "
            + (f"scaled to the work of one call at {code(sw.param)}={sw.work_reference}" if scaled else "unscaled")
            + f". A step: the scaled time {threshold_words(sw.threshold)} from one value to the next "
            "(the median of their per-round ratios), and the paired ratio's 95% CI excludes 1 (the paired form of "
            "non-overlapping CIs, which shared drift cannot fake or hide). "
            f"Timed {se.points_measured} of {se.dense_points} values in {se.groups} group(s) "
            f"({text(se.stop_reason.replace('_', ' '))}, {se.elapsed_s:.0f} s); "
            f"validity: {text(c.validity.flag)}."
        ),
        "",
    ]
    if c.validity.flag == "suspect":
        lines += [f"- suspect: {text(reason)}" for reason in c.validity.reasons] + [""]
    if c.error is not None:
        lines += [f"Error ({text(c.error.kind)}): {text(c.error.message)}", ""]
    if c.steps:
        rows = [
            [
                text(step_where(s), cell=True),
                fmt_ratio(s.ratio, s.ci_low, s.ci_high),
                fmt_time(s.before_s),
                fmt_time(s.after_s),
                _side(s.tag_before, s.kernels_before),
                _side(s.tag_after, s.kernels_after),
            ]
            for s in c.steps
        ]
        lines += [table(rows, ["step", "ratio after/before", "before", "after", "ran before", "ran after"]), ""]
        for s in c.steps:
            gone, new = s.only_before, s.only_after
            if gone or new:
                lines.append(
                    f"- {text(step_where(s))}: only before "
                    f"{', '.join(code(n) for n in gone[:KERNELS_SHOWN]) or 'none'}; only after "
                    f"{', '.join(code(n) for n in new[:KERNELS_SHOWN]) or 'none'}"
                )
            elif s.kernels_before or s.kernels_after:
                lines.append(f"- {text(step_where(s))}: the same kernels ran on both sides")
            else:
                lines.append(f"- {text(step_where(s))}: no kernels were recorded on either side")
            if s.note:
                lines.append(f"  ({text(s.note)})")
        lines.append("")
    for n in se.notes:
        lines.append(f"- note: {text(n)}")
    if plot_link:
        lines += ["", f"![scaled time vs {text(sw.param)}]({text(plot_link)})", ""]
    pts = latest_points(c)
    grid = set(se.grid)
    shown = pts if len(pts) <= MAX_POINT_ROWS else pts[:MAX_POINT_ROWS]
    rows = [
        [
            str(p.value),
            "grid" if p.value in grid else "refine",
            f"{fmt_time(p.scaled_s)} ({fmt_time(p.scaled_ci_low_s)}-{fmt_time(p.scaled_ci_high_s)})",
            fmt_time(p.median_s),
            (f"{text(p.tag, cell=True)}: " if p.tag else "") + (code(p.kernels[0]) if p.kernels else "-"),
        ]
        for p in shown
    ]
    if rows:
        lines += ["", table(rows, [text(sw.param, cell=True), "phase", "scaled (95% CI)", "raw", "top kernel"])]
        if len(pts) > len(shown):
            lines.append(f"\n_{len(pts) - len(shown)} more points in the artifact._")
    for w in c.warnings[:5]:
        lines.append(f"- warning: {text(w)}")
    lines += [
        "",
        essentials_line(c.fingerprint),
        "",
        f"Rerun: {code(c.run.rerun or ' '.join(c.run.command), 2000)}",
        "",
    ]
    return "\n".join(lines)


def _plain(value: Any) -> Any:
    """Strings from an artifact as literal plot text: matplotlib reads $...$ as math, and bad math raises."""
    return value.replace("$", r"\$") if isinstance(value, str) else value


def plot_png(doc: CliffDoc) -> bytes | None:
    """Scaled time vs the param with a 95% CI band, every step marked; None without matplotlib or points."""
    from repro.evidence import plots

    c = cliff_of(doc)
    pts = latest_points(c)
    if plots.available() is not None or not pts:
        return None  # without matplotlib, `repro report --out` draws it on a machine that has it
    sw = c.sweep
    param = _plain(sw.param)
    series = plots.Series(
        label="scaled time",
        x=tuple(float(p.value) for p in pts),
        y=tuple(p.scaled_s for p in pts),
        lo=tuple(p.scaled_ci_low_s for p in pts),
        hi=tuple(p.scaled_ci_high_s for p in pts),
    )
    grid = set(c.search.grid)

    def marks(ax: Any, scale: float) -> None:
        for on_grid, marker, label in ((True, "o", "grid points"), (False, "x", "refinement points")):
            sel = [(p.value, p.scaled_s / scale) for p in pts if (p.value in grid) == on_grid]
            if sel:
                ax.plot([a for a, _ in sel], [b for _, b in sel], marker, color="C0", ls="", label=label)
        top = max(series.y) / scale
        for i, s in enumerate(c.steps):
            x = (s.lo + s.hi) / 2
            ax.axvline(x, color="C3", ls="--" if s.resolved else ":", lw=1)
            ax.annotate(
                f"{s.lo}->{s.hi}\nx{s.ratio:.2f}",
                (x, top),
                textcoords="offset points",
                xytext=(4, -24 - 26 * i),  # staggered: adjacent steps' labels would overlap
                fontsize=8,
                color="C3",
            )

    at = f" at the work of {param}={sw.work_reference}" if sw.metric == "per-unit-of-work" else ""
    gpu = _plain(essentials(c.fingerprint)["gpu"])
    return plots.band_png(
        [series],
        title=f"{c.repro.id}: {param} {sw.range[0]}..{sw.range[1]} on {gpu}",
        x_label=param,
        y_label=f"time per call{at}",
        decorate=marks,
    )


def write_plot(doc: CliffDoc, path: Path) -> Path | None:
    """Draw the plot to a new file ``path`` (atomic, never overwriting); None when it cannot be drawn."""
    from repro.core.fsio import write_new

    data = plot_png(doc)
    return write_new(path, data) if data is not None else None


# --------------------------------------------------------------------------- compare


def boundary(doc: CliffDoc) -> str:
    """One cell: the steps found, or no step and its resolution."""
    c = cliff_of(doc)
    if c.status in ("skipped", "error"):
        return f"{c.status}"
    if not c.steps:
        return f"no step (grid spacing {c.search.resolution})"
    return "; ".join(f"{step_where(s)} {fmt_ratio(s.ratio, s.ci_low, s.ci_high)}" for s in c.steps)


# A step's fields that ``repro compare --json`` carries per environment.
_COMPARED_STEP = ("lo", "hi", "resolved", "ratio", "ci_low", "ci_high", "only_before", "only_after")


def compare_rows(envs: Sequence[tuple[str, Sequence[CliffDoc]]]) -> list[dict[str, Any]]:
    """Per sweep (repro id and param): each environment's steps, and whether the boundaries agree."""
    keys: dict[str, None] = {}
    typed = [(label, [cliff_of(d) for d in docs]) for label, docs in envs]
    for _, cliffs in typed:
        keys.update(dict.fromkeys(c.key for c in cliffs))
    rows = []
    for k in keys:
        per: dict[str, Any] = {}
        located: dict[str, list[list[int]]] = {}
        for label, cliffs in typed:
            c = next((c for c in cliffs if c.key == k), None)
            if c is None:
                per[label] = None
                continue
            per[label] = {
                "status": c.status,
                "range": list(c.sweep.range),
                "steps": [{x: _jsonable(getattr(s, x)) for x in _COMPARED_STEP} for s in c.steps],
                "resolution": c.search.resolution,
                "cell": boundary(c),
            }
            if c.status in ("step", "no_step"):
                located[label] = [[s.lo, s.hi, s.resolved] for s in c.steps]
        ranges = {tuple(v["range"]) for v in per.values() if v}
        # A step not narrowed to adjacent values (the budget ran out) may or may not sit where the
        # other machine's does: neither "same" nor "differ" can be said then.
        unresolved = any(not resolved for steps in located.values() for _, _, resolved in steps)
        same = (
            len({tuple(map(tuple, v)) for v in located.values()}) == 1 if len(located) > 1 and not unresolved else None
        )
        rows.append(
            {
                "sweep": k,
                "results": per,
                "same_boundaries": same,
                "unresolved": unresolved and len(located) > 1,
                "same_range": len(ranges) == 1,
            }
        )
    return rows


def _jsonable(value: Any) -> Any:
    """A field as the document had it: tuples back to lists."""
    return list(value) if isinstance(value, tuple) else value


def compare_markdown(rows: Sequence[Mapping[str, Any]], labels: Sequence[str], keys: Sequence[str]) -> str:
    """The boundaries table for ``repro compare`` (columns headed by the environments' short keys)."""
    if not rows:
        return ""
    body = [
        [code(r["sweep"])]
        + [text(r["results"][lab]["cell"] if r["results"].get(lab) else "-", cell=True) for lab in labels]
        + [
            "cannot tell (a step not narrowed)"
            if r.get("unresolved")
            else {True: "same", False: "**differ**", None: "-"}[r["same_boundaries"]]
        ]
        for r in rows
    ]
    out = ["## Cliff boundaries", "", table(body, ["sweep", *keys, "boundaries"]), ""]
    if any(not r["same_range"] for r in rows):
        out += ["_Some sweeps covered different ranges on different machines; compare their steps with care._", ""]
    return "\n".join(out)
