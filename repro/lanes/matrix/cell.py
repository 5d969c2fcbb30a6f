"""One matrix cell, run where the scheduler put it: the repro in a guarded child, an artifact whatever happens."""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from repro.core.errors import UsageError
from repro.core.redact import REDACTED
from repro.lanes.matrix.plan import PLAN_FILE, SECRET_PREFIX, Cell, Plan, build, secret_var

CELLS_DIR = "cells"
ATTEMPT_NAME = re.compile(r"[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}")  # artifact.new_run_id()
# Set for the repro's process, so its fingerprint names the lane and the cell.
CELL_ENV = "GPU_REPRO_MATRIX_CELL"
LANE_ENV = "GPU_REPRO_LANE"


@dataclass(frozen=True)
class CellResult:
    """How one cell ended: its artifact (None when none could be written) and status."""

    cell_id: str
    status: str
    artifact: Path | None
    message: str


def read_plan(path: Path) -> Plan:
    """The plan file written by ``repro matrix run`` (its spec was checked then; the catalog is checked by the run)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"{path}: cannot read the matrix plan ({exc}); expected {PLAN_FILE} written by `repro matrix run`"
        ) from None
    if not isinstance(doc, dict) or "spec" not in doc:
        raise UsageError(f"{path}: no 'spec' in it; expected {PLAN_FILE} written by `repro matrix run`")
    return build(doc["spec"], str(path), check_catalog=False)


def index_from(cell: int | None, cells: str | None, index_env: str | None) -> int:
    """The cell to run: ``--cell N``, or the ``$INDEX_ENV``-th of ``--cells a,b,c`` (a k8s Indexed Job)."""
    if cell is not None:
        return cell
    if not cells or not index_env:
        raise UsageError("expected --cell N, or --cells LIST with --index-env VAR")
    raw = os.environ.get(index_env, "")
    try:
        picks = [int(x) for x in cells.split(",")]
        return picks[int(raw)]
    except (ValueError, IndexError):
        raise UsageError(f"${index_env}={raw!r} with --cells {cells}: expected an index into the list") from None


def apply_env(cell: Cell, environ: MutableMapping[str, str] = os.environ) -> list[str]:
    """Set the lane's environment in ``environ``; returns the secrets that did not reach this cell.

    A secret's value is ``<redacted>`` in the plan file; the launcher put it in this process's
    environment as ``secret_var(lane, name)``. Every such carrier variable is removed, so the
    repro's process sees the lane's own secrets under their own names and nobody else's.
    """
    secrets = set(cell.lane.secret_names)
    environ.update({k: v for k, v in cell.lane.env.items() if k not in secrets})
    missing = []
    for name in sorted(secrets):
        value = environ.get(secret_var(cell.lane.name, name))
        if value is None and cell.lane.env[name] != REDACTED:
            value = cell.lane.env[name]  # a plan built from the spec itself, in this process
        if value is None:
            missing.append(name)
        else:
            environ[name] = value
    for key in [k for k in environ if k.startswith(SECRET_PREFIX)]:
        del environ[key]
    if missing:
        print(
            f"cell {cell.id}: secret env {', '.join(missing)} of lane {cell.lane.name} did not reach this cell "
            "(a Slurm --export that drops the job's environment?); it runs with what its environment holds",
            file=sys.stderr,
        )
    return missing


def cell_dir(root: Path, cell: Cell) -> Path:
    """Where a cell's run folders go: ``ROOT/cells/<cell-id>/``; every attempt adds a run folder."""
    return root / CELLS_DIR / cell.id


def attempt_dir(root: Path, cell: Cell, attempt: str | None) -> Path:
    """The run folder of this attempt: the one the runner made for it (``attempt``), else a new one.

    The runner makes the folder (and owns the cell's folder, which nobody else may write to), so a
    container's non-root user needs no write access above it. A given folder that is not an empty
    folder of ours (a retried Slurm task finds its first try's) gives way to a new one, where allowed.
    """
    from repro.evidence.artifact import ensure_writable_dir, new_run_id

    folder = cell_dir(root, cell)
    if attempt is not None:
        if not ATTEMPT_NAME.fullmatch(attempt):
            raise UsageError(f"--attempt {attempt!r}: expected a run folder name like 20260101T000000Z-a1b2c3")
        given = folder / attempt
        try:
            st = os.lstat(given)
            if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not any(given.iterdir()):
                return given
        except OSError:
            pass
    ensure_writable_dir(folder)
    run_dir = folder / new_run_id()
    try:
        run_dir.mkdir(mode=0o755)
    except OSError as exc:
        raise UsageError(f"{run_dir}: cannot create the cell's run folder ({exc.strerror or exc})") from None
    return run_dir


def run(
    plan: Plan, cell: Cell, root: Path, repro_paths: Sequence[Path] | None = None, attempt: str | None = None
) -> CellResult:
    """Run ``cell`` isolated (timeout from the plan) into its run folder; a crash leaves an error artifact.

    ``repro_paths``: the plugin folders as this process sees them (a container's mounts); default: the plan's.
    ``attempt``: the run folder the runner made for this launch (see ``attempt_dir``).
    """
    from repro.core.context import SamplingConfig
    from repro.run import runner
    from repro.run.execute import RunRequest

    run_dir = attempt_dir(root, cell, attempt)
    # The lane's environment, and its name and the cell's for the fingerprint; the child inherits them.
    apply_env(cell)
    os.environ[LANE_ENV] = cell.lane.name
    os.environ[CELL_ENV] = cell.id
    req = RunRequest(
        repro_id=cell.repro_id,
        overrides=dict(cell.sets),
        smoke=plan.smoke,
        repro_paths=list(repro_paths) if repro_paths is not None else [Path(p) for p in plan.repro_paths],
        sampling=SamplingConfig(budget_s=plan.budget_s) if plan.budget_s else SamplingConfig(),
        command=["repro", "matrix", "cell", "--cell", str(cell.index)],
        collect_env=plan.collect_env,
    )
    outcome = runner.run_one_isolated(req, run_dir, plan.timeout_s)
    return CellResult(cell.id, outcome.status, outcome.path, outcome.message)
