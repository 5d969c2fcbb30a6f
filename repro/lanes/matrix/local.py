"""The local backend: every GPU of this host, one cell per GPU slot at a time (``CUDA_VISIBLE_DEVICES``)."""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from repro.core.errors import UsageError
from repro.lanes.matrix import launch
from repro.lanes.matrix.plan import Cell, Plan

LOG_DIR = "logs"
# Beyond the cell's own timeout (which still writes an error artifact): start-up, collect_env, the write.
_SLACK_S = 300.0


def detect_devices() -> list[str]:
    """This host's GPU indices by ``nvidia-smi -L`` (no torch, no NVML import here); empty without GPUs."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        res = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [str(i) for i, line in enumerate(res.stdout.splitlines()) if line.startswith("GPU ")]


def parse_devices(text: str | None) -> list[str] | None:
    """``--devices 0,1`` as a list; None when not given (then: every GPU found)."""
    if text is None:
        return None
    devices = [d.strip() for d in text.split(",") if d.strip()]
    if not devices or not all(d.isdigit() for d in devices) or len(set(devices)) != len(devices):
        raise UsageError(f"--devices {text!r}: expected distinct GPU indices like 0,1")
    return devices


def slots(devices: Sequence[str], per_cell: int, max_parallel: int | None) -> list[str | None]:
    """GPU sets that cells take turns on: ``["0", "1"]`` for one GPU per cell on two GPUs.

    A cell that needs no GPU gets ``None`` slots (``max_parallel`` of them, default 1).
    """
    if per_cell == 0:
        return [None] * (max_parallel or 1)
    if len(devices) < per_cell:
        raise UsageError(
            f"cells need {per_cell} GPU(s) each and this host has {len(devices)} ({','.join(devices) or 'none'}); "
            "expected --devices with enough GPUs, or gpus.count 0 for a CPU smoke run"
        )
    out: list[str | None] = [
        ",".join(devices[i : i + per_cell]) for i in range(0, len(devices) - per_cell + 1, per_cell)
    ]
    return out[: max_parallel or len(out)]


def argv(
    cell: Cell, root: Path, launcher: str, gpus: str | None, repro_paths: Sequence[str] = ()
) -> tuple[list[str], dict[str, str]]:
    """The command for one cell and the environment changes it needs (secrets apart: see ``run``)."""
    if launcher in ("docker", "podman"):
        # `-e NAME` copies the lane's secrets from the engine client's environment: never on the command line.
        secrets = tuple(cell.lane.secret_values())
        return launch.engine_argv(launcher, cell, root, gpus, extra_env=secrets, repro_paths=repro_paths), {}
    # A cell without a GPU sees none: an empty CUDA_VISIBLE_DEVICES hides them all.
    return launch.native_argv(cell, root), {"CUDA_VISIBLE_DEVICES": gpus or ""}


def run(
    plan: Plan,
    cells: Sequence[Cell],
    root: Path,
    launchers: Mapping[int, str],
    gpu_slots: Sequence[str | None],
    *,
    log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
) -> dict[str, dict[str, Any]]:
    """Run ``cells``, one per slot at a time; returns what happened to each (for collect's reason column)."""
    (root / LOG_DIR).mkdir(parents=True, exist_ok=True)
    todo: queue.Queue[Cell] = queue.Queue()
    for c in cells:
        todo.put(c)
    records: dict[str, dict[str, Any]] = {}
    lock = threading.Lock()
    procs: dict[int, subprocess.Popen[bytes]] = {}

    def worker(slot: str | None) -> None:
        while True:
            try:
                cell = todo.get_nowait()
            except queue.Empty:
                return
            cmd, env_changes = argv(cell, root, launchers[cell.index], slot, plan.repro_paths)
            log_path = root / LOG_DIR / f"cell-{cell.index}.out"
            t0 = time.monotonic()
            state, code = "COMPLETED", None
            with open(log_path, "ab") as out:
                env = {**os.environ, **env_changes, **cell.lane.secret_values()}
                proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
                with lock:
                    procs[cell.index] = proc
                log(f"cell {cell.index} {cell.id}: started on GPU {slot if slot is not None else 'none'}")
                try:
                    code = proc.wait(timeout=plan.timeout_s + _SLACK_S)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    code = proc.wait()
                    state = "TIMEOUT"
            if state != "TIMEOUT" and code != 0:
                state = "FAILED"
            seconds = time.monotonic() - t0
            with lock:
                procs.pop(cell.index, None)
                records[cell.id] = {
                    "backend": "local",
                    "state": state,
                    "exit_code": str(code),
                    "gpus": slot,
                    "reason": f"killed after {plan.timeout_s + _SLACK_S:g} s" if state == "TIMEOUT" else "",
                    "seconds": round(seconds, 1),
                    "log": f"{LOG_DIR}/cell-{cell.index}.out",
                }
            log(f"cell {cell.index} {cell.id}: {state.lower()} (exit {code}, {seconds:.1f} s)")

    threads = [threading.Thread(target=worker, args=(s,), daemon=True) for s in gpu_slots]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.5)
    except KeyboardInterrupt:
        # Ctrl-C: stop what runs (each cell's own runner kills its repro's tree), start nothing new.
        while not todo.empty():
            todo.get_nowait()
        with lock:
            for p in procs.values():
                p.terminate()
        raise
    return records
