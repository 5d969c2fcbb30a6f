"""Does a shorter idle gap between paired episodes give the same headline and CI?

Runs two catalog comparisons through the harness's own paired sampling (RunContext, the
repro's ``run`` and ``verdict``), once per idle gap (``SamplingConfig.episode_gap_s``) and
repetition, and prints one row per run: headline, 95% CI, half-width, seconds.

- 5090-linear, fp32 only (``tf32_variants=false``): the comparison whose ratio followed the
  GPU's power state and made the idle gap necessary;
- solve-512-cliff, one (backend, batch) pair at n = 511 and 512 (cuSOLVER, batch 16 on a GPU;
  the default backend on CPU): a cheap second comparison with a large ratio.

Profiling is skipped (the kernel table is not what is compared). The gaps run largest first in odd
repetitions and smallest first in even ones, so a slow drift of the GPU over the call does not line up with
one gap. A time guard (``--max-s``) stops starting new runs once the next would not fit,
and says which were left out.

Selection rule (printed at the end): a gap passes when, for every comparison and every
repetition that has a default-gap run, its headline lies inside the CI that the default gap (the largest one given,
0.5 s) got in the same repetition, and its CI half-width is at most 1.25x that run's. The
tool picks the smallest passing gap; the default always passes against itself, so with
no shorter gap passing it picks the default.

On CPU (``--smoke``) the harness pays no idle gap at all (there is no power state to leave),
so a dry run there checks only that the tool runs end to end.

Usage: python tools/gap-experiment.py [--gaps 0,0.05,0.1,0.2,0.5] [--reps 2] [--max-s 80]
       [--smoke] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from repro.core.context import SamplingConfig  # noqa: E402
from repro.core.spec import build_params  # noqa: E402
from repro.run import catalog  # noqa: E402
from repro.run.context import RunContext  # noqa: E402
from repro.run.knobs import apply_knobs, knob_state  # noqa: E402

# How much wider than the default gap's CI a shorter gap's may be and still count as the same.
WIDTH_SLACK = 1.25


@dataclass(frozen=True)
class Case:
    label: str
    repro_id: str
    overrides: dict[str, str]


def cases(cuda: bool) -> list[Case]:
    backend = "cusolver" if cuda else "default"
    return [
        Case("5090-linear fp32", "5090-linear", {"tf32_variants": "false"}),
        Case(
            f"solve {backend}/b16 512 vs 511",
            "solve-512-cliff",
            {"backends": backend, "batches": "16", "n_min": "511", "n_max": "512", "cliff_n": "512"},
        ),
    ]


class _NoProfile(RunContext):
    """The harness's context without the profiled pass after sampling (not what is compared here)."""

    def _profile(self, name: str, runner: Any, iters: int, calls_per_iter: int) -> tuple[list[Any], int]:
        return [], 0


def run_once(case: Case, gap: float, device: str, smoke: bool) -> dict[str, Any]:
    """One run of ``case`` with the idle gap set to ``gap``: headline, CI, half-width, seconds."""
    cls = catalog.get(case.repro_id, [])
    repro = cls()
    overrides = dict(case.overrides)
    if smoke:  # the smoke sizes of solve have other n; keep the pair at the smoke cliff
        overrides = {k: v for k, v in overrides.items() if k not in ("n_min", "n_max", "cliff_n")}
    params = build_params(cls.id, cls.Params, overrides, smoke=smoke)
    ctx = _NoProfile(device=device, smoke=smoke, sampling=replace(SamplingConfig(), episode_gap_s=gap))
    ctx.comparisons = tuple(repro.comparisons(params))
    saved = knob_state()
    t0 = time.perf_counter()
    try:
        result = repro.run(params, ctx)
        verdict = repro.verdict(params, result)
    finally:
        apply_knobs(saved)
    seconds = time.perf_counter() - t0
    value, lo, hi = verdict.value, verdict.ci_low, verdict.ci_high
    half = (hi - lo) / 2 / value if value and lo is not None and hi is not None else None
    return {
        "case": case.label,
        "gap_s": gap,
        "value": value,
        "ci_low": lo,
        "ci_high": hi,
        "half_width": half,
        "status": verdict.status,
        "seconds": seconds,
    }


