"""`repro matrix run --backend slurm` on a real Slurm cluster: a job array, a crashing cell, resume, timeout + scancel.

Lanes: two native lanes (this test env's Python; the second with a backend knob set), and with
GPU_REPRO_MATRIX_IMAGE=<image> (.ci/run sets it to a lane image it built) a third lane that runs
that image through `srun docker run`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, TESTS

from repro.evidence import artifact
from repro.lanes.matrix import collect

PLUGINS = TESTS / "plugins_matrix"
IMAGE_ENV = "GPU_REPRO_MATRIX_IMAGE"

pytestmark = pytest.mark.slurm


def matrix(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    # The cells import this checkout too: sbatch hands the submitter's environment to every task.
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "repro", "matrix", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def spec(tmp_path: Path, marker: Path, **over: Any) -> Path:
    lanes: list[dict[str, Any]] = [{"name": "host"}, {"name": "knob", "env": {"TORCH_LINALG_PREFER_CUSOLVER": "1"}}]
    if os.environ.get(IMAGE_ENV):
        lanes.append({"name": "image", "image": os.environ[IMAGE_ENV]})
    doc: dict[str, Any] = {
        "schema_version": 1,
        "name": "ci",
        "smoke": True,
        "timeout_s": 180,
        "budget_s": 0.2,
        "collect_env": False,
        "repro_paths": [str(PLUGINS)],
        "lanes": lanes,
        "repros": [
            "5090-linear",
            "graph-memset",
            {"id": "test-crash-on-lane", "set": {"crash_lane": "knob", "marker": str(marker)}},
        ],
        "gpus": [{"count": 0}],
        **over,
    }
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(doc))
    return path


def test_job_array_crash_and_resume(slurm_cluster: str, tmp_path: Path) -> None:
    marker = tmp_path / "crash-marker"
    marker.write_text("")
    path, out = spec(tmp_path, marker), tmp_path / "m"
    plan_out = matrix("plan", str(path))
    assert plan_out.returncode == 0, plan_out.stderr
    n = 9 if os.environ.get(IMAGE_ENV) else 6

    r = matrix("run", str(path), "--backend", "slurm", "--out", str(out), "--max-parallel", "2", "--timeout", "480")
    assert r.returncode == 1, r.stdout + r.stderr  # the crashing cell makes the matrix fail
    assert f"{n - 1} done, 1 missing or failed" in r.stderr, r.stderr
    (script,) = (out / "slurm").glob("*.sbatch")
    assert f"#SBATCH --array=0-{n - 1}%2" in script.read_text()
    job = r.stderr.split("submitted job array ")[1].split()[0]

    _, rows = collect.collect(out)
    for row in rows:
        if row.status == "missing":
            pytest.fail(f"cell {row.cell.id} came back without an artifact: {row.note}")
        assert row.artifact is not None
        artifact.load(row.artifact)  # validates against the schema
        sched = row.doc.fingerprint["scheduler"] if row.doc else {}
        # The fingerprint names the job array, this cell's task (= its number) and the node.
        assert sched["kind"] == "slurm" and sched["array_job_id"] == job, sched
        assert sched["array_task_id"] == str(row.cell.index) and sched["matrix_cell"] == row.cell.id
        assert sched["node"]
    statuses = {row.cell.id: row.status for row in rows}
    assert statuses["005-knob-test-crash-on-lane"] == "error"
    assert statuses["000-host-5090-linear"] == "smoke" and statuses["001-host-graph-memset"] == "skipped"
    assert sum(s == "error" for s in statuses.values()) == 1
    crash = next(row for row in rows if row.status == "error")
    assert "SIGSEGV" in crash.note
    (report,) = (out / "collected").glob("*/report.md")
    text = report.read_text()
    for row in rows:
        assert f"| {row.cell.index:<3} | {row.cell.lane.name}" in text
    assert "cell 5 `005-knob-test-crash-on-lane`: error: crash: the repro process died of SIGSEGV" in text

    # Resume: only the crashed cell is submitted again, and (marker gone) it passes.
    marker.unlink()
    r = matrix("run", str(path), "--backend", "slurm", "--out", str(out), "--max-parallel", "2", "--timeout", "300")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"resuming 1 of {n} cells: 5" in r.stderr
    second = max((out / "slurm").glob("*.sbatch"))
    assert "#SBATCH --array=5%2" in second.read_text()
    runs = {d.name: len(list(d.iterdir())) for d in (out / "cells").iterdir()}
    assert runs == {row.cell.id: 2 if row.cell.index == 5 else 1 for row in rows}
    _, rows = collect.collect(out)
    assert all(row.done for row in rows) and rows[5].status == "smoke"


def test_timeout_cancels_the_array_and_reports_the_cell_missing(slurm_cluster: str, tmp_path: Path) -> None:
    path = spec(
        tmp_path,
        tmp_path / "unused",
        name="hang",
        lanes=[{"name": "host"}],
        repros=[{"id": "test-crash-on-lane"}, {"id": "test-hang", "set": {"seconds": 120}}],
        repro_paths=[str(PLUGINS), str(TESTS / "plugins")],
    )
    out = tmp_path / "m"
    r = matrix("run", str(path), "--backend", "slurm", "--out", str(out), "--timeout", "25")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "cancelled after the 25 s timeout" in r.stderr
    job = r.stderr.split("submitted job array ")[1].split()[0]
    left = subprocess.run(["squeue", "-h", "-j", job], capture_output=True, text=True)
    assert left.stdout.strip() == "", left.stdout  # scancel took the whole array down
    _, rows = collect.collect(out)
    assert rows[0].status == "smoke"
    hung = rows[1]
    assert hung.status == "missing" and "cancelled by repro matrix after the 25 s timeout" in hung.note, hung.note
