"""How long torch.profiler sessions take in a fresh process: the first against the next ones.

python tools/profiler-first-session.py [SESSIONS] [ACTIVITIES]     (ACTIVITIES: cpu, cuda or both, the default)

Prints one line per session: seconds to enter, to run one small matmul under it, to exit, to
export the Chrome trace, and the trace's size. Run it twice in a row to see whether a first
session's cost is paid once per process or once per machine.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

import torch
from torch.profiler import ProfilerActivity, profile


def main(sessions: int, activities: str) -> None:
    kinds = {
        "cpu": [ProfilerActivity.CPU],
        "cuda": [ProfilerActivity.CUDA],
        "both": [ProfilerActivity.CPU, ProfilerActivity.CUDA],
    }[activities]
    t = time.perf_counter()
    a = torch.randn(1024, 1024, device="cuda")
    torch.cuda.synchronize()
    print(f"pid {os.getpid()} ({activities}): CUDA init and first tensor {time.perf_counter() - t:.3f} s")
    for i in range(sessions):
        t0 = time.perf_counter()
        prof = profile(activities=kinds)
        prof.__enter__()
        t1 = time.perf_counter()
        (a @ a).sum().item()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        prof.__exit__(None, None, None)
        t3 = time.perf_counter()
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.json")
            prof.export_chrome_trace(path)
            size = os.path.getsize(path)
        t4 = time.perf_counter()
        print(
            f"session {i}: enter {t1 - t0:.3f} s, work {t2 - t1:.3f} s, exit {t3 - t2:.3f} s, "
            f"export {t4 - t3:.3f} s ({size} bytes)"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3, sys.argv[2] if len(sys.argv) > 2 else "both")
