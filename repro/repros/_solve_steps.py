"""solve-512-cliff's neighbouring steps: how the time moved between the sizes beside the cutoff, from the grid of
medians the run records (``extra["time_grid"]``), each step scaled by the LU's work as the headline is."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def _median(grid: Mapping[str, Any], backend: str, batch: int, n: int) -> float | None:
    point = grid.get(backend, {}).get(str(batch), {}).get(str(n), {})
    got = point.get("median_s") if isinstance(point, Mapping) and point.get("status") == "ok" else None
    return float(got) if isinstance(got, int | float) and got > 0 else None


def neighbour_steps(grid: Any, cliff_n: int, batches: Sequence[int]) -> str:
    """``Beside the cutoff, work-scaled t(n+1)/t(n) from the grid's medians (no CI): 510->511 default 1.00x, ...;
    512->513 default 1.10x, 1.14x, 1.11x, cusolver 1.11x, 1.11x, 1.11x (batches 16, 64, 128).``: the steps below
    and past the cutoff's own (n-2 -> n-1 and n -> n+1), per backend the grid timed, where every batch has both
    sizes; "" where no step has them."""
    if not isinstance(grid, Mapping):
        return ""
    said = []
    for lo in (cliff_n - 2, cliff_n):
        per = []
        for backend in grid:
            steps = [
                (b / a) * (lo / (lo + 1)) ** 3
                for batch in batches
                if (a := _median(grid, str(backend), batch, lo)) and (b := _median(grid, str(backend), batch, lo + 1))
            ]
            if steps and len(steps) == len(batches):
                per.append(f"{backend} {', '.join(f'{x:.2f}x' for x in steps)}")
        if per:
            said.append(f"{lo}->{lo + 1} {', '.join(per)}")
    if not said:
        return ""
    every = ", ".join(map(str, batches))
    return (
        f"Beside the cutoff, work-scaled t(n+1)/t(n) from the grid's medians (no CI): {'; '.join(said)} "
        f"(batches {every})."
    )
