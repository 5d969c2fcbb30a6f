"""solve-512-cliff: the seed's own experiment, re-run as posted beside the paired rounds.

The seed times ``torch.linalg.solve_ex`` on a batch of 64 float32 systems (one right-hand side) at
n=511 and n=512 under the default backend and cuSOLVER: one untimed call, then one call between two
CUDA events. One call per point, so it has no CI; its ratio is not scaled by the LU work.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

SEED_BATCH = 64


def seed_snippet(torch: Any, backends: Sequence[str], sizes: Sequence[int], batch: int = SEED_BATCH) -> dict[str, Any]:
    """Per backend: the milliseconds of one timed call at each size and the last over the first."""
    out: dict[str, Any] = {"batch": batch, "sizes": list(sizes), "warmup_calls": 1, "timed_calls": 1, "backends": {}}
    saved = torch.backends.cuda.preferred_linalg_library()
    try:
        for backend in backends:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the flag's "experimental" warning is recorded elsewhere
                torch.backends.cuda.preferred_linalg_library(backend)
            ms: dict[str, float] = {}
            for n in sizes:
                a = torch.randn(batch, n, n, device="cuda")
                b = torch.randn(batch, n, 1, device="cuda")
                torch.linalg.solve_ex(a, b)
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                torch.linalg.solve_ex(a, b)
                end.record()
                torch.cuda.synchronize()
                ms[str(n)] = float(start.elapsed_time(end))
                del a, b
            first, last = ms[str(sizes[0])], ms[str(sizes[-1])]
            out["backends"][backend] = {"ms": ms, "ratio": last / first if first > 0 else None}
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.backends.cuda.preferred_linalg_library(saved)
    return out


def seed_clause(seed: Mapping[str, Any], medians: Mapping[str, float] | None = None) -> str:
    """The seed's snippet as re-run here, in one clause (no full stop); "" when it did not run. ``medians``:
    our variants' median seconds by name (``<backend>_b<batch>_n<n>``): the same points of our rounds are set
    beside the snippet's single calls, which is where the two ratios part."""
    runs = seed.get("backends")
    sizes = seed.get("sizes") or []
    if not isinstance(runs, Mapping) or not runs or len(sizes) != 2:
        return ""
    said, ours = [], []
    for backend, got in runs.items():
        ms = got.get("ms") or {} if isinstance(got, Mapping) else {}
        lo, hi = ms.get(str(sizes[0])), ms.get(str(sizes[1]))
        if isinstance(lo, float) and isinstance(hi, float) and lo > 0:
            said.append(f"{backend} {hi / lo:.2f}x ({lo:.2f} -> {hi:.2f} ms)")
            a, b = ((medians or {}).get(f"{backend}_b{seed.get('batch')}_n{n}") for n in sizes)
            if isinstance(a, float) and isinstance(b, float) and a > 0 and b > 0:
                ours.append(
                    f"{backend} {b / a:.2f}x ({a * 1e3:.2f} -> {b * 1e3:.2f} ms; the snippet's calls "
                    f"{lo / (a * 1e3) - 1:+.0%}, {hi / (b * 1e3) - 1:+.0%} from them)"
                )
    if not said:
        return ""
    beside = f"; our rounds' medians at the same sizes (randn + n*I, no row swaps): {', '.join(ours)}" if ours else ""
    return (
        f"the seed's own snippet (batch {seed.get('batch')}, n={sizes[0]} vs {sizes[1]}, one call each, not "
        f"work-scaled, no CI) gave {', '.join(said)} here{beside}"
    )
