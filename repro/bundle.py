"""``repro bundle RUN_DIR``: one .tar.gz with artifacts, report, logs and Chrome traces, under GitHub's limit."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
import time
from pathlib import Path

from repro.errors import UsageError
from repro.fingerprint import redactor

# GitHub's attachment limit is 25 MB; leave room for tar headers and rounding.
BUNDLE_LIMIT = 24 * 1000 * 1000


def _members(run_dir: Path) -> list[tuple[str, bytes]]:
    """(name in archive, bytes) for everything worth attaching, redacted once more."""
    redact = redactor()
    out: list[tuple[str, bytes]] = []
    for path in sorted(run_dir.rglob("*")):
        if not path.is_file() or path.name.startswith("."):
            continue
        rel = path.relative_to(run_dir).as_posix()
        data = path.read_bytes()
        if path.name.endswith(".gz"):
            # Traces are written redacted; a second pass costs little and guards plugins.
            data = gzip.compress(redact(gzip.decompress(data).decode(errors="replace")).encode(), mtime=0)
        elif path.suffix in (".json", ".md", ".log", ".txt"):
            data = redact(data.decode(errors="replace")).encode()
        out.append((f"{run_dir.name}/{rel}", data))
    return out


def build(run_dir: Path, dest: Path | None = None, limit: int = BUNDLE_LIMIT) -> Path:
    """Write the bundle; when over ``limit``, drop the largest traces first and list them in MANIFEST.json."""
    if not run_dir.is_dir() or not any(run_dir.glob("*.json")):
        raise UsageError(f"{run_dir}: expected a run folder holding artifacts (*.json)")
    dest = dest or run_dir.parent / f"{run_dir.name}.bundle.tar.gz"
    if dest.exists():
        raise UsageError(f"{dest}: exists; expected a new file name (bundles are never overwritten)")
    members = _members(run_dir)
    dropped: list[str] = []
    while True:
        manifest = {
            "run_id": run_dir.name,
            "files": [{"name": n, "bytes": len(d)} for n, d in members],
            "dropped_to_fit": dropped,
            "limit_bytes": limit,
        }
        blob = _tar(members + [(f"{run_dir.name}/MANIFEST.json", json.dumps(manifest, indent=2).encode())])
        traces = [m for m in members if "/traces/" in m[0]]
        if len(blob) <= limit or not traces:
            break
        largest = max(traces, key=lambda m: len(m[1]))
        members.remove(largest)
        dropped.append(largest[0])
    if len(blob) > limit:
        raise UsageError(f"{run_dir}: the bundle is {len(blob)} bytes even without traces; expected <= {limit}")
    dest.write_bytes(blob)
    return dest


def _tar(members: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()
