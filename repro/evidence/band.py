"""The re-run band: how far a headline moved between GPUs of one model, from runs on distinct GPU uuids.

A CI covers what one process sampled on one GPU. Re-runs of the same repro on other GPUs of the
same model land outside it by up to a few percent, so a reader comparing two machines needs the
between-GPU spread too. The band is built from real artifacts (the committed reference runs, and a
fleet's runs through ``repro matrix collect --band``) and shipped as data with its provenance.

    python -m repro.evidence.band artifacts/reference     # rewrites the shipped data files
    python -m repro.evidence.band --show [REPRO ...]      # lists each band's GPUs and run ids
"""

from __future__ import annotations

import json
import math
import re
import statistics
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from repro.core import fsio, stats
from repro.env.fingerprint import essentials
from repro.evidence import artifact, model
from repro.evidence.artifact import ARTIFACT_KIND
from repro.evidence.model import Artifact, Row

DATA_FILE = Path(__file__).resolve().parent / "data" / "rerun_band.json"
# A compact copy of every run behind the bands (its verdict, each variant's rounds and clocks, the GPU and harness
# it ran on): what a bundle ships so that a reader can check a band without the repository.
RUNS_FILE = DATA_FILE.with_name("band_runs.json")
BAND_VERSION = 2
# Statuses whose headline is a measured ratio.
MEASURED = ("reproduced", "not_reproduced", "inconclusive", "undecided")
# The CI target of a default run (SamplingConfig's); a run sampled to a looser one joins no band.
DEFAULT_TARGET = 0.01
# Fewer GPUs than this say nothing about a spread between GPUs.
MIN_GPUS = 2


@dataclass(frozen=True)
class Point:
    """One GPU's headline for one repro: the median of its runs, and where they came from (the runs'
    torch, driver and harness source digest, each distinct value once)."""

    uuid: str
    value: float
    runs: tuple[str, ...]
    torch: tuple[str, ...] = ()
    driver: tuple[str, ...] = ()
    harness: tuple[str, ...] = ()  # the first 12 hex digits of each run's harness source sha256
    run_values: tuple[float, ...] = ()  # each run's headline, in the order of ``runs`` (empty: not recorded)
    # Each run's per-round headline ratios (their median is its value; empty where its artifact does not
    # hold them) and its artifact's path where the band was computed, in the order of ``runs``.
    run_rounds: tuple[tuple[float, ...], ...] = ()
    run_paths: tuple[str, ...] = ()
    # Each run's validity flag ("valid", "suspect", "" where not recorded) and the first 12 hex digits of its
    # repro's own source sha256 ("" where not recorded), in the order of ``runs``.
    run_flags: tuple[str, ...] = ()
    run_sources: tuple[str, ...] = ()


