"""The Slurm backend: one job array per GPU selector, polled with squeue, finished states from sacct or scontrol."""

from __future__ import annotations

import math
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.core.errors import ReproError, UsageError
from repro.lanes.matrix import launch
from repro.lanes.matrix.plan import Cell, Plan

LOG_DIR = "logs"
_GPU_VAR = "${CUDA_VISIBLE_DEVICES}"
# Where the generator wants Slurm's GPU list expanded. It holds NUL bytes, which the spec's schema
# refuses in every value, so no word the spec provides can ask for an expansion.
GPU_WORD = "\x00CUDA_VISIBLE_DEVICES\x00"
# Control characters end an #SBATCH line (newline) or hide text from a reader (ESC, CR).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# Poll gently: a busy slurmctld is shared by everyone on the cluster.
POLL_S = 2.0
# Slurm's own time limit per task: the cell's timeout plus room for start-up, collect_env and the
# error artifact, so the cell's own timeout (which still writes an artifact) fires first.
_TASK_SLACK_S = 300
_SCONTROL_FIELD = re.compile(r"(\w+)=(\S*)")

Run = Callable[..., "subprocess.CompletedProcess[str]"]  # (argv) or (argv, extra environment)


def _run(argv: Sequence[str], env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    try:
        full = {**os.environ, **env} if env else None
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=60, env=full)
    except FileNotFoundError:
        raise ReproError(f"{argv[0]} not found; expected a Slurm client (sbatch, squeue, scancel) on PATH") from None
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(list(argv), 124, "", f"{argv[0]} timed out after 60 s")


def _dquote(literal: str) -> str:
    """``literal`` made inert inside double quotes: ``\\``, ``"``, ``$`` and backquote escaped (POSIX 2.2.3)."""
    return re.sub(r'([\\"$`])', r"\\\1", literal)


def _shell(argv: Sequence[str]) -> str:
    """One shell line: every word quoted, the generator's GPU word (``GPU_WORD``) the only expansion.

    A word holding ``GPU_WORD`` becomes one double-quoted word whose literal parts are escaped, so
    ``"device=${CUDA_VISIBLE_DEVICES}"`` expands the GPU list Slurm gave the task and nothing else.
    """
    out = []
    for arg in argv:
        if _CONTROL.search(arg.replace(GPU_WORD, "")):
            raise UsageError(f"{arg!r}: a control character in a command word; expected printable text")
        if GPU_WORD in arg:
            out.append('"' + _GPU_VAR.join(_dquote(part) for part in arg.split(GPU_WORD)) + '"')
        else:
            out.append(shlex.quote(arg))
    return " ".join(out)


def _sbatch_line(option: str) -> str:
    """``#SBATCH <option>``; an option with a control character (a newline would end the line) is refused."""
    if _CONTROL.search(option):
        raise UsageError(f"#SBATCH {option!r}: a control character; expected one printable option")
    return f"#SBATCH {shlex.quote(option)}"


