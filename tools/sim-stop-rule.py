"""Optional stopping: measure_paired checks the paired CI after every episode (from the 6th on)
and stops as soon as it is 'decided' (whole CI on one side of the threshold, half-width <= 2%).
Under the null (true per-round ratio == threshold), how often does the final verdict say
'reproduced'? A 95% two-sided CI checked once gives <= 2.5%.

Uses the real RunContext.measure_paired loop, with _setup_arm/_profile stubbed so each arm's
samples are synthetic lognormal draws (no torch work), and the real verdict.compute."""

import math
import random
import sys

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent))
import functools

from repro.core import stats, verdict
from repro.core.context import Arm, SamplingConfig
from repro.core.results import Comparison
from repro.run.context import RunContext

stats.median_ci_ranks = functools.lru_cache(None)(stats.median_ci_ranks)

THR = 1.5
SIGMA = float(sys.argv[1]) if len(sys.argv) > 1 else 0.04
TRIALS = int(sys.argv[2]) if len(sys.argv) > 2 else 300
rng = random.Random(1)


def fake_setup(self, arm, cfg):
    mult = THR if arm.name == "num" else 1.0
    take = lambda: mult * math.exp(rng.gauss(0, SIGMA)) * 1e-3
    return (lambda: None), take, 1, 0


RunContext._setup_arm = fake_setup
RunContext._profile = lambda self, name, runner, iters, cpi: ([], 0)

comp = Comparison("c", "num", "den", THR, headline=True)
cfg = SamplingConfig(episode_s=0.0, episode_gap_s=0.0, budget_s=1e9, max_rounds=1000)
repro_hits = stops = 0
fixed_hits = 0
for t in range(TRIALS):
    ctx = RunContext(device="cpu", smoke=True, sampling=cfg, comparisons=(comp,))
    vs = ctx.measure_paired([Arm("num", lambda: None), Arm("den", lambda: None)])
    r = verdict.compute(comp, {v.name: v for v in vs})
    stops += vs[0].timing.stop_reason == "decided"
    repro_hits += r.status == "reproduced"
print(
    f"sigma={SIGMA} trials={TRIALS}: stop=decided in {stops}, final status reproduced in "
    f"{repro_hits} = {repro_hits / TRIALS:.1%} (a valid one-sided 2.5% error rate allows ~{0.025 * TRIALS:.0f})"
)
