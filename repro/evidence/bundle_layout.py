"""The names ``repro bundle`` gives what it adds beside a run's own files, and how a folder walk tells them apart.

A bundle unpacks to ``<run-id>/``: the run's own files (``<id>.json`` artifacts, ``report.md``,
``packages.txt``, ``attached/``, ``logs/``, ``traces/``, ``plots/``), which ``repro report`` and
``repro validate`` read as they read the run folder, and the bundle's own, named here, which are not
artifacts. ``repro.evidence.bundle`` writes them under these names; ``repro.evidence.artifact`` leaves
them out of its folder walks. (A leaf module: the artifact walk cannot import the bundle, which reads artifacts.)
"""

from __future__ import annotations

import functools
import json
import stat
from pathlib import Path

# Files the bundle writes at its top, beside the run's own.
MANIFEST = "MANIFEST.json"
BAND_TEXT = "band.txt"
BAND_DATA = "band.json"
BAND_RUNS = "band-runs.json"
# The run's report with nothing left out for length, beside the pasted report.md.
FULL_REPORT = "report-full.md"
# Folders only a bundle has (a run folder's own are attached/, logs/, traces/, plots/).
HARNESS = "harness"
SCRIPTS = "scripts"
SEEDS = "seeds"
CONTEXT = "context"

# A manifest lists a bundle's few hundred members at most; a file far larger is no manifest (and is not read).
MANIFEST_MAX = 8 * 1024 * 1024

OWN_FILES = frozenset({MANIFEST, BAND_TEXT, BAND_DATA, BAND_RUNS, FULL_REPORT})
OWN_FOLDERS = frozenset({HARNESS, SCRIPTS, SEEDS, CONTEXT})


def _manifest(folder: Path) -> dict[str, object] | None:
    """``folder``'s MANIFEST.json when it is the bundle's: an object with ``files`` and the folder's own name as its
    ``run_id`` (a bundle unpacks to ``<run-id>/``), which a run never writes and no artifact can be named (repro ids
    are lower case); None otherwise. Parsed once per file version (a walk asks for every file beneath it)."""
    path = Path(folder) / MANIFEST
    try:
        st = path.stat()
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_size > MANIFEST_MAX:
        return None
    doc = _parsed(str(path), st.st_mtime_ns, st.st_size)
    if doc is not None and doc.get("run_id") == Path(folder).name and isinstance(doc.get("files"), list):
        return doc
    return None


@functools.lru_cache(maxsize=32)
def _parsed(path: str, mtime_ns: int, size: int) -> dict[str, object] | None:
    """The JSON object at ``path`` as of (``mtime_ns``, ``size``), which key the cache; None for anything else."""
    try:
        doc = json.loads(Path(path).read_bytes())
    except (OSError, ValueError, RecursionError):  # unreadable or no JSON: no manifest of a bundle
        return None
    return doc if isinstance(doc, dict) else None


def _root(path: Path, top: Path) -> tuple[Path, dict[str, object]] | None:
    """The unpacked bundle ``path`` lies in and its manifest, found from ``top`` (a folder above it, or its own)
    down: the outermost folder that holds the bundle's MANIFEST.json, so one the run's maker put in ``attached/``
    makes no second bundle; None outside any."""
    path, top = Path(path), Path(top)
    try:
        rel = path.parent.relative_to(top)
    except ValueError:
        return None
    for folder in (top.joinpath(*rel.parts[:i]) for i in range(len(rel.parts) + 1)):
        if (manifest := _manifest(folder)) is not None:
            return folder, manifest
    return None


def bundle_of(path: Path, top: Path) -> Path | None:
    """The unpacked bundle that added ``path`` (met while walking ``top``), or None when ``path`` is no file the
    bundle added: its MANIFEST.json, or one of its top files or a file under one of its own folders that the
    manifest lists (the run's own files are its run's; a file the manifest does not list is read as any other)."""
    found = _root(path, top)
    if found is None:
        return None
    root, manifest = found
    parts = Path(path).relative_to(root).parts
    if parts == (MANIFEST,):
        return root
    own = (len(parts) == 1 and parts[0] in OWN_FILES) or (len(parts) > 1 and parts[0] in OWN_FOLDERS)
    files = manifest.get("files")
    listed = {f.get("name") for f in files if isinstance(f, dict)} if isinstance(files, list) else set()
    return root if own and "/".join((root.name, *parts)) in listed else None