def pick(rows: list[dict[str, Any]], gaps: list[float]) -> tuple[float, dict[float, str]]:
    """The smallest gap that passes the selection rule (module docstring), and why each failed."""
    default = max(gaps)
    ref = {(r["case"], r["rep"]): r for r in rows if r["gap_s"] == default}
    why: dict[float, str] = {}
    for gap in sorted(gaps):
        # A repetition the time guard cut before its default-gap run has nothing to compare with.
        runs = [r for r in rows if r["gap_s"] == gap and (r["case"], r["rep"]) in ref]
        if not runs:
            why[gap] = "not run"
            continue
        for r in runs:
            base = ref.get((r["case"], r["rep"]))
            if base is None or base["value"] is None or r["value"] is None:
                why[gap] = f"{r['case']} rep {r['rep']}: no default-gap run or no headline to compare with"
                break
            if not base["ci_low"] <= r["value"] <= base["ci_high"]:
                why[gap] = (
                    f"{r['case']} rep {r['rep']}: headline {r['value']:.4f} outside the default's "
                    f"CI {base['ci_low']:.4f}-{base['ci_high']:.4f}"
                )
                break
            if r["half_width"] > WIDTH_SLACK * base["half_width"]:
                why[gap] = (
                    f"{r['case']} rep {r['rep']}: half-width {r['half_width']:.2%} over "
                    f"{WIDTH_SLACK}x the default's {base['half_width']:.2%}"
                )
                break
    passing = [g for g in sorted(gaps) if g not in why]
    return (passing[0] if passing else default), why


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--gaps", default="0,0.05,0.1,0.2,0.5", help="idle gaps to try, seconds (the largest is the default)"
    )
    ap.add_argument("--reps", type=int, default=2, help="repetitions of every (comparison, gap)")
    ap.add_argument("--max-s", type=float, default=80.0, help="start no run that would end after this many seconds")
    ap.add_argument("--smoke", action="store_true", help="smoke sizes, on CPU when there is no GPU (dry run)")
    ap.add_argument("--json", type=Path, help="also write the rows and the pick here")
    args = ap.parse_args()
    try:
        gaps = sorted({float(g) for g in args.gaps.split(",") if g.strip()})
    except ValueError:
        print(f"--gaps {args.gaps!r}: expected comma-separated seconds, e.g. 0,0.1,0.5", file=sys.stderr)
        return 2
    if not gaps or min(gaps) < 0 or args.reps < 1:
        print(f"--gaps {args.gaps!r} --reps {args.reps}: expected gaps >= 0 and reps >= 1", file=sys.stderr)
        return 2
    t_start = time.perf_counter()
    import torch

    cuda = torch.cuda.is_available()
    if not cuda and not args.smoke:
        print("no CUDA device: pass --smoke for a CPU dry run", file=sys.stderr)
        return 2
    device = "cuda" if cuda else "cpu"
    if cuda:
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
    else:
        torch.set_num_threads(1)
    print(f"device: {torch.cuda.get_device_name() if cuda else 'cpu (no idle gap is paid on CPU)'}", flush=True)
    rows: list[dict[str, Any]] = []
    left_out: list[str] = []
    last: dict[tuple[str, float], float] = {}  # seconds the last run of (case, gap) took
    for rep in range(args.reps):
        # Largest first in odd repetitions, smallest first in even ones: a drift over the call
        # does not line up with one gap, and the default gap runs first in the first repetition.
        order = sorted(gaps, reverse=rep % 2 == 0)
        for gap in order:
            for case in cases(cuda):
                spent = time.perf_counter() - t_start
                seen = [t for (label, _), t in last.items() if label == case.label]
                guess = last.get((case.label, gap), max(seen, default=0.0))
                if spent + guess > args.max_s:
                    left_out.append(f"{case.label} gap {gap:g} s rep {rep + 1}")
                    continue
                row = {**run_once(case, gap, device, args.smoke), "rep": rep + 1}
                last[(case.label, gap)] = row["seconds"]
                rows.append(row)
                print(
                    f"  rep {rep + 1} gap {gap:<5g} {case.label:<32} {row['status']:<15} "
                    f"{row['value']:.4f} ({row['ci_low']:.4f}-{row['ci_high']:.4f}) "
                    f"{row['half_width']:.2%}  {row['seconds']:.1f} s",
                    flush=True,
                )
    print()
    print("| comparison | gap (s) | rep | headline (95% CI) | half-width | seconds |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in sorted(rows, key=lambda r: (r["case"], r["gap_s"], r["rep"])):
        print(
            f"| {r['case']} | {r['gap_s']:g} | {r['rep']} | {r['value']:.4f} ({r['ci_low']:.4f}-{r['ci_high']:.4f}) "
            f"| {r['half_width']:.2%} | {r['seconds']:.1f} |"
        )
    chosen, why = pick(rows, gaps)
    print()
    for gap in gaps:
        print(f"gap {gap:g} s: {'passes' if gap not in why else 'fails: ' + why[gap]}")
    if left_out:
        print(f"left out by the {args.max_s:g} s guard: {'; '.join(left_out)}")
    print(f"total {time.perf_counter() - t_start:.1f} s")
    print(f"chosen gap: {chosen:g} s (the smallest gap passing the rule; default {max(gaps):g} s)")
    if args.json:
        doc = {"device": device, "gaps": gaps, "rows": rows, "left_out": left_out, "chosen_gap_s": chosen}
        tmp = args.json.with_suffix(args.json.suffix + f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(doc, indent=2) + "\n")
        os.replace(tmp, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
