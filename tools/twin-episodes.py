"""graph-memset's pure CUDA twin across the committed H200 runs: its episodes, and what fewer replays would give.

Reads every committed graph-memset artifact under artifacts/reference/h200 whose twin came in 50 rounds of
episodes, and prints two markdown tables from their recorded replays (nothing runs):

1. per run: the GPU, the headline memset/fill with its 95% CI half-width (recomputed with the harness's own
   ``stats.summarize_rounds`` from the per-round ratios), and each episode's median ratio, with the count of
   episodes more than 5% off the run's median;
2. per comparison the twin times: the headline and half-width from all of each round's replays against only the
   first half of them (what halving ``twin_replays`` or ``twin_work_replays`` would keep), over every run.

Usage: python tools/twin-episodes.py [ROOT]   (ROOT: artifacts/reference/h200 by default)
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from repro.core import stats  # noqa: E402

PAIRS = (
    ("memset/fill", "twin_memset", "twin_fill"),
    ("(memset+work)/(fill+work)", "twin_memset_work", "twin_fill_work"),
    ("the seed's program", "twin_seed_memset", "twin_seed_fill"),
)


def _rounds(samples: list[float], per_round: int, keep: int) -> list[float]:
    return [stats.quantile(sorted(samples[i : i + per_round][:keep]), 0.5) for i in range(0, len(samples), per_round)]


def _ratio(vs: dict[str, Any], num: str, den: str, half: bool) -> tuple[float, float, list[float]] | None:
    """(median, CI half-width, episode medians) of the per-round ratio; ``half``: each round's first half only."""
    if not (vs.get(num) or {}).get("timing") or not (vs.get(den) or {}).get("timing"):
        return None
    tn, td = vs[num]["timing"], vs[den]["timing"]
    ep = tn.get("episode_rounds")
    n_rounds = len(tn.get("rounds") or [])
    if not ep or not n_rounds:
        return None
    per = len(tn["samples"]) // n_rounds
    keep = max(1, per // 2) if half else per
    r = [a / b for a, b in zip(_rounds(tn["samples"], per, keep), _rounds(td["samples"], per, keep), strict=True)]
    s = stats.summarize_rounds(r, ep)
    return s.median, s.rel_ci_halfwidth, stats.episode_medians(r, ep)


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "artifacts/reference/h200")
    runs = []
    for f in sorted(root.glob("**/graph-memset.json")):
        d = json.loads(f.read_text())
        vs = {v["name"]: v for v in d["variants"]}
        if _ratio(vs, "twin_memset", "twin_fill", False) is None or len(vs["twin_memset"]["timing"]["rounds"]) != 50:
            continue
        gpu = str((d["fingerprint"].get("gpu") or {}).get("uuid") or "?").removeprefix("GPU-")
        runs.append(("/".join(f.relative_to(root).parts[:-2]), gpu[:8], vs))  # the folder above the run folder
    print(f"## Episodes of the twin's memset/fill ({len(runs)} runs)\n")
    print("| run | GPU | headline | half-width | episodes >5% off it | episode medians |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, gpu, vs in runs:
        med, hw, eps = _ratio(vs, "twin_memset", "twin_fill", False)  # type: ignore[misc]
        off = sum(abs(e / med - 1) > 0.05 for e in eps)
        print(f"| {name} | {gpu} | {med:.4f} | {hw:.2%} | {off} of {len(eps)} | {' '.join(f'{e:.3f}' for e in eps)} |")
    print("\n## Each round's replays, all against the first half\n")
    print("| comparison | runs | median shift (min, median, max) | half-width, all (median, max) | half-width, half |")
    print("| --- | --- | --- | --- | --- |")
    for label, num, den in PAIRS:
        got = [(_ratio(vs, num, den, False), _ratio(vs, num, den, True)) for _, _, vs in runs]
        both = [(a, b) for a, b in got if a is not None and b is not None]
        shift = sorted(b[0] / a[0] - 1 for a, b in both)
        full, half = sorted(a[1] for a, _ in both), sorted(b[1] for _, b in both)
        print(
            f"| {label} | {len(both)} | {shift[0]:+.2%}, {statistics.median(shift):+.2%}, {shift[-1]:+.2%} "
            f"| {statistics.median(full):.2%}, {full[-1]:.2%} | {statistics.median(half):.2%}, {half[-1]:.2%} |"
        )


if __name__ == "__main__":
    main()
