"""Artifacts: assemble, validate against the JSON Schema, write atomically, never overwrite."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import math
import os
import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any, TypeGuard

from repro import __version__
from repro.core import fsio
from repro.core.errors import UsageError
from repro.evidence import bundle_layout

ARTIFACT_SCHEMA_VERSION = "1.9"
ARTIFACT_KIND = "gpu-repro.artifact"
SCHEMA_DIR = Path(__file__).resolve().parents[1] / "schemas"
SCHEMA_FILES = ("artifact.schema.json", "fingerprint.schema.json", "cliff.schema.json", "matrix.schema.json")
# Other document kinds of the same schema family that `validate`, `report` and `compare` accept.
CLIFF_KIND = "gpu-repro.cliff"
KIND_SCHEMAS = {ARTIFACT_KIND: "artifact.schema.json", CLIFF_KIND: "cliff.schema.json"}


FILE_MODE = fsio.FILE_MODE
# Artifacts nest a handful of levels; anything this deep is hostile or broken, and would
# exhaust the recursion of the parser, the validator or the renderer.
MAX_DEPTH = 64
MAX_BYTES = 256 * 1024 * 1024


# --------------------------------------------------------------------------- schema


@cache
def _registry_and_schemas() -> tuple[Any, dict[str, dict[str, Any]]]:
    from referencing import Registry, Resource

    schemas = {name: json.loads((SCHEMA_DIR / name).read_text()) for name in SCHEMA_FILES}
    registry: Any = Registry().with_resources((s["$id"], Resource.from_contents(s)) for s in schemas.values())
    return registry, schemas


def schema(name: str = "artifact.schema.json") -> dict[str, Any]:
    return _registry_and_schemas()[1][name]


# The item schema of the raw timings (samples, rounds): thousands of numbers per variant.
_TIMES = {"type": "number", "minimum": 0}


@cache
def _draft() -> Any:
    """Draft 2020-12 with one shortcut: an array of non-negative numbers under ``_TIMES`` is checked
    in one pass; anything else in such an array is checked item by item as the draft says, so the
    errors are the draft's own."""
    from jsonschema import Draft202012Validator, validators

    items = Draft202012Validator.VALIDATORS["items"]

    def fast_items(v: Any, schema_items: Any, instance: Any, schema: Any) -> Iterable[Any]:
        if (
            schema_items == _TIMES
            and "prefixItems" not in schema
            and isinstance(instance, list)
            and all(type(x) in (int, float) and x >= 0 for x in instance)
        ):
            return
        yield from items(v, schema_items, instance, schema)

    return validators.extend(Draft202012Validator, {"items": fast_items})


@cache
def validator(name: str = "artifact.schema.json") -> Any:
    """A draft 2020-12 validator with format checking; $refs resolve from disk, never the network."""
    from jsonschema import Draft202012Validator

    registry, schemas = _registry_and_schemas()
    return _draft()(schemas[name], registry=registry, format_checker=Draft202012Validator.FORMAT_CHECKER)


def schema_name(doc: Any) -> str:
    """The schema a document is checked against: its ``kind``'s, else the repro artifact's."""
    kind = doc.get("kind") if isinstance(doc, dict) else None
    return KIND_SCHEMAS.get(kind, "artifact.schema.json") if isinstance(kind, str) else "artifact.schema.json"


def is_cliff(doc: Mapping[str, Any]) -> bool:
    return doc.get("kind") == CLIFF_KIND


def validation_errors(doc: Any, name: str = "artifact.schema.json") -> list[str]:
    """Every schema violation as 'path: message', empty when the document is valid."""
    errors = sorted(validator(name).iter_errors(doc), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in errors]


# Validation results of files, by (schema, the file's digest): a file is checked once per process
# however often it is read (a run folder's artifacts are read by report, bundle, band...), and a large
# one (thousands of raw samples) takes a tenth of a second or more to check.
_CHECKED: dict[tuple[str, bytes], tuple[str, ...]] = {}
_CHECKED_MAX = 4096


