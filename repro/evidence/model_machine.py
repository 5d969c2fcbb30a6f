"""What the evidence layer reads of a fingerprint, field by field: typed facts about the machine.

``facts`` builds them from a fingerprint (``repro.evidence.model`` calls it at load, for
``Artifact.machine`` and ``Cliff.machine``). The fingerprint's own reader of the essentials (GPU,
driver, torch, CUDA, stack) stays ``repro.env.fingerprint.essentials``. A field holds its value
only when it has the type the fingerprint writes (``repro.env.nvml``, ``repro.env.fingerprint``),
else None; NVML's block and the host's are open in the schema, so nothing else can be assumed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Ceiling", "Harness", "Host", "Library", "MachineFacts", "Nvml", "Scheduler", "facts"]


def number(value: Any) -> float | None:
    """``value`` when it is a number (int or float, never bool), else None."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def string(value: Any) -> str | None:
    """``value`` as a string, None staying None."""
    return None if value is None else str(value)


def mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def _flag(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Harness:
    """The harness that measured, as the fingerprint records it (unchecked: see ``standalone.harness_of``)."""

    version: Any = None
    source_sha256: Any = None
    git_commit: Any = None
    git_state: Any = None
    libraries: Mapping[str, Any] = field(default_factory=dict)  # its own dependencies' versions (since 1.6)


@dataclass(frozen=True)
class Scheduler:
    """The scheduler that placed the process and the ``repro matrix`` cell (fingerprint ``scheduler``)."""

    kind: str | None = None
    matrix_cell: str | None = None
    job_id: str | None = None
    array_job_id: str | None = None
    array_task_id: str | None = None
    node: str | None = None
    pod: str | None = None


@dataclass(frozen=True)
class Nvml:
    """NVML's reading of the board (fingerprint ``gpu.nvml``)."""

    board_part_number: str | None = None
    vbios_version: str | None = None
    pci_device_id: str | None = None  # "0x233010de": the device id and NVIDIA's vendor id (the SKU's form factor)
    driver_version: str | None = None
    power_limit_w: float | None = None
    power_default_limit_w: float | None = None
    power_enforced_limit_w: float | None = None
    power_max_limit_w: float | None = None  # the highest limit the board accepts
    sm_clock_max_mhz: float | None = None
    mem_clock_max_mhz: float | None = None
    sm_clock_app_mhz: float | None = None  # the application clock (nvidia-smi -ac), and its default below
    sm_clock_app_default_mhz: float | None = None
    persistence_mode: bool | None = None
    ecc_mode: bool | None = None
    mig_mode: bool | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    compute_mode: int | None = None  # NVML_COMPUTEMODE_*: 0 default, 2 exclusive process, 3 prohibited
    virtualization_mode: int | None = None  # NVML_GPU_VIRTUALIZATION_MODE_*: 0 none, 1 passthrough, 2 vGPU, ...


@dataclass(frozen=True)
class Ceiling:
    """One measured ceiling (fingerprint ``ceilings``) that has a value."""

    name: str
    value: float
    unit: str
    method: str | None = None  # how it was measured ("8192^3 fp32 matmul, TF32 off")
    sm_clock_after_mhz: float | None = None  # NVML's SM clock right after the probe
    clock_events_after: tuple[str, ...] | None = None  # NVML's clock-event reasons then; None: not read


@dataclass(frozen=True)
class Library:
    """One CUDA library the process could load (fingerprint ``software.libraries``)."""

    name: str
    version: str | None
    loaded: bool


@dataclass(frozen=True)
class Host:
    """The host that ran the process (fingerprint ``host``)."""

    os: str | None = None
    python: str | None = None
    cpu: str | None = None
    cpu_count: int | None = None
    hypervisor: bool | None = None  # /proc/cpuinfo's hypervisor flag (since schema 1.6)
    # The hypervisor's vendor in lscpu's word ("KVM") and what in /sys named it (since schema 1.9).
    hypervisor_vendor: str | None = None
    hypervisor_vendor_source: str | None = None
    # The interpreter, its package folders and how the harness was installed (since schema 1.8).
    python_env: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MachineFacts:
    """What the evidence layer reads from a fingerprint besides ``essentials``: the GPU's identity
    and board, the libraries, knobs and environment, the harness, the scheduler's record,
    collect_env's output."""

    gpu_name: str | None = None
    gpu_uuid: str | None = None
    harness: Harness = Harness()
    gpu_state: Mapping[str, Any] = field(default_factory=dict)  # NVML's reading when the repro started
    # NVML's reading of this GPU before the run's first repro (gpu.state_at_run_start); empty: none
    gpu_at_run_start: Mapping[str, Any] = field(default_factory=dict)
    sm_clock_max_mhz: float | None = None  # the GPU's maximum SM clock, as NVML reported it
    torch_has_magma: bool | None = None  # torch was built with MAGMA (torch.linalg's default backend)
    torch_version: str | None = None  # as recorded (unchecked: a re-run line checks it)
    torch_cuda_built: str | None = None  # the CUDA torch was built with, as recorded (unchecked)
    scheduler: Scheduler = Scheduler()
    collect_env: str = ""
    # The lane image's record (fingerprint container.env): GPU_REPRO_LANE, GPU_REPRO_IMAGE and its digest.
    lane: str | None = None
    image: str | None = None
    image_digest: str | None = None
    compute_capability: str | None = None
    sm_count: int | None = None
    memory_total_bytes: int | None = None
    nvml: Nvml = Nvml()
    # The ceilings that have a value; None when the fingerprint recorded none at all.
    ceilings: tuple[Ceiling, ...] | None = None
    libraries: tuple[Library, ...] = ()  # in the order recorded
    torch_git_version: str | None = None
    transformer_engine: str | None = None
    knobs: Mapping[str, Any] = field(default_factory=dict)  # torch's knobs at process start, as recorded
    env: Mapping[str, str] = field(default_factory=dict)  # the allowlisted environment variables set
    host: Host = Host()
    in_container: bool | None = None  # /.dockerenv or /run/.containerenv seen; None: not recorded
    cgroup_hints: tuple[str, ...] = ()  # container runtimes /proc/self/cgroup names (since 1.6)
    torch_install: Mapping[str, Any] = field(default_factory=dict)  # software.torch.install (since 1.6)
    packages_sha256: str | None = None  # sha256 of the run folder's packages.txt (since 1.7)
    container_env: Mapping[str, str] = field(default_factory=dict)  # fingerprint container.env: an image's variables


def _events(raw: Any) -> tuple[str, ...] | None:
    return tuple(str(x) for x in raw if isinstance(x, str)) if isinstance(raw, list) else None


def _ceilings(raw: Any) -> tuple[Ceiling, ...] | None:
    if not raw or not isinstance(raw, Mapping):
        return None
    measured = ((str(k), number(c.get("value")), c) for k, c in raw.items() if isinstance(c, Mapping))
    return tuple(
        Ceiling(
            k,
            value,
            str(c.get("unit")),
            c["method"] if isinstance(c.get("method"), str) else None,
            number(c.get("sm_clock_after_mhz")),
            _events(c.get("clock_events_after")),
        )
        for k, value, c in measured
        if value
    )


def _libraries(raw: Mapping[str, Any]) -> tuple[Library, ...]:
    return tuple(
        Library(str(k), string(v.get("version")), v.get("loaded") is True)
        for k, v in raw.items()
        if isinstance(v, Mapping)
    )


def _nvml(nv: Mapping[str, Any]) -> Nvml:
    return Nvml(
        board_part_number=string(nv.get("board_part_number")),
        vbios_version=string(nv.get("vbios_version")),
        pci_device_id=string(nv.get("pci_device_id")),
        driver_version=string(nv.get("driver_version")),
        power_limit_w=number(nv.get("power_limit_w")),
        power_default_limit_w=number(nv.get("power_default_limit_w")),
        power_enforced_limit_w=number(nv.get("power_enforced_limit_w")),
        power_max_limit_w=number(nv.get("power_max_limit_w")),
        sm_clock_max_mhz=number(nv.get("sm_clock_max_mhz")),
        mem_clock_max_mhz=number(nv.get("mem_clock_max_mhz")),
        sm_clock_app_mhz=number(nv.get("sm_clock_app_mhz")),
        sm_clock_app_default_mhz=number(nv.get("sm_clock_app_default_mhz")),
        persistence_mode=_flag(nv.get("persistence_mode")),
        ecc_mode=_flag(nv.get("ecc_mode")),
        mig_mode=_flag(nv.get("mig_mode")),
        pcie_gen=_int(nv.get("pcie_gen")),
        pcie_width=_int(nv.get("pcie_width")),
        compute_mode=_int(nv.get("compute_mode")),
        virtualization_mode=_int(nv.get("virtualization_mode")),
    )


def _strings(raw: Mapping[str, Any]) -> Mapping[str, str]:
    return {str(k): str(v) for k, v in raw.items()}


def facts(fp: Mapping[str, Any]) -> MachineFacts:
    """The typed facts of a fingerprint (an empty or partial one gives Nones and empties)."""
    gpu, h, sched = mapping(fp.get("gpu")), mapping(fp.get("harness")), mapping(fp.get("scheduler"))
    sw = mapping(fp.get("software"))
    torch = mapping(sw.get("torch"))
    magma = torch.get("has_magma")
    box = mapping(fp.get("container"))
    env = mapping(box.get("env"))
    host = mapping(fp.get("host"))
    nvml = _nvml(mapping(gpu.get("nvml")))
    te = sw.get("transformer_engine")
    return MachineFacts(
        gpu_name=string(gpu.get("name")) if gpu.get("name") else None,
        gpu_uuid=string(gpu.get("uuid")) if gpu.get("uuid") else None,
        harness=Harness(
            h.get("version"),
            h.get("source_sha256"),
            h.get("git_commit"),
            h.get("git_state"),
            mapping(h.get("libraries")),
        ),
        gpu_state=mapping(gpu.get("state")),
        gpu_at_run_start=mapping(gpu.get("state_at_run_start")),
        packages_sha256=string(sw.get("packages_sha256")) or None,
        container_env=_strings(env),
        sm_clock_max_mhz=nvml.sm_clock_max_mhz,
        torch_has_magma=magma if isinstance(magma, bool) else None,
        torch_version=torch.get("version") if isinstance(torch.get("version"), str) else None,
        torch_cuda_built=torch.get("cuda_built") if isinstance(torch.get("cuda_built"), str) else None,
        scheduler=Scheduler(**{f.name: string(sched.get(f.name)) for f in dataclasses.fields(Scheduler)}),
        collect_env=str(mapping(fp.get("collect_env")).get("output") or ""),
        lane=string(env.get("GPU_REPRO_LANE")),
        image=string(env.get("GPU_REPRO_IMAGE")),
        image_digest=string(env.get("GPU_REPRO_IMAGE_DIGEST")) or None,
        compute_capability=string(gpu.get("compute_capability")) if gpu.get("compute_capability") else None,
        sm_count=_int(gpu.get("sm_count")),
        memory_total_bytes=_int(gpu.get("memory_total_bytes")),
        nvml=nvml,
        ceilings=_ceilings(fp.get("ceilings")),
        libraries=_libraries(mapping(sw.get("libraries"))),
        torch_git_version=string(torch.get("git_version")),
        transformer_engine=string(te) if te else None,
        knobs={k: v for k, v in mapping(fp.get("knobs")).items() if k != "errors"},
        env=_strings(mapping(fp.get("env"))),
        host=Host(
            os=string(host.get("os")) if host.get("os") else None,
            python=string(host.get("python")) if host.get("python") else None,
            cpu=string(host.get("cpu")) if host.get("cpu") else None,
            cpu_count=_int(host.get("cpu_count")),
            hypervisor=_flag(host.get("hypervisor")),
            hypervisor_vendor=_str(host.get("hypervisor_vendor")),
            hypervisor_vendor_source=_str(host.get("hypervisor_vendor_source")),
            python_env=mapping(host.get("python_env")),
        ),
        in_container=bool(box.get("dockerenv") or box.get("containerenv")) if "dockerenv" in box else None,
        cgroup_hints=tuple(str(x) for x in box.get("cgroup_hints") or () if isinstance(x, str)),
        torch_install=mapping(torch.get("install")),
    )
