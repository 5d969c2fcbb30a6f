"""What ran on the device: kernel tables and per-call device time from torch.profiler's Chrome
trace, and a profiler session that keeps Kineto's chatter off stderr."""

from __future__ import annotations

import bisect
import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from repro.core.results import Kernel

# Kernel categories in a torch.profiler Chrome trace that are device work.
DEVICE_CATS = ("kernel", "gpu_memset", "gpu_memcpy")

__all__ = [
    "DEVICE_CATS",
    "chrome_trace",
    "kernels_from_trace",
    "per_call_device_time",
    "profiler_session",
    "quiet_profiler_stderr",
]


def kernels_from_trace(trace: Mapping[str, Any], device: str, calls: int) -> list[Kernel]:
    """Aggregate a Chrome trace into a kernel table.

    On CUDA the device categories are the kernels that ran. On CPU there are no
    kernels, so aten ops stand in, each charged only its self time (its duration
    minus the ops nested in it), which is where CPU work actually happened.
    """
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    if device == "cuda":
        picked = [(e.get("name", "?"), float(e.get("dur", 0.0))) for e in events if e.get("cat") in DEVICE_CATS]
    else:
        picked = _self_times([e for e in events if e.get("cat") == "cpu_op"])
    agg: dict[str, list[float]] = {}
    for name, dur in picked:
        row = agg.setdefault(name, [0, 0.0])
        row[0] += 1
        row[1] += dur
    table = [
        Kernel(name=n, count=int(c), total_us=t, mean_us=t / c, per_call=c / max(calls, 1)) for n, (c, t) in agg.items()
    ]
    return sorted(table, key=lambda k: -k.total_us)


def _self_times(ops: list[dict[str, Any]]) -> list[tuple[str, float]]:
    """(name, self time in us) of each op: its duration less that of its direct children."""
    out: list[tuple[str, float]] = []
    by_tid: dict[Any, list[dict[str, Any]]] = {}
    for e in ops:
        by_tid.setdefault(e.get("tid"), []).append(e)
    for evs in by_tid.values():
        evs.sort(key=lambda e: (e["ts"], -e.get("dur", 0)))
        stack: list[list[Any]] = []  # [end, name, dur, children_dur]
        for e in evs:
            dur = float(e.get("dur", 0.0))
            while stack and e["ts"] >= stack[-1][0]:
                top = stack.pop()
                out.append((top[1], max(top[2] - top[3], 0.0)))
            if stack:
                stack[-1][3] += dur
            stack.append([e["ts"] + dur, e.get("name", "?"), dur, 0.0])
        out.extend((top[1], max(top[2] - top[3], 0.0)) for top in stack)
    return out


def per_call_device_time(trace: Mapping[str, Any], calls: int, match: Callable[[str], bool]) -> list[float]:
    """Seconds of matching device work per profiler range ``gpu_repro_call_<i>``, i < ``calls``.

    A kernel belongs to the last range that started before it did: every call is
    followed by a synchronize, so no kernel of one call starts after the next begins.
    """
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    # Untimed warm-up calls run in ranges ``gpu_repro_warm_<i>``: they end the previous
    # call's range, and their own kernels count for nothing (index -1).
    starts = sorted(
        (e["ts"], int(e["name"].rsplit("_", 1)[1]) if e["name"].startswith("gpu_repro_call_") else -1)
        for e in events
        if str(e.get("name", "")).startswith(("gpu_repro_call_", "gpu_repro_warm_"))
        and e.get("cat") == "user_annotation"
    )
    stamps = [ts for ts, _ in starts]
    totals = [0.0] * calls
    for e in events:
        if e.get("cat") in DEVICE_CATS and match(e.get("name", "")):
            k = bisect.bisect_right(stamps, e["ts"]) - 1
            if k >= 0 and 0 <= starts[k][1] < calls:
                totals[starts[k][1]] += float(e.get("dur", 0.0)) / 1e6
    return totals


# Kineto (torch.profiler's native backend) writes these from C++ straight to fd 2 at every session
# start and stop ("USDT:<date> <time> <pid>:<tid> SyncActivityProfilerHandler.cpp:52] profiler_start",
# and "STAGE: ..."), whatever KINETO_LOG_LEVEL says (0-5 tried with torch 2.13). They tell a user nothing.
_KINETO_CHATTER = re.compile(rb"^(USDT|STAGE):\S+ \S+ \d+:\d+ \S+\.cpp:\d+\] ")


@contextlib.contextmanager
def quiet_profiler_stderr() -> Iterator[None]:
    """Hold back fd 2 around a profiler session; afterwards pass on everything but Kineto's chatter.

    Redirecting the file descriptor (not ``sys.stderr``) is what reaches native code. Anything
    else written meanwhile (a real warning or error) still reaches stderr, only later.
    """
    try:
        saved = os.dup(2)
    except OSError:  # no fd 2 to redirect: nothing would be printed anyway
        yield
        return
    with tempfile.TemporaryFile() as held:
        sys.stderr.flush()
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            kept = [ln for ln in held.read().splitlines(keepends=True) if not _KINETO_CHATTER.match(ln)]
            if kept:
                os.write(2, b"".join(kept))


def profiler_session(cuda: bool) -> Any:
    """A Kineto profiler session recording host ops and, when ``cuda``, device kernels:
    ``torch.autograd.profiler.profile``, the session ``torch.profiler.profile`` wraps.

    The harness opens it directly: ``torch.profiler.profile`` imports ``torch._inductor`` when it
    starts (to read one inductor setting the harness never uses), 4-6 s in a fresh process on
    the H200 (artifacts/reference/h200/evidence3/profiler-first-session.txt). Use it in a
    ``with`` block; the block's value has ``export_chrome_trace``.
    """
    from torch.autograd.profiler import profile

    return profile(use_device="cuda" if cuda else None, use_kineto=True)


def chrome_trace(prof: Any) -> bytes:
    """A finished profiler session as Chrome-trace JSON bytes (torch only writes it to a file)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        return path.read_bytes()
