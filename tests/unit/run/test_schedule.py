"""One schedule of paired rounds per repro, the knobs against a synthetic clock, --quick and the
GPU-busy share."""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, TESTS, timing_for
from typer.testing import CliRunner

from repro.cli.main import app
from repro.cli.options import QUICK_TARGET, sampling_config
from repro.core.context import Arm, SamplingConfig
from repro.core.results import Comparison, RunResult, VariantResult, Verdict
from repro.core.verdict import as_quick
from repro.evidence import artifact
from repro.evidence.report import report
from repro.run import schedule
from repro.run.context import RunContext

PLUGINS = TESTS / "plugins"
REFERENCE = ROOT / "artifacts" / "reference" / "h200" / "evidence" / "all"


class _Clock:
    """Synthetic time: calls advance it by their cost; the idle gap by its length."""

    def __init__(self) -> None:
        self.t = 0.0
        self.sleeps = 0
        self.episode = 0  # the GPU's state: changes only across an idle gap
        self.blocks: list[str] = []  # the arm of every timed sample, in order

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s
        self.sleeps += 1
        self.episode += 1


class _Synthetic(RunContext):
    """A "CUDA" context whose arms are synthetic: a call of arm X costs ``cost[X]`` seconds times a
    factor that drifts between episodes (the power state), plus noise."""

    cost: dict[str, float]
    noise: float = 0.0
    quiet: frozenset[str] = frozenset()  # arms without noise
    rng: random.Random = random.Random(7)

    def synchronize(self) -> None:
        pass

    def _monitor(self, period_s: float | None = 0.05) -> Any:
        return None

    def _setup_arm(self, arm: Arm, cfg: SamplingConfig) -> tuple[Callable[[], Any], Callable[[], float], int, int]:
        clock = self.clock
        assert isinstance(clock, _Clock)

        def one() -> float:
            drift = 1.0 + 0.3 * ((clock.episode * 7919) % 5) / 5  # a state per episode, the same for every arm
            noise = 0.0 if arm.name in self.quiet else self.noise
            t = self.cost[arm.name] * drift * (1.0 + noise * self.rng.gauss(0, 1))
            clock.t += t
            return t

        def take() -> float:
            clock.blocks.append(arm.name)
            return one()

        return (lambda: one()), take, 1, 3


@pytest.fixture(autouse=True)
def _no_profiler(monkeypatch: pytest.MonkeyPatch) -> None:
    def none(ctx: Any, arms: Any, cfg: Any, name: str) -> dict[str, tuple[list[Any], int, float]]:
        return {a.arm.name: ([], 0, 0.0) for a in arms}

    monkeypatch.setattr(schedule, "_profile_all", none)


def _ctx(cost: dict[str, float], comps: list[Comparison], cfg: SamplingConfig, noise: float = 0.0) -> _Synthetic:
    clock = _Clock()
    ctx = _Synthetic(device="cuda", smoke=False, sampling=cfg, clock=clock, sleep=clock.sleep)
    ctx.cost, ctx.noise, ctx.comparisons, ctx.rng = cost, noise, tuple(comps), random.Random(7)
    return ctx


GROUPS = {"g1": ("a1", "b1"), "g2": ("a2", "b2"), "g3": ("a3", "b3")}
COST = {"a1": 0.002, "b1": 0.001, "a2": 0.003, "b2": 0.003, "a3": 0.004, "b3": 0.001}
COMPS = [Comparison(g, a, b, 1.5) for g, (a, b) in GROUPS.items()]


def _arms(names: tuple[str, ...]) -> list[Arm]:
    return [Arm(n, lambda: None) for n in names]


def test_one_schedule_keeps_each_comparisons_arms_in_the_same_round() -> None:
    ctx = _ctx(COST, COMPS, SamplingConfig())
    out = ctx.measure_groups({g: _arms(names) for g, names in GROUPS.items()})
    for g, (a, b) in GROUPS.items():
        va, vb = out[g]
        assert va.timing is not None and vb.timing is not None and va.timing.rounds and vb.timing.rounds
        assert len(va.timing.rounds) == len(vb.timing.rounds)
        # The state drifts by up to 30% between episodes; a round's two arms share it, so every
        # per-round ratio is the true one, which only holds when both come from the same round.
        assert {round(x / y, 9) for x, y in zip(va.timing.rounds, vb.timing.rounds, strict=True)} == {
            round(COST[a] / COST[b], 9)
        }
    # A group's two arms run back to back: next to every block of a1 is one of b1.
    seq = [n for i, n in enumerate(ctx.clock.blocks) if i == 0 or ctx.clock.blocks[i - 1] != n]  # type: ignore[attr-defined]
    for i, n in enumerate(seq):
        partner = ("b" if n[0] == "a" else "a") + n[1]
        assert partner in seq[max(0, i - 1) : i + 2], (i, seq[max(0, i - 3) : i + 3])


