"""5090-linear: the seed's experiment (blocks timed by a host clock, no warm-up) on a fake clock, and
how the finding puts its number beside ours."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from helpers import timing_for

from repro.core.context import SamplingConfig
from repro.core.results import Comparison, Ratio, VariantResult
from repro.repros.linear_5090 import SEED_CALLS, seed_blocks, seed_clause


class _Gpu:
    """A fake clock and GPU: each call queues ``cost`` seconds, the first of a form ``first`` more;
    synchronize advances the clock by the queued work."""

    def __init__(self, cost: dict[str, float], first: dict[str, float]) -> None:
        self.t, self.queued, self.cost, self.first = 0.0, 0.0, cost, first
        self.calls: list[str] = []
        self.syncs = 0

    def clock(self) -> float:
        return self.t

    def synchronize(self) -> None:
        self.t += self.queued
        self.queued = 0.0
        self.syncs += 1

    def form(self, name: str) -> Any:
        def call() -> None:
            self.queued += self.cost[name] + (self.first[name] if name not in self.calls else 0.0)
            self.calls.append(name)

        return call


def test_the_seed_blocks_time_each_form_once_in_order_with_no_warm_up() -> None:
    gpu = _Gpu({"linear": 0.002, "manual": 0.001}, {"linear": 0.5, "manual": 0.1})
    out = seed_blocks((("linear", gpu.form("linear")), ("manual", gpu.form("manual"))), 100, gpu.clock, gpu.synchronize)
    # Every call of linear before any of manual, 100 each: one block per form, nothing before it.
    assert gpu.calls == ["linear"] * 100 + ["manual"] * 100
    assert out["order"] == ["linear", "manual"] and out["calls"] == 100 and out["warmup_calls"] == 0
    assert out["block_s"] == pytest.approx({"linear": 0.5 + 100 * 0.002, "manual": 0.1 + 100 * 0.001})
    assert out["first_call_s"] == pytest.approx({"linear": 0.5 + 0.002, "manual": 0.1 + 0.001})
    assert out["ratio"] == pytest.approx((0.5 + 0.2) / (0.1 + 0.1))
    assert gpu.syncs == 6  # before each block, after its first call, after its loop
    assert SEED_CALLS == 2000  # the seed's count


def _variant(name: str, per_call: float) -> VariantResult:
    timing = timing_for([per_call] * 21, method="cuda_events", calls_per_sample=1, budget_s=1.0)
    return VariantResult(name=name, label=name, config={}, status="ok", timing=timing)


def _head(lo: float, hi: float) -> Ratio:
    c = Comparison("fp32", "linear_fp32", "manual_fp32", 1.5)
    return Ratio(c, (lo + hi) / 2, lo, hi, "not_reproduced", "below", True, 50)


def test_the_finding_puts_the_seed_number_beside_ours_and_says_where_they_part() -> None:
    lin, man = _variant("linear_fp32", 0.00126), _variant("manual_fp32", 0.00136)
    seed = {
        "calls": 2000,
        "order": ["linear", "manual"],
        "block_s": {"linear": 2.7, "manual": 2.74},
        "first_call_s": {"linear": 0.2, "manual": 0.01},
        "ratio": 2.7 / 2.74,
    }
    said = seed_clause(seed, lin, man, _head(0.92, 0.93))
    assert said.startswith(
        "the seed's experiment in this process (2000 calls per form, nn.Linear first, then x @ w.t() + b; under "
        "no_grad, where the seed's program records autograd) gave 0.99x here "
        "(nn.Linear 1.35 ms/call, manual 1.37 ms/call; one block each, "
        "so no CI), outside our CI: the blocks' first calls took 200 and 10 ms; without them the ratio is 0.92x"
    )
    rest = 2.5 / 1999
    assert f"{(rest / 0.00126 - 1) * 100:+.1f}%" in said
    # Inside our CI, the finding says they agree and nothing more.
    assert seed_clause(seed, lin, man, _head(0.95, 1.0)).endswith("inside our CI: the two methods agree here")
    # Without the seed's numbers (an older artifact, or an error) nothing is said.
    assert seed_clause({}, lin, man, _head(0.9, 1.0)) == ""
    assert seed_clause(seed, dataclasses.replace(man, timing=None), man, None) == ""


@pytest.mark.parametrize("quick", [False, True])
def test_the_seed_experiment_runs_in_a_full_run_and_not_in_a_quick_one(fast: SamplingConfig, quick: bool) -> None:
    from repro.core.spec import build_params
    from repro.repros.linear_5090 import Linear5090, LinearParams
    from repro.run.context import RunContext

    p = build_params("5090-linear", LinearParams, {}, smoke=True)
    ctx = RunContext(device="cpu", smoke=True, sampling=fast, quick=quick)
    ctx.comparisons = tuple(c for c in Linear5090().comparisons(p) if c.headline or not quick)
    res = Linear5090().run(p, ctx)
    assert ("seed_method" in res.extra) is not quick
    if not quick:
        assert res.extra["seed_method"]["timer"] == "time.perf_counter"


def test_the_api_log_is_a_detail_not_part_of_the_finding() -> None:
    from repro.core.results import RunResult
    from repro.repros.linear_5090 import Linear5090, LinearParams

    lin, man = _variant("linear_fp32", 0.00126), _variant("manual_fp32", 0.00136)
    log = {
        "forms": {"nn.Linear": {"cublasLt": {"cublasLtMatmul": 1}}, "x @ w.t() + b": {"cublas": {"cublasSgemm_v2": 1}}}
    }
    v = Linear5090().verdict(LinearParams(tf32_variants=False), RunResult((lin, man), extra={"api_log": log}))
    assert "API log" not in v.finding
    assert any(d.startswith("The cuBLAS") and "API log (one fp32 call each): nn.Linear called" in d for d in v.details)
