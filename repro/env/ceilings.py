"""Measured ceilings of this GPU: copy bandwidth and fp32 / tf32 / bf16 matrix rates."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from repro.core.fsio import once_per_run
from repro.env import nvml

# In a hidden folder of the run: not an artifact, and no `*.json` glob of the run folder meets it.
CEILINGS_FILE = ".cache/ceilings.json"
# A matrix this size keeps every SM busy for milliseconds in each precision, far
# past launch overhead; a 1 GiB copy is ~20x the largest L2 (H200: 60 MB).
_MATMUL_N = 8192
_COPY_BYTES = 1 << 30
_REPEATS = 10


def _best_seconds(fn: Any, repeats: int = _REPEATS) -> float:
    """Fastest of ``repeats`` event-timed calls after warm-up: a ceiling is the best the GPU did."""
    import torch

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(repeats):
        start.record()
        fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3)
    return best


def measure() -> dict[str, Any]:
    """Run the four probes; one that fails keeps its key with a null value and the error."""
    import torch

    out: dict[str, Any] = {}
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.get_float32_matmul_precision())
    n = _MATMUL_N

    def matmul(dtype: Any, allow_tf32: bool) -> float:
        torch.backends.cuda.matmul.allow_tf32 = allow_tf32
        a = torch.randn(n, n, device="cuda", dtype=dtype)
        b = torch.randn(n, n, device="cuda", dtype=dtype)
        secs = _best_seconds(lambda: a @ b)
        return 2.0 * n**3 / secs / 1e12

    def copy() -> float:
        src = torch.empty(_COPY_BYTES, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        secs = _best_seconds(lambda: dst.copy_(src))
        return 2.0 * _COPY_BYTES / secs / 1e9  # bytes read plus bytes written

    probes = {
        "copy": (copy, "GB/s", f"device-to-device copy of {_COPY_BYTES >> 20} MiB, read+write bytes"),
        "fp32": (lambda: matmul(torch.float32, False), "TFLOP/s", f"{n}^3 fp32 matmul, TF32 off"),
        "tf32": (lambda: matmul(torch.float32, True), "TFLOP/s", f"{n}^3 fp32 matmul, TF32 on"),
        "bf16": (lambda: matmul(torch.bfloat16, False), "TFLOP/s", f"{n}^3 bf16 matmul"),
    }
    gpu = _nvml()
    try:
        for key, (fn, unit, how) in probes.items():
            try:
                out[key] = {"value": fn(), "unit": unit, "method": how, "error": None}
            except Exception as exc:  # one failed probe leaves the others standing
                out[key] = {"value": None, "unit": unit, "method": how, "error": f"{type(exc).__name__}: {exc}"}
            if gpu is not None:  # the clock after the probe's last repeat, and why it was held there
                with contextlib.suppress(Exception):  # a bad reading costs the reading, not the ceilings
                    state = nvml.snapshot(*gpu)
                    out[key].update(
                        sm_clock_after_mhz=state["sm_clock_mhz"], clock_events_after=state["clocks_event_reasons"]
                    )
            torch.cuda.empty_cache()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved[0]
        torch.set_float32_matmul_precision(saved[1])
    return out


def _nvml() -> tuple[Any, Any] | None:
    """(pynvml, handle) of the GPU torch uses, or None where NVML cannot be had."""
    import torch

    from repro.env.fingerprint import pci_bus_id

    try:
        index = torch.cuda.current_device()
        return nvml.handle_for(pci_bus_id(torch.cuda.get_device_properties(index)), index)
    except Exception:  # no NVML (or no driver library): the ceilings go without the clock readings
        return None


def for_run(run_dir: Path) -> dict[str, Any]:
    """Ceilings measured once per run: the first repro of a run measures, the rest read the file."""
    return once_per_run(run_dir / CEILINGS_FILE, measure)
