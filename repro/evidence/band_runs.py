"""The shipped band runs (``band.RUNS_FILE``): a compact copy of every run behind the bands, which a bundle ships
and the report reads for what a band's arms did. The file is parsed once per path and change (``_parsed``), and
what is read from it is shared between callers: read it, never change it."""

from __future__ import annotations

import functools
import json
import statistics
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from repro.evidence.band import RUNS_FILE, Band
from repro.evidence.markdown import finite, fmt_time


def _shipped(path: Path) -> Mapping[str, Any] | None:
    """The band-runs document at ``path``; None where it cannot be read or is not a JSON object."""
    try:
        st = path.stat()
    except OSError:
        return None
    return _parsed(str(path), (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size))


@functools.lru_cache(maxsize=4)
def _parsed(path: str, stamp: tuple[int, int, int, int]) -> Mapping[str, Any] | None:
    """``path``'s JSON, once per path and ``stamp`` (inode, modification and change times, size): a file replaced
    or rewritten, its modification time restored or not, gets another stamp."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, Mapping) else None


def runs_of(repros: Sequence[str], path: Path = RUNS_FILE, leave: Collection[str] = ()) -> str | None:
    """The shipped band runs of ``repros`` as ``runs_json``'s text, but those whose run id ``leave`` names (the
    runs ``band.without`` left out of the bands); None where there are none or no file."""
    doc = _shipped(path)
    if doc is None:
        return None
    try:
        runs = [r for r in doc["runs"] if r.get("repro") in repros and r.get("run_id") not in leave]
    except (KeyError, TypeError, AttributeError):
        return None
    if not runs:
        return None
    return json.dumps({**doc, "runs": runs}, sort_keys=True, separators=(",", ":")) + "\n"


def _arm_times(run: Mapping[str, Any]) -> dict[str, float]:
    """A band run's headline arms (its headline row's numerator and denominator variants) with their median
    seconds, where recorded as finite positive numbers; {} for anything else."""
    verdict = run.get("verdict") if isinstance(run, Mapping) else None
    rows = verdict.get("breakdown") if isinstance(verdict, Mapping) else None
    head = verdict.get("headline") if isinstance(verdict, Mapping) else None
    row = next((r for r in rows or () if isinstance(r, Mapping) and r.get("comparison") == head and head), None)
    times = {
        v.get("name"): v.get("median_s")
        for v in run.get("variants") or ()
        if isinstance(v, Mapping) and isinstance(v.get("name"), str)
    }
    out = {}
    for name in (row.get("num"), row.get("den")) if row else ():
        t = finite(times.get(name))
        if isinstance(name, str) and t is not None and t > 0:
            out[name] = t
    return out


def _others_seen(run: Mapping[str, Any], arms: Collection[str]) -> list[object]:
    """Each headline arm's recorded ``other_pids`` (None where not recorded) of one band run."""
    got = []
    for v in run.get("variants") or ():
        if isinstance(v, Mapping) and v.get("name") in arms:
            mon = v.get("gpu_monitor")
            got.append(mon.get("other_pids") if isinstance(mon, Mapping) else None)
    return got


def band_arms(
    b: Band, path: Path = RUNS_FILE
) -> tuple[dict[str, Mapping[str, Any]], dict[str, dict[str, float]], dict[str, float]] | None:
    """(band run id -> its shipped run, run id -> its headline arms' medians, arm -> the median of all its runs'):
    from the shipped band runs (``path``); None where they cannot be read or the band's runs name not two arms."""
    doc = _shipped(path)
    if doc is None:
        return None
    try:
        runs = {r["run_id"]: r for r in doc["runs"] if isinstance(r, Mapping) and r.get("repro") == b.repro}
    except (KeyError, TypeError, AttributeError):
        return None
    arms = {rid: _arm_times(runs.get(rid) or {}) for p in b.points for rid in p.runs}
    every: dict[str, list[float]] = {}
    for times in arms.values():
        for name, t in times.items():
            every.setdefault(name, []).append(t)
    if len(every) != 2:
        return None
    return runs, arms, {name: statistics.median(ts) for name, ts in every.items()}


def outlier_arms(b: Band, path: Path = RUNS_FILE) -> str:
    """``on its farthest 3 GPUs, the arm that moved most: twin_fill 741 ns (b43f15a9), ..., against all its runs'
    medians of twin_memset 918 ns, twin_fill 618 ns``: for a band with ``outliers``, which arm of the headline (its
    numerator or denominator variant) moved most on each of the farthest GPUs, from the shipped band runs
    (``path``), against the median of every band run of that arm, and whether NVML listed another compute process
    around those arms; "" without outliers, or without the runs of every farthest GPU and their arms."""
    few = b.outliers
    shipped = band_arms(b, path) if few is not None else None
    if few is None or shipped is None:
        return ""
    runs, arms, typical = shipped
    c = b.center
    moved: dict[str, list[str]] = {}
    others: list[object] = []
    for p in sorted(b.points, key=lambda q: -abs(q.value / c - 1))[: few[0]]:
        seen = [arms[rid] for rid in p.runs]
        got = {n: statistics.median(a[n] for a in seen if n in a) for n in typical if any(n in a for a in seen)}
        if not got:
            return ""  # a farthest GPU without its runs' arms: the sentence would leave it out
        arm = max(got, key=lambda n: abs(got[n] / typical[n] - 1))
        moved.setdefault(arm, []).append(f"{fmt_time(got[arm])} ({p.uuid[:8]})")
        others += [o for rid in p.runs for o in _others_seen(runs.get(rid) or {}, typical)]
    said = "; ".join(f"{name} {', '.join(v)}" for name, v in moved.items())
    usual = ", ".join(f"{name} {fmt_time(t)}" for name, t in typical.items())
    alone = (
        "; NVML listed no other compute process before or after these arms"
        if others and all(o == [] for o in others)
        else ""
    )
    return (
        f"on its farthest {few[0]} GPUs, the arm that moved most: {said}, against all its runs' medians of {usual}"
        f"{alone}"
    )


__all__ = ["band_arms", "outlier_arms", "runs_of"]
