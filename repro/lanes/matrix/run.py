"""``repro matrix run``: prepare the matrix folder, pick the cells still to run, hand them to a backend."""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro.core.errors import UsageError
from repro.lanes.matrix import collect as collect_mod
from repro.lanes.matrix import launch
from repro.lanes.matrix.cell import CELLS_DIR, read_plan
from repro.lanes.matrix.plan import PLAN_FILE, Cell, Plan, to_doc

BACKENDS = ("local", "slurm", "k8s")
Log = Callable[[str], None]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Options:
    """How to run: backend, launcher, parallelism, the wait's timeout, devices (local), dry run."""

    backend: str
    launcher: str | None = None  # None: the spec's slurm.launcher (Slurm), else auto
    max_parallel: int | None = None
    timeout_s: float | None = None  # the whole matrix; default from the cells' timeout and count
    devices: Sequence[str] | None = None  # local: GPU indices (None: every GPU found)
    dry_run: bool = False


def _check(opts: Options) -> None:
    if opts.backend not in BACKENDS:
        raise UsageError(f"--backend {opts.backend!r}: expected one of {', '.join(BACKENDS)}")
    if opts.launcher is not None and opts.launcher not in launch.LAUNCHERS:
        raise UsageError(f"--launcher {opts.launcher!r}: expected one of {', '.join(launch.LAUNCHERS)}")
    if opts.max_parallel is not None and opts.max_parallel < 1:
        raise UsageError(f"--max-parallel {opts.max_parallel}: expected at least 1")
    if opts.timeout_s is not None and not opts.timeout_s > 0:
        raise UsageError(f"--timeout {opts.timeout_s:g}: expected seconds > 0")


def prepare(plan: Plan, root: Path, dry_run: bool) -> list[Cell]:
    """Write the plan file (first run) or check it is the same matrix (resume); the cells still to run."""
    from repro.core import fsio
    from repro.evidence.artifact import ensure_writable_dir

    plan_path = root / PLAN_FILE
    if plan_path.exists():
        old = read_plan(plan_path)
        if old.digest != plan.digest:
            raise UsageError(
                f"--out {root}: holds another matrix ({old.name}, spec digest {old.digest}, this spec {plan.digest}); "
                "expected the same spec to resume, or a new --out"
            )
        _, rows = collect_mod.collect(root)
        return [r.cell for r in rows if not r.done]
    if dry_run:
        return list(plan.cells)
    ensure_writable_dir(root)
    fsio.write_new(plan_path, (json.dumps(to_doc(plan), indent=2) + "\n").encode())
    return list(plan.cells)


def _open_cells_dir(root: Path, launchers: Mapping[int, str]) -> None:
    """Containers of a root caller run as the images' uid 1000: let it create its cell folders (as /tmp does)."""
    folder = root / CELLS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    if os.getuid() == 0 and any(v in ("docker", "podman", "pyxis") for v in launchers.values()):
        folder.chmod(0o1777)


