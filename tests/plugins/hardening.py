"""Test-only repros for the hardening suite: grandchildren, hostile output, a deterministic gap."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from repro.api import Context
from repro.core.spec import Metric, Repro, Requirements, RunResult, Verdict, param
from repro.core.verdict import ratio_verdict
from repro.run.catalog import register

# A python that sleeps; it detaches (new session, double fork) so only a subreaper or a /proc sweep finds it.
_DAEMON = (
    "import os, time\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    if os.fork() == 0:\n"
    "        time.sleep(300)\n"
    "    os._exit(0)\n"
    "time.sleep(300)\n"
)
HOSTILE = "```\n</details>\n\n# injected heading\n<script>alert(1)</script>\n"
SECRET = "hf_" + "abcdefghijklmnopqrstuvwxyz0123"


@dataclass(frozen=True)
class HardeningParams:
    seconds: float = param(0.0, help="how long to sleep inside run() after forking", min=0.0)
    note: str = param("", help="free text, recorded in the artifact's params")


class _Base(Repro[HardeningParams]):
    upstream = ()
    seed_claim = "test fixture"
    Params = HardeningParams
    requires = Requirements(cuda=False)
    metric = Metric(name="t(a)/t(b)", description="test ratio", threshold=1.5)

    def verdict(self, p: HardeningParams, result: RunResult) -> Verdict:
        return ratio_verdict(
            self.metric,
            result.variant("a"),
            result.variant("b"),
            finding=lambda v, lo, hi, status, q: f"test ratio {v:.2f} ({status})",
        )


@register
class Forks(_Base):
    id = "test-forks"
    title = "leaves detached grandchildren behind"

    def run(self, p: HardeningParams, ctx: Context) -> RunResult:
        subprocess.Popen([sys.executable, "-c", _DAEMON], start_new_session=True)
        time.sleep(p.seconds)
        a = ctx.measure("a", lambda: sum(range(4000)))
        b = ctx.measure("b", lambda: sum(range(1000)))
        return RunResult(variants=(a, b))


@register
class ForksThenHangs(_Base):
    id = "test-forks-hang"
    title = "leaves detached grandchildren behind, then hangs"

    def run(self, p: HardeningParams, ctx: Context) -> RunResult:
        subprocess.Popen([sys.executable, "-c", _DAEMON], start_new_session=True)
        print("test-forks-hang: forked", file=sys.stderr, flush=True)
        time.sleep(300)
        raise AssertionError("should have been stopped")


@register
class Gap(_Base):
    id = "test-gap"
    title = "a 2 ms sleep against a no-op: reproduced on any machine"

    def run(self, p: HardeningParams, ctx: Context) -> RunResult:
        a = ctx.measure("a", lambda: time.sleep(0.002))
        b = ctx.measure("b", lambda: None)
        return RunResult(variants=(a, b))


@register
class Hostile(_Base):
    id = "test-hostile"
    title = "prints markdown, HTML and a token, then dies"

    def run(self, p: HardeningParams, ctx: Context) -> RunResult:
        print(HOSTILE + f"token={SECRET}\nproxy=http://bob:hunter2@proxy.example:3128\n", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGSEGV)
        raise AssertionError("unreachable")
