"""Render every committed artifact the way `repro report`, `repro compare` and `repro matrix collect` do, one file each.

Run it before and after a change to the evidence layer and diff the two folders; any difference is
a change in what a reader sees:

    python tools/evidence_snapshot.py /tmp/before   # on the old code
    python tools/evidence_snapshot.py /tmp/after    # on the new code
    diff -r /tmp/before /tmp/after

Reports and comparisons go through the CLI (typer's CliRunner, in this process), so the catalog
declarations and terminal cleaning the real commands apply are in the output. Inputs are every run
folder and every artifact file under artifacts/reference/ and tests/fixtures/; comparisons are
each run folder against the next one (sorted) and against the first, as markdown and as JSON;
matrix folders (those with a plan.json and cells/) are collected in memory (nothing is written).
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("artifacts/reference", "tests/fixtures")


def _name(*parts: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", "__".join(parts)).strip("_")[:200]


def _inputs() -> tuple[list[str], list[str], list[str]]:
    """(run folders, artifact files, matrix roots), relative to the repository root, sorted."""
    from repro.evidence import artifact

    folders: set[str] = set()
    files: list[str] = []
    matrices: list[str] = []
    for src in SOURCES:
        for path in sorted((ROOT / src).rglob("*.json")):
            rel = path.relative_to(ROOT)
            if any(p.startswith(".") for p in rel.parts):
                continue
            if path.name == "plan.json" and (path.parent / "cells").is_dir():
                matrices.append(str(rel.parent))
                continue
            if artifact.not_an_artifact(path) is None:
                files.append(str(rel))
                folders.add(str(rel.parent))
    return sorted(folders), files, sorted(matrices)


def main(out: Path) -> int:
    from typer.testing import CliRunner

    from repro.cli.main import app
    from repro.lanes.matrix import collect

    os.chdir(ROOT)
    out.mkdir(parents=True, exist_ok=True)
    runner = CliRunner()
    folders, files, matrices = _inputs()

    def render(name: str, args: list[str]) -> None:
        res = runner.invoke(app, args, env={"COLUMNS": "120", "NO_COLOR": "1"})
        (out / name).write_text(f"exit {res.exit_code}\n{res.stdout}")

    for f in folders:
        render(_name("report", f) + ".md", ["report", f])
    for f in files:
        render(_name("report-file", f) + ".md", ["report", f])
    pairs = list(zip(folders, folders[1:], strict=False)) + [(folders[0], f) for f in folders[1:]]
    for a, b in pairs:
        render(_name("compare", a, b) + ".md", ["compare", a, b])
        render(_name("compare", a, b) + ".json", ["compare", "--json", a, b])
    for m in matrices:
        plan, rows = collect.collect(Path(m))
        (out / (_name("matrix", m) + ".md")).write_text(collect.markdown(plan, rows))
        (out / (_name("matrix", m) + ".json")).write_text(json.dumps(collect.as_json(plan, rows), indent=2) + "\n")
    n = len(list(out.iterdir()))
    print(
        f"{n} files in {out}: {len(folders)} run folders, {len(files)} artifacts, {len(pairs)} pairs, "
        f"{len(matrices)} matrices",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python tools/evidence_snapshot.py OUT_DIR", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(Path(sys.argv[1])))
