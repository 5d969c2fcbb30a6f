"""``repro bundle RUN_DIR``: one .tar.gz with artifacts, report, logs and Chrome traces, under GitHub's limit.

Only what the run wrote goes in, found by name (a manifest, never a directory
walk): ``<id>.json`` artifacts, ``report.md``, ``logs/<id>.log``,
``traces/<id>/*.trace.json.gz``, the report's plots ``plots/<id>.<sweep>.png``, the standalone
scripts the caller regenerated from the catalog (``scripts/<id>.py``), the run's ``packages.txt``,
text files its maker put in ``attached/`` (``*.log``, ``*.out``, ``*.txt``, ``*.tsv``, ``*.py``, ``*.sh``,
``*.json``, ``*.md``: the seeds' raw output, the scripts' runs, the driver that ran them, a re-run's artifact)
and, when it is the harness that ran (same source digest), the harness itself as ``harness/gpu_repro-*.whl``.
Each is opened without following links and packed only if it is a regular file with one name (a
hard link could be a second name of any file on that filesystem); member names are relative
(``<run-id>/...``), so the archive extracts into one folder. Logs (``*.log``, ``*.out``) are cut to
their tail, other files too large or sparse are left out and named in MANIFEST.json, which gives every
other member's bytes and sha256. What the bundle adds itself (MANIFEST.json, band.*, ``harness/``, ``scripts/``,
``seeds/``, ``context/``, ``report-full.md``) is named in ``repro.evidence.bundle_layout``, where ``repro report``
and ``repro validate`` learn to leave it out of the unpacked folder.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import re
import stat
import tarfile
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.core import fsio
from repro.core.errors import UsageError
from repro.core.redact import text_redactor
from repro.evidence import band, band_runs, model, seeds, wheel
from repro.evidence.bundle_layout import BAND_DATA, BAND_RUNS, BAND_TEXT, CONTEXT, HARNESS, MANIFEST, SCRIPTS, SEEDS
from repro.evidence.bundle_layout import FULL_REPORT as FULL_REPORT  # re-exported: the report names it

# GitHub's attachment limit is 25 MB; leave room for tar headers and rounding.
BUNDLE_LIMIT = 24 * 1000 * 1000
# What one file may bring: an artifact or report over this is not something the run wrote.
FILE_LIMIT = 32 * 1024 * 1024
# A trace is decompressed (to redact it again) only up to this size: a gzip bomb stops here.
TRACE_LIMIT = 256 * 1024 * 1024
# Logs keep their end: the error is where the run stopped.
LOG_TAIL = 512 * 1024
# <id>.json, or <id>.cliff-<param>.json from `repro cliff` (whose plot, <...>.png, goes in beside it).
_ID = re.compile(r"[a-z0-9][a-z0-9-]*(\.cliff-[A-Za-z0-9_-]+)?")
# A schedule's trace is named by its groups joined with "+" (fp32+tf32), as the run writes it.
_TRACE = re.compile(r"[A-Za-z0-9_.+-]+\.trace\.json\.gz")
ATTACHED_LIMIT = 4 * 1024 * 1024  # all of attached/ together: a bundle never fails for what was attached
# Attached files that may be cut to their tail (a log's end is what matters); any other is whole or left out: a cut
# artifact is no longer JSON, a cut script no longer runs.
_LOG_LIKE = (".log", ".out")
_ATTACHED = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*\.(log|out|txt|tsv|py|sh|json|md)")
_PLOT = re.compile(r"([a-z0-9][a-z0-9-]*)\.[A-Za-z0-9_-]+\.png")


@dataclass
class _Plan:
    members: list[tuple[str, bytes]] = field(default_factory=list)
    left_out: list[dict[str, str]] = field(default_factory=list)
    trimmed: list[str] = field(default_factory=list)
    harness: dict[str, str | None] = field(default_factory=dict)


def _open_regular(path: Path) -> tuple[int, os.stat_result] | None:
    """An fd for ``path`` if it is a regular file reached without following a link at its last step."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:  # missing, a link (ELOOP), unreadable
        return None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return None
    return fd, st


