"""A ``repro cliff`` search as the evidence layer reads it: its sweep, search, points and steps, typed.

``repro.evidence.model.of`` builds the whole ``Cliff`` (its repro, run, validity and error blocks are
the artifact's, typed there); this module holds what only a cliff search carries. Every field is
one the cliff schema (``schemas/cliff.schema.json``) requires, except ``Step.points_apart``, which
it records when known.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from repro.core.results import from_jsonable

__all__ = ["Point", "Search", "Step", "Sweep", "points", "search", "steps", "sweep"]


@dataclass(frozen=True)
class Sweep:
    """The param swept, over which range, and what counts as a step."""

    param: str
    help: str
    range: tuple[int, int]  # (low, high), inclusive
    limits: tuple[int, int]  # the range the repro allows
    default: int
    metric: Literal["per-unit-of-work", "time"]
    work_reference: int  # times are scaled to the work of one call at this value
    threshold: float
    grid_points: int
    max_points: int
    budget_s: float


@dataclass(frozen=True)
class Search:
    """How the grid-and-bisection search went."""

    grid: tuple[int, ...]
    stop_reason: str
    points_measured: int  # distinct values timed
    measurements: int  # points timed, a value timed in several groups counted each time
    dense_points: int
    groups: int
    resolution: int | None  # widest gap between grid neighbours
    elapsed_s: float
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Point:
    """One value of the param, timed in one group of interleaved rounds."""

    value: int
    phase: str
    group: int
    median_s: float
    ci_low_s: float
    ci_high_s: float
    scaled_s: float
    scaled_ci_low_s: float
    scaled_ci_high_s: float
    rounds: int
    kernels: tuple[str, ...]
    tag: str  # what the repro reads off the kernel names (solve: the LU path)


@dataclass(frozen=True)
class Step:
    """A step between two values: the paired ratio of scaled time, and the kernels on each side."""

    lo: int
    hi: int
    resolved: bool  # hi = lo + 1
    ratio: float
    ci_low: float
    ci_high: float
    before_s: float
    after_s: float
    kernels_before: tuple[str, ...]
    kernels_after: tuple[str, ...]
    only_before: tuple[str, ...]
    only_after: tuple[str, ...]
    tag_before: str
    tag_after: str
    note: str
    points_apart: bool | None = None  # the two points' own CIs do not overlap (recorded, not decisive)


def _build(tp: type, raw: Any) -> Any:
    return from_jsonable(tp, raw if isinstance(raw, Mapping) else {})


def sweep(raw: Any) -> Sweep:
    """A cliff document's ``sweep`` block."""
    out: Sweep = _build(Sweep, raw)
    return out


def search(raw: Any) -> Search:
    """A cliff document's ``search`` block."""
    out: Search = _build(Search, raw)
    return out


def points(raw: Any) -> tuple[Point, ...]:
    """A cliff document's ``points``, in the order recorded."""
    return tuple(_build(Point, p) for p in raw if isinstance(p, Mapping)) if isinstance(raw, list | tuple) else ()


def steps(raw: Any) -> tuple[Step, ...]:
    """A cliff document's ``steps``, in the order recorded."""
    return tuple(_build(Step, s) for s in raw if isinstance(s, Mapping)) if isinstance(raw, list | tuple) else ()
