"""graph-memset's 4-byte memset through cuda-bindings, and the seed's torch program re-coded, run in the repro's
process after its rounds.

The seed's torch form captures 1000 ops into one CUDA graph, each op a 4-byte cudaMemsetAsync
(through cuda-bindings) or ``z.zero_()`` on a one-element float tensor, then ``torch.matmul(x, w.T)``
on a 512x1024 and a 1024x1024 fp32 tensor; it warms up with 30 ops on a side stream, replays the
graph once (its first replay after capture), and times that replay with a host clock around it and a device
synchronize. Memset
first, then zero_. One replay per form, so it has no CI.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

SEED_OPS = 1000
SEED_WARMUP_OPS = 30
SEED_HOW = (
    "1000 ops in one graph, each a 4-byte memset or zero_() then a 512x1024 @ (1024x1024).T fp32 matmul, "
    "one replay timed by a host clock"
)

# Why the seed's torch program and the harness's own pairing of the same ops ("(memset+mm)/(fill+mm) (torch
# graph)") can disagree, even in sign: what each does differently.
SEED_TORCH_WHY = (
    "the seed's: each graph's first replay after capture, one per form, host clock, memset form first (1 us per op "
    "is 3% of it), matmul by w.T into a new output; ours: paired rounds of back-to-back warm replays, CUDA events, "
    "matmul(a, b, out=c); which difference turns the sign is not tested"
)


def memset_op(flag: Any) -> tuple[Callable[[], None] | None, str | None]:
    """A 4-byte cudaMemsetAsync on ``flag`` through cuda-bindings, or (None, why not).

    The stream is read at call time: inside ``torch.cuda.graph`` torch's current stream
    is the capture stream, so the memset becomes a graph node there.
    """
    import torch

    try:
        from cuda.bindings import runtime as cudart
    except Exception as exc:  # missing or broken cuda-bindings: only the memset variants skip
        return None, f"cuda-bindings is not importable ({type(exc).__name__}: {exc})"
    success = cudart.cudaError_t.cudaSuccess
    try:
        # cuda-bindings keeps its own notion of the current device; point it at torch's.
        (err,) = cudart.cudaSetDevice(flag.device.index)
    except Exception as exc:  # e.g. it cannot load a CUDA runtime that fits the driver
        return None, f"cuda-bindings cannot reach the GPU ({type(exc).__name__}: {exc})"
    if err != success:
        return None, f"cudaSetDevice through cuda-bindings returned {getattr(err, 'name', err)}, expected cudaSuccess"
    ptr = flag.data_ptr()

    def memset() -> None:
        (err,) = cudart.cudaMemsetAsync(ptr, 0, 4, torch.cuda.current_stream().cuda_stream)
        if err != success:
            name = getattr(err, "name", err)
            raise RuntimeError(f"cudaMemsetAsync(ptr, 0, 4, stream) returned {name}, expected cudaSuccess")

    return memset, None


def seed_torch_program(
    torch: Any, memset_of: Callable[[Any], Callable[[], None] | None], ops: int = SEED_OPS
) -> dict[str, Any]:
    """Milliseconds of one replay per form (memset, then zero_), and memset over zero_.
    ``memset_of(tensor)`` gives the 4-byte cudaMemsetAsync on that tensor, or None without one."""
    out: dict[str, Any] = {"ops": ops, "how": SEED_HOW, "ms": {}}
    for form in ("memset", "zero_"):
        z = torch.zeros(1, device="cuda")
        x = torch.randn(512, 1024, device="cuda")
        w = torch.randn(1024, 1024, device="cuda")
        clear = memset_of(z) if form == "memset" else z.zero_
        if clear is None:
            out["error"] = "cuda-bindings could not issue the memset"
            return out

        def op(clear: Callable[..., Any] = clear, x: Any = x, w: Any = w) -> None:
            clear()
            torch.matmul(x, w.T)

        graph, side = torch.cuda.CUDAGraph(), torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(SEED_WARMUP_OPS):
                op()
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(graph):
            for _ in range(ops):
                op()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        graph.replay()
        torch.cuda.synchronize()
        out["ms"][form] = (time.perf_counter() - t0) * 1e3
        del graph, z, x, w
    memset, zero = out["ms"]["memset"], out["ms"]["zero_"]
    out["ratio"] = memset / zero if zero > 0 else None
    return out
