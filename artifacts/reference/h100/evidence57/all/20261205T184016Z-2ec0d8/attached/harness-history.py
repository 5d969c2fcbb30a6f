"""The harness's commit log with each commit's source digest: what `repro` records as
``fingerprint.harness.source_sha256``, computed here by today's ``repro.env.harness.source_sha256`` over
each commit's package (``git archive`` of ``repro/`` and the ``schemas/`` it links to).

One line per commit that touched ``repro/``, ``schemas/`` or ``pyproject.toml``, newest first:
``<short hash> <commit time, UTC> <digest's first 12> <subject>``, then `` [repro/repros: a.py, b.py]`` where the commit
changed files there (a repro's module file, whose digest its artifacts record, or a helper of one; against the
first parent for a merge). A run's digest (in its artifacts, its report's head and a band's runs) then names the
commit it ran. A digest recorded by an older harness was computed by that
harness's own rule, which may differ: such a digest can be missing here.

Usage: python tools/harness-history.py [REV]   (from a checkout; REV defaults to HEAD)
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from repro.env.harness import source_sha256  # noqa: E402
from repro.evidence.printed import HISTORY_MARK  # noqa: E402


def _git(*args: str) -> bytes:
    return subprocess.run(["git", *args], capture_output=True, check=True).stdout


def digest_at(commit: str) -> str:
    """The harness source digest of ``commit``'s package, "-" where it has none."""
    paths = [p for p in ("repro", "schemas") if _git("ls-tree", commit, p).strip()]
    if "repro" not in paths:
        return "-"
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(fileobj=io.BytesIO(_git("archive", commit, *paths))) as tf:
            tf.extractall(tmp, filter="tar")
        return source_sha256(Path(tmp) / "repro")[:12]


def main() -> None:
    rev = sys.argv[1] if len(sys.argv) > 1 else "HEAD"
    # Commit times in UTC, to the minute: a run's created_utc can then be set against the commits around it.
    os.environ["TZ"] = "UTC"
    log = _git(
        "log",
        "--format=%h%x00%cd%x00%s",
        "--date=format-local:%Y-%m-%dT%H:%MZ",
        rev,
        "--",
        "repro",
        "schemas",
        "pyproject.toml",
    )
    diff = ("diff-tree", "-r", "--name-only", "--no-commit-id", "--diff-merges=first-parent", "--root")
    for line in log.decode().splitlines():
        commit, date, subject = line.split("\0", 2)
        changed = _git(*diff, commit, "--", "repro/repros").decode().split()
        repros = f" {HISTORY_MARK}{', '.join(f.removeprefix('repro/repros/') for f in changed)}]" if changed else ""
        print(f"{commit} {date} {digest_at(commit)} {subject}{repros}")


if __name__ == "__main__":
    main()
