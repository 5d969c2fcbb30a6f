"""Whether two headlines of one repro on one GPU model agree as GPUs of that model do (a band of
``repro.evidence.band``): inside the range of the band's GPUs, each side on its own, widened by how far one
GPU's re-runs lie from that GPU's value or by a run's own CI, whichever is larger."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from repro.evidence.band import MEASURED, MIN_GPUS, PARAM_NAME, Band, key_of, lookup, params_of
from repro.evidence.band_runs import band_arms
from repro.evidence.markdown import fmt_time
from repro.evidence.model import Artifact

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


def other_models(doc: Artifact | Mapping[str, Any], bands: Sequence[Band]) -> list[Band]:
    """The bands of this artifact's repro, params and headline comparison on other GPU models, most GPUs first:
    where its own model has none, what the committed runs read elsewhere (not a band for this model)."""
    key = key_of(doc, joining=False)
    if key is None:
        return []
    found = [
        b
        for b in bands
        if (b.repro, b.params, b.headline) == (key[0], key[2], key[3]) and b.gpu != key[1] and len(b.points) >= MIN_GPUS
    ]
    return sorted(found, key=lambda b: -len(b.points))


def span(b: Band) -> tuple[float, float]:
    """The lowest and highest GPU values of a band."""
    return min(p.value for p in b.points), max(p.value for p in b.points)


def suspect_words(b: Band) -> str:
    """``, all 82 runs suspect`` or ``, 15 of 163 runs suspect``; "" where none was: a band of suspect runs says so
    wherever it is quoted."""
    flagged, known = b.suspect
    return f", {'all' if flagged == known else f'{flagged} of'} {known} runs suspect" if flagged else ""


def _gpus(b: Band) -> str:
    """``57 GPUs`` or ``63 GPUs, all 82 runs suspect``."""
    return f"{len(b.points)} GPUs{suspect_words(b)}"


def elsewhere(b: Band) -> str:
    """``NVIDIA H200: 1.23-1.51x (57 GPUs)``: where another model's GPUs read, lowest to highest."""
    lo, hi = span(b)
    return f"{b.gpu}: {lo:.3g}-{hi:.3g}x ({_gpus(b)})"


def module_runs(doc: Artifact, b: Band) -> str:
    """``3 of 110 runs with this repro module file``: how many of the band's runs recorded this run's repro source;
    "" where this run or the band's runs recorded none."""
    ours, known = b.same_source(doc.repro.source_sha256 or "")
    return f"{ours} of {known} runs with this repro module file" if known and doc.repro.source_sha256 else ""


def model_flip(doc: Artifact, bands: Sequence[Band]) -> str:
    """``On NVIDIA H200 every GPU's median at these params lies above the 1.2 threshold (the table's span; 3 of 110
    runs with this repro module file), unlike this run; arms there/here: ...``: where this model has no band, this run's
    status is the threshold's call (its whole CI on one side: reproduced or not_reproduced), and every GPU of another
    model's band lies on the other side; "" otherwise."""
    v = doc.verdict
    if v.status not in ("reproduced", "not_reproduced") or v.threshold is None or lookup(doc, bands) is not None:
        return ""
    for b in other_models(doc, bands):
        lo, hi = span(b)
        side = "above" if v.status == "not_reproduced" and lo >= v.threshold else ""
        side = "below" if v.status == "reproduced" and hi < v.threshold else side
        if side:
            code = f"; {said}" if (said := module_runs(doc, b)) else ""
            return (
                f"On {b.gpu} every GPU's median at these params lies {side} the {v.threshold:g} threshold (the table's "
                f"span{code}), unlike this run{_arms_there(doc, b)}."
            )
    return ""


def _runs(b: Band) -> int:
    return len({r for p in b.points for r in p.runs})


def _params_differ(ours: Mapping[str, Any], there: Sequence[tuple[Band, dict[str, Any]]]) -> str:
    """``lack control_kernels, controls_without_te (all 15 runs); lack kernel_episode_rounds (7 of 15 runs)``: how
    the params of the bands' runs differ from this run's, per param: absent there, or set to another value (or set
    there and not here), with how many of their runs do so."""
    total = sum(_runs(b) for b, _ in there)
    missing = object()
    groups: dict[tuple[str, int], list[str]] = {}
    for k in sorted({*ours, *(k for _, t in there for k in t)}):
        if not PARAM_NAME.fullmatch(k):
            continue
        lack = sum(_runs(b) for b, t in there if k in ours and k not in t)
        other = sum(_runs(b) for b, t in there if k in t and t[k] != ours.get(k, missing))
        for kind, n in (("lack", lack), ("set otherwise", other)):
            if n:
                groups.setdefault((kind, n), []).append(k)
    return "; ".join(
        f"{kind} {', '.join(keys)} ({'all' if n == total else f'{n} of'} {total} runs)"
        for (kind, n), keys in sorted(groups.items(), key=lambda g: (g[0][0], -g[0][1]))
    )