def attached_names(run_dir: Path) -> list[str]:
    """The files of ``run_dir/attached/`` a bundle packs (text by name: ``.log``, ``.out``, ``.txt``,
    ``.tsv``, ``.py``, ``.sh``, ``.json``, ``.md``), sorted; a link or a folder is not one of them."""
    folder = Path(run_dir) / "attached"
    if not _real_dir(folder):
        return []
    return sorted(
        p.name for p in folder.iterdir() if _ATTACHED.fullmatch(p.name) and p.is_file() and not p.is_symlink()
    )


def attached_artifacts(run_dir: Path, names: Sequence[str]) -> dict[str, Any]:
    """The artifacts among ``names`` (``attached_names``'): name -> document; a file that is not an artifact is
    packed only."""
    from repro.evidence import artifact

    found: dict[str, Any] = {}
    for name in (n for n in names if n.endswith(".json")):
        try:
            found[name] = artifact.load(Path(run_dir) / "attached" / name)
        except UsageError:
            continue
    return found


def attached_inputs(run_dir: Path) -> dict[str, Any]:
    """What a run folder's ``attached/`` gives its report (``report.report``'s keywords): the names a bundle packs,
    the artifacts among them (re-runs from the bundle, ``rerun-*.json``, and later runs of the same repros; a file
    that is not an artifact is packed only) and what the programs run beside the run printed."""
    from repro.evidence import printed

    names = attached_names(run_dir)
    reruns = attached_artifacts(run_dir, names)
    said: dict[str, str] = {}
    for name in (n for n in names if printed.wanted(n)):
        try:
            said[name] = printed.read(Path(run_dir) / "attached" / name)
        except OSError:
            continue  # unreadable: left out, as an unreadable artifact is
    return {"attached": names, "reruns": reruns, "printed": said}


def _real_dir(path: Path) -> bool:
    """A directory that is not a link (a linked logs/ or traces/ could point anywhere)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _sparse(st: os.stat_result) -> bool:
    # Far fewer blocks than bytes: a hole-filled file whose size says nothing about its content.
    return st.st_size > 1024 * 1024 and st.st_blocks * 512 < st.st_size // 2


def _read(path: Path, rel: str, plan: _Plan, *, limit: int, tail: bool = False, room: str = "") -> bytes | None:
    """The file's bytes (its last ``limit`` bytes when ``tail``), or None with the reason recorded (``room`` says
    what the limit was, where it is not a file's own)."""
    opened = _open_regular(path)
    if opened is None:
        if os.path.lexists(path):
            plan.left_out.append({"name": rel, "reason": "not a regular file (a link, a folder or a device)"})
        return None
    fd, st = opened
    with os.fdopen(fd, "rb") as fh:
        if st.st_nlink > 1:
            # The run writes each file under one name; a second name was made by someone else, and
            # may be a secret from outside the run folder. (fsio's writes link a temp file to the final
            # name and then remove it: a kill in between leaves a hidden .<name>.*.tmp beside it.)
            reason = f"a hard link ({st.st_nlink} names for one file; if one is a hidden .*.tmp, remove it)"
            plan.left_out.append({"name": rel, "reason": reason})
            return None
        if st.st_size > limit and not tail:
            plan.left_out.append({"name": rel, "reason": f"{st.st_size} bytes; over the {limit}-byte limit{room}"})
            return None
        if _sparse(st) and not tail:
            plan.left_out.append({"name": rel, "reason": f"sparse file of {st.st_size} bytes"})
            return None
        if tail and st.st_size > limit:
            fh.seek(st.st_size - limit)
            data = fh.read(limit)
            plan.trimmed.append(rel)
            marker = f"[... repro bundle: the first {st.st_size - limit} bytes of this log were cut; tail follows]\n"
            return marker.encode() + data
        return fh.read(limit + 1)[:limit]


