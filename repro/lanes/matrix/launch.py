"""How a cell is started on a node: natively, in docker or podman, or through Slurm's pyxis plugin."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from repro.core.errors import UsageError
from repro.lanes.matrix.plan import PLAN_FILE, Cell, default_python

Launcher = Literal["pyxis", "docker", "podman", "native"]
LAUNCHERS: tuple[str, ...] = ("auto", "pyxis", "docker", "podman", "native")
CONTAINER_ROOT = "/artifacts"  # where the matrix folder is mounted in a container (the images' VOLUME)
# Scheduler variables a container should see, so the cell's fingerprint names its job, task and node
# (docker's `-e NAME` copies the value from the launching environment, and skips an unset one).
PASS_ENV = (
    "SLURM_JOB_ID",
    "SLURM_ARRAY_JOB_ID",
    "SLURM_ARRAY_TASK_ID",
    "SLURMD_NODENAME",
    "SLURM_CLUSTER_NAME",
)
# The images' non-root user (docker/install-repro.sh): a root caller's containers run as it.
IMAGE_USER = "1000:1000"


PLUGIN_ROOT = "/opt/gpu-repro/plugins"  # where a container sees the spec's repro_paths (read-only)


def cell_args(cell: Cell, root: str, plugins: Sequence[str] = ()) -> list[str]:
    """``repro`` arguments that run ``cell`` from the plan file in ``root`` (as the node or container sees it).

    ``plugins``: plugin folders as the container sees them; a native cell reads the plan's own.
    """
    args = ["matrix", "cell", "--plan", f"{root}/{PLAN_FILE}", "--cell", str(cell.index), "--root", root]
    if cell.attempt:
        args += ["--attempt", cell.attempt]
    for path in plugins:
        args += ["--repro-path", path]
    return args


# A mount is written ``host:container[:ro]`` (docker -v) and mounts are joined by commas (pyxis):
# a colon or comma in a host path would add a mount or change its options.
_MOUNT_UNSAFE = re.compile(r"[,:\x00-\x1f\x7f-\x9f]")


def mount_source(path: Path | str, what: str) -> str:
    """``path`` as the host side of a container mount; one that would split the mount list is a UsageError."""
    text = str(path)
    if _MOUNT_UNSAFE.search(text):
        raise UsageError(f"{what} {text!r}: a comma, colon or control character; expected a plain folder path")
    return text


def plugin_mounts(repro_paths: Sequence[str]) -> list[tuple[str, str]]:
    """(host folder, container folder) for each plugin folder of the spec."""
    return [(mount_source(Path(p).resolve(), "repro_paths"), f"{PLUGIN_ROOT}/{i}") for i, p in enumerate(repro_paths)]


def _user() -> str:
    return IMAGE_USER if os.getuid() == 0 else f"{os.getuid()}:{os.getgid()}"


def engine_argv(
    engine: str,
    cell: Cell,
    root: Path,
    gpu_devices: str | None,
    extra_env: Sequence[str] = PASS_ENV,
    repro_paths: Sequence[str] = (),
) -> list[str]:
    """``docker run ...`` / ``podman run ...`` for one cell: no network, non-root, the matrix folder at /artifacts.

    ``gpu_devices`` is what the GPUs are: ``0`` or ``0,1`` for the local backend, ``$CUDA_VISIBLE_DEVICES``
    in a Slurm script (the shell expands it to the GPUs Slurm gave the task), None for no GPU.
    """
    ref = cell.lane.ref
    if ref is None:
        raise ValueError(f"lane {cell.lane.name} has no image")
    argv = [engine, "run", "--rm", "--network", "none", "--init", "--user", _user()]
    if gpu_devices is not None:
        if engine == "podman":  # CDI names, as the NVIDIA Container Toolkit generates them
            argv += ["--device", f"nvidia.com/gpu={gpu_devices}"]
        else:
            argv += ["--gpus", f'"device={gpu_devices}"']
    argv += ["-v", f"{mount_source(root, '--out')}:{CONTAINER_ROOT}"]
    mounts = plugin_mounts(repro_paths)
    for host, inside in mounts:
        argv += ["-v", f"{host}:{inside}:ro"]
    for name in extra_env:
        argv += ["-e", name]
    argv += [*cell.lane.engine_args, ref, *cell_args(cell, CONTAINER_ROOT, [m[1] for m in mounts])]
    return argv


def native_argv(cell: Cell, root: Path) -> list[str]:
    """The node's Python running ``repro matrix cell``."""
    return [cell.lane.python or default_python(), "-m", "repro", *cell_args(cell, str(root))]


def pyxis_ref(ref: str) -> str:
    """An image reference as enroot spells it: a registry host is set off by ``#``, not ``/``.

    ``nvcr.io/nvidia/nemo:26.08.01`` -> ``nvcr.io#nvidia/nemo:26.08.01``; a Docker Hub name stays as it is.
    """
    first, sep, rest = ref.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return f"{first}#{rest}"
    return ref


def pyxis_argv(cell: Cell, root: Path, repro_paths: Sequence[str] = ()) -> list[str]:
    """``srun`` with pyxis: the image is the step's container; the entrypoint is skipped, so ``repro`` is named."""
    ref = cell.lane.ref
    if ref is None:
        raise ValueError(f"lane {cell.lane.name} has no image")
    mounts = plugin_mounts(repro_paths)
    return [
        "srun",
        f"--container-image={pyxis_ref(ref)}",
        "--container-mounts="
        + ",".join([f"{mount_source(root, '--out')}:{CONTAINER_ROOT}", *(f"{h}:{c}:ro" for h, c in mounts)]),
        "--no-container-entrypoint",
        "repro",
        *cell_args(cell, CONTAINER_ROOT, [m[1] for m in mounts]),
    ]


def has_pyxis(srun: str = "srun") -> bool:
    """Whether this cluster's srun knows --container-image (the pyxis SPANK plugin adds it to ``srun --help``)."""
    try:
        res = subprocess.run([srun, "--help"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--container-image" in res.stdout + res.stderr


def choose(wanted: str, cell: Cell, *, slurm: bool) -> Launcher:
    """The launcher for ``cell``: a native lane runs natively; an image lane gets pyxis, docker or podman.

    ``auto`` takes pyxis where srun has it (Slurm only), else the first engine on PATH. An image lane
    with no way to run images is a UsageError: running the node's own Python instead would measure
    a different stack under the lane's name.
    """
    if wanted not in LAUNCHERS:
        raise UsageError(f"--launcher {wanted!r}: expected one of {', '.join(LAUNCHERS)}")
    if cell.lane.image is None:
        return "native"
    if wanted == "native":
        raise UsageError(
            f"--launcher native: lane {cell.lane.name!r} is an image ({cell.lane.ref}); expected a lane without 'image'"
        )
    if wanted != "auto":
        if wanted == "pyxis" and not slurm:
            raise UsageError("--launcher pyxis: pyxis is a Slurm plugin; expected --backend slurm")
        return wanted  # type: ignore[return-value]  # checked against LAUNCHERS above
    if slurm and has_pyxis():
        return "pyxis"
    for engine in ("docker", "podman"):
        if shutil.which(engine):
            return "docker" if engine == "docker" else "podman"
    raise UsageError(
        f"lane {cell.lane.name!r} runs the image {cell.lane.ref}, but there is no pyxis, docker or podman here; "
        "expected one of them (or --launcher)"
    )