def file_validation_errors(raw: bytes, doc: Any, name: str = "artifact.schema.json") -> list[str]:
    """``validation_errors`` of ``doc``, parsed by ``parse_json`` or ``json.loads`` from ``raw`` (a file's
    bytes), remembered by the bytes' digest."""
    key = (name, hashlib.blake2b(raw, digest_size=20).digest())
    if key not in _CHECKED:
        if len(_CHECKED) >= _CHECKED_MAX:
            _CHECKED.clear()
        _CHECKED[key] = tuple(validation_errors(doc, name))
    return list(_CHECKED[key])


# --------------------------------------------------------------------------- building


def new_run_id(now: dt.datetime | None = None) -> str:
    """UTC timestamp plus random hex: sortable, and two runs in one second still differ."""
    now = now or dt.datetime.now(dt.timezone.utc)
    return f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def source_sha256(path: str | os.PathLike[str] | None) -> str | None:
    if not path or not Path(path).is_file():
        return None
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def to_jsonable(value: Any) -> Any:
    """Dataclasses to dicts, tuples to lists, NaN/inf to null (JSON has neither)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def assemble(
    *,
    repro: Mapping[str, Any],
    run: Mapping[str, Any],
    variants: Sequence[Any],
    verdict: Any,
    validity: Mapping[str, Any],
    fingerprint: Mapping[str, Any],
    extra: Mapping[str, Any] | None = None,
    warnings: Iterable[str] = (),
    error: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The artifact document, in schema order."""
    doc: dict[str, Any] = to_jsonable(
        {
            "schema_version": ARTIFACT_SCHEMA_VERSION,
            "kind": ARTIFACT_KIND,
            "repro": dict(repro),
            "run": {"harness_version": __version__, **run},
            "variants": list(variants),
            "verdict": verdict,
            "validity": dict(validity),
            "fingerprint": dict(fingerprint),
            "extra": dict(extra or {}),
            "warnings": list(warnings),
            "error": dict(error) if error is not None else None,
        }
    )
    return doc


# --------------------------------------------------------------------------- writing


def ensure_writable_dir(path: Path) -> Path:
    """Create ``path`` (and parents) or fail with a UsageError naming it."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {path}: cannot create directory ({exc.strerror or exc})") from None
    if not path.is_dir() or not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"--out {path}: expected a writable directory")
    return path


def write_new(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; an existing file is never replaced (see ``repro.core.fsio``)."""
    return fsio.write_new(path, data)


def write_artifact(doc: Mapping[str, Any], path: Path) -> Path:
    """Validate, then write; an invalid document is a bug and is never written."""
    errors = validation_errors(doc)
    if errors:
        raise ValueError(f"artifact for {path.name} fails its schema: {errors[0]}")
    data = (json.dumps(doc, indent=2, sort_keys=False, allow_nan=False) + "\n").encode()
    return write_new(path, data)


# --------------------------------------------------------------------------- reading


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} overflows to {value}")
    return value


