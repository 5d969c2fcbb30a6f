"""Test-only repro for the matrix tests: dies of SIGSEGV in one lane while a marker file exists, else runs quickly."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path

from repro.api import Context
from repro.core.spec import Metric, Repro, Requirements, RunResult, Verdict, param
from repro.core.verdict import ratio_verdict
from repro.run.catalog import register


@dataclass(frozen=True)
class CrashParams:
    crash_lane: str = param("", help="the lane (GPU_REPRO_LANE) in which to crash")
    marker: str = param("", help="crash only while this file exists (remove it, and a resumed run passes)")


@register
class CrashOnLane(Repro[CrashParams]):
    id = "test-crash-on-lane"
    title = "segfaults in one lane while a marker file exists"
    upstream = ()
    seed_claim = "test fixture"
    Params = CrashParams
    requires = Requirements(cuda=False)
    metric = Metric(name="t(a)/t(b)", description="test ratio", threshold=1.5)

    def run(self, p: CrashParams, ctx: Context) -> RunResult:
        if os.environ.get("GPU_REPRO_LANE") == p.crash_lane and p.marker and Path(p.marker).exists():
            os.kill(os.getpid(), signal.SIGSEGV)
        a = ctx.measure("a", lambda: sum(range(2000)))
        b = ctx.measure("b", lambda: sum(range(1000)))
        return RunResult(variants=(a, b))

    def verdict(self, p: CrashParams, result: RunResult) -> Verdict:
        return ratio_verdict(
            self.metric,
            result.variant("a"),
            result.variant("b"),
            finding=lambda v, lo, hi, status, q: f"test ratio {v:.2f} ({status})",
        )
