"""Where the process runs, for the fingerprint: the host, any container, and the scheduler that placed it."""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

# Variables container images set that name their CUDA, library and framework builds, and the
# image this project's lanes ran.
CONTAINER_ENV = (
    "NVIDIA_REQUIRE_CUDA",
    "CUDA_VERSION",
    "NV_CUDA_CUDART_VERSION",
    "NV_LIBCUBLAS_VERSION",
    "NV_CUDNN_VERSION",
    "NVIDIA_PYTORCH_VERSION",
    "NVIDIA_BUILD_ID",
    "PYTORCH_VERSION",
    "GPU_REPRO_IMAGE",
    "GPU_REPRO_IMAGE_DIGEST",
    "GPU_REPRO_LANE",
)


def host_section(probe: Callable[[str, Callable[[], Any]], Any]) -> dict[str, Any]:
    from repro.env.harness import python_env

    def cpu_model() -> str | None:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
        return platform.processor() or None

    def hypervisor() -> bool | None:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return "hypervisor" in line.split(":", 1)[1].split()
        return None

    return {
        "os": platform.platform(),
        "kernel": platform.release(),
        # The CPU flag a hypervisor sets for its guests; collect_env's output names the vendor.
        "hypervisor": probe("host.hypervisor", hypervisor),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "python_env": probe("host.python_env", python_env),
        "cpu": probe("host.cpu", cpu_model),
        "cpu_count": os.cpu_count(),
        # Recorded redacted (nothing leaves with the host's name by default); the
        # redactor also scrubs the real name from free text such as paths.
        "hostname": "<hostname>",
    }


# Words in /proc/self/cgroup that name a container runtime or orchestrator.
_CGROUP_HINTS = ("docker", "containerd", "kubepods", "libpod", "podman", "lxc", "crio")


def cgroup_hints(text: str) -> list[str]:
    """The runtimes /proc/self/cgroup names (``docker``, ``kubepods``, ...), each once, in a fixed order."""
    low = text.lower()
    return [h for h in _CGROUP_HINTS if h in low]


def container_section() -> dict[str, Any]:
    try:
        cgroup = Path("/proc/self/cgroup").read_text()[:4096]
    except OSError:
        cgroup = ""
    return {
        "dockerenv": os.path.exists("/.dockerenv"),
        "containerenv": os.path.exists("/run/.containerenv"),
        "env": {k: os.environ[k] for k in CONTAINER_ENV if k in os.environ},
        "cgroup_hints": cgroup_hints(cgroup),
    }


# Where a scheduler ran this process: Slurm's job, array task and node; a Kubernetes pod (the
# GPU_REPRO_POD_* names come from the downward API in the Jobs `repro matrix` builds); the matrix cell.
SCHEDULER_ENV = {
    "slurm": (
        ("job_id", "SLURM_JOB_ID"),
        ("array_job_id", "SLURM_ARRAY_JOB_ID"),
        ("array_task_id", "SLURM_ARRAY_TASK_ID"),
        ("node", "SLURMD_NODENAME"),
        ("cluster", "SLURM_CLUSTER_NAME"),
    ),
    "k8s": (
        ("pod", "GPU_REPRO_POD_NAME"),
        ("namespace", "GPU_REPRO_POD_NAMESPACE"),
        ("node", "GPU_REPRO_NODE_NAME"),
        ("completion_index", "JOB_COMPLETION_INDEX"),
    ),
}


def scheduler_section(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The scheduler that placed this process (``kind`` null when none) and the matrix cell, from the environment."""
    environ = os.environ if environ is None else environ
    out: dict[str, Any] = {"kind": None, "matrix_cell": environ.get("GPU_REPRO_MATRIX_CELL")}
    for kind, names in SCHEDULER_ENV.items():
        found = {key: environ[var] for key, var in names if environ.get(var)}
        if found and out["kind"] is None:
            out["kind"] = kind
            out.update(found)
    return out