def test_the_idle_gap_is_paid_once_per_episode_not_once_per_group() -> None:
    cfg = SamplingConfig()
    shared = _ctx(COST, COMPS, cfg)
    out = shared.measure_groups({g: _arms(names) for g, names in GROUPS.items()})
    episodes = {
        len(v.timing.rounds or ()) // (v.timing.episode_rounds or 1) for vs in out.values() for v in vs if v.timing
    }
    assert shared.clock.sleeps == max(episodes) - 1  # type: ignore[attr-defined]
    apart = 0
    for g, names in GROUPS.items():
        one = _ctx(COST, COMPS, cfg)
        one.measure_paired(_arms(names), group=g)
        apart += one.clock.sleeps  # type: ignore[attr-defined]
    assert apart >= 3 * (cfg.min_episodes - 1) and shared.clock.sleeps < apart  # type: ignore[attr-defined]


def test_the_warm_up_seconds_are_shared_by_the_schedules_arms() -> None:
    seen: dict[str, float] = {}

    class Spy(_Synthetic):
        def _setup_arm(self, arm: Arm, cfg: SamplingConfig) -> tuple[Callable[[], Any], Callable[[], float], int, int]:
            seen[arm.name] = cfg.warmup_s
            return super()._setup_arm(arm, cfg)

    cfg = SamplingConfig(warmup_s=0.3)
    clock = _Clock()
    ctx = Spy(device="cuda", smoke=False, sampling=cfg, clock=clock, sleep=clock.sleep)
    ctx.cost, ctx.comparisons, ctx.rng = COST, tuple(COMPS), random.Random(7)
    ctx.measure_groups({g: _arms(names) for g, names in GROUPS.items()})
    assert seen == {n: pytest.approx(0.05) for n in COST}  # 0.3 s over six arms
    seen.clear()
    ctx.measure_groups({"g1": _arms(("a1",))})
    assert seen == {"a1": pytest.approx(0.3)}  # one arm keeps the whole warm-up


NEAR = {**COST, "a1": 0.0015}  # g1 at its threshold, 1.5: never decided, only the target stops it


def _elapsed(target: float, budget: float, noise: float, seed: int, cost: dict[str, float] = COST) -> float:
    cfg = dataclasses.replace(SamplingConfig(), target_rel_ci=target, budget_s=budget)
    ctx = _ctx(cost, COMPS, cfg, noise)
    ctx.rng = random.Random(seed)
    out = ctx.measure_groups({g: _arms(names) for g, names in GROUPS.items()})
    assert all(v.status == "ok" for vs in out.values() for v in vs)
    return float(ctx.clock())


# A schedule stops only at an episode's end, so two runs that both stop on the budget can end an
# episode and a gap apart (a group that stopped earlier changes where the episodes end).
GRAIN = 2 * SamplingConfig().episode_s + SamplingConfig().episode_gap_s


@pytest.mark.parametrize("noise", [0.002, 0.02, 0.05, 0.3])
@pytest.mark.parametrize("cost", [COST, NEAR, {n: 50 * t for n, t in COST.items()}], ids=["clear", "near", "slow"])
def test_a_looser_target_and_a_smaller_budget_never_take_longer(noise: float, cost: dict[str, float]) -> None:
    for seed in range(2):
        default = _elapsed(0.01, 5.0, noise, seed, cost)
        looser = _elapsed(0.02, 5.0, noise, seed, cost)
        smaller = _elapsed(0.01, 2.0, noise, seed, cost)
        both = _elapsed(0.02, 2.0, noise, seed, cost)
        assert looser <= default + GRAIN and smaller <= default + GRAIN, (default, looser, smaller)
        assert both <= min(looser, smaller) + GRAIN, (both, looser, smaller)