def array_spec(indices: Sequence[int], max_parallel: int | None) -> str:
    """``0-5%2`` for a run of indices, ``1,4%2`` for a resumed few: the array ids are the cells' numbers."""
    idx = sorted(indices)
    ranges: list[str] = []
    start = prev = idx[0]
    for i in [*idx[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        ranges.append(f"{start}-{prev}" if prev > start else str(start))
        if i is not None:
            start = prev = i
    return ",".join(ranges) + (f"%{max_parallel}" if max_parallel else "")


def task_argv(cell: Cell, root: Path, launcher: str, repro_paths: Sequence[str] = ()) -> list[str]:
    """The command one array task runs for ``cell``, in the form the cluster supports."""
    gpus = GPU_WORD if cell.gpus.count > 0 else None
    if launcher == "pyxis":
        return launch.pyxis_argv(cell, root, repro_paths)
    if launcher in ("docker", "podman"):
        # The lane's secrets are in the job's environment (see ``submit``); `-e NAME` copies them in by name.
        env = (*launch.PASS_ENV, *cell.lane.secret_values())
        return ["srun", "--ntasks=1", *launch.engine_argv(launcher, cell, root, gpus, env, repro_paths)]
    return ["srun", "--ntasks=1", *launch.native_argv(cell, root)]


def script(
    plan: Plan, cells: Sequence[Cell], root: Path, launchers: Mapping[int, str], max_parallel: int | None
) -> str:
    """The sbatch script of one job array: one ``case`` branch per cell, named by its array index."""
    first = cells[0]
    gpus = first.gpus
    minutes = math.ceil((plan.timeout_s + _TASK_SLACK_S) / 60)
    opts = [
        f"--job-name=gpu-repro-{plan.name}",
        f"--array={array_spec([c.index for c in cells], max_parallel)}",
        f"--output={root}/{LOG_DIR}/cell-%a.out",
        "--ntasks=1",
        f"--time={minutes}",
    ]
    if gpus.count > 0:
        opts.append(f"--gres={gpus.slurm_gres or f'gpu:{gpus.count}'}")
    if gpus.slurm_constraint:
        opts.append(f"--constraint={gpus.slurm_constraint}")
    for key in ("partition", "account"):
        if plan.slurm.get(key):
            opts.append(f"--{key}={plan.slurm[key]}")
    opts += list(plan.slurm.get("sbatch_args") or ())
    lines = [
        "#!/bin/bash",
        f"# gpu-repro matrix {plan.name!r}: {len(cells)} cell(s), GPU selector {gpus.label}; from `repro matrix run`.",
        *(_sbatch_line(o) for o in opts),
        "set -u",
        'echo "cell $SLURM_ARRAY_TASK_ID: job ${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID} on $(hostname -s)" >&2',
        'case "$SLURM_ARRAY_TASK_ID" in',
    ]
    for c in cells:
        lines.append(f"    {c.index})  # {c.id} ({launchers[c.index]})")
        lines.append(f"        {_shell(task_argv(c, root, launchers[c.index], plan.repro_paths))} ;;")
    lines += [
        '    *) echo "array task $SLURM_ARRAY_TASK_ID is not a cell of this matrix" >&2; exit 2 ;;',
        "esac",
        "",
    ]
    return "\n".join(lines)


def secrets(cells: Sequence[Cell]) -> dict[str, str]:
    """Every secret the cells' lanes need, as the job's environment carries it (sbatch exports its own)."""
    out: dict[str, str] = {}
    for c in cells:
        out.update(c.lane.secret_values())
    return out


def submit(path: Path, run: Run = _run, env: Mapping[str, str] | None = None) -> str:
    """``sbatch --parsable``: the job id (an error names sbatch's own message).

    ``env``: variables added to sbatch's environment, which the job inherits (sbatch's default
    ``--export=ALL``): how a lane's secrets reach its cells without being written into the script.
    """
    argv = ["sbatch", "--parsable", str(path)]
    res = run(argv, env) if env else run(argv)
    if res.returncode != 0:
        raise ReproError(f"sbatch {path} failed: {' '.join(res.stderr.split())[:300]}")
    return res.stdout.strip().split(";")[0]


@dataclass
class TaskState:
    """What the scheduler said about one array task, last seen."""

    task: str
    state: str = "UNKNOWN"
    reason: str = ""
    node: str = ""
    exit_code: str = ""
    source: str = ""


@dataclass
class Watch:
    """An array job being polled; ``tasks`` maps cell index to what Slurm last said of it."""

    job_id: str
    indices: Sequence[int]
    tasks: dict[int, TaskState] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for i in self.indices:
            self.tasks.setdefault(i, TaskState(task=f"{self.job_id}_{i}", state="PENDING"))


def _task_index(jobid: str, job: str) -> int | None:
    m = re.fullmatch(rf"{re.escape(job)}_(\d+)", jobid)
    return int(m.group(1)) if m else None


def poll(watch: Watch, run: Run = _run) -> bool:
    """One look with squeue; True while any task is still queued or running."""
    res = run(["squeue", "-h", "-r", "-j", watch.job_id, "-o", "%i|%T|%r|%N"])
    if res.returncode != 0:
        # squeue answers "Invalid job id" once the whole array has left the queue.
        return "invalid job id" not in res.stderr.lower()
    live = False
    listed: set[int] = set()
    for line in res.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 4:
            continue
        i = _task_index(parts[0], watch.job_id)
        if i is None or i not in watch.tasks:
            continue
        live = True
        listed.add(i)
        t = watch.tasks[i]
        t.state, t.reason, t.node, t.source = parts[1], parts[2] if parts[2] != "None" else "", parts[3], "squeue"
    for i, t in watch.tasks.items():
        if i not in listed and t.source == "squeue":
            t.state = "ENDED"  # left the queue; finish() reads how it ended
    return live


def finish(watch: Watch, run: Run = _run) -> None:
    """Final state of every task: sacct where accounting exists, else scontrol (while slurmctld remembers)."""
    res = run(["sacct", "-n", "-P", "-X", "-j", watch.job_id, "-o", "JobID,State,ExitCode,NodeList,Reason"])
    if res.returncode == 0 and res.stdout.strip():
        for line in res.stdout.splitlines():
            parts = line.split("|")
            i = _task_index(parts[0], watch.job_id) if parts else None
            if i is None or i not in watch.tasks or len(parts) < 5:
                continue
            t = watch.tasks[i]
            t.state, t.exit_code, t.node, t.source = parts[1].split()[0], parts[2], parts[3], "sacct"
            t.reason = "" if parts[4] in ("None", "") else parts[4]
        return
    # No slurmdbd (sacct: "Slurm accounting storage is disabled"): scontrol knows finished jobs for MinJobAge.
    res = run(["scontrol", "show", "job", "-o", watch.job_id])
    if res.returncode != 0:
        return
    for line in res.stdout.splitlines():
        f = dict(_SCONTROL_FIELD.findall(line))
        try:
            i = int(f.get("ArrayTaskId", ""))
        except ValueError:
            continue
        if i not in watch.tasks:
            continue
        t = watch.tasks[i]
        t.state, t.exit_code, t.source = f.get("JobState", t.state), f.get("ExitCode", ""), "scontrol"
        t.node = f.get("NodeList", "") if f.get("NodeList") not in (None, "(null)") else t.node
        t.reason = "" if f.get("Reason") in (None, "None") else f.get("Reason", "")


def cancel(job_id: str, run: Run = _run) -> None:
    """``scancel`` the whole array; a job that has already ended is not an error."""
    run(["scancel", job_id])


def wait(
    watch: Watch,
    timeout_s: float,
    *,
    run: Run = _run,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
) -> str | None:
    """Poll until the array has left the queue; past ``timeout_s``, or on Ctrl-C, scancel it.

    Returns None when it ended by itself, else why it was cancelled (Ctrl-C is re-raised after the scancel).
    """
    start = clock()
    last = ""
    try:
        while poll(watch, run):
            states = sorted({t.state for t in watch.tasks.values()})
            line = f"slurm job {watch.job_id}: " + ", ".join(
                f"{sum(t.state == s for t in watch.tasks.values())} {s.lower()}" for s in states
            )
            if line != last:
                log(line)
                last = line
            if clock() - start > timeout_s:
                cancel(watch.job_id, run)
                log(f"slurm job {watch.job_id}: cancelled after the {timeout_s:g} s timeout")
                _drain(watch, run, sleep, clock)
                finish(watch, run)
                return f"cancelled by repro matrix after the {timeout_s:g} s timeout"
            sleep(POLL_S)
    except KeyboardInterrupt:
        cancel(watch.job_id, run)
        log(f"slurm job {watch.job_id}: cancelled (interrupted)")
        raise
    finish(watch, run)
    return None


# How long a cancelled array may take to leave the queue (COMPLETING: its steps are being killed).
_DRAIN_S = 60.0


def _drain(watch: Watch, run: Run, sleep: Callable[[float], None], clock: Callable[[], float]) -> None:
    """After scancel: wait (bounded) until the tasks have left the queue, so their final state is readable."""
    end = clock() + _DRAIN_S
    while poll(watch, run) and clock() < end:
        sleep(POLL_S)


def records(watch: Watch, cells: Mapping[int, Cell], root: Path, cancelled: str | None) -> dict[str, dict[str, Any]]:
    """What the scheduler said per cell, for collect's "reason" column."""
    out: dict[str, dict[str, Any]] = {}
    for i, t in watch.tasks.items():
        cell = cells[i]
        out[cell.id] = {
            "backend": "slurm",
            "job": watch.job_id,
            "task": t.task,
            "state": t.state,
            "reason": t.reason or (cancelled if cancelled and t.state != "COMPLETED" else ""),
            "exit_code": t.exit_code,
            "node": t.node,
            "source": t.source,
            "log": f"{LOG_DIR}/cell-{i}.out",
        }
    return out
