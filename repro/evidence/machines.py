"""The machines behind a run: an essentials line, the terminal fingerprint, each machine's summary, GPU state."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from repro.env.fingerprint import HARNESS_LIBRARIES, HARNESS_OPTIONAL, HARNESS_REQUIRES, essentials
from repro.evidence.clocks import during_measurement
from repro.evidence.markdown import text
from repro.evidence.model import Artifact, MachineFacts, Nvml

# torch's own defaults for the knobs the fingerprint reads, as it records them: the environment
# names only the knobs that differ; every value is in the artifact's fingerprint.knobs.
_TORCH_DEFAULTS = {
    "cuda_matmul_allow_tf32": "False",
    "cudnn_allow_tf32": "True",
    "float32_matmul_precision": "highest",
    "fp16_reduced_precision_reduction": "True",
    "bf16_reduced_precision_reduction": "True",
    "preferred_linalg_library": "_LinalgBackend.Default",
    "preferred_blas_library": "_BlasBackend.Cublas",
    "cudnn_benchmark": "False",
    "deterministic_algorithms": "False",
}


def essentials_line(fp: Mapping[str, Any]) -> str:
    """GPU, driver, torch with its CUDA and cuBLAS, and the stack, as one markdown line."""
    e = {k: text(v or "-") for k, v in essentials(fp).items()}
    return (
        f"GPU **{e['gpu']}** (cc {e['cc']}), driver {e['driver']}, "
        f"torch {e['torch']} (CUDA {e['cuda']}, cuBLAS {e['cublas']}), stack: {e['lane']}"
    )


def fingerprint_text(fp: Mapping[str, Any], python: str) -> list[str]:
    """The fingerprint's essentials as plain lines for a terminal (no markdown), then what could not be read.

    ``python`` is the interpreter that took the fingerprint: when torch is missing there, that
    is the fact the reader needs, not a probe's traceback.
    """
    e = essentials(fp)
    gpu = fp.get("gpu") or {}
    torch_info = (fp.get("software") or {}).get("torch") or {}
    lines = [
        f"GPU:     {e['gpu']}" + (f" (compute capability {e['cc']}, {gpu.get('sm_count')} SMs)" if e["cc"] else ""),
        f"driver:  {e['driver'] or '-'}",
        f"torch:   {e['torch'] or 'not installed'}"
        + (f" (built with CUDA {e['cuda']})" if e["cuda"] else " (CPU-only build)" if e["torch"] else ""),
        f"stack:   {e['lane']}",
        "libraries loaded by this process:",
    ]
    for k, v in sorted(((fp.get("software") or {}).get("libraries") or {}).items()):
        lines.append(f"  {k}: {v['version'] if v.get('loaded') else 'not loaded'}")
    errors = dict(fp.get("errors") or {})
    torch_error = errors.pop("torch", None)
    if torch_error and torch_error.startswith("ModuleNotFoundError"):
        lines.append(
            f"torch is not installed in {python}, so the torch, GPU and knob fields are empty. "
            "Install the PyTorch build you want to test where this Python sees it, or try `make smoke` "
            "(README, 'Your first run')."
        )
    elif torch_error:
        lines.append(f"torch is installed but failed to import ({torch_error}); the torch and GPU fields are empty.")
    elif torch_info and not torch_info.get("cuda_available"):
        lines.append("torch sees no CUDA GPU: GPU repros will skip here (`repro doctor` says why).")
    for name, error in sorted(errors.items()):
        lines.append(f"could not read {name}: {error}")
    return lines


def _identity(fp: Mapping[str, Any]) -> str:
    """A fingerprint without what changes from process to process (GPU state, collect_env's text)."""
    gpu = {k: v for k, v in (fp.get("gpu") or {}).items() if k != "state"}
    rest = {k: v for k, v in fp.items() if k not in ("gpu", "collect_env")}
    return json.dumps({**rest, "gpu": gpu}, sort_keys=True, default=str)


@dataclass(frozen=True)
class Machine:
    """One distinct fingerprint of the run and the repros that share it."""

    label: str  # "A", "B", ...
    fingerprint: Mapping[str, Any]
    repros: tuple[str, ...]
    facts: MachineFacts = MachineFacts()  # read from ``fingerprint``


def machines(docs: Sequence[Artifact]) -> tuple[list[Machine], dict[int, str]]:
    """The distinct fingerprints (first seen first) and, per doc (by id()), its machine's label."""
    found: dict[str, tuple[Artifact, list[str]]] = {}
    of: dict[int, str] = {}
    for d in docs:
        key = _identity(d.fingerprint)
        _, ids = found.setdefault(key, (d, []))
        ids.append(d.repro.id)
        of[id(d)] = chr(ord("A") + list(found).index(key)) if len(found) <= 26 else str(list(found).index(key) + 1)
    out = [
        Machine(chr(ord("A") + i) if len(found) <= 26 else str(i + 1), first.fingerprint, tuple(ids), first.machine)
        for i, (first, ids) in enumerate(found.values())
    ]
    return out, of


def _gib(n: Any) -> str:
    return f"{n / 2**30:.0f} GiB" if isinstance(n, int | float) else "-"


def machine_summary(m: Machine, every: str | None = None, ceilings_in: str | None = None) -> str:
    """The facts a maintainer asks for first, from the fingerprint's fields, as a short list that is
    never cut: GPU SKU, driver, power and clocks; the libraries the process loaded; knobs; harness.
    ``ceilings_in``: the repro whose process measured the ceilings, when the artifacts say."""
    f, nv = m.facts, m.facts.nvml
    onoff = {True: "on", False: "off", None: "-"}
    parts = [
        f"**Machine {m.label}** (used by {text(', '.join(m.repros) if every is None else every)}):",
        "",
        f"- GPU: {f.gpu_name or '-'}, board {nv.board_part_number or '-'}{_board_ids(nv)}, compute capability "
        f"{f.compute_capability or '-'}, {f.sm_count or '-'} SMs, "
        f"{_gib(f.memory_total_bytes)}; "
        f"driver {nv.driver_version or '-'}; power limit {nv.power_limit_w or '-'} W "
        f"(default {nv.power_default_limit_w or '-'} W{_enforced(nv)}); "
        f"max clocks SM {nv.sm_clock_max_mhz or '-'} MHz, "
        f"memory {nv.mem_clock_max_mhz or '-'} MHz{_app_clock(nv)}; persistence {onoff[nv.persistence_mode]}, "
        f"ECC {onoff[nv.ecc_mode]}, MIG {onoff[nv.mig_mode]}, "
        f"PCIe gen {nv.pcie_gen or '-'} x{nv.pcie_width or '-'}",
    ]
    if f.ceilings is not None:
        shown = [f"{c.name} {c.value:.4g} {c.unit}" + (f" ({c.method})" if c.method else "") for c in f.ceilings]
        when = f", timed once in {ceilings_in}'s process" if ceilings_in else ""
        clocks = [f"{c.name} {c.sm_clock_after_mhz:g}" for c in f.ceilings if c.sm_clock_after_mhz]
        events = [f"{c.name} {', '.join(c.clock_events_after)}" for c in f.ceilings if c.clock_events_after]
        read = any(c.clock_events_after is not None for c in f.ceilings)
        after = f"; SM clock after each probe's last repeat: {', '.join(clocks)} MHz" if clocks else ""
        none = " (no clock events)" if clocks and read else ""
        after += f" (clock events: {'; '.join(events)})" if events else none
        parts.append(
            f"- Measured ceilings (the tables' \"% of\": this GPU's rates{when}, not datasheet peaks): "
            f"{', '.join(shown) or '-'}{after}"
        )
    loaded = [f"{lib.name} {lib.version}" for lib in f.libraries if lib.loaded]
    parts.append(
        f"- Libraries loaded (from /proc/self/maps): "
        f"{', '.join(loaded) or 'none read'}; torch {f.torch_version or '-'} (git "
        f"{(f.torch_git_version or '-')[:12]}, built with CUDA {f.torch_cuda_built or '-'}, "
        f"has_magma {f.torch_has_magma}); "
        f"Transformer Engine {f.transformer_engine or 'not installed'}"
    )
    changed = [f"{k}={v}" for k, v in f.knobs.items() if str(v) != _TORCH_DEFAULTS.get(k)]
    if not f.knobs or len(changed) == len(f.knobs):
        said = ", ".join(changed) or "-"
    else:
        said = "torch's defaults" + (f", but {', '.join(changed)}" if changed else "")
    parts.append("- Knobs at process start: " + said)
    parts.append("- Allowlisted env vars set: " + (", ".join(f"{k}={v}" for k, v in f.env.items()) or "none"))
    h = f.host
    parts.append(
        f"- Host: {h.os or '-'}, Python {h.python or '-'}, {h.cpu or '-'} ({_cpu_model(f)}{h.cpu_count or '-'} CPUs)"
        + "".join(f"; {x}" for x in host_words(f))
    )
    parts += [f"- {x}" for x in [container_words(f), install_words(f), harness_words(f)] if x]
    # Fingerprint values are untrusted text: every bullet's content is escaped; only the frame is markdown.
    return "\n".join(f"- {text(p[2:])}" if p.startswith("- ") else p for p in parts)


def _board_ids(nv: Nvml) -> str:
    """``, VBIOS 96.00.DA.00.0C, PCI device 0x233010de`` where NVML gave them."""
    said = [f"VBIOS {nv.vbios_version}"] if nv.vbios_version else []
    said += [f"PCI device {nv.pci_device_id}"] if nv.pci_device_id else []
    return "".join(f", {x}" for x in said)


# collect_env's lscpu lines that tell one CPU of a generic name ("Intel(R) Xeon(R) Processor") from another.
_CPU_FIELDS = (("CPU family", "family"), ("Model", "model"), ("Stepping", "stepping"), ("L3 cache", "L3"))


def _cpu_model(f: MachineFacts) -> str:
    """``family 6, model 207, stepping 2, L3 300 MiB (1 instance); `` from collect_env's lscpu lines; "" without."""
    said = []
    for field, words in _CPU_FIELDS:
        m = re.search(rf"^{field}:\s*(\S.*?)\s*$", f.collect_env, re.MULTILINE)
        if m and len(m.group(1)) <= 40:
            said.append(f"{words} {m.group(1)}")
    return f"{', '.join(said)}; " if said else ""


_VIRTUALIZATION = {0: "GPU not virtualized", 1: "GPU passthrough", 2: "vGPU", 3: "host vGPU", 4: "host vSGA"}
_COMPUTE_MODE = {0: "default", 1: "exclusive thread", 2: "exclusive process", 3: "prohibited"}
_VENDOR = re.compile(r"^Hypervisor vendor:\s*(\S.*?)\s*$", re.MULTILINE)


def _vendor(f: MachineFacts) -> tuple[str, str] | None:
    """The hypervisor's vendor and what said it: collect_env's (lscpu's CPUID reading) where it ran, else
    the harness's own probe of /sys (schema 1.9; a quick run skips collect_env); None where neither says."""
    said = _VENDOR.search(f.collect_env)
    probe = f.host.hypervisor_vendor
    if said:
        name = said.group(1)
        agrees = probe is not None and probe.lower() == name.lower()
        also = f", as {f.host.hypervisor_vendor_source or 'the probe'} says" if agrees else ""
        return name, f"collect_env's hypervisor vendor{also}"
    if probe:
        return probe, f.host.hypervisor_vendor_source or "the harness's probe"
    return None


def host_words(f: MachineFacts) -> list[str]:
    """Whether the host is a virtual machine (its hypervisor's vendor, else the CPU's hypervisor flag),
    how NVML says the GPU is virtualized, and its compute mode."""
    out = []
    vendor = _vendor(f)
    if vendor:
        out.append(f"{vendor[0]} guest ({vendor[1]})")
    elif f.host.hypervisor is not None:
        out.append("a VM guest (CPU hypervisor flag)" if f.host.hypervisor else "no CPU hypervisor flag (bare metal)")
    mode = f.nvml.virtualization_mode
    out.append(
        _VIRTUALIZATION.get(mode, f"GPU virtualization mode {mode}")
        if mode is not None
        else "GPU virtualization: not recorded"
    )
    if f.nvml.compute_mode is not None:
        out.append(f"compute mode {_COMPUTE_MODE.get(f.nvml.compute_mode, str(f.nvml.compute_mode))}")
    return out


def guest_words(f: MachineFacts) -> str | None:
    """``KVM guest, GPU passthrough``: a virtual machine host in a few words for the report's head; None
    on bare metal or where nothing says."""
    vendor = _vendor(f)
    if not vendor and not f.host.hypervisor:
        return None
    said = f"{vendor[0]} guest" if vendor else "VM guest"
    mode = f.nvml.virtualization_mode
    return said + (f", {_VIRTUALIZATION.get(mode, f'GPU virtualization mode {mode}')}" if mode else "")


def container_words(f: MachineFacts) -> str | None:
    """A container: its markers, and its image, or that the image cannot be seen from inside it."""
    if not f.in_container and not f.image:
        return None
    seen = ", ".join(f.cgroup_hints)
    marks = "Container: yes (" + (f"cgroup names {seen}" if seen else "a container's marker file") + ")"
    image = (
        f"image {f.image}" + (f"@{f.image_digest}" if f.image_digest else "")
        if f.image
        else ("image: not visible from inside the container")
    )
    # An image's own variables (as nvidia/cuda images set them) hint at its base where its name is unseen.
    hints = image_vars(f.container_env)
    if hints and not f.image:
        image += f"; its variables: {hints}"
    return f"{marks}; {image}"


# An image's own version variables (nvidia/cuda and NGC images set them), one list wherever the report names them.
_IMAGE_VARS = (
    "CUDA_VERSION",
    "NV_CUDA_CUDART_VERSION",
    "NV_LIBCUBLAS_VERSION",
    "NV_CUDNN_VERSION",
    "NVIDIA_PYTORCH_VERSION",
)


def image_vars(env: Mapping[str, Any]) -> str:
    """``CUDA_VERSION=13.0.2, NV_CUDNN_VERSION=...``: the image's version variables the fingerprint recorded."""
    return ", ".join(f"{k}={env[k]}" for k in _IMAGE_VARS if env.get(k))


def harness_words(f: MachineFacts) -> str | None:
    """The versions of the libraries the harness itself ran on (fingerprint ``harness.libraries``): its wheel's
    requirements, then the optional ones with what uses them, then any other an older harness recorded."""
    got = f.harness.libraries
    if not got:
        return None

    def one(k: str) -> str:
        v = got.get(k)
        return f"{k} {v}" if isinstance(v, str) else f"{k} not installed"

    needed = [one(k) for k in HARNESS_REQUIRES if k in got]
    extra = [f"{one(k)} ({why})" for k, why in HARNESS_OPTIONAL.items() if k in got]
    other = [one(k) for k in sorted(got) if k not in HARNESS_LIBRARIES]
    parts = [f"requirements: {', '.join(needed)}"] if needed else []
    parts += [f"optional: {', '.join(extra)}"] if extra else []
    parts += [f"also recorded: {', '.join(other)}"] if other else []
    return text("The harness's own libraries, " + "; ".join(parts))


def _enforced(nv: Nvml) -> str:
    """``, enforced X W`` where NVML recorded the limit the board enforces, and the highest it accepts."""
    said = f", enforced {nv.power_enforced_limit_w:g} W" if nv.power_enforced_limit_w else ""
    return said + (f", board maximum {nv.power_max_limit_w:g} W" if nv.power_max_limit_w else "")


def _app_clock(nv: Nvml) -> str:
    """``; SM application clock X MHz (its default)``, or where it differs from its default (set by someone)."""
    app, default = nv.sm_clock_app_mhz, nv.sm_clock_app_default_mhz
    if not app:
        return ""
    if app == default:
        return f"; SM application clock {app:g} MHz (its default)"
    if not default:
        return f"; SM application clock {app:g} MHz (its default not read)"
    return f"; SM application clock {app:g} MHz, set away from its default {default:g} MHz"


def install_words(f: MachineFacts) -> str | None:
    """How torch was installed (fingerprint ``software.torch.install``), when recorded."""
    got = f.torch_install
    if not got:
        return None
    by = got.get("installer") or "an unknown installer"
    tags = got.get("wheel_tags") or []
    wheel = f"a wheel tagged {', '.join(map(str, tags))}" if tags else "no wheel tag"
    url = got.get("direct_url")
    src = f"from {url}" if url else "from a package index the installer did not record (no direct_url.json)"
    said = f"torch installed by {by}, {wheel}, {src}, in {got.get('location') or '-'}"
    version = got.get("version")
    if isinstance(version, str):
        said += f"; its metadata version {version}"
        if "+" not in version and str(f.torch_version or "").split("+", 1)[0] == version:
            said += " has no local tag, as PyPI's wheels have (PyPI takes none)"
    digest = got.get("record_sha256")
    if isinstance(digest, str):
        said += f"; sha256 of this install's RECORD (its files' hashes) {digest[:16]}…"
    return said


def _span(values: Sequence[Any], unit: str) -> str:
    nums = sorted(float(v) for v in values if isinstance(v, int | float))
    if not nums:
        return f"- {unit}".strip()
    lo, hi = f"{nums[0]:.4g}", f"{nums[-1]:.4g}"
    return f"{lo} {unit}" if lo == hi else f"{lo}-{hi} {unit}"


def _befores(d: Artifact) -> list[Mapping[str, Any]]:
    """The monitor's readings just before each block of a repro's timed rounds (each distinct one once)."""
    out: list[Mapping[str, Any]] = []
    for v in d.variants:
        mon = v.gpu_monitor
        got = mon.get("before") if isinstance(mon, Mapping) else None
        if isinstance(got, Mapping) and got not in out:
            out.append(got)
    return out


def run_start_words(docs: Sequence[Artifact]) -> str | None:
    """The GPU before the run's first repro (fingerprint ``gpu.state_at_run_start``), as NVML read it."""
    st = next((d.machine.gpu_at_run_start for d in docs if d.machine.gpu_at_run_start), None)
    if not st:
        return None
    pids = st.get("compute_pids")
    procs = (
        "no compute process"
        if pids == []
        else f"{len(pids)} compute process(es)"
        if isinstance(pids, list)
        else "compute processes not read"
    )
    util = st.get("utilization_gpu_pct")
    said = [
        *_readings([st]),
        f"utilization {util}%" if isinstance(util, int | float) else "utilization not read",
        procs,
    ]
    events = st.get("clocks_event_reasons")
    if isinstance(events, list):
        said.append(f"clock events: {', '.join(map(str, events))}" if events else "no clock events")
    return f"GPU before the run's first repro ({st.get('taken_utc') or 'time not recorded'}): {', '.join(said)}"


def _readings(states: Sequence[Mapping[str, Any]]) -> list[str]:
    """Power, temperature and SM clock over NVML readings: each one value, or its range."""
    return [
        f"power {_span([st.get('power_w') for st in states], 'W')}",
        f"temperature {_span([st.get('temperature_c') for st in states], 'C')}",
        f"SM clock {_span([st.get('sm_clock_mhz') for st in states], 'MHz')}",
    ]


def _state_words(states: Sequence[tuple[str, Mapping[str, Any]]], where: str) -> list[str]:
    """Ranges of power, temperature and SM clock over the repros, and which repros had clock events."""
    parts = _readings([st for _, st in states])
    events = list(
        dict.fromkeys(
            f"{rid}: {', '.join(st['clocks_event_reasons'])}" for rid, st in states if st.get("clocks_event_reasons")
        )
    )
    parts.append(f"clock events {where}: {'; '.join(events)}" if events else f"no clock events {where}")
    return parts


def state_line(docs: Sequence[Artifact]) -> str:
    """The GPU's state as one line: before the run's first repro, just before each block of timed rounds
    (its monitor's first reading), then when each repro's fingerprint was taken, after the measurement;
    ranges over the repros, and by name any repro with other compute processes or the clocks held down."""
    before = [(d.repro.id, b) for d in docs for b in _befores(d)]
    states = [(d.repro.id, d.machine.gpu_state) for d in docs if d.machine.gpu_state]
    said: list[str] = [start] if (start := run_start_words(docs)) else []
    if before:
        said.append("GPU state just before each block of timed rounds: " + ", ".join(_state_words(before, "then")))
    if states:
        crowded = [
            f"{rid} ({len(st['compute_pids'])})"
            for rid, st in states
            if isinstance(st.get("compute_pids"), list) and len(st["compute_pids"]) > 1
        ]
        procs = (
            f"more than one compute process in {', '.join(crowded)}"
            if crowded
            else "no compute process but the repro's own (NVML's view from this container)"
        )
        said.append(
            "when each repro's fingerprint was taken, after its measurement: "
            + ", ".join([*_state_words(states, "then"), procs])
        )
    if not said:
        return "GPU state: not recorded."
    # nvmlDeviceGetPowerUsage's documented behaviour, so a reader knows what a watt figure here is.
    power = " NVML's power readings are its power usage: a 1 s average on GPUs after the A100, per NVML's docs."
    return text("; ".join(said) + ". " + during_measurement(docs) + power)
