"""Plots of sweeps: a line per group with its CI as a band, one PNG per sweep, and alt text stating the finding.

``band_plot`` is the reusable piece (any series of x against time with a CI); ``figures``
turns the sweeps an artifact declares into files under ``<folder>/plots/``. matplotlib is
optional (the ``plots`` extra): without it nothing is drawn, each figure says why, and
``repro report RUN_DIR --out FILE`` on a machine that has it draws them from the artifacts.
"""

from __future__ import annotations

import importlib.util
import io
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro.core.fsio import write_new
from repro.core.results import Plot
from repro.evidence import model
from repro.evidence.declared import Declarations, Declared, of
from repro.evidence.model import Artifact, Doc

__all__ = ["Figure", "Series", "available", "band_plot", "band_png", "describe", "figures", "plots_of", "series_of"]

PLOTS_DIR = "plots"
# Why a figure of a report printed to stdout has no file: nothing is written without --out.
NOT_DRAWN_HERE = "not drawn for this report"
INSTALL_HINT = "pip install 'gpu-repro[plots]' (matplotlib), then `repro report RUN_DIR --out FILE` draws it"


@dataclass(frozen=True)
class Series:
    """One line: y (seconds) against x, with the CI of each point as a band."""

    label: str
    x: tuple[float, ...]
    y: tuple[float, ...]
    lo: tuple[float, ...]
    hi: tuple[float, ...]


@dataclass(frozen=True)
class Figure:
    """One sweep's plot: its file (relative to the report), its alt text, and whether it exists."""

    repro_id: str
    sweep: str
    file: str  # "plots/<id>.<sweep>.png"
    alt: str
    drawn: bool
    why_not: str | None = None


def available() -> str | None:
    """None when matplotlib can draw here, else why not."""
    if importlib.util.find_spec("matplotlib") is None:
        return "matplotlib is not installed here"
    return None


def _time_unit(values: Sequence[float]) -> tuple[str, float]:
    top = max((v for v in values if v > 0), default=1.0)
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if top >= scale:
            return unit, scale
    return "ns", 1e-9


def band_png(
    series: Sequence[Series],
    *,
    title: str,
    x_label: str,
    y_label: str,
    log_y: bool = False,
    ci_label: str = "95% CI of each point's median time",
    decorate: Callable[[Any, float], None] | None = None,
) -> bytes:
    """``series`` (times in seconds) as lines with CI bands, as PNG bytes.

    The y unit (s, ms, us, ns) is picked from the data and written into the axis label.
    ``decorate(ax, scale)`` adds what one kind of plot needs on top (``scale``: seconds per
    y unit), e.g. the steps ``repro cliff`` found.
    """
    import matplotlib

    matplotlib.use("Agg")  # no display on GPU machines or in CI
    import matplotlib.pyplot as plt

    unit, scale = _time_unit([v for s in series for v in s.hi])
    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=110)
    try:
        for s in series:
            line = ax.plot(s.x, [v / scale for v in s.y], marker="o", markersize=3, label=s.label)[0]
            ax.fill_between(
                s.x, [v / scale for v in s.lo], [v / scale for v in s.hi], color=line.get_color(), alpha=0.25, lw=0
            )
        if all(float(x).is_integer() for s in series for x in s.x):
            from matplotlib.ticker import MaxNLocator

            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if decorate is not None:
            decorate(ax, scale)
        ax.set_xlabel(x_label)
        ax.set_ylabel(f"{y_label} ({unit})")
        if log_y:
            ax.set_yscale("log")
        ax.set_title(title, fontsize=10)
        ax.grid(True, alpha=0.3)
        if series:
            ax.legend(fontsize=8, title=f"line: median; band: {ci_label}", title_fontsize=8)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        return buf.getvalue()
    finally:
        plt.close(fig)


def band_plot(path: Path, series: Sequence[Series], **kw: Any) -> Path:
    """``band_png`` into a new file at ``path``: atomic, never replacing one (``fsio.write_new``)."""
    return write_new(path, band_png(series, **kw))


# --------------------------------------------------------------------------- sweeps of an artifact


def plots_of(doc: Artifact, declared: Declared | None = None) -> list[Plot]:
    """The plots an artifact declares (schema 1.2), else those the caller looked up for its repro."""
    recorded = doc.repro.plots
    if recorded is None:
        return list((declared.plots if declared is not None else None) or ())
    return list(recorded)


