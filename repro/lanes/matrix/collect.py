"""``repro matrix collect``: every cell's newest artifact validated, missing and failed cells flagged, one table."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro.core.errors import UsageError
from repro.lanes.matrix.cell import CELLS_DIR, cell_dir, read_plan
from repro.lanes.matrix.plan import PLAN_FILE, Cell, Plan

SCHEDULER_DIR = "scheduler"  # one file per `repro matrix run`: what the scheduler said about each cell
COLLECTED_DIR = "collected"
# Statuses after which a resumed run leaves a cell alone.
DONE = frozenset({"reproduced", "not_reproduced", "inconclusive", "smoke", "skipped"})


@dataclass(frozen=True)
class Row:
    """One cell as collected: its newest artifact (or why there is none) and what the scheduler said."""

    cell: Cell
    status: str  # a verdict status, or "missing" / "invalid"
    artifact: Path | None
    doc: Mapping[str, Any] | None
    attempts: int
    note: str
    scheduler: Mapping[str, Any]

    @property
    def done(self) -> bool:
        """True when a resumed run need not run this cell again."""
        return self.status in DONE


def scheduler_records(root: Path) -> dict[str, dict[str, Any]]:
    """What each backend recorded per cell, the newest run last (so it wins)."""
    out: dict[str, dict[str, Any]] = {}
    folder = root / SCHEDULER_DIR
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        for cell_id, rec in (doc.get("cells") or {}).items() if isinstance(doc, dict) else []:
            if isinstance(rec, dict):
                out[cell_id] = rec
    return out


def _attempts(root: Path, cell: Cell) -> list[Path]:
    """The cell's run folders, oldest first (run ids sort by time)."""
    folder = cell_dir(root, cell)
    return sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


def _reason(rec: Mapping[str, Any]) -> str:
    if not rec:
        return "never ran (no artifact, no scheduler record)"
    bits = [str(rec.get("state") or "unknown state")]
    for key, label in (("reason", "reason"), ("exit_code", "exit"), ("node", "node")):
        if rec.get(key):
            bits.append(f"{label} {rec[key]}")
    where = f"; log {rec['log']}" if rec.get("log") else ""
    return f"{rec.get('backend', 'scheduler')}: " + ", ".join(bits) + where


def row(root: Path, cell: Cell, records: Mapping[str, Mapping[str, Any]]) -> Row:
    """The newest attempt of ``cell`` that left an artifact decides; an attempt without one is reported missing."""
    from repro.evidence import artifact

    attempts = _attempts(root, cell)
    rec = records.get(cell.id, {})
    if not attempts or not (attempts[-1] / f"{cell.repro_id}.json").exists():
        return Row(cell, "missing", None, None, len(attempts), _reason(rec), rec)
    path = attempts[-1] / f"{cell.repro_id}.json"
    try:
        doc = artifact.load(path)
    except UsageError as exc:
        return Row(cell, "invalid", path, None, len(attempts), str(exc), rec)
    v = doc["verdict"]
    note = v["finding"]
    if v["status"] == "error" and doc.get("error"):
        note = f"{doc['error'].get('kind', 'error')}: {doc['error'].get('message', '')}"
    return Row(cell, v["status"], path, doc, len(attempts), note, rec)


def collect(root: Path) -> tuple[Plan, list[Row]]:
    """Every cell of the matrix in ``root``, in index order."""
    plan_path = root / PLAN_FILE
    if not plan_path.is_file():
        raise UsageError(f"{root}: no {PLAN_FILE}; expected a folder written by `repro matrix run --out DIR`")
    plan = read_plan(plan_path)
    records = scheduler_records(root)
    return plan, [row(root, c, records) for c in plan.cells]


def _where(r: Row) -> str:
    """Job/task or pod and node, from the artifact's fingerprint, else from the scheduler's record."""
    fp_s = ((r.doc or {}).get("fingerprint") or {}).get("scheduler") or {}
    if fp_s.get("kind") == "slurm":
        job = f"{fp_s.get('array_job_id') or fp_s.get('job_id')}_{fp_s.get('array_task_id')}"
        return f"slurm {job} on {fp_s.get('node', '?')}"
    if fp_s.get("kind") == "k8s":
        return f"pod {fp_s.get('pod', '?')} on {fp_s.get('node', '?')}"
    rec = r.scheduler
    if rec.get("task"):
        return f"{rec.get('backend')} {rec['task']}" + (f" on {rec['node']}" if rec.get("node") else "")
    if rec.get("backend") == "local":
        return f"local, GPU {rec.get('gpus') or 'none'}"
    return "-"


