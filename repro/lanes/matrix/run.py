"""``repro matrix run``: prepare the matrix folder, pick the cells still to run, hand them to a backend."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import stat
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro.core.errors import UsageError
from repro.lanes.matrix import collect as collect_mod
from repro.lanes.matrix import launch
from repro.lanes.matrix.cell import CELLS_DIR, cell_dir, read_plan
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
        why = collect_mod.untrusted(plan_path, os.getuid())
        if why:
            raise UsageError(
                f"--out {root}: its {PLAN_FILE} is {why}; expected a matrix folder you ran, or a new --out"
            )
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


def _own_dir(path: Path) -> None:
    """``path`` as a folder of the runner's that nobody else can write to.

    Made 0755; an existing one that others can write to (mode 1777, or a cell folder owned by a
    container's user) is fixed where it can be and refused where it cannot.
    """
    path.mkdir(mode=0o755, exist_ok=True)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{path}: not a folder (a link?); expected the matrix's own folder")
    if st.st_uid != os.getuid():
        if os.getuid() != 0:
            raise UsageError(f"{path}: owned by uid {st.st_uid}; expected a folder of yours (uid {os.getuid()})")
        os.lchown(path, os.getuid(), os.getgid())
    if st.st_mode & 0o022:
        path.chmod(stat.S_IMODE(st.st_mode) & ~0o022)


def _prepare_attempts(root: Path, cells: Sequence[Cell], launchers: Mapping[int, str]) -> list[Cell]:
    """Make each cell's run folder for this launch: the cells carry its name to ``repro matrix cell --attempt``.

    ``cells/`` and every cell folder are the runner's and writable by it alone, so no other local user
    can plant an attempt. A root caller's containers run as the images' uid 1000: each gets its own
    attempt folder, handed to that uid for the run and taken back after (``_give_back``).
    """
    from repro.evidence.artifact import new_run_id

    _own_dir(root / CELLS_DIR)
    image_uid, image_gid = (int(x) for x in launch.IMAGE_USER.split(":"))
    out = []
    for c in cells:
        folder = cell_dir(root, c)
        _own_dir(folder)
        attempt = new_run_id()
        (folder / attempt).mkdir(mode=0o755)
        if os.getuid() == 0 and launchers[c.index] in ("docker", "podman"):
            os.lchown(folder / attempt, image_uid, image_gid)
        out.append(dataclasses.replace(c, attempt=attempt))
    return out


def _give_back(root: Path, cells: Sequence[Cell]) -> None:
    """After containers of a root caller wrote as uid 1000: take back this launch's attempt folders.

    As `repro images run` does, so that a root caller finds root's files, not a stranger's, and
    collect trusts them (it believes only the runner's files that nobody else can write).
    """
    if os.getuid() != 0:
        return
    image_uid = int(launch.IMAGE_USER.split(":")[0])
    for c in cells:
        if not c.attempt:
            continue
        top = cell_dir(root, c) / c.attempt
        for dirpath, dirnames, filenames in os.walk(top):  # never follows links
            for path in [dirpath, *(os.path.join(dirpath, n) for n in [*dirnames, *filenames])]:
                st = os.lstat(path)
                if st.st_uid != image_uid:
                    continue
                os.lchown(path, os.getuid(), os.getgid())
                if not stat.S_ISLNK(st.st_mode):
                    os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o022)


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
        cells = _prepare_attempts(root, cells, launchers)
        log(
            f"matrix {plan.name}: {len(cells)} cell(s) on {len(gpu_slots)} slot(s): "
            + ", ".join(str(s) for s in gpu_slots)
        )
        try:
            records = local.run(plan, cells, root, launchers, gpu_slots, log=log)
        finally:
            _give_back(root, cells)
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
    if not opts.dry_run:
        todo = _prepare_attempts(root, todo, launchers)
    texts: list[tuple[list[Cell], str]] = []
    for group in sorted({c.group for c in todo}):
        cells = [c for c in todo if c.group == group]
        texts.append((cells, slurm.script(plan, cells, root, launchers, parallel)))
    if opts.dry_run:
        return "\n".join(t for _, t in texts)
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
            _give_back(root, cells)
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
