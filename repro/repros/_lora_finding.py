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
    """What was measured, beside the seed's number, and which it was here by the CI against 1.0 (linear
    scaling): a per-sample slowdown, linear scaling, or a little better or worse than it. Whether the
    seed's claim was tested (its GPU, its model) is the status's to say."""
    step = f'a batch-2 step took {step_ratio(head)} a batch-1 step (the seed: "about 2x" on an RTX 5090)'
    # The seed's "2x slower" is a step time or a per-sample time; it does not say which.
    as_step = "read as step time, the seed's 2x is linear scaling, nothing to fix"
    if head.where == "above":
        return f"{step}, more than the 2x of linear scaling: a per-sample slowdown on this stack"
    if head.where == "straddles":
        return step
    if head.ci_high < LINEAR_LOW:
        return f"{step}: batching made each sample cheaper on this stack, the opposite of a cliff"
    if head.ci_high < 1.0:
        under = (1 - head.value) * 100
        return f"{step}: per sample {under:.0f}% under linear scaling (1.0, outside the CI), not a cliff ({as_step})"
    if head.ci_low <= 1.0:
        return f"{step}: per sample, linear scaling on this stack (the CI holds 1.0), not a cliff ({as_step})"
    return f"{step}, a little worse than linear scaling (1.0, below the CI) but below the {THRESHOLD} threshold"


def _places(x: float, lo: float, hi: float) -> int:
    """The fewest decimals (2 to 4) at which ``x`` prints outside ``lo``-``hi``; 4 when none does."""
    for d in (2, 3):
        if round(x, d) < round(lo, d) or round(x, d) > round(hi, d):
            return d
    return 4


def kernel_clause(result: RunResult, head: Ratio | None = None) -> str:
    """Per sample, batch 2's profiled kernel time over batch 1's, beside the event-timed headline;
    "" without both kernel tables. The kernels come from one profiled step per batch after sampling,
    at a clock no monitor recorded, so when that ratio lies outside the headline's CI the clause says
    so, printed to the digits that show it outside, and names no cause for the timed steps' extra
    time (launch and host gaps, the profiled step's clock): this run cannot split them. A batch whose
    profiled kernels exceed its timed median is named, the measured sign that a profiled step ran at
    another speed than the timed ones."""
    have = {v.name: v for v in result.variants}
    sums: dict[str, float] = {}
    timed: dict[str, float] = {}
    for v in result.variants:
        if v.kernels:
            sums[v.name] = sum(k.us_per_call for k in v.kernels)
        if v.timing is not None:
            timed[v.name] = v.timing.stats.median * 1e6
    one, two = sums.get("bs1", 0.0), sums.get("bs2", 0.0)
    if not (one > 0 and two > 0 and "bs1" in have and "bs2" in have):
        return ""
    alone = two / 2 / one
    said = f"{one / 1e3:.1f} -> {two / 1e3:.1f} ms a step"
    if head is None or head.ci_low <= alone <= head.ci_high:
        return f"the profiled kernels alone gave {alone:.2f}x per sample ({said})"
    d = _places(alone, head.ci_low, head.ci_high)
    side, bound = ("below", head.ci_low) if alone < head.ci_low else ("above", head.ci_high)
    over = [n for n in sums if n in timed and sums[n] > timed[n]]
    beyond = "".join(
        f" (batch {n.removeprefix('bs')}'s kernels, {sums[n] / 1e3:.1f} ms, exceed its timed step, "
        f"{timed[n] / 1e3:.1f} ms)"
        for n in over[:1]
    )
    return (
        f"the profiled kernels alone gave {alone:.{d}f}x per sample ({said}), {side} the CI's {bound:.{d}f}: one "
        f"profiled step per batch after sampling, clock not recorded, so not a measure of the timed steps{beyond}"
    )


def count_words(n: int) -> str:
    """``453M``, ``1.2M``, or the exact count with separators under a million."""
    if n >= 100_000_000:
        return f"{n / 1e6:.0f}M"
    if n >= 1_000_000:
        return f"{n / 1e6:.1f}M"
    return f"{n:,}"


FLUX_WIDTH = 3072  # FLUX.1's hidden size, this repro's default


def scope_clause(p_depth: int, hidden: int, result: RunResult) -> str:
    """The model that ran, in numbers the run computed: blocks, their width, parameters, peak memory at batch 2."""
    params = result.extra.get("parameters")
    count = ""
    if isinstance(params, Mapping) and isinstance(params.get("total"), int):
        trainable = params.get("trainable")
        extra = f" ({count_words(trainable)} trainable)" if isinstance(trainable, int) else ""
        count = f", {count_words(params['total'])} parameters in all{extra}"
    peak = ""
    bs2 = next((v for v in result.variants if v.name == "bs2"), None)
    if bs2 is not None and (g := gib(bs2.extra.get("peak_allocated_bytes"))) is not None:
        peak = f", {g:.1f} GiB peak at batch 2"
    blocks = "block" if p_depth == 1 else "blocks"
    width = "at FLUX's width" if hidden == FLUX_WIDTH else f"of width {hidden} (FLUX's is {FLUX_WIDTH})"
    return f"the model is {p_depth} transformer {blocks} {width}{count}{peak}, not FLUX"


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
        "one monitor over all batches' rounds"
        if shared
        else "medians (min-max) of the polls after each batch's blocks (power: NVML's average over about its last "
        "second, which spans the other batches' blocks too, so it is not one batch's)"
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
