"""lora-batch-scaling's words: the measured step ratio against the seed's, the model's scope, clocks and memory.

Every number in these sentences comes from the run: the headline ratio and its CI, each batch's GPU
monitor, the parameter count of the stack that was built and each batch's peak allocator use.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from repro.api import Outcome, Ratio, RunResult, VariantResult

GIB = 2**30
# Per-sample ratios under this are better than linear (batch 1 left the GPU under-used);
# between it and LINEAR_HIGH, step time doubled with the batch: linear scaling.
LINEAR_LOW, LINEAR_HIGH = 0.9, 1.1
THRESHOLD = 1.3
THRESHOLD_WHY = (
    "linear scaling reads 1.0, and the seed's 2x read per sample ~2 (read as step time it is linear scaling, 1.0); "
    "1.3 leaves room for run-to-run noise and mild allocator effects"
)


def oom(v: VariantResult) -> bool:
    """Whether the variant failed by running out of memory."""
    return "out of memory" in (v.reason or "").lower() or "OutOfMemoryError" in (v.reason or "")


def gib(n: Any) -> float | None:
    """Bytes as GiB, None when not a number."""
    return n / GIB if isinstance(n, int | float) else None


def step_ratio(head: Ratio) -> str:
    """The batch-2 step over the batch-1 step with its CI: the per-sample headline times 2."""
    return Outcome.fmt(
        dataclasses.replace(head, value=2 * head.value, ci_low=2 * head.ci_low, ci_high=2 * head.ci_high)
    )


def lora_sentence(head: Ratio) -> str:
    """What was measured, beside the seed's number, and which it was here: linear scaling or a
    per-sample slowdown. Whether the seed's claim was tested (its GPU) is the status's to say."""
    step = f'a batch-2 step took {step_ratio(head)} a batch-1 step (the seed: "about 2x" on an RTX 5090)'
    if head.where == "above":
        return f"{step}, more than the 2x of linear scaling: a per-sample slowdown on this stack"
    if head.where == "straddles":
        return step
    if head.value < LINEAR_LOW:
        return f"{step}: batching made each sample cheaper on this stack, the opposite of a cliff"
    if head.value <= LINEAR_HIGH:
        # The seed's "2x slower" is a step time or a per-sample time; it does not say which.
        return (
            f"{step}: per sample, linear scaling on this stack, not a cliff (if the seed's 2x is step time, it is "
            "this same linear scaling, with nothing to fix)"
        )
    return f"{step}, a little worse than linear scaling but below the {THRESHOLD} threshold"


def kernel_clause(result: RunResult, head: Ratio | None = None) -> str:
    """Per sample, batch 2's profiled kernel time over batch 1's, beside the event-timed headline (which
    also holds a step's time outside its kernels); "" without both kernel tables. When that ratio lies
    outside the headline's CI, the clause gives each batch's timed step beyond its kernels and what
    that fixed cost per step alone does to the per-sample ratio."""
    have = {v.name: v for v in result.variants}
    sums, timed = [], []
    for name in ("bs1", "bs2"):
        v = have.get(name)
        kernels = v.kernels if v is not None else ()
        sums.append(sum(k.us_per_call for k in kernels))
        timed.append(v.timing.stats.median * 1e6 if v is not None and v.timing is not None else None)
    if not all(x > 0 for x in sums):
        return ""
    one, two = sums
    alone = two / 2 / one
    said = f"{one / 1e3:.1f} -> {two / 1e3:.1f} ms a step"
    clause = f"the profiled kernels alone gave {alone:.2f}x per sample ({said})"
    t1, t2 = timed
    if head is None or head.ci_low <= alone <= head.ci_high or t1 is None or t2 is None or t1 <= one or t2 <= two:
        return clause  # inside the CI, or the profiled pass (a separate run) read more than the timed steps
    # The timed steps' per-sample ratio against the kernels' own: what the time outside kernels does.
    moved = (t2 / 2 / t1) / alone - 1
    return (
        f"{clause}, outside the CI: the timed steps' {(t1 - one) / 1e3:.1f} ms (batch 1) and "
        f"{(t2 - two) / 1e3:.1f} ms (batch 2) outside kernels (launch and host gaps) move it {moved * 100:+.1f}%, to "
        f"{t2 / 2 / t1:.2f}x, the timed medians' ratio (the headline: the median of per-round ratios)"
    )


def count_words(n: int) -> str:
    """``453M``, ``1.2M``, or the exact count with separators under a million."""
    if n >= 100_000_000:
        return f"{n / 1e6:.0f}M"
    if n >= 1_000_000:
        return f"{n / 1e6:.1f}M"
    return f"{n:,}"


def scope_clause(p_depth: int, result: RunResult) -> str:
    """The model that ran, in numbers the run computed: blocks, parameters, peak memory at batch 2."""
    params = result.extra.get("parameters")
    count = ""
    if isinstance(params, Mapping) and isinstance(params.get("total"), int):
        trainable = params.get("trainable")
        extra = f" ({count_words(trainable)} trainable)" if isinstance(trainable, int) else ""
        count = f" of {count_words(params['total'])} parameters{extra}"
    peak = ""
    bs2 = next((v for v in result.variants if v.name == "bs2"), None)
    if bs2 is not None and (g := gib(bs2.extra.get("peak_allocated_bytes"))) is not None:
        peak = f", {g:.1f} GiB peak at batch 2"
    return f"the model is a {p_depth}-block FLUX-shaped stack{count}{peak}, not FLUX"


def _clock(mon: Mapping[str, Any]) -> str:
    mid, lo, hi = mon.get("sm_clock_during_mhz"), mon.get("sm_clock_min_mhz"), mon.get("sm_clock_max_mhz")
    if not isinstance(mid, int | float):
        return "SM clock not recorded"
    span = f" ({lo:g}-{hi:g})" if isinstance(lo, int | float) and isinstance(hi, int | float) and lo != hi else ""
    watts = mon.get("power_during_w")
    power = f", {watts:.0f} W" if isinstance(watts, int | float) else ""
    return f"SM {mid:g} MHz{span}{power}"


def clocks_clause(result: RunResult) -> tuple[str, str]:
    """(a clause on whose clocks sagged, a detail line with every batch's clocks and power), from each
    batch's own GPU monitor; both empty without monitors."""
    mons = {v.name: v.gpu_monitor for v in result.variants if isinstance(v.gpu_monitor, Mapping)}
    if not mons:
        return "", ""
    per = "; ".join(f"{name} {_clock(mon)}" for name, mon in mons.items())
    # A monitor with "arm" holds that batch's polls only; one without covers every batch's rounds.
    shared = not all("arm" in mon for mon in mons.values())
    scope = (
        "one monitor over all batches' rounds" if shared else "medians (min-max) of the polls after each batch's blocks"
    )
    detail = f"GPU clocks and power, {scope}: {per}."
    sagged = [name for name, mon in mons.items() if mon.get("throttled")]
    if not sagged:
        return "", detail
    why = ", ".join(sorted({r for n in sagged for r in mons[n].get("throttled") or ()}))
    who = "all batches" if shared else " and ".join(sagged)
    medians = ", ".join(f"{n} {mons[n].get('sm_clock_during_mhz')}" for n in mons)
    clause = f"{why} held the SM clock down during {who}'s rounds (median MHz: {medians})"
    if all(mons[n].get("sm_clock_during_mhz") == mons[n].get("sm_clock_max_mhz") for n in sagged):
        # A reason flagged by some polls while the median poll stayed at the top clock: it did not hold it down.
        lows = ", ".join(f"{n} {mons[n].get('sm_clock_min_mhz')}" for n in sagged)
        clause = (
            f"{why} showed during {who}'s rounds, the median SM clock at its max (median MHz: {medians}; min: {lows})"
        )
    return clause, detail


def memory_sentence(result: RunResult, cap: float | None) -> str:
    """Peak memory per batch (and allocator retries under a cap)."""
    mem = []
    for v in result.variants:
        peak = gib(v.extra.get("peak_allocated_bytes"))
        what = "out of memory" if v.status == "error" and oom(v) else (f"{peak:.1f} GiB" if peak is not None else "n/a")
        retries = v.extra.get("num_alloc_retries")
        if cap is not None and retries is not None and v.status == "ok":
            what += f", {retries} allocator retr{'y' if retries == 1 else 'ies'}"
        mem.append(f"batch {v.config.get('batch')} {what}")
    where = f"under a {cap:g} GiB cap" if cap is not None else "with no memory cap"
    return f"Peak memory {where}: {'; '.join(mem)}."
