"""Whether two headlines of one repro on one GPU model agree as GPUs of that model do (a band of
``repro.evidence.band``): inside the range of the band's GPUs, each side on its own, widened by how far one
GPU's re-runs lie from that GPU's value or by a run's own CI, whichever is larger."""

from __future__ import annotations

from typing import Literal

from repro.evidence.band import Band

Agreement = Literal["consistent", "differs beyond the band", "no cross-GPU data"]


def slack(band: Band, floor: float = 0.0) -> float:
    """How far one run may lie from its GPU's value: one GPU's re-run spread (``Band.same_gpu``), taken as at
    least ``floor`` (a run's own relative CI half-width: a few GPUs can agree more closely than one run's CI
    can tell)."""
    return max(band.same_gpu[0] if band.same_gpu else 0.0, floor)


def reach(band: Band, floor: float = 0.0, centred: bool = False) -> tuple[float, float]:
    """(below, above): how far under and over the reference a headline may lie, relatively, and agree.

    ``centred``: the reference is the band's centre, so a headline agrees inside the GPUs' range (their farthest
    below and above it) widened by one run's ``slack``. Otherwise the reference is another run, on any GPU of
    the band: two GPUs' values differ by up to the range's whole width, and each run by its own slack.
    """
    below, above = band.sides()
    if centred:
        return below + slack(band, floor), above + slack(band, floor)
    width = below + above + 2 * slack(band, floor)
    return width, width


def agree(a: float, b: float, band: Band | None, floor: float = 0.0, centred: bool = False) -> Agreement:
    """Whether headline ``b`` lies within ``reach`` of ``a`` (the band's centre when ``centred``)."""
    if band is None:
        return "no cross-GPU data"
    below, above = reach(band, floor, centred)
    return "consistent" if -below <= b / a - 1 <= above else "differs beyond the band"


__all__ = ["Agreement", "agree", "reach", "slack"]
