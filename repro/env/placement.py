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


# Where the hypervisor probe reads; tests point it at a folder of fake files.
_SYSFS = Path("/sys")
# A guest's kernel registers a paravirtual clocksource only for the hypervisor it found in the CPU's
# hypervisor leaf, the leaf lscpu reads for collect_env's "Hypervisor vendor": so each names that vendor,
# in lscpu's word. (Under KVM with Hyper-V's interface on top, lscpu says Microsoft and the kernel KVM.)
_CLOCKSOURCE_VENDORS = {
    "kvm-clock": "KVM",
    "hyperv_clocksource_tsc_page": "Microsoft",
    "hyperv_clocksource_msr": "Microsoft",
    "xen": "Xen",
}
# DMI names that say the hypervisor outright (VMware's guests have no clocksource of their own). QEMU's
# "QEMU" / "Standard PC ..." is left out: QEMU runs on KVM or emulates, and lscpu would tell them apart.
_DMI_VENDORS = {
    ("VMware, Inc.", None): "VMware",
    ("Microsoft Corporation", "Virtual Machine"): "Microsoft",  # Hyper-V; the maker's own machines differ
    ("Xen", None): "Xen",
}


def _sys_text(rel: str, errors: list[OSError]) -> str:
    """The stripped text of ``/sys/<rel>``, empty where the file is absent (a bare host, a masked path) or
    unreadable (the error kept in ``errors``, so one such file never hides what the next source says)."""
    try:
        return (_SYSFS / rel).read_text(errors="replace").strip()
    except (FileNotFoundError, NotADirectoryError):
        return ""
    except OSError as exc:
        errors.append(exc)
        return ""


def hypervisor_vendor() -> tuple[str, str] | None:
    """``("KVM", "the kernel's kvm-clock clocksource")``: the hypervisor's vendor in lscpu's word and what
    named it, read from /sys without root or a subprocess (so a run without collect_env still knows it);
    None where nothing there names one (bare metal, or a guest that hides it). Where no source names one and
    a file could not be read, that error is raised (the probe records it)."""
    errors: list[OSError] = []
    kind = _sys_text("hypervisor/type", errors)[:40]  # Xen's own sysfs
    if kind:
        return ("Xen" if kind == "xen" else kind), "/sys/hypervisor/type"
    listed = _sys_text("devices/system/clocksource/clocksource0/available_clocksource", errors).split()
    for name, vendor in _CLOCKSOURCE_VENDORS.items():
        if name in listed:
            return vendor, f"the kernel's {name} clocksource"
    maker, product = _sys_text("class/dmi/id/sys_vendor", errors), _sys_text("class/dmi/id/product_name", errors)
    for (want_maker, want_product), vendor in _DMI_VENDORS.items():
        if maker == want_maker and want_product in (None, product):
            return vendor, f"DMI {maker}" + (f", {product}" if want_product else "")
    if errors:
        raise errors[0]
    return None


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

    vendor = probe("host.hypervisor_vendor", hypervisor_vendor)
    return {
        "os": platform.platform(),
        "kernel": platform.release(),
        # The CPU flag a hypervisor sets for its guests, and its vendor where /sys names it.
        "hypervisor": probe("host.hypervisor", hypervisor),
        "hypervisor_vendor": vendor[0] if vendor else None,
        "hypervisor_vendor_source": vendor[1] if vendor else None,
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