def test_a_looser_target_and_a_smaller_budget_do_take_less() -> None:
    for seed in range(3):
        # At the threshold nothing is decided: the target is what stops it.
        assert _elapsed(0.02, 5.0, 0.03, seed, NEAR) < 0.8 * _elapsed(0.01, 5.0, 0.03, seed, NEAR)
        # Too noisy for either target: the budget is what stops it.
        assert _elapsed(0.01, 2.0, 0.3, seed) < 0.6 * _elapsed(0.01, 5.0, 0.3, seed)
        assert _elapsed(0.02, 2.0, 0.3, seed) < 0.6 * _elapsed(0.01, 5.0, 0.3, seed)
        # Slow arms (a 100 ms step) on target at the floor: a looser target's floor has fewer rounds.
        slow = {name: 50 * t for name, t in COST.items()}
        assert _elapsed(0.02, 2.0, 0.002, seed, slow) < 0.6 * _elapsed(0.01, 5.0, 0.002, seed, slow)


def _noisy_run(budget: float) -> tuple[_Synthetic, dict[str, list[Any]]]:
    cfg = dataclasses.replace(SamplingConfig(), budget_s=budget)
    ctx = _ctx(COST, COMPS, cfg, noise=0.3)  # too noisy for the 1% target: the budget stops it
    out = ctx.measure_groups({g: _arms(names) for g, names in GROUPS.items()})
    assert {v.timing.stop_reason for vs in out.values() for v in vs if v.timing} == {"time_budget"}
    return ctx, out


def test_the_budget_bounds_the_schedule_but_for_the_floor() -> None:
    cfg = SamplingConfig()
    ctx, out = _noisy_run(0.1)  # 0.6 s for six arms: under the floor, which it stops at
    v = out["g1"][0]
    assert v.timing is not None and v.timing.episode_rounds
    assert len(v.timing.rounds) // v.timing.episode_rounds == cfg.min_episodes
    ctx, out = _noisy_run(2.0)  # 12 s for six arms: it stops at the first episode's end past them
    clock = ctx.clock
    assert isinstance(clock, _Clock)
    episode_work = (clock.t - clock.sleeps * cfg.episode_gap_s) / (clock.sleeps + 1)
    assert 12.0 <= clock.t <= 12.0 + episode_work + cfg.episode_gap_s


class _SlowStart(_Synthetic):
    """The first timed sample costs 0.4 s more: one-off costs at the schedule's start (the monitor's first
    readings on an H200), longer than an episode's floor of seconds on their own."""

    def _setup_arm(self, arm: Arm, cfg: SamplingConfig) -> tuple[Callable[[], Any], Callable[[], float], int, int]:
        runner, take, calls, warm = super()._setup_arm(arm, cfg)
        clock = self.clock
        assert isinstance(clock, _Clock)

        def first_slow() -> float:
            if not clock.blocks:
                clock.t += 0.4
            return take()

        return runner, first_slow, calls, warm


@pytest.mark.parametrize("target", [0.01, 0.02])
def test_a_slow_first_round_does_not_shorten_every_episode(target: float) -> None:
    cfg = dataclasses.replace(SamplingConfig(), target_rel_ci=target, budget_s=2.0)
    clock = _Clock()
    ctx = _SlowStart(device="cuda", smoke=False, sampling=cfg, clock=clock, sleep=clock.sleep)
    ctx.cost, ctx.comparisons, ctx.rng = {"a1": 0.002, "b1": 0.001}, (COMPS[0],), random.Random(7)
    (v, _) = ctx.measure_groups({"g1": _arms(("a1", "b1"))})["g1"]
    assert v.timing is not None and v.timing.episode_rounds is not None
    # A round is an untimed call and 3 samples of each arm, 12 ms or more (the drift only adds): an episode of
    # 0.3 s needs 25 of them at most. Timed from the schedule's start, the slow first round alone filled one.
    assert v.timing.episode_rounds >= 0.9 * cfg.episode_s / 0.012, v.timing.episode_rounds