def table_rows(rows: Sequence[Row]) -> list[list[str]]:
    """The comparison table, cell by cell; every value rendered inert."""
    from repro.evidence.markdown import text, verdict_cell

    out = []
    for r in rows:
        ratio = verdict_cell(r.doc) if r.doc is not None else "-"
        gpu = "-"
        if r.doc is not None:
            from repro.env.fingerprint import essentials

            gpu = essentials(r.doc["fingerprint"])["gpu"]
        out.append(
            [
                str(r.cell.index),
                text(r.cell.lane.name, cell=True),
                text(r.cell.repro_id, cell=True),
                text(" ".join(f"{k}={v}" for k, v in r.cell.sets.items()) or "-", cell=True),
                f"**{text(r.status, cell=True)}**",
                ratio,
                text(gpu, cell=True),
                text(_where(r), cell=True),
                str(r.attempts),
                text(r.note[:200], cell=True),
            ]
        )
    return out


HEADERS = ["#", "lane", "repro", "--set", "status", "ratio (95% CI)", "GPU", "where", "runs", "finding or reason"]


def markdown(plan: Plan, rows: Sequence[Row]) -> str:
    """The issue-ready report: the matrix table first, then the per-repro report of every artifact."""
    from repro.evidence.markdown import REPORT_LIMIT, table, text
    from repro.evidence.report import report
    from repro.run.scripts import declared

    bad = [r for r in rows if not r.done]
    head = [
        f"# gpu-repro matrix {text(plan.name)}: {len(rows)} cells, {len(rows) - len(bad)} done, "
        f"{len(bad)} missing or failed",
        "",
        table(table_rows(rows), HEADERS),
        "",
    ]
    if bad:
        head += ["Cells to look at (a resumed `repro matrix run` reruns exactly these):", ""]
        head += [f"- cell {r.cell.index} `{text(r.cell.id)}`: {text(r.status)}: {text(r.note[:300])}" for r in bad]
        head.append("")
    docs = [r.doc for r in rows if r.doc is not None]
    text_head = "\n".join(head) + "\n"
    # The whole report fits one GitHub comment: the per-cell details get what the table leaves.
    room = max(REPORT_LIMIT - len(text_head), 8_000)
    body = (
        report(docs, limit=room, title=f"matrix {plan.name}: per-cell details", declared=declared(docs)) if docs else ""
    )
    return text_head + body


def as_json(plan: Plan, rows: Sequence[Row]) -> dict[str, Any]:
    """Machine-readable collect output."""
    return {
        "matrix": plan.name,
        "digest": plan.digest,
        "cells": [
            {
                "index": r.cell.index,
                "id": r.cell.id,
                "lane": r.cell.lane.name,
                "repro": r.cell.repro_id,
                "set": dict(r.cell.sets),
                "status": r.status,
                "artifact": str(r.artifact) if r.artifact else None,
                "attempts": r.attempts,
                "note": r.note,
                "scheduler": dict(r.scheduler),
                "verdict": (r.doc or {}).get("verdict"),
            }
            for r in rows
        ],
    }


def write(root: Path, plan: Plan, rows: Sequence[Row]) -> Path:
    """``ROOT/collected/<run-id>/`` with table.md (the report) and table.json; never overwrites."""
    from repro.core import fsio
    from repro.evidence.artifact import new_run_id

    folder = root / COLLECTED_DIR / new_run_id()
    fsio.write_new(folder / "report.md", markdown(plan, rows).encode())
    fsio.write_new(folder / "cells.json", (json.dumps(as_json(plan, rows), indent=2) + "\n").encode())
    return folder


__all__ = ["CELLS_DIR", "DONE", "Row", "collect", "markdown", "row", "scheduler_records", "write"]
