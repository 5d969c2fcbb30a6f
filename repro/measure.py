"""Timing with adaptive sampling, kernel capture via torch.profiler, NVML monitoring per variant."""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro import stats
from repro.spec import Achieved, Kernel, Timing, VariantResult, Work

# CUDA events resolve ~0.5 us and a launch costs a few us, so a sample shorter
# than this would measure the harness. Calls are batched until a sample reaches it.
MIN_SAMPLE_S = 1e-3
MAX_CALLS_PER_SAMPLE = 10_000
# A distribution-free 95% CI on the median exists from n = 6; 20 keeps it a few
# order statistics wide, so one outlier cannot end sampling early.
MIN_SAMPLES = 20
# Kernel categories in a torch.profiler Chrome trace that are device work.
_DEVICE_CATS = ("kernel", "gpu_memset", "gpu_memcpy")


@dataclass(frozen=True)
class SamplingConfig:
    """When to stop sampling: CI target reached, time budget spent, or sample cap."""

    target_rel_ci: float = 0.01
    budget_s: float = 5.0
    warmup_s: float = 0.2
    min_samples: int = MIN_SAMPLES
    max_samples: int = 2000
    profile_iters: int = 3


def sample_adaptively(
    take: Callable[[], float], cfg: SamplingConfig, clock: Callable[[], float] = time.perf_counter
) -> tuple[list[float], str, float]:
    """Call ``take`` (one sample, seconds per call) until a stopping rule fires.

    Returns (samples, stop_reason, elapsed_s). The CI is checked every few
    samples, not each one: summarize sorts, and that should not dominate.
    """
    samples: list[float] = []
    t0 = clock()
    check_every = 1
    while True:
        samples.append(take())
        n = len(samples)
        elapsed = clock() - t0
        if n >= cfg.max_samples:
            return samples, "max_samples", elapsed
        if n >= cfg.min_samples and n % check_every == 0:
            if stats.summarize(samples).rel_ci_halfwidth <= cfg.target_rel_ci:
                return samples, "ci_target", elapsed
            check_every = max(1, n // 10)
        if elapsed >= cfg.budget_s and n >= cfg.min_samples:
            return samples, "time_budget", elapsed


# --------------------------------------------------------------------------- kernels


def kernels_from_trace(trace: Mapping[str, Any], device: str, calls: int) -> list[Kernel]:
    """Aggregate a Chrome trace into a kernel table.

    On CUDA the device categories are the kernels that ran. On CPU there are no
    kernels, so aten ops stand in, each charged only its self time (its duration
    minus the ops nested in it), which is where CPU work actually happened.
    """
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    if device == "cuda":
        picked = [(e.get("name", "?"), float(e.get("dur", 0.0))) for e in events if e.get("cat") in _DEVICE_CATS]
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


# --------------------------------------------------------------------------- context


@dataclass
class Context:
    """What a repro's ``run`` gets: the device, the sampling rules and ``measure``."""

    device: str  # "cuda" or "cpu"
    smoke: bool
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    ceilings: Mapping[str, Any] = field(default_factory=dict)
    trace_dir: Path | None = None
    nvml: tuple[Any, Any] | None = None  # (pynvml, handle) when NVML answered
    log: Callable[[str], None] = lambda msg: None

    @property
    def cuda(self) -> bool:
        return self.device == "cuda"

    def skipped(
        self, name: str, label: str, reason: str, extra: Mapping[str, Any] | None = None, **config: Any
    ) -> VariantResult:
        """A variant that could not run here, with the reason (e.g. an optional backend is absent)."""
        return VariantResult(
            name=name, label=label, config=config, status="skipped", reason=reason, extra=dict(extra or {})
        )

    def errored(
        self, name: str, label: str, exc: BaseException, extra: Mapping[str, Any] | None = None, **config: Any
    ) -> VariantResult:
        """A variant that failed (e.g. ran out of memory) while the repro carries on."""
        return VariantResult(
            name=name,
            label=label,
            config=config,
            status="error",
            reason=f"{type(exc).__name__}: {exc}".splitlines()[0][:500],
            extra=dict(extra or {}),
        )

    def synchronize(self) -> None:
        if self.cuda:
            import torch

            torch.cuda.synchronize()

    def measure(
        self,
        name: str,
        fn: Callable[[], Any],
        *,
        label: str = "",
        config: Mapping[str, Any] | None = None,
        work: Work | None = None,
        graph: bool = False,
        calls_per_sample: int | None = None,
        before_sample: Callable[[], None] | None = None,
        extra: Mapping[str, Any] | None = None,
        sampling: SamplingConfig | None = None,
    ) -> VariantResult:
        """Warm up, time ``fn`` until the CI target or budget, capture kernels, read NVML.

        ``graph=True`` captures ``calls_per_sample`` calls into one CUDA graph and
        times its replays, so launch overhead drops out. ``before_sample`` runs
        outside the timed region (e.g. to flush L2 or rotate inputs). ``sampling``
        overrides the run's rules for a repro with many small variants.
        """
        self.log(f"  {name}: warm-up")
        cfg = sampling or self.sampling
        warm_calls = self._warmup(fn, cfg.warmup_s)
        calls = calls_per_sample or self._calibrate(fn)
        runner: Callable[[], Any]
        if graph:
            if not self.cuda:
                raise RuntimeError("graph replay needs CUDA")
            runner = self._capture(fn, calls)
            method, calls_in_run = "graph_replay", calls
        else:
            runner, method, calls_in_run = fn, ("cuda_events" if self.cuda else "perf_counter"), calls
        take = self._sampler(runner, 1 if graph else calls, calls_in_run, before_sample)
        monitor = self._monitor()
        self.log(f"  {name}: sampling ({calls} calls per sample)")
        if monitor is not None:
            with monitor:
                samples, reason, elapsed = sample_adaptively(take, cfg)
            gpu_monitor: dict[str, Any] | None = monitor.summary()
        else:
            samples, reason, elapsed = sample_adaptively(take, cfg)
            gpu_monitor = None
        st = stats.summarize(samples)
        timing = Timing(
            method=method,  # type: ignore[arg-type]
            unit="s",
            calls_per_sample=calls,
            warmup_calls=warm_calls,
            stop_reason=reason,  # type: ignore[arg-type]
            target_rel_ci=cfg.target_rel_ci,
            budget_s=cfg.budget_s,
            elapsed_s=elapsed,
            stats=st,
            samples=tuple(samples),
        )
        self.log(f"  {name}: profiling kernels")
        kernels, iters = self._profile(name, runner, 1 if graph else cfg.profile_iters, calls if graph else 1)
        notes: list[str] = []
        if gpu_monitor and gpu_monitor["throttled"]:
            notes.append(
                f"clocks-event reasons while measuring: {', '.join(gpu_monitor['throttled'])} "
                f"(SM clock {gpu_monitor['sm_clock_during_mhz']} MHz)"
            )
        if reason != "ci_target":
            notes.append(
                f"median CI half-width {st.rel_ci_halfwidth:.2%} did not reach the "
                f"{cfg.target_rel_ci:.2%} target before the {reason.replace('_', ' ')}"
            )
        return VariantResult(
            name=name,
            label=label or name,
            config=dict(config or {}),
            status="ok",
            device=self.device,
            timing=timing,
            kernels=tuple(kernels),
            kernel_source="cuda" if self.cuda else "cpu",
            profiled_iterations=iters,
            work=work,
            achieved=achieved(work, st.median, self.ceilings),
            gpu_monitor=gpu_monitor,
            extra=dict(extra or {}),
            warnings=tuple(notes),
        )

    # -- pieces of measure(), each a seam ---------------------------------------------

    def kernel_samples(self, fn: Callable[[], Any], iters: int, match: Callable[[str], bool]) -> list[float]:
        """Per-call device time (seconds) of the kernels whose names ``match``, one sample per call.

        Each call is bracketed by a synchronize and a profiler range, so the kernels
        that start between one range's start and the next belong to that call.
        Needs CUDA; this is how a repro gets a sample set for a per-kernel metric.
        """
        from torch.profiler import ProfilerActivity, profile, record_function

        if not self.cuda:
            raise RuntimeError("kernel_samples needs CUDA")
        self.synchronize()
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*Profiler clears events", category=UserWarning)
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for i in range(iters):
                    with record_function(f"gpu_repro_call_{i}"):
                        fn()
                    self.synchronize()
        events = [e for e in json.loads(_chrome_trace(prof))["traceEvents"] if e.get("ph") == "X"]
        starts = sorted(
            (e["ts"], int(e["name"].rsplit("_", 1)[1]))
            for e in events
            if str(e.get("name", "")).startswith("gpu_repro_call_") and e.get("cat") == "user_annotation"
        )
        totals = [0.0] * iters
        for e in events:
            if e.get("cat") in _DEVICE_CATS and match(e.get("name", "")):
                owner = [i for ts, i in starts if ts <= e["ts"]]
                if owner:
                    totals[owner[-1]] += float(e.get("dur", 0.0)) / 1e6
        return [t for t in totals if t > 0]

    def _warmup(self, fn: Callable[[], Any], warmup_s: float) -> int:
        calls, t0 = 0, time.perf_counter()
        while calls < 3 or time.perf_counter() - t0 < warmup_s:
            fn()
            calls += 1
            self.synchronize()
            if calls >= 10_000:
                break
        return calls

    def _calibrate(self, fn: Callable[[], Any]) -> int:
        self.synchronize()
        t0 = time.perf_counter()
        fn()
        self.synchronize()
        one = max(time.perf_counter() - t0, 1e-7)
        return int(min(MAX_CALLS_PER_SAMPLE, max(1, math.ceil(MIN_SAMPLE_S / one))))

    def _capture(self, fn: Callable[[], Any], calls: int) -> Callable[[], Any]:
        import torch

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up on a side stream, as CUDA graph capture requires
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(calls):
                fn()
        torch.cuda.synchronize()
        return g.replay

    def _sampler(
        self,
        runner: Callable[[], Any],
        repeats: int,
        calls_in_run: int,
        before: Callable[[], None] | None,
    ) -> Callable[[], float]:
        if self.cuda:
            import torch

            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

            def take_cuda() -> float:
                if before is not None:
                    before()
                start.record()
                for _ in range(repeats):
                    runner()
                end.record()
                end.synchronize()
                return start.elapsed_time(end) / 1e3 / calls_in_run

            return take_cuda

        def take_cpu() -> float:
            if before is not None:
                before()
            t0 = time.perf_counter()
            for _ in range(repeats):
                runner()
            return (time.perf_counter() - t0) / calls_in_run

        return take_cpu

    def _monitor(self) -> Any:
        if self.nvml is None:
            return None
        from repro.nvml import Monitor

        return Monitor(*self.nvml, own_pid=os.getpid())

    def _profile(
        self, name: str, runner: Callable[[], Any], iters: int, calls_per_iter: int
    ) -> tuple[list[Kernel], int]:
        from torch.profiler import ProfilerActivity, profile

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        self.synchronize()
        with warnings.catch_warnings():
            # torch warns that a profiler cycle clears its events; one cycle is all we keep.
            warnings.filterwarnings("ignore", message=".*Profiler clears events", category=UserWarning)
            with profile(activities=acts) as prof:
                for _ in range(iters):
                    runner()
                self.synchronize()
        raw = _chrome_trace(prof)
        trace = json.loads(raw)
        if self.trace_dir is not None:
            from repro.fsio import NoSpace, write_new_gzip
            from repro.redact import redactor

            safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
            path = self.trace_dir / f"{safe}.trace.json.gz"
            try:  # atomic: the trace appears whole or not at all
                write_new_gzip(path, redactor()(raw.decode(errors="replace")).encode())
            except (OSError, NoSpace) as exc:  # a trace is a side file: a full disk must not cost the measurement
                self.log(f"{name}: Chrome trace not written ({exc})")
        return kernels_from_trace(trace, self.device, iters * calls_per_iter), iters


def _chrome_trace(prof: Any) -> bytes:
    """A finished profiler session as Chrome-trace JSON bytes (torch only writes it to a file)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        return path.read_bytes()


def achieved(work: Work | None, seconds: float, ceilings: Mapping[str, Any]) -> Achieved | None:
    """Achieved TFLOP/s and GB/s at ``seconds`` per call, and the share of the applicable ceiling."""
    if work is None or seconds <= 0:
        return None
    tflops = work.flops / seconds / 1e12 if work.flops else None
    gbps = work.bytes / seconds / 1e9 if work.bytes else None
    ceiling = ceilings.get(work.ceiling) if work.ceiling else None
    value = unit = pct = None
    if isinstance(ceiling, Mapping) and ceiling.get("value"):
        value, unit = float(ceiling["value"]), str(ceiling["unit"])
        rate = tflops if unit == "TFLOP/s" else gbps
        pct = 100.0 * rate / value if rate is not None else None
    return Achieved(
        tflops=tflops, gbps=gbps, ceiling=work.ceiling, ceiling_value=value, ceiling_unit=unit, pct_of_ceiling=pct
    )