@dataclass(frozen=True)
class Band:
    repro: str
    gpu: str
    params: str  # canonical JSON of the params the runs used: a band holds for those only
    points: tuple[Point, ...]
    headline: str = ""  # the name of the headline comparison (verdict.headline): bands never pool two

    @property
    def center(self) -> float:
        return statistics.median(p.value for p in self.points)

    @property
    def half_width(self) -> float:
        """The largest relative distance of a GPU's value from the median of all GPUs."""
        c = self.center
        return max(abs(p.value / c - 1) for p in self.points)

    def sides(self, drop: int = 0) -> tuple[float, float]:
        """(below, above): the largest relative distance of a GPU's value under and over the median of all, without
        the ``drop`` farthest GPUs; 0.0 for a side no GPU lies on."""
        c = self.center
        kept = sorted((p.value / c - 1 for p in self.points), key=abs)[: len(self.points) - drop]
        return max((-x for x in kept if x < 0), default=0.0), max((x for x in kept if x > 0), default=0.0)

    @property
    def outliers(self) -> tuple[int, float] | None:
        """(k, the half-width without the k farthest GPUs) where a few GPUs set the band: each of those k lies more
        than twice as far from the median of all as any GPU left, and k is at most a tenth of the GPUs; else None."""
        c = self.center
        far = sorted((abs(p.value / c - 1) for p in self.points), reverse=True)
        k = max((j for j in range(1, len(far) // 10 + 1) if far[j - 1] > 2 * far[j]), default=0)
        return (k, far[k]) if k else None

    @property
    def same_gpu(self) -> tuple[float, int, int] | None:
        """How far one GPU's runs (separate processes) lay from that GPU's value: the largest relative
        distance, over the GPUs with at least two runs, with how many such GPUs and runs; None without any."""
        many = [p for p in self.points if len(p.run_values) >= 2 and p.value > 0]
        if not many:
            return None
        far = max(abs(v / p.value - 1) for p in many for v in p.run_values)
        return far, len(many), sum(len(p.run_values) for p in many)

    @property
    def suspect(self) -> tuple[int, int]:
        """(runs flagged suspect, runs whose flag is recorded): a band of suspect runs says where a re-run lands
        under the same conditions, not where a clean one would."""
        flags = [f for p in self.points for f in p.run_flags if f]
        return sum(f == "suspect" for f in flags), len(flags)

    def same_source(self, sha: str) -> tuple[int, int]:
        """(runs whose repro source begins with ``sha``'s first 12 hex digits, runs whose source is recorded)."""
        got = [s for p in self.points for s in p.run_sources if s]
        return sum(s == sha[:12] for s in got), len(got)


Key = tuple[str, str, str, str]


def key_of(doc: Artifact | Mapping[str, Any], *, joining: bool = True) -> Key | None:
    """(repro, GPU model, params, headline comparison) of a measured GPU artifact, else None.

    To join a band (``joining``) a verdict must also come from paired comparisons: runs of the
    unpaired method moved more between processes and say nothing about the spread between GPUs.
    It must also be a run with the default evidence: not a quick run, and no variant sampled to a
    CI target looser than the default's (a band says where a default re-run lands).
    """
    a = model.of(doc)
    if not isinstance(a, Artifact) or a.kind != ARTIFACT_KIND or a.smoke:
        return None
    verdict, gpu = a.verdict, a.machine
    if verdict.status not in MEASURED or (joining and verdict.paired is not True):
        return None
    if joining and (a.run.quick or any(v.timing and v.timing.target_rel_ci > DEFAULT_TARGET for v in a.variants)):
        return None
    if verdict.value is None or not gpu.gpu_uuid or not gpu.gpu_name:
        return None
    params = json.dumps(a.repro.params or {}, sort_keys=True)
    return a.repro.id, gpu.gpu_name, params, verdict.headline or ""


def _origin(a: Artifact) -> tuple[str, str, str]:
    """(torch, driver, harness digest's first 12) of the run, each "" when not recorded."""
    e = essentials(a.fingerprint)
    harness = a.fingerprint.get("harness")
    sha = harness.get("source_sha256") if isinstance(harness, Mapping) else None
    return str(e["torch"] or ""), str(e["driver"] or ""), str(sha or "")[:12]


def _marks(a: Artifact) -> tuple[str, str]:
    """(validity flag, the repro source sha256's first 12) of the run, each "" when not recorded."""
    return str(a.validity.flag or ""), str(a.repro.source_sha256 or "")[:12]


def _distinct(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted({v for v in values if v}))


def headline_row(a: Artifact) -> Row | None:
    """The verdict's headline breakdown row; None where the verdict has none."""
    return next((r for r in a.verdict.breakdown if r.headline and r.comparison == a.verdict.headline), None)


def headline_rounds(a: Artifact) -> tuple[float, ...]:
    """The headline's per-round paired ratios (``row_rounds`` of its row and the recorded headline)."""
    row = headline_row(a)
    return row_rounds(a, row, a.verdict.value) if row is not None else ()


def row_rounds(a: Artifact, row: Row, value: float | None) -> tuple[float, ...]:
    """A paired row's per-round ratios, from its two variants' recorded rounds and the row's scale, where their
    median is ``value`` (the ratio recorded for them); () otherwise (a kernel-time basis, rounds not recorded)."""
    if not row.paired or row.basis == "kernel" or value is None:
        return ()
    num, den = a.variant(str(row.num)), a.variant(str(row.den))
    x = (num.timing.rounds if num is not None and num.timing is not None else None) or ()
    y = (den.timing.rounds if den is not None and den.timing is not None else None) or ()
    if not x or len(x) != len(y) or any(v <= 0 for v in y):
        return ()
    ratios = stats.paired_ratios(x, y, float(row.scale or 1.0))
    return tuple(ratios) if math.isclose(statistics.median(ratios), value, rel_tol=1e-9) else ()


def compute(
    docs: Iterable[Artifact | Mapping[str, Any]], base: Sequence[Band] = (), paths: Mapping[str, str] | None = None
) -> list[Band]:
    """Bands of every (repro, GPU model, params) seen on at least MIN_GPUS distinct GPUs.

    ``base`` adds earlier bands' points: a GPU already there keeps its value unless ``docs``
    brings runs on it, which then replace it. ``paths``: each artifact's path by ``run_id/repro``, recorded
    beside its run.
    """
    # Per key and GPU, each run's (value, run id, its origin, its headline rounds, its marks).
    runs: dict[Key, dict[str, list[tuple[float, str, tuple[str, str, str], tuple[float, ...], tuple[str, str]]]]] = {}
    for doc in docs:
        a = model.of(doc)
        key = key_of(a) if isinstance(a, Artifact) else None
        if key is None or not isinstance(a, Artifact):
            continue
        uuid = str(a.machine.gpu_uuid)
        runs.setdefault(key, {}).setdefault(uuid, []).append(
            (float(a.verdict.value or 0.0), a.run.run_id, _origin(a), headline_rounds(a), _marks(a))
        )
    points: dict[Key, dict[str, Point]] = {}
    for band in base:
        points.setdefault((band.repro, band.gpu, band.params, band.headline), {}).update(
            {p.uuid: p for p in band.points}
        )
    for key, by_gpu in runs.items():
        for uuid, vals in by_gpu.items():
            by_run = {r: (v, rounds, marks) for v, r, _, rounds, marks in vals if r}
            ids = tuple(sorted(by_run))
            origins = [o for _, _, o, _, _ in vals]
            where = paths or {}
            points.setdefault(key, {})[uuid] = Point(
                uuid,
                statistics.median(v for v, _, _, _, _ in vals),
                ids,
                _distinct(o[0] for o in origins),
                _distinct(o[1] for o in origins),
                _distinct(o[2] for o in origins),
                tuple(by_run[r][0] for r in ids),
                tuple(by_run[r][1] for r in ids),
                tuple(where.get(f"{r}/{key[0]}", "") for r in ids) if paths else (),
                tuple(by_run[r][2][0] for r in ids),
                tuple(by_run[r][2][1] for r in ids),
            )
    return [
        Band(repro, gpu, params, tuple(sorted(by_gpu.values(), key=lambda p: p.uuid)), headline)
        for (repro, gpu, params, headline), by_gpu in sorted(points.items())
        if len(by_gpu) >= MIN_GPUS
    ]


def to_json(bands: Sequence[Band], sources: Sequence[str]) -> str:
    doc = {
        "kind": "gpu-repro.rerun-band",
        "version": BAND_VERSION,
        "sources": list(sources),
        "bands": [
            {
                "repro": b.repro,
                "gpu": b.gpu,
                "params": json.loads(b.params),
                "headline": b.headline,
                "center": b.center,
                "half_width": b.half_width,
                "points": [
                    {
                        "uuid": p.uuid,
                        "value": p.value,
                        "runs": list(p.runs),
                        "torch": list(p.torch),
                        "driver": list(p.driver),
                        "harness": list(p.harness),
                        "run_values": list(p.run_values),
                        "run_rounds": [list(r) for r in p.run_rounds],
                        "run_paths": list(p.run_paths),
                        "run_flags": list(p.run_flags),
                        "run_sources": list(p.run_sources),
                    }
                    for p in b.points
                ],
            }
            for b in bands
        ],
    }
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def without(bands: Sequence[Band], run_ids: Iterable[str]) -> list[Band]:
    """``bands`` less the runs ``run_ids`` names: a report of a committed run, rendered again from band data made
    after it, must not set the run (or its re-runs) against itself. A GPU keeps the median of its other runs; a
    GPU left with none goes, and so does a band left with fewer than MIN_GPUS. A GPU's torch, driver and harness
    sets are its runs' distinct values, not per run: they stay as they were (on the shipped data every GPU's runs
    share them)."""
    drop = set(run_ids)
    out = []
    for b in bands:
        points = []
        for p in b.points:
            keep = [i for i, r in enumerate(p.runs) if r not in drop]
            if len(keep) == len(p.runs):
                points.append(p)
                continue
            n = len(p.runs)
            if not keep or len(p.run_values) != n:  # without per-run values the GPU's median cannot be taken again
                continue
            values = _kept(p.run_values, keep, n)
            points.append(
                replace(
                    p,
                    value=statistics.median(values),
                    runs=_kept(p.runs, keep, n),
                    run_values=values,
                    run_rounds=_kept(p.run_rounds, keep, n),
                    run_paths=_kept(p.run_paths, keep, n),
                    run_flags=_kept(p.run_flags, keep, n),
                    run_sources=_kept(p.run_sources, keep, n),
                )
            )
        if len(points) >= MIN_GPUS:
            out.append(replace(b, points=tuple(points)))
    return out


def _kept(xs: tuple[Any, ...], keep: Sequence[int], n: int) -> tuple[Any, ...]:
    """The entries at ``keep`` of a per-run record of ``n`` runs; () for a record of another length, which cannot be
    cut to the runs kept (it goes, as if not recorded)."""
    return tuple(xs[i] for i in keep) if len(xs) == n else ()


def load(path: Path = DATA_FILE) -> list[Band]:
    """The bands in a data file; a missing or unreadable file is no band, never an error."""
    try:
        return load_text(path.read_text())
    except OSError:
        return []


def load_text(data: str) -> list[Band]:
    """The bands in a data file's text (``to_json``'s); unreadable text is no band, never an error."""
    try:
        doc = json.loads(data)
        return [
            Band(
                str(b["repro"]),
                str(b["gpu"]),
                json.dumps(b["params"], sort_keys=True),
                tuple(
                    Point(
                        str(p["uuid"]),
                        float(p["value"]),
                        tuple(map(str, p["runs"])),
                        tuple(map(str, p.get("torch", ()))),
                        tuple(map(str, p.get("driver", ()))),
                        tuple(map(str, p.get("harness", ()))),
                        tuple(map(float, p.get("run_values") or ())),
                        tuple(tuple(map(float, r)) for r in p.get("run_rounds") or ()),
                        tuple(map(str, p.get("run_paths") or ())),
                        tuple(map(str, p.get("run_flags") or ())),
                        tuple(map(str, p.get("run_sources") or ())),
                    )
                    for p in b["points"]
                ),
                str(b.get("headline") or ""),
            )
            for b in doc["bands"]
        ]
    except (ValueError, KeyError, TypeError, AttributeError):
        return []


def lookup(doc: Artifact | Mapping[str, Any], bands: Sequence[Band] | None = None) -> Band | None:
    """The band for this artifact's repro, GPU model, params and headline comparison, if one was measured."""
    key = key_of(doc, joining=False)
    if key is None:
        return None
    return next((b for b in (load() if bands is None else bands) if _key(b) == key), None)


def _key(b: Band) -> Key:
    return b.repro, b.gpu, b.params, b.headline


def versions(b: Band) -> tuple[str, ...]:
    """The harness source digests (first 12 hex digits) of the band's runs, each once."""
    return _distinct(h for p in b.points for h in p.harness)


# A param name as a report names it: an artifact's params are open, so other keys are left unsaid.
PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def params_of(b: Band) -> dict[str, Any] | None:
    """A band's params as a dict; None where its JSON is not an object (a band built elsewhere, damaged)."""
    try:
        got = json.loads(b.params)
    except ValueError:
        return None
    return got if isinstance(got, dict) else None


def other_params(doc: Artifact | Mapping[str, Any], bands: Sequence[Band] | None = None) -> list[str]:
    """The names of the params in which the bands of this repro and GPU model differ from this
    artifact's (present on one side only, or with other values); empty when no such band exists."""
    key = key_of(doc, joining=False)
    if key is None:
        return []
    ours = json.loads(key[2])
    out: set[str] = set()
    for b in load() if bands is None else bands:
        if (b.repro, b.gpu) == key[:2] and b.headline == key[3] and b.params != key[2]:
            if (theirs := params_of(b)) is None:
                continue
            out |= {n for n in set(ours) | set(theirs) if theirs.get(n, out) != ours.get(n, out)}
    return sorted(n for n in out if PARAM_NAME.fullmatch(n))


def _walk(roots: Sequence[Path]) -> Iterable[tuple[Path, dict[str, Any]]]:
    for root in roots:
        for path in sorted(root.rglob("*.json")) if root.is_dir() else [root]:
            if any("attempt" in part for part in path.parts) or path.name.startswith("."):
                continue  # the superseded paired-CI method of artifacts/reference/h200/paired/attempt*
            try:
                raw = path.read_bytes()
                doc = json.loads(raw)
            except (OSError, ValueError):
                continue
            # Only valid artifacts: anything else beside them (a doctor report, a plan) is no run.
            if (
                isinstance(doc, dict)
                and doc.get("kind") == ARTIFACT_KIND
                and not artifact.file_validation_errors(raw, doc)
            ):
                yield path, doc


def _runs(p: Point) -> str:
    """The run ids, each with its own headline where the data records it (``id=0.9221``)."""
    if len(p.run_values) == len(p.runs):
        return ", ".join(f"{r}={v:.4g}" for r, v in zip(p.runs, p.run_values, strict=True)) or "-"
    return ", ".join(p.runs) or "-"


def machines_of(p: Point) -> tuple[str, ...]:
    """The machine folders a GPU's runs were committed under (``artifacts/reference/<machine>/...``: ``h200``
    for a one-GPU host, ``h200x2`` for a two-GPU host), each once; () where the band recorded no paths."""
    return _distinct(
        path.split("/")[2] for path in p.run_paths if path.startswith("artifacts/reference/") and path.count("/") > 2
    )


def show(bands: Sequence[Band], repros: Sequence[str] = ()) -> list[str]:
    """Each band's provenance as lines: the repro, GPU model and params, which machine folders its GPUs'
    runs came from, then one line per GPU (its uuid's first 8 characters, its value, the run ids it comes from
    with each run's headline, its machine folder)."""
    out = []
    for b in bands:
        if repros and b.repro not in repros:
            continue
        hosts: dict[str, list[Point]] = {}
        for p in b.points:
            hosts.setdefault(", ".join(machines_of(p)) or "not recorded", []).append(p)
        split = "; ".join(
            f"{where}: {len(ps)} GPUs, {min(p.value for p in ps):.4g}-{max(p.value for p in ps):.4g}"
            for where, ps in sorted(hosts.items())
        )
        out.append(
            f"{b.repro} on {b.gpu}: median {b.center:.4g}, ±{b.half_width * 100:.2g}% over {len(b.points)} GPUs "
            f"(by machine folder: {split})"
        )
        out.append(f"  headline comparison {b.headline or '(not recorded)'}; params {b.params}")
        out += [
            f"  GPU {p.uuid[:8]}: {p.value:.4g} (runs {_runs(p)}; torch {', '.join(p.torch) or '-'}; "
            f"driver {', '.join(p.driver) or '-'}; harness {', '.join(p.harness) or '-'}; "
            f"machine {', '.join(machines_of(p)) or '-'})"
            for p in b.points
        ]
    return out


_MONITOR_KEYS = (
    "polls",
    "sm_clock_min_mhz",
    "sm_clock_max_mhz",
    "sm_clock_during_mhz",
    "power_during_w",
    "power_max_w",
    "reasons_seen",
    "throttled",
    "series",
    "other_pids",
)
_GPU_KEYS = ("name", "uuid", "compute_capability", "pci_bus_id")
# NVML's board identity: what tells one board of a model from another beyond its uuid.
_NVML_KEYS = ("vbios_version", "board_part_number")


def compact_run(doc: Mapping[str, Any], path: str) -> dict[str, Any]:
    """One band run as a bundle ships it: where its artifact is, its verdict with every breakdown row, each
    variant's status, rounds and clocks, and the GPU (with its VBIOS and board part number where NVML gave
    them), driver, torch and harness it ran on."""
    fp = doc.get("fingerprint") or {}
    gpu = fp.get("gpu") or {}
    e = essentials(fp)

    def variant(v: Mapping[str, Any]) -> dict[str, Any]:
        t = v.get("timing") or {}
        mon = v.get("gpu_monitor") or {}
        return {
            "name": v.get("name"),
            "status": v.get("status"),
            "median_s": (t.get("stats") or {}).get("median"),
            "rounds": t.get("rounds"),
            "episode_rounds": t.get("episode_rounds"),
            "gpu_monitor": {k: mon[k] for k in _MONITOR_KEYS if k in mon} or None,
        }

    verdict = doc.get("verdict") or {}
    return {
        "path": path,
        "run_id": (doc.get("run") or {}).get("run_id"),
        "repro": (doc.get("repro") or {}).get("id"),
        "params": (doc.get("repro") or {}).get("params"),
        "verdict": {k: verdict.get(k) for k in ("status", "value", "ci_low", "ci_high", "ci_level", "headline")}
        | {"breakdown": verdict.get("breakdown") or []},
        "validity": doc.get("validity"),
        "warnings": doc.get("warnings") or [],
        "variants": [variant(v) for v in doc.get("variants") or [] if isinstance(v, Mapping)],
        "gpu": {k: gpu.get(k) for k in _GPU_KEYS}
        | {"driver": e["driver"]}
        | {k: nvml.get(k) for k in _NVML_KEYS if isinstance(nvml := gpu.get("nvml"), Mapping)},
        "torch": e["torch"],
        "harness": fp.get("harness"),
    }


def runs_json(bands: Sequence[Band], docs: Mapping[str, Mapping[str, Any]]) -> str:
    """``RUNS_FILE``'s text: the compact copy of each run the bands name (``docs``: artifact by path)."""
    named = sorted({path for b in bands for p in b.points for path in p.run_paths if path in docs})
    body = {"kind": "gpu-repro.band-runs", "version": 1, "runs": [compact_run(docs[path], path) for path in named]}
    return json.dumps(body, sort_keys=True, separators=(",", ":")) + "\n"


def main(argv: Sequence[str]) -> int:
    if argv[:1] == ["--show"]:
        bands = load()
        known = {b.repro for b in bands}
        unknown = [r for r in argv[1:] if r not in known]
        if unknown:
            print(
                f"no re-run band for {', '.join(unknown)}; bands exist for: {', '.join(sorted(known))}", file=sys.stderr
            )
            return 2
        print(f"{DATA_FILE}:")
        print("\n".join(show(bands, argv[1:])))
        return 0
    roots = [Path(a) for a in argv] or [Path("artifacts/reference")]
    docs = list(_walk(roots))
    paths = {f"{d['run']['run_id']}/{d['repro']['id']}": str(p) for p, d in docs}
    bands = compute((d for _, d in docs), paths=paths)
    fsio.write_replace(DATA_FILE, to_json(bands, [str(r) for r in roots]).encode())
    fsio.write_replace(RUNS_FILE, runs_json(bands, {str(p): d for p, d in docs}).encode())
    for b in bands:
        print(f"{b.repro} on {b.gpu}: {b.center:.4g}, ±{b.half_width * 100:.2f}% over {len(b.points)} GPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