def test_the_floors_scale_with_the_budget_and_a_looser_target() -> None:
    base = SamplingConfig()
    assert base.episode_floor(10.0) == (4, 0.3)  # 20 rounds in 6 episodes, 0.3 s each
    assert dataclasses.replace(base, target_rel_ci=0.005).episode_floor(10.0) == (4, 0.3)  # tighter: the default
    rounds, seconds = dataclasses.replace(base, target_rel_ci=0.02).episode_floor(10.0)
    assert (rounds, seconds) == (2, 0.3)  # a quarter of 20 rounds in 6 episodes: one each, but never under two
    assert dataclasses.replace(base, target_rel_ci=0.015).episode_floor(10.0) == (2, 0.3)
    assert dataclasses.replace(base, target_rel_ci=0.05).episode_floor(10.0)[0] == 2  # never under two rounds
    assert base.episode_floor(0.6)[1] == pytest.approx(0.1)  # an episode never asks for over its share
    assert sampling_config(None, None, quick=True).target_rel_ci == QUICK_TARGET
    assert sampling_config(None, 0.03, quick=True).target_rel_ci == 0.03


def test_quick_times_only_the_arms_a_headline_comparison_uses() -> None:
    ctx = _ctx(COST, COMPS[:1], SamplingConfig())
    ctx.quick = True
    out = ctx.measure_groups({"g1": _arms(("a1", "b1", "extra")), "g2": _arms(("a2", "b2"))})
    assert [v.status for v in out["g1"]] == ["ok", "ok", "skipped"]
    assert [v.status for v in out["g2"]] == ["skipped", "skipped"]
    assert all(v.reason == schedule.QUICK_SKIP for v in [*out["g1"][2:], *out["g2"]])
    assert ctx.measure("alone", lambda: None).reason == schedule.QUICK_SKIP


def test_quick_first_rule_leaves_later_headlines_untimed_once_one_answered() -> None:
    heads = [dataclasses.replace(c, headline=True) for c in COMPS]
    ctx = _ctx(COST, heads, SamplingConfig())
    ctx.quick = True
    first = ctx.measure_groups({"g1": _arms(("a1", "b1"))})["g1"]
    assert ctx.untimed("a2") is None  # nothing has answered yet
    assert ctx.untimed("a2", first) == schedule.QUICK_ANSWERED.format(comparison="g1")
    assert ctx.untimed("a1", first) is None  # the answering headline's own arms
    failed = [dataclasses.replace(first[0], status="error")]
    assert ctx.untimed("a2", [*failed, first[1]]) is None  # g1 gave no ratio: g2 may still be the headline
    ctx.headline_rule = "worst"  # every headline decides together: all are timed
    assert ctx.untimed("a2", first) is None
    ctx.headline_rule, ctx.quick = "first", False
    assert ctx.untimed("a2", first) is None  # a full run times every comparison


def test_quick_profiles_no_arm_and_each_variant_says_so() -> None:
    quick = _ctx(COST, COMPS[:1], SamplingConfig())
    quick.quick = True
    timed = [v for v in quick.measure_groups({"g1": _arms(("a1", "b1"))})["g1"]]
    timed.append(quick.measure("a1", lambda: None))
    for v in timed:
        assert v.status == "ok" and v.kernel_source == schedule.QUICK_UNPROFILED and v.profiled_iterations == 0
        assert v.timing is not None and v.timing.profile_s is None and not v.kernels
    assert "profiling" not in quick.spent
    full = _ctx(COST, COMPS[:1], SamplingConfig())
    v = full.measure_groups({"g1": _arms(("a1", "b1"))})["g1"][0]
    assert v.kernel_source == "cuda" and v.timing is not None and v.timing.profile_s is not None


def test_a_failing_group_leaves_the_schedule_and_the_others_go_on() -> None:
    class Fails(_Synthetic):
        def _setup_arm(self, arm: Arm, cfg: SamplingConfig) -> Any:
            if arm.name == "a2":
                raise RuntimeError("out of memory (simulated)")
            return super()._setup_arm(arm, cfg)

    clock = _Clock()
    ctx = Fails(device="cuda", smoke=False, sampling=SamplingConfig(), clock=clock, sleep=clock.sleep)
    ctx.cost, ctx.comparisons = COST, tuple(COMPS)
    out = ctx.measure_groups({g: _arms(names) for g, names in GROUPS.items()})
    assert [v.status for v in out["g2"]] == ["error", "error"] and "simulated" in (out["g2"][0].reason or "")
    assert all(v.status == "ok" for g in ("g1", "g3") for v in out[g])
    with pytest.raises(RuntimeError, match="simulated"):  # one group alone raises, as measure_paired always did
        ctx.measure_paired(_arms(("a2", "b2")), group="g2")