def _label(sweep: Plot, key: Sequence[Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in zip(sweep.group_by, key, strict=True)) or "measured"


def series_of(doc: Artifact, sweep: Plot) -> list[Series]:
    """One series per group of measured variants, sorted by x; groups with fewer than 2 points are left out."""
    groups: dict[tuple[Any, ...], list[tuple[float, float, float, float]]] = {}
    for v in doc.variants:
        t = v.timing
        cfg = v.config or {}
        x = cfg.get(sweep.x)
        if v.status != "ok" or not t or not isinstance(x, int | float) or isinstance(x, bool):
            continue
        s = t.stats
        div = float(x) if sweep.per_x and x else 1.0
        key = tuple(cfg.get(k) for k in sweep.group_by)
        groups.setdefault(key, []).append((float(x), s.median / div, s.ci_low / div, s.ci_high / div))
    out = []
    for key, pts in groups.items():
        if len(pts) < 2:
            continue
        pts.sort()
        out.append(
            Series(
                _label(sweep, key),
                tuple(p[0] for p in pts),
                tuple(p[1] for p in pts),
                tuple(p[2] for p in pts),
                tuple(p[3] for p in pts),
            )
        )
    return out


def _fmt_x(x: float) -> str:
    return f"{x:g}"


def finding(sweep: Plot, series: Sequence[Series]) -> str:
    """One line stating what the plot shows: the largest step between neighbouring points, and the rest."""
    if not series:
        return f"{sweep.y_label} against {sweep.x_label}: no group has two measured points"
    steps = []
    for s in series:
        for i in range(1, len(s.x)):
            if s.y[i - 1] > 0:
                steps.append((s.y[i] / s.y[i - 1], s.label, s.x[i - 1], s.x[i]))
    what = f"{sweep.y_label} against {sweep.x_label}"
    if not steps:
        return what
    worst = max(steps, key=lambda st: abs(math.log(st[0])) if st[0] > 0 else 0.0)
    # The plot draws medians, so its steps are ratios of two medians, unscaled; the comparisons
    # table's ratios are medians of paired per-round ratios, some scaled by work. Said in the caption,
    # so a reader does not take 9.37x here and 9.33x there for a contradiction.
    text = (
        f"{what}: the largest step (a ratio of two medians, unscaled; the tables: paired ratios) is "
        f"{worst[0]:.2f}x ({worst[1]}, from {_fmt_x(worst[2])} to {_fmt_x(worst[3])})"
    )
    others = [st for st in steps if st[1] != worst[1]]
    if others:
        lo = min(st[0] for st in others)
        hi = max(st[0] for st in others)
        text += f"; between neighbouring points the other lines change {lo:.2f}x to {hi:.2f}x"
    if sweep.per_x:
        s = series[0]
        text += f"; {s.label}: {_fmt_x(s.x[0])} -> {_fmt_x(s.x[-1])} changes it {s.y[-1] / s.y[0]:.2f}x"
    return text


def file_name(repro_id: str, sweep: Plot) -> str:
    return f"{PLOTS_DIR}/{repro_id}.{sweep.name}.png"


def describe(
    docs: Sequence[Doc | Mapping[str, Any]], why_not: str = NOT_DRAWN_HERE, *, declared: Declarations | None = None
) -> list[Figure]:
    """The figures the report refers to, without drawing anything (``figures`` draws them).

    ``declared``: the plots the catalog declares, for artifacts that do not record their own. A cliff
    search draws its own plot (``repro.evidence.cliff_report``).
    """
    out = []
    for doc in model.artifacts(docs):
        rid = doc.repro.id
        for sw in plots_of(doc, of(doc, declared)):
            series = series_of(doc, sw)
            if series:
                out.append(Figure(rid, sw.name, file_name(rid, sw), finding(sw, series), False, why_not))
    return out


def figures(
    docs: Sequence[Doc | Mapping[str, Any]],
    folder: Path | None,
    draw: bool = True,
    *,
    declared: Declarations | None = None,
) -> list[Figure]:
    """Each sweep's figure under ``folder``/plots: drawn now (when ``draw`` and matplotlib is here),
    kept when the file already exists, else described with the reason it is missing.

    A drawing that fails costs that figure (its reason says why), never the report.
    """
    missing = available()
    runs = model.artifacts(docs)
    out = []
    for fig in describe(runs, declared=declared):
        path = folder / fig.file if folder is not None else None
        if path is not None and path.is_file():
            out.append(Figure(fig.repro_id, fig.sweep, fig.file, fig.alt, True))
            continue
        if path is None or not draw:
            out.append(fig)
            continue
        if missing:
            out.append(Figure(fig.repro_id, fig.sweep, fig.file, fig.alt, False, missing))
            continue
        doc = next(d for d in runs if d.repro.id == fig.repro_id)
        sw = next(s for s in plots_of(doc, of(doc, declared)) if s.name == fig.sweep)
        try:
            band_plot(
                path,
                series_of(doc, sw),
                title=f"{fig.repro_id}: {sw.y_label} vs {sw.x_label}",
                x_label=sw.x_label,
                y_label=sw.y_label,
                log_y=sw.log_y,
            )
        except Exception as exc:  # a plot is evidence on top; its failure must not cost the report
            out.append(Figure(fig.repro_id, fig.sweep, fig.file, fig.alt, False, f"{type(exc).__name__}: {exc}"))
            continue
        out.append(Figure(fig.repro_id, fig.sweep, fig.file, fig.alt, True))
    return out