def _trace(path: Path, rel: str, plan: _Plan, fix: Callable[[str], str]) -> bytes | None:
    data = _read(path, rel, plan, limit=FILE_LIMIT)
    if data is None:
        return None
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as gz:
            raw = gz.read(TRACE_LIMIT + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise UsageError(
            f"{path}: not a complete gzip file ({exc}); expected a Chrome trace (.trace.json.gz)"
        ) from None
    if len(raw) > TRACE_LIMIT:
        plan.left_out.append({"name": rel, "reason": f"over {TRACE_LIMIT} bytes once decompressed"})
        return None
    redacted = fix(raw.decode(errors="replace"))
    return gzip.compress(redacted.encode(), mtime=0)


def plan(run_dir: Path, report: str | None = None) -> tuple[str, _Plan]:
    """The archive's root name and what goes in, redacted once more. ``report``: the text to pack as
    ``report.md`` in place of the run folder's (a report rendered again for the bundle)."""
    root = Path(run_dir).resolve()
    name = root.name
    if not root.is_dir() or not name:
        raise UsageError(f"{run_dir}: expected a run folder (artifacts/<run-id>)")
    ids = sorted(p.stem for p in root.glob("*.json") if _ID.fullmatch(p.stem) and stat.S_ISREG(os.lstat(p).st_mode))
    if not ids:
        raise UsageError(f"{run_dir}: holds no artifacts (<id>.json); expected a run folder")
    fix = text_redactor()
    out = _Plan()

    def text(path: Path, rel: str, *, tail: bool = False, limit: int | None = None, room: str = "") -> int:
        """Pack ``path`` redacted as ``rel``; the bytes read (0 when it was left out)."""
        data = _read(path, rel, out, limit=limit or (LOG_TAIL if tail else FILE_LIMIT), tail=tail, room=room)
        if data is None:
            return 0
        out.members.append((f"{name}/{rel}", fix(data.decode(errors="replace")).encode()))
        return len(data)

    for rid in ids:
        text(root / f"{rid}.json", f"{rid}.json")
        png = root / f"{rid}.png"
        if ".cliff-" in rid and png.is_file():
            data = _read(png, png.name, out, limit=FILE_LIMIT)  # an image: nothing to redact
            if data is not None:
                out.members.append((f"{name}/{png.name}", data))
    if report is None:
        text(root / "report.md", "report.md")
    else:
        out.members.append((f"{name}/report.md", fix(report).encode()))
    if (root / "packages.txt").is_file():
        text(root / "packages.txt", "packages.txt")
    room = ATTACHED_LIMIT  # what the run's maker put beside it: text only, redacted like the rest
    attached = attached_names(root)
    for extra_name in attached:
        rel = f"attached/{extra_name}"
        if room <= 0:
            out.left_out.append({"name": rel, "reason": f"attached/ holds more than {ATTACHED_LIMIT} bytes"})
            continue
        if extra_name.endswith(_LOG_LIKE):
            room -= text(root / rel, rel, tail=True, limit=min(LOG_TAIL, room))
        else:
            room -= text(root / rel, rel, limit=room, room=f": what was left of attached/'s {ATTACHED_LIMIT} bytes")
    if _real_dir(root / "logs"):
        for rid in ids:
            text(root / "logs" / f"{rid}.log", f"logs/{rid}.log", tail=True)
    if _real_dir(root / "traces"):
        for rid in ids:
            folder = root / "traces" / rid
            if not _real_dir(folder):
                continue
            for trace in sorted(folder.iterdir()):
                if not _TRACE.fullmatch(trace.name):
                    continue
                rel = f"traces/{rid}/{trace.name}"
                data = _trace(trace, rel, out, fix)
                if data is not None:
                    out.members.append((f"{name}/{rel}", data))
    if _real_dir(root / "plots"):
        for png in sorted((root / "plots").iterdir()):
            m = _PLOT.fullmatch(png.name)
            if m and m.group(1) in ids:
                # Drawn by repro.evidence.plots from the (already redacted) artifacts: binary, packed as is.
                data = _read(png, f"plots/{png.name}", out, limit=FILE_LIMIT)
                if data is not None:
                    out.members.append((f"{name}/plots/{png.name}", data))
    if not any(n.endswith(".json") and n.count("/") == 1 for n, _ in out.members):
        raise UsageError(f"{run_dir}: no artifact could be packed (see links or sizes); expected regular files")
    docs = [_parsed(root / f"{rid}.json") for rid in ids]  # read once, for the harness and the band
    _add_harness(name, docs, out)
    repros = [rid.split(".cliff-", 1)[0] for rid in ids]
    typed = _typed(docs)
    # The band less this run and its attached runs, as the report takes it (band.without).
    later = [a.run.run_id for a in _typed(attached_artifacts(root, attached).values())]
    _add_band(name, repros, out, _uuids(typed), _sources(typed), _keys(typed), [d.run.run_id for d in typed] + later)
    _add_seeds(name, repros, out)
    if "graph-memset" in repros:
        out.members.append((f"{name}/{CONTEXT}/graph-memset.md", twin_context().encode()))
    return name, out


def twin_context() -> str:
    """The committed side experiment on graph-memset's twin beside other CUDA contexts (``data/twin_context.json``),
    as markdown: its Not-tested line on another process's graph cites it."""
    raw = (Path(__file__).parent / "data" / "twin_context.json").read_text()
    return str(json.loads(raw)["markdown"])


def _add_seeds(name: str, repros: list[str], out: _Plan) -> None:
    """``seeds/<id>/``: the seed's own program of each repro that has one, as this package holds it."""
    have = seeds.programs()
    ran = [rid for rid in sorted(set(repros)) if rid in have]
    if not ran:
        return
    packed = {n for n, _ in out.members}
    said = (
        " What they printed on this run's machine: attached/seeds_raw.log."
        if (f"{name}/attached/seeds_raw.log" in packed)
        else ""
    )
    if f"{name}/attached/seeds_raw.py" in packed:
        said += " The script that ran them there: attached/seeds_raw.py."
    said += (
        " The seed documents are not in this bundle: report.md's 'Seed claim' line of each repro links the source"
        " they name (an issue), or says the seed gives none, and states the claim as this project reads it."
    )
    where = "".join(f"\n\n{rid}: {got}" for rid in sorted(set(repros)) if (got := seeds.posted(rid)))
    out.members.append((f"{name}/{SEEDS}/README.txt", f"{seeds.about()}{said}{where}\n".encode()))
    for rid in ran:
        out.members += [(f"{name}/{SEEDS}/{rid}/{fname}", body.encode()) for fname, body in sorted(have[rid].items())]


def _add_band(
    name: str,
    repros: list[str],
    out: _Plan,
    uuids: set[str],
    sources: Mapping[str, str],
    keys: set[band.Key],
    run_ids: Sequence[str] = (),
) -> None:
    """``band.txt``: the re-run bands of the run's repros, one line per GPU with its value, run ids,
    torch, driver and harness digest (``python -m repro.evidence.band --show``'s lines), and whether this
    run's GPU (``uuids``: the artifacts' NVML UUIDs) is one of them, how many of each band's runs were suspect and
    how many ran this run's repro module (``sources``: repro id -> its source sha256) and whether it is the band
    the report compares the run with (``keys``: the run's band keys); ``band.json``: those bands'
    data, with each run's per-round headline ratios and its artifact's path in the repository. ``run_ids``: runs
    left out of the bands (this run and its attached runs, as the report leaves them out)."""
    known = band.without(band.load(), run_ids)
    mine = [b for b in known if b.repro in repros]
    lines = band.show(known, sorted(set(repros)))
    ours = sorted(u[:8] for u in uuids if u)
    among = {p.uuid[:8] for b in mine for p in b.points}
    if ours:
        said_ours = ", ".join(f"{u} ({'among them' if u in among else 'not among them'})" for u in ours)
        lines.append(f"This run's GPU: {said_ours}.")
    for b in mine:
        flagged, known_flags = b.suspect
        same, known_sources = b.same_source(sources.get(b.repro, ""))
        used = (b.repro, b.gpu, b.params, b.headline) in keys
        whose = "this run's band" if used else "not this run's band (another GPU, params or headline, or no headline)"
        lines.append(
            f"{b.repro} ({b.headline or 'headline'}; {whose}): {flagged} of {known_flags} runs suspect when they ran; "
            f"{same} of {known_sources} ran this run's repro module file "
            f"({sources.get(b.repro, '')[:12] or 'not recorded'}: the sha256 of the repro's own module, not of its "
            "helper modules, CUDA source or the sampler; the harness digests beside each run cover the whole package)."
        )
    said = lines or ["no re-run band for these repros"]
    head = f"Re-run bands ({band.DATA_FILE.name} of this harness), for {', '.join(sorted(set(repros)))}:"
    how = (
        "A GPU's value is the median of its runs' headline ratios (each run's beside its id); ± is the farthest "
        "GPU's value from the median of all GPUs. The runs are default `repro all` and `repro run` runs committed "
        f"under artifacts/reference/ in the gpu-repro repository; {BAND_DATA} (beside this file) has each run's "
        "per-round headline ratios (their median is the run's value; none where the headline is a kernel-time "
        f"ratio) and its artifact's path there; {BAND_RUNS} a compact copy of each of those runs (its verdict, "
        "each variant's rounds and GPU clocks, the GPU, driver, torch and harness it ran on). Their harness "
        "digests may differ ('-': a run from before harness digests), and so may their methods: a harness "
        "version's changes are in the gpu-repro repository's history, "
        "which has no public URL here (attached/harness-history.txt, where the run's maker attached it, lists its "
        "commits, each with the digest a run of it records); bands of one repro split where their params differ "
        "(each band lists its params), and each says which machine folder under artifacts/reference/ its GPUs' runs "
        "came from (h200: a host with one H200; h200x2: a host with two). A GPU is named by the first 8 characters "
        "of its NVML UUID (the "
        "artifacts' gpu.uuid). The band covers the GPUs and harness versions listed, on the torch and driver "
        "listed: not other stacks."
    )
    out.members.append((f"{name}/{BAND_TEXT}", ("\n".join([head, how, *said]) + "\n").encode()))
    if mine:
        out.members.append((f"{name}/{BAND_DATA}", band.to_json(mine, ["artifacts/reference"]).encode()))
    if runs := band_runs.runs_of(sorted({b.repro for b in mine}), leave=set(run_ids)):
        out.members.append((f"{name}/{BAND_RUNS}", runs.encode()))


def _parsed(path: Path) -> Any:
    """An artifact file's JSON, or None where it cannot be read or parsed."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def recorded_digests(docs: Iterable[Any]) -> set[str | None]:
    """The harness source digests the artifacts ``docs`` (parsed JSON) record; None for one that records none
    or is no artifact."""
    found: set[str | None] = set()
    for doc in docs:
        try:
            found.add(model.of(doc).machine.harness.source_sha256)
        except (ValueError, AttributeError):  # not an object, or no artifact
            found.add(None)
    return found


def _typed(docs: Iterable[Any]) -> list[model.Doc]:
    """The run's documents in their typed form (``model.of``); unreadable ones are skipped."""
    found: list[model.Doc] = []
    for doc in docs:
        with contextlib.suppress(ValueError, AttributeError):
            found.append(model.of(doc))
    return found


def _keys(docs: Iterable[model.Doc]) -> set[band.Key]:
    """The band keys of the run's measured artifacts (``repro.evidence.band.key_of``): the bands its report uses."""
    return {k for d in docs if isinstance(d, model.Artifact) and (k := band.key_of(d, joining=False)) is not None}


def _sources(docs: Iterable[model.Doc]) -> dict[str, str]:
    """Repro id -> the repro source sha256 the run's artifacts recorded."""
    return {d.repro.id: d.repro.source_sha256 for d in docs if isinstance(d, model.Artifact) and d.repro.source_sha256}


def _uuids(docs: Iterable[model.Doc]) -> set[str]:
    """The GPU UUIDs the run's documents recorded (the NVML ``GPU-...`` form)."""
    return {d.machine.gpu_uuid.removeprefix("GPU-") for d in docs if d.machine.gpu_uuid}


def _add_harness(name: str, docs: Sequence[Any], out: _Plan) -> None:
    """The running harness as a wheel, when it is the one whose source digest every artifact records."""
    recorded = recorded_digests(docs)
    wheel_name, data, digest = wheel.build()
    out.harness = {"source_sha256": digest, "wheel": None, "reason": None}
    if recorded != {digest}:
        ran = ", ".join(sorted(d[:12] if d else "none recorded" for d in recorded))
        out.harness["reason"] = (
            f"the artifacts record source digest(s) {ran}; this harness is {digest[:12]}: "
            "bundle with the harness that ran to include it"
        )
        return
    out.harness["wheel"] = f"{HARNESS}/{wheel_name}"
    out.members.append((f"{name}/{HARNESS}/{wheel_name}", data))


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.relative_to(folder)
        return True
    except ValueError:
        return False


# A script member's name: scripts/<repro id>.py (or .sh), nothing a caller could steer elsewhere.
_SCRIPT = re.compile(rf"{SCRIPTS}/[a-z0-9][a-z0-9-]*\.(py|sh)")


def script_member(repro_id: str, script: str) -> str | None:
    """``scripts/<id>.py`` (``.sh`` for a shell script), or None when the id is no plain file name part."""
    first = script.split("\n", 1)[0]
    ext = "sh" if first.startswith("#!") and first.rstrip().endswith(("sh", "bash")) else "py"
    name = f"{SCRIPTS}/{repro_id}.{ext}"
    return name if _SCRIPT.fullmatch(name) else None


def build(
    run_dir: Path,
    dest: Path | None = None,
    limit: int = BUNDLE_LIMIT,
    scripts: Mapping[str, str] | None = None,
    scripts_left_out: Mapping[str, str] | None = None,
    script_notes: Mapping[str, str] | None = None,
    full_report: str | None = None,
    report: str | None = None,
) -> Path:
    """Write the bundle; when over ``limit``, drop the largest traces first and list them in MANIFEST.json.

    ``scripts``: ``{"scripts/<id>.py": text}``, the standalone scripts the caller regenerated from
    the catalog for the run's artifacts (``repro.run.scripts.regenerate``; names from
    ``script_member``); packed redacted, and listed in MANIFEST.json's ``scripts``. ``script_notes``:
    ``{member: what to know about it}`` (its source differs from the one that ran); ``scripts_left_out``:
    ``{repro id: why no script}``; both listed there too. ``full_report``: the run's report with
    nothing left out for length, packed redacted as ``report-full.md`` (the pasted ``report.md``
    fits a screen by leaving bulk out and pointing there). ``report``: the pasted report to pack in place of
    the run folder's ``report.md`` (see ``plan``).
    """
    root = Path(run_dir).resolve()
    name, p = plan(root, report)
    fix = text_redactor()
    packed: list[str] = []
    for rel, body in sorted((scripts or {}).items()):
        if not _SCRIPT.fullmatch(rel):
            raise UsageError(f"script member {rel!r}: expected scripts/<repro id>.py or .sh")
        p.members.append((f"{name}/{rel}", fix(body).encode()))
        packed.append(f"{name}/{rel}")
    if full_report is not None:
        p.members.append((f"{name}/{FULL_REPORT}", fix(full_report).encode()))
    dest = Path(dest) if dest is not None else root.parent / f"{name}.bundle.tar.gz"
    target = dest.parent.resolve() / dest.name
    if _inside(target, root):
        raise UsageError(f"--out {dest}: inside the run folder; expected a path outside {root}")
    if os.path.lexists(target):
        raise UsageError(f"{dest}: exists; expected a new file name (bundles are never overwritten)")
    members = list(p.members)
    dropped: list[str] = []
    while True:
        manifest = {
            "run_id": name,
            "files": [{"name": n, "bytes": len(d), "sha256": hashlib.sha256(d).hexdigest()} for n, d in members],
            "dropped_to_fit": dropped,
            "left_out": p.left_out,
            "logs_cut_to_tail": [f"{name}/{t}" for t in p.trimmed],
            "limit_bytes": limit,
            "harness": p.harness,
            "scripts": packed,
            "script_notes": {f"{name}/{k}": fix(v) for k, v in sorted((script_notes or {}).items())},
            "scripts_left_out": [{"repro": k, "reason": fix(v)} for k, v in sorted((scripts_left_out or {}).items())],
        }
        blob = _tar(members + [(f"{name}/{MANIFEST}", json.dumps(manifest, indent=2).encode())])
        traces = [m for m in members if "/traces/" in m[0]]
        if len(blob) <= limit or not traces:
            break
        largest = max(traces, key=lambda m: len(m[1]))
        members.remove(largest)
        dropped.append(largest[0])
    if len(blob) > limit:
        sizes = sorted(((len(d), n) for n, d in members), reverse=True)[:3]
        biggest = ", ".join(f"{n} ({size} bytes)" for size, n in sizes)
        raise UsageError(
            f"{run_dir}: the bundle is {len(blob)} bytes even without traces; expected <= {limit}; largest: {biggest}"
        )
    with contextlib.suppress(FileExistsError):
        return fsio.write_new(target, blob)
    raise UsageError(f"{dest}: exists; expected a new file name (bundles are never overwritten)")


def _tar(members: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            info.type = tarfile.REGTYPE
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()