def _verdict(lo: float, hi: float, status: str = "not_reproduced") -> Verdict:
    row = {"comparison": "fp32", "where": "straddles" if lo < 1.5 <= hi else "below", "status": status}
    return Verdict(
        metric="t(a)/t(b)",
        description="d",
        value=(lo + hi) / 2,
        ci_low=lo,
        ci_high=hi,
        ci_level=0.95,
        threshold=1.5,
        status=status,  # type: ignore[arg-type]
        finding="Not reproduced: ...",
        breakdown=(row,),
    )


def test_a_quick_ci_that_straddles_is_undecided_and_names_the_full_command() -> None:
    v = as_quick(_verdict(1.3, 1.6), "repro run 5090-linear")
    assert v.status == "undecided" and "`repro run 5090-linear`" in v.finding
    assert v.breakdown[0]["status"] == "undecided"
    assert as_quick(_verdict(1.0, 1.2), "x").status == "not_reproduced"  # clear of the threshold: stands
    assert as_quick(_verdict(1.6, 1.9, "reproduced"), "x").status == "reproduced"


def _quick_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, straddle: bool) -> tuple[int, dict[str, Any], str]:
    # test-gap (a 2 ms sleep against a no-op) reproduces on any machine; with the smoke relabelling
    # switched off, as on a GPU, the quick run's verdict is what --fail-on and the report see.
    def as_gpu(v: Verdict, device: str | None) -> Verdict:
        return dataclasses.replace(v, status="not_reproduced", ci_low=1.0, ci_high=2.0) if straddle else v

    monkeypatch.setattr("repro.run.execute.as_smoke", as_gpu)
    cli = CliRunner(env={"COLUMNS": "120"})
    args = ["run", "test-gap", "--repro-path", str(PLUGINS), "--out", str(tmp_path), "--quick", "--no-collect-env"]
    r = cli.invoke(app, [*args, "--budget", "0.3", "--fail-on", "reproduced"])
    (art,) = tmp_path.glob("*/test-gap.json")
    doc = json.loads(art.read_text())
    assert artifact.validation_errors(doc) == []
    (rep,) = tmp_path.glob("*/report.md")
    return r.exit_code, doc, rep.read_text()


def test_quick_run_says_so_in_artifact_and_report_and_fail_on_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, doc, md = _quick_run(tmp_path, monkeypatch, straddle=False)
    assert doc["run"]["quick"] is True and "--quick" in doc["run"]["rerun"]
    assert doc["verdict"]["status"] == "reproduced" and code == 3
    assert "(quick run)" in md and "Quick run (`--quick`)" in md
    timed = [v for v in doc["variants"] if v["status"] == "ok"]
    assert timed and all(v["kernel_source"] == schedule.QUICK_UNPROFILED for v in timed)
    # The artifact carries its busy share (schema 1.9), the samples' own sum over the run's wall clock.
    run = doc["run"]
    assert 0 < run["gpu_busy_s"] < run["duration_s"] and run["gpu_busy_share"] > 0
    recomputed = artifact.gpu_busy({**doc, "run": {k: v for k, v in run.items() if not k.startswith("gpu_busy")}})
    assert recomputed is not None and run["gpu_busy_s"] == pytest.approx(recomputed[0], abs=1e-3)


