"""NVML seam: clocks, throttle reasons, processes and ECC, imported lazily and never fatal."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any

# Reasons that mean the GPU ran slower than it could while we measured. "GPU idle"
# and "applications clocks setting" are normal states, not throttling.
_REASONS = {
    0x1: ("gpu_idle", False),
    0x2: ("applications_clocks_setting", False),
    0x4: ("sw_power_cap", True),
    0x8: ("hw_slowdown", True),
    0x10: ("sync_boost", False),
    0x20: ("sw_thermal_slowdown", True),
    0x40: ("hw_thermal_slowdown", True),
    0x80: ("hw_power_brake_slowdown", True),
    0x100: ("display_clock_setting", False),
}
THROTTLING = frozenset(name for name, bad in _REASONS.values() if bad)


def decode_reasons(mask: int) -> list[str]:
    """Names of the clocks-event reasons set in an NVML bitmask."""
    names = [name for bit, (name, _) in _REASONS.items() if mask & bit]
    unknown = mask & ~sum(_REASONS)
    if unknown:
        names.append(f"unknown_0x{unknown:x}")
    return names


def _pynvml() -> Any:
    import pynvml  # from nvidia-ml-py; imported here so CPU-only commands never load it

    pynvml.nvmlInit()
    return pynvml


def _safe(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception:  # a query the driver does not support reads as null
        return None


def handle_for(pci_bus_id: str | None = None, index: int = 0) -> tuple[Any, Any]:
    """(pynvml, handle) for the GPU torch uses, matched by PCI bus id when known."""
    nv = _pynvml()
    if pci_bus_id:
        try:
            return nv, nv.nvmlDeviceGetHandleByPciBusId(pci_bus_id.encode())
        except Exception:  # fall back to the index below
            pass
    return nv, nv.nvmlDeviceGetHandleByIndex(index)


def snapshot(nv: Any, h: Any) -> dict[str, Any]:
    """One reading of the volatile state: clocks, reasons, temperature, power, processes."""
    mask = _safe(lambda: nv.nvmlDeviceGetCurrentClocksEventReasons(h))
    if mask is None:
        mask = _safe(lambda: nv.nvmlDeviceGetCurrentClocksThrottleReasons(h))
    procs = _safe(lambda: nv.nvmlDeviceGetComputeRunningProcesses(h))
    return {
        "sm_clock_mhz": _safe(lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
        "mem_clock_mhz": _safe(lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)),
        "clocks_event_reasons": decode_reasons(mask) if mask is not None else None,
        "temperature_c": _safe(lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
        "power_w": _safe(lambda: nv.nvmlDeviceGetPowerUsage(h) / 1000.0),
        "compute_pids": sorted(p.pid for p in procs) if procs is not None else None,
        "ecc_volatile_uncorrected": _safe(
            lambda: nv.nvmlDeviceGetTotalEccErrors(h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC)
        ),
    }


def run_start() -> dict[str, Any]:
    """Every GPU's state before a run touches any (its uuid without NVML's ``GPU-``), with its
    utilization over NVML's last sample period; ``{"error": ...}`` where NVML cannot be read."""
    import datetime

    try:
        nv = _pynvml()
        count = nv.nvmlDeviceGetCount()
    except Exception as exc:  # no driver, no nvidia-ml-py: nothing to read
        return {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
    gpus: dict[str, Any] = {}
    for i in range(count):
        h = _safe(functools.partial(nv.nvmlDeviceGetHandleByIndex, i))
        uuid = _safe(functools.partial(nv.nvmlDeviceGetUUID, h)) if h is not None else None
        if uuid is None:
            continue
        uuid = (uuid.decode() if isinstance(uuid, bytes) else str(uuid)).removeprefix("GPU-")
        util = _safe(functools.partial(nv.nvmlDeviceGetUtilizationRates, h))
        gpus[uuid] = {**snapshot(nv, h), "utilization_gpu_pct": util.gpu if util is not None else None}
    return {"taken_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "gpus": gpus}


class Monitor:
    """Polls NVML on a thread while a variant runs; summarises clocks and throttling.

    Polling (every ``period_s``) rather than only reading before/after catches a
    power-cap excursion in the middle of a measurement.
    """

    def __init__(self, nv: Any, h: Any, own_pid: int, period_s: float | None = 0.05) -> None:
        self._nv, self._h, self._pid, self._period = nv, h, own_pid, period_s
        self._stop = threading.Event()
        self._readings: list[dict[str, Any]] = []
        self._thread = threading.Thread(target=self._loop, daemon=True) if period_s is not None else None
        self.before: dict[str, Any] = {}
        self.after: dict[str, Any] = {}
        self._t0 = time.monotonic()

    def _loop(self) -> None:
        while not self._stop.wait(self._period or 0.05):
            self._readings.append({**snapshot(self._nv, self._h), "t": time.monotonic() - self._t0})

    def poll(self, arm: str | None = None) -> None:
        """One light reading (SM clock, clocks-event reasons, power), for a monitor without a thread.

        Paired timing calls this right after each arm's block of a round, on the measuring
        thread, so that nothing runs beside the timed work (a polling thread was one of the
        harness's own sources of variance on the H200) and each reading is the state the GPU
        was in when ``arm``'s block finished: ``summary(arm)`` keeps that arm's readings only.
        """
        mask = _safe(lambda: self._nv.nvmlDeviceGetCurrentClocksEventReasons(self._h))
        if mask is None:
            mask = _safe(lambda: self._nv.nvmlDeviceGetCurrentClocksThrottleReasons(self._h))
        self._readings.append(
            {
                "sm_clock_mhz": _safe(lambda: self._nv.nvmlDeviceGetClockInfo(self._h, self._nv.NVML_CLOCK_SM)),
                "clocks_event_reasons": decode_reasons(mask) if mask is not None else None,
                "power_w": _safe(lambda: self._nv.nvmlDeviceGetPowerUsage(self._h) / 1000.0),
                "compute_pids": None,
                "arm": arm,
                "t": time.monotonic() - self._t0,
            }
        )

    def __enter__(self) -> Monitor:
        self._t0 = time.monotonic()
        self.before = snapshot(self._nv, self._h)
        if self._thread is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        self.after = snapshot(self._nv, self._h)

    def summary(self, arm: str | None = None) -> dict[str, Any]:
        """Clocks, power and throttling over the whole monitored span, or, with ``arm``, over the
        polls taken after that arm's blocks only (``before`` and ``after`` stay the span's ends:
        they were read before and after every arm, so they belong to none)."""
        mine = [r for r in self._readings if arm is None or r.get("arm") == arm]
        # An arm's clock range is its own polls'; without polls it falls back to the span's ends.
        readings = mine if arm is not None and mine else [self.before, *mine, self.after]
        clocks = [r["sm_clock_mhz"] for r in readings if r.get("sm_clock_mhz") is not None]
        polled = sorted(r["sm_clock_mhz"] for r in mine if r.get("sm_clock_mhz") is not None)
        watts = sorted(r["power_w"] for r in mine if r.get("power_w") is not None)
        reasons: set[str] = set()
        others: set[int] = set()
        for r in readings:
            reasons.update(r.get("clocks_event_reasons") or ())
        for r in [self.before, *mine, self.after]:  # polls read no processes: the ends say who was there
            others.update(p for p in (r.get("compute_pids") or ()) if p != self._pid)
        ecc = [self.before.get("ecc_volatile_uncorrected"), self.after.get("ecc_volatile_uncorrected")]
        out = {
            "before": self.before,
            "after": self.after,
            "polls": len(mine),
            "sm_clock_min_mhz": min(clocks) if clocks else None,
            "sm_clock_max_mhz": max(clocks) if clocks else None,
            # While the work ran: the median poll, or the reading right after a variant too
            # short for any poll (the GPU is still at its working clock then).
            "sm_clock_during_mhz": polled[len(polled) // 2] if polled else self.after.get("sm_clock_mhz"),
            "power_during_w": watts[len(watts) // 2] if watts else None,
            "power_max_w": watts[-1] if watts else None,
            "reasons_seen": sorted(reasons),
            "throttled": sorted(reasons & THROTTLING),
            "other_pids": sorted(others),
            "ecc_new_errors": (ecc[1] - ecc[0]) if ecc[0] is not None and ecc[1] is not None else None,
        }
        # Every poll, in order: seconds since the span began, SM MHz, watts, the clocks-event reasons. A paired
        # timing polls once after each arm's block, so an arm's i-th poll follows its i-th round.
        out["series"] = [
            [
                round(r["t"], 3) if isinstance(r.get("t"), float) else None,
                r.get("sm_clock_mhz"),
                round(r["power_w"], 1) if isinstance(r.get("power_w"), float) else r.get("power_w"),
                "|".join(r.get("clocks_event_reasons") or ()),
            ]
            for r in mine
        ]
        if arm is not None:
            out["arm"] = arm  # these numbers are this arm's polls, not the whole group's
        return out


def static_info(nv: Any, h: Any) -> dict[str, Any]:
    """The slow-changing facts for the fingerprint: names, limits, link, modes."""

    def text(v: Any) -> Any:
        return v.decode() if isinstance(v, bytes) else v

    mem = _safe(lambda: nv.nvmlDeviceGetMemoryInfo(h))
    mig = _safe(lambda: nv.nvmlDeviceGetMigMode(h))
    return {
        "name": _safe(lambda: text(nv.nvmlDeviceGetName(h))),
        "driver_version": _safe(lambda: text(nv.nvmlSystemGetDriverVersion())),
        "cuda_driver_version": _safe(lambda: nv.nvmlSystemGetCudaDriverVersion_v2()),
        "board_part_number": _safe(lambda: text(nv.nvmlDeviceGetBoardPartNumber(h))),
        "pci_device_id": _safe(lambda: f"0x{nv.nvmlDeviceGetPciInfo(h).pciDeviceId:08x}"),
        "pci_subsystem_id": _safe(lambda: f"0x{nv.nvmlDeviceGetPciInfo(h).pciSubSystemId:08x}"),
        "vbios_version": _safe(lambda: text(nv.nvmlDeviceGetVbiosVersion(h))),
        "memory_total_bytes": mem.total if mem is not None else None,
        "power_limit_w": _safe(lambda: nv.nvmlDeviceGetPowerManagementLimit(h) / 1000.0),
        "power_default_limit_w": _safe(lambda: nv.nvmlDeviceGetPowerManagementDefaultLimit(h) / 1000.0),
        # The limit the board enforces: the lower of its own and any set from outside (a host, a hypervisor).
        "power_enforced_limit_w": _safe(lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0),
        # The highest limit the board accepts: its form factor's maximum, above any limit set on it.
        "power_max_limit_w": _safe(lambda: nv.nvmlDeviceGetPowerManagementLimitConstraints(h)[1] / 1000.0),
        "sm_clock_max_mhz": _safe(lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM)),
        "mem_clock_max_mhz": _safe(lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_MEM)),
        # Application clocks differing from their default mean someone set them (nvidia-smi -ac).
        "sm_clock_app_mhz": _safe(lambda: nv.nvmlDeviceGetApplicationsClock(h, nv.NVML_CLOCK_SM)),
        "sm_clock_app_default_mhz": _safe(lambda: nv.nvmlDeviceGetDefaultApplicationsClock(h, nv.NVML_CLOCK_SM)),
        "persistence_mode": _safe(lambda: bool(nv.nvmlDeviceGetPersistenceMode(h))),
        "ecc_mode": _safe(lambda: bool(nv.nvmlDeviceGetEccMode(h)[0])),
        "mig_mode": bool(mig[0]) if mig is not None else None,
        "compute_mode": _safe(lambda: nv.nvmlDeviceGetComputeMode(h)),
        # NVML_GPU_VIRTUALIZATION_MODE_*: 0 none (bare metal), 1 passthrough, 2 vGPU, 3 host vGPU, 4 host vSGA.
        "virtualization_mode": _safe(lambda: nv.nvmlDeviceGetVirtualizationMode(h)),
        "pcie_gen": _safe(lambda: nv.nvmlDeviceGetCurrPcieLinkGeneration(h)),
        "pcie_gen_max": _safe(lambda: nv.nvmlDeviceGetMaxPcieLinkGeneration(h)),
        "pcie_width": _safe(lambda: nv.nvmlDeviceGetCurrPcieLinkWidth(h)),
        "pcie_width_max": _safe(lambda: nv.nvmlDeviceGetMaxPcieLinkWidth(h)),
    }


def compute_arch() -> str | None:
    """``sm_XY`` of this machine's GPUs when NVML sees at least one and all share it (so whichever of
    them a process uses has it); None without NVML, without a GPU, or with mixed architectures."""
    try:
        nv = _pynvml()
        found = {
            tuple(nv.nvmlDeviceGetCudaComputeCapability(nv.nvmlDeviceGetHandleByIndex(i)))
            for i in range(nv.nvmlDeviceGetCount())
        }
    except Exception:  # no driver, no library, or a failing query: nothing to build ahead for
        return None
    if len(found) != 1:
        return None
    major, minor = next(iter(found))
    return f"sm_{major}{minor}"