# A comparison this run did not time: its standalone script or the seed's program may still have run it here.
UNTIMED = "not timed in this run's rounds"


def not_run_bands(doc: Artifact, bands: Sequence[Band], brief: bool = True) -> str:
    """What committed runs read for a comparison this run did not run, where this run measured nothing for its
    headline (a measured status without a value; never a smoke run): the first in the verdict's not-run list with a
    band, on this run's GPU model where it has one, else on the model with the most distinct GPUs; of that model's
    bands, the one at this run's params where there is one, else all of them; "" where none has a band.

    ``brief``, the summary table's cell: ``torch_fused, kernel time: NVIDIA H200 1.000-1.003x (11 GPUs, other
    params)`` (the comparison's metric, which tells it from a script's whole steps). Else the Re-run-elsewhere
    line's words, which name the comparison's label, the runs and how their params differ from this run's
    (``_params_differ``)."""
    v = doc.verdict
    if v.value is not None or v.status not in MEASURED or doc.smoke:
        return ""
    ours = doc.repro.params or {}
    canonical = json.dumps(ours, sort_keys=True)
    for name, label in dict.fromkeys((n.comparison, n.label) for n in v.not_run):
        found = [
            (b, t)
            for b in bands
            if (b.repro, b.headline) == (doc.repro.id, name) and len(b.points) >= MIN_GPUS
            if (t := params_of(b)) is not None
        ]
        if not found:
            continue
        models = sorted({b.gpu for b, _ in found})
        own = doc.machine.gpu_name
        gpu = (
            own
            if own in models
            else max(models, key=lambda g: len({p.uuid for b, _ in found if b.gpu == g for p in b.points}))
        )
        there = [(b, t) for b, t in found if b.gpu == gpu]
        there = [(b, t) for b, t in there if b.params == canonical] or there
        values = [p.value for b, _ in there for p in b.points]
        gpus = len({p.uuid for b, _ in there for p in b.points})
        runs = sum(_runs(b) for b, _ in there)
        span = f"{min(values):.3f}-{max(values):.3f}x"
        differ = _params_differ(ours, there) if doc.repro.params else "unknown: this run recorded none"
        if brief:  # with the comparison's metric ("kernel time" of "kernel time per step") where its label names one
            same = ("other params" if doc.repro.params else "params unknown here") if differ else "these params"
            metric = label.partition(": ")[2].split(",")[0].split(" per ")[0] if label and label != "None" else ""
            return f"{name}, {metric or UNTIMED}: {gpu} {span} ({gpus} GPUs, {same})"
        what = label if label and label != "None" else name
        params = f"whose params: {differ}" if differ else "at this run's params"
        return f"{name} ({what}), {UNTIMED}, read {span} on {gpus} {gpu} GPUs in {runs} committed runs, {params}"
    return ""


def _arms_there(doc: Artifact, b: Band) -> str:
    """``; arms there/here: twin_memset 918 ns/912 ns, twin_fill 618 ns/782 ns; NVML saw no other process around
    them here``: the headline's arms' medians over the other model's band runs beside this run's, the one that differs
    more last, and whether NVML saw another compute process around this run's arms (another process's live graph
    moves a node's time); "" where either side lacks them."""
    got = band_arms(b)
    here = {x.name: x.median for x in doc.variants if x.timing is not None and x.median}
    if got is None or set(got[2]) - set(here):
        return ""
    there = got[2]
    far = max(there, key=lambda n: abs(here[n] / there[n] - 1))
    pairs = [f"{n} {fmt_time(there[n])}/{fmt_time(here[n])}" for n in sorted(there, key=lambda n: n == far)]
    seen = [(x.gpu_monitor or {}).get("other_pids") for x in doc.variants if x.name in there]
    alone = "; NVML saw no other process around them here" if seen and all(o == [] for o in seen) else ""
    return f"; arms there/here: {', '.join(pairs)}{alone}"


__all__ = [
    "Agreement",
    "agree",
    "elsewhere",
    "model_flip",
    "module_runs",
    "not_run_bands",
    "other_models",
    "reach",
    "slack",
    "span",
    "suspect_words",
]
