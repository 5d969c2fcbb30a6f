"""``repro matrix collect``: every cell's newest artifact validated, missing and failed cells flagged, one table."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro.core.errors import UsageError
from repro.core.terminal import clean
from repro.lanes.matrix.cell import CELLS_DIR, cell_dir, read_plan
from repro.lanes.matrix.plan import PLAN_FILE, Cell, Plan

SCHEDULER_DIR = "scheduler"  # one file per `repro matrix run`: what the scheduler said about each cell
COLLECTED_DIR = "collected"
# Statuses after which a resumed run leaves a cell alone.
DONE = frozenset({"reproduced", "not_reproduced", "inconclusive", "undecided", "smoke", "skipped"})


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
    ignored: tuple[str, ...] = ()  # attempts not believed: ``<run folder>: why``

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
    """The cell's run folders, oldest first (run ids sort by time); links are listed too (and distrusted)."""
    folder = cell_dir(root, cell)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir() or p.is_symlink())


def untrusted(path: Path, uid: int) -> str | None:
    """Why ``path`` cannot be believed as the matrix runner's (uid ``uid``) own; None when it can.

    Anything another local user could have put there or changed is out: a link, another owner,
    a group- or world-writable mode.
    """
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link"
    if st.st_uid != uid:
        return f"owned by uid {st.st_uid}, not the matrix's runner (uid {uid})"
    if st.st_mode & 0o022:
        return f"writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def runner_uid(root: Path) -> int:
    """The uid whose files collect believes: the owner of the plan file (who ran ``repro matrix run``)."""
    return os.lstat(root / PLAN_FILE).st_uid


def _reason(rec: Mapping[str, Any]) -> str:
    if not rec:
        return "never ran (no artifact, no scheduler record)"
    bits = [str(rec.get("state") or "unknown state")]
    for key, label in (("reason", "reason"), ("exit_code", "exit"), ("node", "node")):
        if rec.get(key):
            bits.append(f"{label} {rec[key]}")
    where = f"; log {rec['log']}" if rec.get("log") else ""
    return f"{rec.get('backend', 'scheduler')}: " + ", ".join(bits) + where


def _cell_of(doc: Mapping[str, Any]) -> Any:
    return ((doc.get("fingerprint") or {}).get("scheduler") or {}).get("matrix_cell")


def row(root: Path, cell: Cell, records: Mapping[str, Mapping[str, Any]], uid: int | None = None) -> Row:
    """The newest believable attempt of ``cell`` decides; an attempt without an artifact is reported missing.

    Believable (``untrusted``): the attempt folder and its artifact are the runner's (``uid``, default
    the plan file's owner) and writable by it alone, and the artifact names this cell. Others are
    listed in ``ignored`` and never decide, so a resumed run reruns a cell whose only result is forged.
    """
    from repro.evidence import artifact

    uid = runner_uid(root) if uid is None else uid
    rec = records.get(cell.id, {})
    ignored: list[str] = []
    trusted = 0
    newest: tuple[Path | None, dict[str, Any] | None, str] | None = None  # (artifact, its doc, why unreadable)
    for attempt in reversed(_attempts(root, cell)):
        path = attempt / f"{cell.repro_id}.json"
        has_artifact = os.path.lexists(path)
        why = untrusted(attempt, uid) or (untrusted(path, uid) if has_artifact else None)
        doc: dict[str, Any] | None = None
        error = ""
        if why is None and has_artifact:
            try:
                doc = artifact.load(path)
            except UsageError as exc:
                error = str(exc)
            else:
                if _cell_of(doc) != cell.id:
                    why = f"its artifact is cell {_cell_of(doc)!r}'s, not {cell.id!r}'s"
        if why is not None:
            ignored.append(f"{attempt.name}: {why}")
            continue
        trusted += 1
        if newest is None:
            newest = (path if has_artifact else None, doc, error)
    ignored.reverse()
    extra = f" (ignored {len(ignored)} untrusted attempt(s): {'; '.join(ignored)})" if ignored else ""
    if newest is None or newest[0] is None:
        return Row(cell, "missing", None, None, trusted, _reason(rec) + extra, rec, tuple(ignored))
    found, doc, error = newest
    if doc is None:
        return Row(cell, "invalid", found, None, trusted, error + extra, rec, tuple(ignored))
    v = doc["verdict"]
    note = v["finding"]
    if v["status"] == "error" and doc.get("error"):
        note = f"{doc['error'].get('kind', 'error')}: {doc['error'].get('message', '')}"
    return Row(cell, v["status"], found, doc, trusted, note + extra, rec, tuple(ignored))


def collect(root: Path) -> tuple[Plan, list[Row]]:
    """Every cell of the matrix in ``root``, in index order."""
    plan_path = root / PLAN_FILE
    if not plan_path.is_file():
        raise UsageError(f"{root}: no {PLAN_FILE}; expected a folder written by `repro matrix run --out DIR`")
    plan = read_plan(plan_path)
    records = scheduler_records(root)
    uid = runner_uid(root)
    return plan, [row(root, c, records, uid) for c in plan.cells]


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
                "ignored": list(r.ignored),
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
    # Escape sequences from the artifacts have no place in markdown, and `cat report.md` would obey them.
    fsio.write_new(folder / "report.md", clean(markdown(plan, rows)).encode())
    fsio.write_new(folder / "cells.json", (json.dumps(as_json(plan, rows), indent=2) + "\n").encode())
    return folder


__all__ = [
    "CELLS_DIR",
    "DONE",
    "Row",
    "collect",
    "markdown",
    "row",
    "runner_uid",
    "scheduler_records",
    "untrusted",
    "write",
]