def _give_back(root: Path) -> None:
    """After containers of a root caller wrote as uid 1000: hand what they made to the folder's owner.

    As `repro images run` does, so that a root caller finds root's files, not a stranger's. The cell
    folders themselves stay the container user's: a resumed run's container adds its attempt there.
    """
    if os.getuid() != 0:
        return
    owner = root.stat()
    image_uid = int(launch.IMAGE_USER.split(":")[0])
    cells = root / CELLS_DIR
    for dirpath, dirnames, filenames in os.walk(cells):
        if Path(dirpath) == cells:
            continue
        for name in [*dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            if os.lstat(path).st_uid == image_uid:
                os.lchown(path, owner.st_uid, owner.st_gid)


def _record(root: Path, backend: str, records: dict[str, dict[str, Any]], extra: dict[str, Any]) -> Path:
    from repro.core import fsio
    from repro.evidence.artifact import new_run_id, utc_now

    doc = {"backend": backend, "finished_utc": utc_now(), **extra, "cells": records}
    return fsio.write_new(
        root / collect_mod.SCHEDULER_DIR / f"{new_run_id()}.json", (json.dumps(doc, indent=2) + "\n").encode()
    )


def _wait_timeout(plan: Plan, n: int, parallel: int, given: float | None) -> float:
    # Every cell may use its whole timeout, `parallel` at a time, plus an hour of queueing and start-up.
    return given if given is not None else plan.timeout_s * -(-n // max(parallel, 1)) + 3600


def run(plan: Plan, root: Path, opts: Options, *, log: Log = _stderr) -> tuple[list[Cell], str | None]:
    """Run the cells of ``plan`` not yet done in ``root``; returns them, and the dry run's text (if any)."""
    _check(opts)
    root = root.resolve()
    todo = prepare(plan, root, opts.dry_run)
    if not todo:
        log(f"matrix {plan.name}: every cell in {root} is done; nothing to run")
        return [], None
    if len(todo) < len(plan.cells):
        log(
            f"matrix {plan.name}: resuming {len(todo)} of {len(plan.cells)} cells: "
            + ", ".join(str(c.index) for c in todo)
        )
    if opts.backend == "slurm":
        return todo, _slurm(plan, root, todo, opts, log)
    if opts.backend == "k8s":
        return todo, _k8s(plan, root, todo, opts, log)
    return todo, _local(plan, root, todo, opts, log)


def _local(plan: Plan, root: Path, todo: list[Cell], opts: Options, log: Log) -> str | None:
    from repro.lanes.matrix import local

    launchers = {c.index: launch.choose(opts.launcher or "auto", c, slurm=False) for c in todo}
    devices = list(opts.devices) if opts.devices is not None else local.detect_devices()
    out: list[str] = []
    for group in sorted({c.group for c in todo}):
        cells = [c for c in todo if c.group == group]
        gpu_slots = local.slots(devices, cells[0].gpus.count, opts.max_parallel)
        if opts.dry_run:
            for c in cells:
                argv, env = local.argv(
                    c, root, launchers[c.index], "<gpu>" if gpu_slots[0] is not None else None, plan.repro_paths
                )
                # Lines a user may paste into a shell: every word quoted, nothing in them expands.
                prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
                out.append(f"{prefix} {shlex.join(argv)}".strip())
            continue
        _open_cells_dir(root, launchers)
        log(
            f"matrix {plan.name}: {len(cells)} cell(s) on {len(gpu_slots)} slot(s): "
            + ", ".join(str(s) for s in gpu_slots)
        )
        try:
            records = local.run(plan, cells, root, launchers, gpu_slots, log=log)
        finally:
            _give_back(root)
        _record(root, "local", records, {"slots": [s for s in gpu_slots]})
    return "\n".join(out) + "\n" if opts.dry_run else None


def _slurm(plan: Plan, root: Path, todo: list[Cell], opts: Options, log: Log) -> str | None:
    from repro.core import fsio
    from repro.evidence.artifact import new_run_id
    from repro.lanes.matrix import slurm

    launchers = {
        c.index: launch.choose(opts.launcher or plan.slurm.get("launcher", "auto"), c, slurm=True) for c in todo
    }
    parallel = opts.max_parallel or plan.slurm.get("max_parallel")
    texts: list[tuple[list[Cell], str]] = []
    for group in sorted({c.group for c in todo}):
        cells = [c for c in todo if c.group == group]
        texts.append((cells, slurm.script(plan, cells, root, launchers, parallel)))
    if opts.dry_run:
        return "\n".join(t for _, t in texts)
    _open_cells_dir(root, launchers)
    (root / slurm.LOG_DIR).mkdir(exist_ok=True)
    watches: list[tuple[slurm.Watch, list[Cell]]] = []
    try:
        for cells, text in texts:
            path = fsio.write_new(root / "slurm" / f"{new_run_id()}.sbatch", text.encode())
            job = slurm.submit(path, env=slurm.secrets(cells))
            log(f"slurm: submitted job array {job} ({len(cells)} cells) from {path}")
            watches.append((slurm.Watch(job, [c.index for c in cells]), cells))
        for watch, cells in watches:
            timeout = _wait_timeout(plan, len(cells), int(parallel or len(cells)), opts.timeout_s)
            cancelled = slurm.wait(watch, timeout, log=log)
            _give_back(root)
            _record(
                root, "slurm", slurm.records(watch, {c.index: c for c in cells}, root, cancelled), {"job": watch.job_id}
            )
    except KeyboardInterrupt:
        for watch, _ in watches:
            slurm.cancel(watch.job_id)
        raise
    return None


def _k8s(plan: Plan, root: Path, todo: list[Cell], opts: Options, log: Log) -> str | None:
    from repro.evidence.artifact import new_run_id
    from repro.lanes.matrix import k8s

    attempt = new_run_id().split("-")[-1]
    jobs = k8s.manifests(plan, todo, to_doc(plan), attempt)
    if opts.dry_run:
        return "---\n".join(k8s.to_yaml(objs) for _, objs, _ in jobs)
    paths = k8s.write_manifests(root / "k8s", jobs)
    log(f"k8s: manifests in {', '.join(str(p) for p in paths)}")
    timeout = _wait_timeout(plan, len(todo), len(todo), opts.timeout_s)
    records = k8s.submit_and_wait(plan, jobs, timeout, log=log)
    _record(root, "k8s", records, {"jobs": [name for name, _, _ in jobs]})
    return None
