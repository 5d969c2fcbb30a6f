"""Synthetic fused-adam-capturable variants for tests/unit/repros/test_repro_fused_adam*.py: the two
forms of a backend timed in paired rounds under a common drift, or as plain samples."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Literal

from helpers import TimingMethod, timing_for

from repro.core.spec import VariantResult

# A slow drift of the GPU over the rounds (+-22.5%, median 1), the same for both forms in a round.
DRIFT = [1 + 0.05 * (((i * 7) % 10) - 4.5) for i in range(30)]


def _samples(center: float, n: int = 21) -> list[float]:
    return [center * (1 + 0.004 * (k - n // 2)) for k in range(n)]  # +-4% around center, median = center


def _rounds(center: float, salt: int, drift: Sequence[float] = DRIFT) -> list[float]:
    """Paired round values: the common drift times a little jitter that differs between variants."""
    return [center * d * (1 + 0.003 * (((i + salt) % 3) - 1)) for i, d in enumerate(drift)]


def _variant(
    name: str,
    step_s: float,
    kernel_s: float | None = None,
    device: str = "cuda",
    status: Literal["ok", "skipped", "error"] = "ok",
    paired: bool = True,
) -> VariantResult:
    """One form of one backend. ``paired``: step and kernel times in rounds shared with the
    backend's other form (as run() records them); else plain samples (the older two-sample path)."""
    if status != "ok":
        return VariantResult(name=name, label=name, config={}, status=status, reason="not here")
    backend = name.rsplit("_", 1)[0].removesuffix("_capturable")
    salt = 1 if name.endswith("_capturable") else 0
    method: TimingMethod = "cuda_events" if device == "cuda" else "perf_counter"
    extra: dict[str, Any] = {}
    if paired and not name.endswith("_graph"):
        rounds = _rounds(step_s, salt)
        timing = dataclasses.replace(timing_for(rounds, method=method), group=backend, rounds=tuple(rounds))
        if kernel_s is not None:
            extra = {"kernel_rounds_s": _rounds(kernel_s, salt), "kernel_group": f"{backend}_kernels"}
    else:
        timing = timing_for(_samples(step_s), method=method, calls_per_sample=1, budget_s=5.0)
        if kernel_s is not None:
            extra = {"kernel_samples_s": _samples(kernel_s, 30)}
    return VariantResult(name=name, label=name, config={}, status="ok", device=device, timing=timing, extra=extra)
