"""Test-only repros that misbehave on purpose: they prove one bad repro never takes the batch down."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass

from repro.api import Context
from repro.core.spec import Metric, Repro, Requirements, RunResult, Verdict, param
from repro.core.verdict import ratio_verdict
from repro.run.catalog import register


@dataclass(frozen=True)
class MisbehavingParams:
    seconds: float = param(60.0, help="how long to hang", min=0.0)


class _Base(Repro[MisbehavingParams]):
    upstream = ()
    seed_claim = "test fixture"
    Params = MisbehavingParams
    requires = Requirements(cuda=False)
    metric = Metric(name="t(a)/t(b)", description="test ratio", threshold=1.5)

    def verdict(self, p: MisbehavingParams, result: RunResult) -> Verdict:
        return ratio_verdict(
            self.metric,
            result.variant("a"),
            result.variant("b"),
            finding=lambda v, lo, hi, status, q: f"test ratio {v:.2f} ({status})",
        )


@register
class Segfault(_Base):
    id = "test-segfault"
    title = "dies of SIGSEGV"

    def run(self, p: MisbehavingParams, ctx: Context) -> RunResult:
        os.kill(os.getpid(), signal.SIGSEGV)
        raise AssertionError("unreachable")


@register
class Hang(_Base):
    id = "test-hang"
    title = "hangs past its timeout"

    def run(self, p: MisbehavingParams, ctx: Context) -> RunResult:
        time.sleep(p.seconds)
        raise AssertionError("should have been killed")


@register
class Raises(_Base):
    id = "test-raises"
    title = "raises inside run()"

    def run(self, p: MisbehavingParams, ctx: Context) -> RunResult:
        raise RuntimeError("boom from inside the repro")


@register
class Fine(_Base):
    id = "test-fine"
    title = "two pure-Python variants"

    def run(self, p: MisbehavingParams, ctx: Context) -> RunResult:
        a = ctx.measure("a", lambda: sum(range(4000)))
        b = ctx.measure("b", lambda: sum(range(1000)))
        return RunResult(variants=(a, b))