def test_quick_run_straddling_is_undecided(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, doc, md = _quick_run(tmp_path, monkeypatch, straddle=True)
    assert doc["verdict"]["status"] == "undecided" and code == 0
    assert "`repro run test-gap`" in doc["verdict"]["finding"] and "undecided" in md


def test_gpu_busy_share_in_the_breakdown_and_the_report() -> None:
    doc: dict[str, Any] = {
        "run": {"duration_s": 10.0, "device": "cuda"},
        "variants": [
            {"timing": {"samples": [0.001] * 100, "calls_per_sample": 5}, "extra": {}},
            {"timing": {"samples": [0.002] * 50, "calls_per_sample": 10}, "extra": {"kernel_rounds_s": [0.5, 0.5]}},
            {"timing": None, "extra": {}},
        ],
    }
    busy = artifact.gpu_busy(doc)
    assert busy is not None and busy[0] == pytest.approx(2.5) and busy[1] == pytest.approx(0.25)
    assert artifact.format_busy(doc) == "GPU busy 2.5 s (25%)"
    assert artifact.gpu_busy({"run": {"duration_s": 1.0}, "variants": []}) is None
    # Schema 1.9 writes the pair: read as written where it agrees with itself and the duration, else recomputed.
    written = {**doc, "run": {**doc["run"], "gpu_busy_s": 3.0, "gpu_busy_share": 0.3}}
    assert artifact.gpu_busy(written) == (3.0, 0.3) and artifact.format_busy(written) == "GPU busy 3.0 s (30%)"
    for bad in ((1e300, 1e300), (3.0, 0.5), (20.0, 2.0), (-1.0, -0.1)):
        wrong = {**doc, "run": {**doc["run"], "gpu_busy_s": bad[0], "gpu_busy_share": bad[1]}}
        assert artifact.gpu_busy(wrong) == pytest.approx((2.5, 0.25))


def test_the_run_busy_share_sums_every_repro_and_heads_the_pasted_report() -> None:
    timed: dict[str, Any] = {
        "run": {"duration_s": 10.0, "device": "cuda", "gpu_busy_s": 2.0, "gpu_busy_share": 0.2},
        "variants": [],
    }
    idle: dict[str, Any] = {"run": {"duration_s": 6.0, "device": "cuda"}, "variants": []}  # timed nothing: counts
    assert artifact.format_run_busy([timed, idle]) == "GPU busy 2.0 s of the repros' 16.0 s (12%)"
    assert artifact.format_run_busy([timed]) == "GPU busy 2.0 s of the repro's 10.0 s (20%)"
    cpu = {"run": {**timed["run"], "device": "cpu"}, "variants": []}
    assert artifact.format_run_busy([timed, cpu]).startswith("device busy 4.0 s of the repros' 20.0 s")
    assert artifact.format_run_busy([idle]) == ""
    docs = [artifact.load(p) for p in sorted(REFERENCE.glob("*/*.json"))]
    # The pasted form, cut to its limits, keeps the run's share on its identity line.
    head = report(docs).split("\n")[2]
    busy = [artifact.gpu_busy(d) for d in docs]
    total = sum(b[0] for b in busy if b is not None)
    seconds = sum(d["run"]["duration_s"] for d in docs)
    assert f"GPU busy {total:.1f} s of the repros' {seconds:.1f} s ({total / seconds:.0%})" in head


def test_old_artifacts_still_validate_render_and_get_a_busy_share() -> None:
    paths = sorted(REFERENCE.glob("*/*.json"))
    assert paths
    docs = [artifact.load(p) for p in paths]  # validates (schema 1.3)
    assert {d["schema_version"] for d in docs} == {"1.3"}
    md = report(docs, limit=10**9, max_lines=None)  # whole: a pasted report may leave the time lines out
    assert all(artifact.gpu_busy(d) is not None for d in docs) and "GPU busy" in md
    parts = dict(artifact.time_breakdown(docs[0]))
    assert "  sampling" in parts and "measure" in parts  # the split from the variants, as before 1.4


def test_a_new_artifact_takes_the_measure_split_from_the_run() -> None:
    doc = {"run": {"phases_s": {"cuda_init": 0.1, "measure": 5.0, "collect_env": 1.0}, "measure_s": {"sampling": 3.0}}}
    assert artifact.time_breakdown(doc) == [
        ("cuda_init", 0.1),
        ("measure", 5.0),
        ("  sampling", 3.0),
        ("  inputs and side measurements", 2.0),  # the measurement's seconds outside its schedules
        ("collect_env", 1.0),
    ]


def test_repro_all_quick_reaches_the_worker(tmp_path: Path) -> None:
    cli = CliRunner(env={"COLUMNS": "120"})
    args = ["all", "--only", "test-gap", "--repro-path", str(PLUGINS), "--out", str(tmp_path), "--quick"]
    r = cli.invoke(app, [*args, "--budget", "0.3", "--no-fork-server"])
    assert r.exit_code == 0, r.output
    (art,) = tmp_path.glob("*/test-gap.json")
    doc = json.loads(art.read_text())
    assert doc["run"]["quick"] is True and doc["verdict"]["status"] == "smoke"
    assert doc["fingerprint"]["collect_env"] == {"output": None, "error": "not collected"}  # quick: none
    assert doc["variants"][0]["timing"]["target_rel_ci"] == QUICK_TARGET


def test_a_quick_5090_linear_finding_names_no_kernels() -> None:
    from repro.repros.linear_5090 import Linear5090, LinearParams

    def timed(name: str, t: float) -> VariantResult:
        samples = [t * (1 + 0.001 * (i % 5)) for i in range(40)]
        return VariantResult(
            name=name,
            label=name,
            config={},
            status="ok",
            device="cuda",
            timing=timing_for(samples),
            kernel_source=schedule.QUICK_UNPROFILED,
        )

    res = RunResult(variants=(timed("linear_fp32", 2e-3), timed("manual_fp32", 1e-3)))
    verdict = Linear5090().verdict(LinearParams(), res)
    assert f"no kernels to name: {schedule.QUICK_UNPROFILED}" in verdict.finding
    assert "no kernels captured" not in verdict.finding


def test_each_arm_keeps_its_own_calibrated_calls_per_sample() -> None:
    # Calibration sizes each arm's sample to about MIN_SAMPLE_S: a sample's fixed cost (the first call's launch on an
    # idle queue) is then the same share of both arms' samples and cancels in their ratio, where equal call counts
    # would give the faster arm the larger share.
    calibrated = {"a1": 5, "b1": 3, "a2": 2, "b2": 2, "a3": 4, "b3": 1}

    class _Calibrated(_Synthetic):
        def _setup_arm(self, arm: Arm, cfg: SamplingConfig) -> tuple[Callable[[], Any], Callable[[], float], int, int]:
            runner, take, _, warm = super()._setup_arm(arm, cfg)
            return runner, take, arm.calls_per_sample or calibrated[arm.name], warm

    clock = _Clock()
    ctx = _Calibrated(device="cuda", smoke=False, sampling=SamplingConfig(), clock=clock, sleep=clock.sleep)
    ctx.cost, ctx.comparisons, ctx.rng = COST, tuple(COMPS), random.Random(7)
    out = ctx.measure_groups({g: _arms(names) for g, names in GROUPS.items()})
    calls = {v.name: v.timing.calls_per_sample for vs in out.values() for v in vs if v.timing is not None}
    assert calls == calibrated


def test_the_order_check_classifies_each_round_by_the_order_the_schedule_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    """repro.core.order.orders_of says in which order a group's arms ran in each of its rounds: here read off the
    schedule's own blocks, for groups of 3, 2 and 4 arms that stop after different numbers of rounds."""
    from repro.core.order import orders_of

    ran: list[str] = []
    block = schedule._block

    def recorded(ctx: Any, a: Any, cfg: SamplingConfig) -> None:
        ran.append(a.arm.name)
        block(ctx, a, cfg)

    monkeypatch.setattr(schedule, "_block", recorded)
    groups = {"g3": ("a", "b", "c"), "g2": ("d", "e"), "g4": ("f", "g", "h", "i")}
    cost = {"a": 0.002, "b": 0.001, "c": 0.003, "d": 0.001, "e": 0.001, "f": 0.001, "g": 0.002, "h": 0.001, "i": 0.004}
    comps = [Comparison(f"{g}x", names[0], names[1], 1.5) for g, names in groups.items()]
    ctx = _ctx(cost, comps, SamplingConfig(), noise=0.2)
    ctx.quiet = frozenset("defghi")  # g2 and g4 decide early, g3 samples on
    out = ctx.measure_groups({g: _arms(n) for g, n in groups.items()})
    lengths = set()
    for g, names in groups.items():
        mine = [n for n in ran if n in names]
        timing = out[g][0].timing
        rounds = timing.rounds if timing is not None else None
        assert rounds is not None and len(mine) == len(names) * len(rounds)
        seen = [tuple(mine[i : i + len(names)]) for i in range(0, len(mine), len(names))]
        assert seen == orders_of(list(names), len(rounds)), g
        lengths.add(len(rounds))
    assert len(lengths) > 1  # the groups stopped after different numbers of rounds