def depth(value: Any) -> int:
    """How deeply ``value`` nests (a scalar is 0), without recursion."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        v, d = todo.pop()
        if isinstance(v, dict):
            children: Iterable[Any] = v.values()
        elif isinstance(v, list):
            children = v
        else:
            continue
        deepest = max(deepest, d)
        if d > MAX_DEPTH:
            break
        todo.extend((c, d + 1) for c in children)
    return deepest


def parse_json(text: str | bytes, what: str) -> Any:
    """Strict JSON: no NaN/Infinity, no overflowing numbers, at most MAX_DEPTH levels; UsageError otherwise."""
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except RecursionError:
        raise UsageError(f"{what}: nests too deeply; expected JSON at most {MAX_DEPTH} levels deep") from None
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError is a ValueError
        reason = str(exc).splitlines()[0][:200]
        raise UsageError(f"{what}: not valid JSON ({reason}); expected a gpu-repro artifact") from None
    if depth(value) > MAX_DEPTH:
        raise UsageError(f"{what}: nests too deeply; expected JSON at most {MAX_DEPTH} levels deep")
    return value


def load(path: Path, *, validate: bool = True) -> dict[str, Any]:
    """Read an artifact; a missing, corrupt, hostile or schema-invalid file is a UsageError naming it."""
    try:
        size = Path(path).stat().st_size
        if size > MAX_BYTES:
            raise UsageError(f"{path}: {size} bytes; expected an artifact under {MAX_BYTES // 2**20} MiB")
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file; expected a gpu-repro artifact (.json)") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory; expected a gpu-repro artifact (.json)") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror or exc}); expected a gpu-repro artifact") from None
    doc = parse_json(raw, str(path))
    if validate:
        name = schema_name(doc)
        errors = file_validation_errors(raw, doc, name)
        if errors:
            more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
            raise UsageError(f"{path}: fails the {name.split('.')[0]} schema v1 at {errors[0]}{more}")
    if not isinstance(doc, dict):
        raise UsageError(f"{path}: a JSON {type(doc).__name__}, not an object; expected a gpu-repro artifact")
    return doc


def expand(paths: Iterable[Path]) -> list[Path]:
    """Files and run folders to artifact files (a folder contributes its ``*.json``; an unpacked bundle's folder
    those of its run: ``bundle_members`` are left out)."""
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            theirs = bundle_members(p)
            found = sorted(f for f in p.glob("*.json") if not f.name.startswith(".") and f.name not in theirs)
            if not found:
                raise UsageError(f"{p}: folder holds no artifacts; expected a run folder with *.json")
            out.extend(found)
        else:
            out.append(p)
    return out


def bundle_members(folder: Path) -> list[str]:
    """The JSON files at the top of ``folder`` that a bundle added beside its run's artifacts (MANIFEST.json,
    band.json, band-runs.json: ``repro.evidence.bundle_layout``), when it is an unpacked bundle; else empty."""
    folder = Path(folder)
    return sorted(f.name for f in folder.glob("*.json") if bundle_layout.bundle_of(f, folder) is not None)


def not_an_artifact(path: Path) -> str | None:
    """Why a JSON file met while walking folders is not an artifact, or None when it is (or claims to be).

    A document is taken as an artifact when its ``kind`` says so, or when it has no ``kind`` but
    carries an artifact's ``repro`` and ``verdict``; anything else (``doctor --json`` output, a
    ``compare --json`` document, a fingerprint) is some other file. Unreadable or corrupt JSON is
    not skipped: it may be a damaged artifact, and validation must say so.
    """
    try:
        doc = parse_json(Path(path).read_bytes(), str(path))
    except (OSError, UsageError):  # unreadable, corrupt or hostile: validation says which
        return None
    if not isinstance(doc, dict):
        return f"a JSON {type(doc).__name__}, not an object"
    kind = doc.get("kind")
    if kind in KIND_SCHEMAS:
        return None
    if kind is not None:
        return f"kind {str(kind)[:60]!r}"
    if "repro" in doc and "verdict" in doc:
        return None
    return "no 'kind' field"


def walk(paths: Iterable[Path]) -> tuple[list[Path], list[tuple[Path, str]], dict[Path, list[str]]]:
    """Files as given, and every ``*.json`` under the given folders (nested run folders included).

    Returns (artifact files, [(skipped file, why)], {unpacked bundle folder: the JSON files it added, left out}). A
    file named directly is always returned for validation; only files found inside folders are skipped when they
    are not artifacts, or left out when a bundle added them beside its run's files (``bundle_members``; its run's
    own, ``attached/`` among them, are walked as in the run folder). A folder without a single artifact is a
    UsageError.
    """
    files: list[Path] = []
    skipped: list[tuple[Path, str]] = []
    bundles: dict[Path, list[str]] = {}
    for p in paths:
        p = Path(p)
        if not p.is_dir():
            files.append(p)
            continue
        # Hidden files and folders (a run's .cache/ of ceilings and collect_env) are the harness's own, not artifacts.
        found = []
        for f in sorted(p.rglob("*.json")):
            if not f.is_file() or any(x.startswith(".") for x in f.relative_to(p).parts):
                continue
            if (bundle := bundle_layout.bundle_of(f, p)) is not None:
                bundles.setdefault(bundle, []).append(f.relative_to(bundle).as_posix())
            else:
                found.append(f)
        mine = []
        for f in found:
            why = not_an_artifact(f)
            if why is None:
                mine.append(f)
            else:
                skipped.append((f, why))
        if not mine:
            seen = f"{len(found)} JSON file(s), none an artifact" if found else "no JSON files"
            raise UsageError(f"{p}: holds no gpu-repro artifacts ({seen}); expected artifact files or run folders")
        files.extend(mine)
    return files, skipped, bundles


def time_breakdown(doc: Mapping[str, Any]) -> list[tuple[str, float]]:
    """Where a run's seconds went, from its artifact: the run's phases, with the measurement split
    into warm-up, sampling (each paired schedule's rounds counted once) and profiling.

    The split is the run's own ``measure_s`` (1.4); older artifacts get it from their variants.
    Empty for artifacts written before the breakdown existed (schema 1.1 and older).
    """
    run = doc.get("run") if isinstance(doc.get("run"), Mapping) else {}
    phases = run.get("phases_s") if isinstance(run, Mapping) else None
    if not isinstance(phases, Mapping):
        return []
    split = run.get("measure_s") if isinstance(run, Mapping) else None
    if isinstance(split, Mapping):
        inner = [
            (f"  {k}", float(split.get(k) or 0.0))
            for k in ("warm-up", "sampling", "profiling")
            if _number(split.get(k))
        ]
        top = [(str(k), float(t)) for k, t in phases.items() if _number(t)]
        at = next((i + 1 for i, (k, _) in enumerate(top) if k == "measure"), len(top))
        if at <= len(top) and top[at - 1][0] == "measure":
            # What the measurement spent outside the timed schedules: inputs, first calls, side measurements.
            rest = top[at - 1][1] - sum(t for _, t in inner)
            inner += [("  inputs and side measurements", rest)] if rest > 0 else []
        return top[:at] + inner + top[at:]
    warm = prof = 0.0
    groups: dict[str, float] = {}
    for v in doc.get("variants") or []:
        t = v.get("timing") if isinstance(v, Mapping) else None
        if not isinstance(t, Mapping):
            continue
        warm += float(t.get("warmup_s") or 0.0)
        prof += float(t.get("profile_s") or 0.0)
        groups[str(t.get("group") or v.get("name"))] = float(t.get("elapsed_s") or 0.0)
    out: list[tuple[str, float]] = []
    for name, seconds in phases.items():
        if not isinstance(seconds, int | float) or isinstance(seconds, bool):
            continue
        out.append((str(name), float(seconds)))
        if name == "measure":
            out += [("  warm-up", warm), ("  sampling", sum(groups.values())), ("  profiling", prof)]
    return out


def format_breakdown(parts: Sequence[tuple[str, float]], min_s: float = 0.05) -> str:
    """``measure 5.8 s (warm-up 0.4, sampling 2.1, profiling 3.2), collect_env 3.9 s``; tiny phases left out."""
    top: list[tuple[str, float, list[str]]] = []
    for name, seconds in parts:
        if name.startswith("  "):
            if top and seconds >= min_s:
                top[-1][2].append(f"{name.strip()} {seconds:.1f}")
        else:
            top.append((name, seconds, []))
    return ", ".join(
        f"{name} {seconds:.1f} s" + (f" ({', '.join(subs)})" if subs else "")
        for name, seconds, subs in top
        if seconds >= min_s
    )


def _number(x: Any) -> TypeGuard[int | float]:
    return isinstance(x, int | float) and not isinstance(x, bool)


def gpu_busy(doc: Mapping[str, Any]) -> tuple[float, float] | None:
    """(seconds, share of the run's wall clock) the device spent executing the run's timed work.

    The timed work is every variant's samples (each sample is seconds per call, over
    ``calls_per_sample`` calls) and the per-kernel rounds a repro keeps in ``extra``
    (``kernel_rounds_s``, device time of the matched kernels). It is the floor a faster
    harness could reach with the same samples. None without a duration or a timed sample. An artifact since
    schema 1.9 carries both as ``run.gpu_busy_s`` and ``run.gpu_busy_share``, read as written where they agree with
    each other and the duration (else recomputed from the samples).
    """
    run = doc.get("run") if isinstance(doc.get("run"), Mapping) else {}
    duration = run.get("duration_s") if isinstance(run, Mapping) else None
    if not isinstance(duration, int | float) or isinstance(duration, bool) or not duration > 0:
        return None
    seconds = run.get("gpu_busy_s") if isinstance(run, Mapping) else None
    share = run.get("gpu_busy_share") if isinstance(run, Mapping) else None
    if _number(seconds) and _number(share):
        said = float(seconds), float(share)
        if 0 <= said[0] <= float(duration) and 0 <= said[1] <= 1 and abs(said[0] / float(duration) - said[1]) < 1e-3:
            return said
    busy = 0.0
    for v in doc.get("variants") or []:
        if not isinstance(v, Mapping):
            continue
        t = v.get("timing")
        if isinstance(t, Mapping) and _number(t.get("calls_per_sample")):
            busy += sum(float(x) for x in t.get("samples") or [] if _number(x)) * float(t["calls_per_sample"])
        extra = v.get("extra")
        rounds = extra.get("kernel_rounds_s") if isinstance(extra, Mapping) else None
        if isinstance(rounds, list):
            busy += sum(float(x) for x in rounds if _number(x))
    if busy <= 0:
        return None
    return busy, busy / duration


def format_busy(doc: Mapping[str, Any]) -> str:
    """``GPU busy 12.3 s (21%)`` (``device busy`` off a GPU), or empty when unknown."""
    got = gpu_busy(doc)
    if got is None:
        return ""
    run = doc.get("run") if isinstance(doc.get("run"), Mapping) else {}
    who = "GPU" if isinstance(run, Mapping) and run.get("device") == "cuda" else "device"
    return f"{who} busy {got[0]:.1f} s ({got[1]:.0%})"


def format_run_busy(docs: Sequence[Mapping[str, Any]]) -> str:
    """``GPU busy 29.6 s of the repros' 92.3 s (32%)``: the busy seconds of every artifact that has them over the
    durations of all of them (a repro that timed nothing still took its seconds); empty when none has them."""
    busy = [got[0] for d in docs if (got := gpu_busy(d)) is not None]
    if not busy:
        return ""
    runs: list[Mapping[str, Any]] = [r if isinstance(r := d.get("run"), Mapping) else {} for d in docs]
    total = sum(float(x) for r in runs if _number(x := r.get("duration_s")) and x > 0)
    who = "GPU" if all(r.get("device") == "cuda" for r in runs) else "device"
    whose = "the repros'" if len(docs) > 1 else "the repro's"
    if not total > 0:
        return ""
    return f"{who} busy {sum(busy):.1f} s of {whose} {total:.1f} s ({sum(busy) / total:.0%})"


# A run folder's name: its UTC start time and a random suffix.
RUN_ID = re.compile(r"[0-9]{8}T[0-9]{6}Z-[0-9a-f]{4,}")


def newest_run(folder: Path) -> tuple[Path, int] | None:
    """For a folder that holds run folders (``artifacts/``) rather than artifacts: the newest run
    folder by run id (ids start with their UTC time) and how many there are; None otherwise."""
    folder = Path(folder)
    if not folder.is_dir() or any(p.is_file() for p in folder.glob("*.json")):
        return None
    runs = sorted(p for p in folder.iterdir() if p.is_dir() and RUN_ID.fullmatch(p.name) and any(p.glob("*.json")))
    return (runs[-1], len(runs)) if runs else None
