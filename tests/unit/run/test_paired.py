"""Paired comparisons: interleaved rounds, CIs from per-round ratios that survive drift, episodes, the judge."""

from __future__ import annotations

import dataclasses
import json
import random
from collections import Counter
from pathlib import Path

import pytest
from helpers import ROOT, timing_for
from typer.testing import CliRunner

from repro.cli.main import app
from repro.core import stats
from repro.core.context import Arm, SamplingConfig
from repro.core.order import round_order
from repro.core.results import Comparison, Finding, Metric, RunResult, Timing, VariantResult
from repro.core.spec import Repro, Requirements
from repro.core.verdict import as_smoke, outcome, variant_ratio
from repro.run.context import RunContext
from repro.run.kernels import per_call_device_time
from repro.run.sampling import kernel_episode

LEGACY = ROOT / "tests" / "plugins_legacy"
TRUE_RATIO = 0.92


def test_round_order_puts_each_arm_first_equally_often() -> None:
    for k in (2, 3, 4):
        firsts = Counter(round_order(k, r)[0] for r in range(4 * k))
        assert set(firsts) == set(range(k)) and len(set(firsts.values())) == 1, (k, firsts)
        for r in range(4 * k):
            assert sorted(round_order(k, r)) == list(range(k))
    assert [round_order(2, r) for r in range(4)] == [[0, 1], [1, 0], [1, 0], [0, 1]]


def _drifting_pair(rng: random.Random, n: int) -> tuple[list[float], list[float], list[float], list[float]]:
    """Both sides under one GPU state that drifts by up to +-8% over the run, plus 0.5% noise.

    Returns (num, den) as blocked timing sees them (num's block first, then den's, each in
    whatever state the GPU is in then) and as paired rounds see them (both in every round).
    """
    state = [1.0 + 0.08 * ((i / (2 * n)) - 0.5) * 2 + rng.gauss(0, 0.01) for i in range(2 * n)]

    def noisy(x: float) -> float:
        return x * (1 + rng.gauss(0, 0.005))

    blocked_num = [noisy(TRUE_RATIO * state[i]) for i in range(n)]
    blocked_den = [noisy(state[n + i]) for i in range(n)]
    paired_num = [noisy(TRUE_RATIO * state[2 * i]) for i in range(n)]
    paired_den = [noisy(state[2 * i + 1]) for i in range(n)]
    return blocked_num, blocked_den, paired_num, paired_den


def test_paired_ci_covers_the_true_ratio_under_drift_where_blocked_timing_does_not() -> None:
    rng = random.Random(8)
    blocked_hits = paired_hits = 0
    trials = 200
    for _ in range(trials):
        bn, bd, pn, pd = _drifting_pair(rng, 60)
        _, lo, hi = stats.ratio_ci(bn, bd)
        blocked_hits += lo <= TRUE_RATIO <= hi
        _, lo, hi = stats.paired_ratio_ci(pn, pd)
        paired_hits += lo <= TRUE_RATIO <= hi
    # Blocked timing lets the drift between the two blocks into the ratio: its CI, built from
    # within-block noise only, misses the true ratio almost always. Pairing cancels it.
    assert blocked_hits / trials < 0.2
    assert paired_hits / trials >= 0.93


def test_episodes_widen_the_ci_to_cover_a_state_that_holds_for_an_episode() -> None:
    # The ratio itself depends on the GPU's state (a slower clock stretches the compute-bound
    # side more), and a state holds for a whole episode: rounds within one are not independent.
    rng = random.Random(3)
    hits_rounds = hits_episodes = 0
    trials = 200
    for _ in range(trials):
        num, den = [], []
        for _ep in range(6):
            shift = 1 + rng.gauss(0, 0.006)
            for _r in range(25):
                d = 1.0 + rng.gauss(0, 0.002)
                num.append(TRUE_RATIO * shift * d * (1 + rng.gauss(0, 0.001)))
                den.append(d)
        _, lo, hi = stats.paired_ratio_ci(num, den)
        hits_rounds += lo <= TRUE_RATIO <= hi
        _, lo2, hi2 = stats.paired_ratio_ci(num, den, episode=25)
        hits_episodes += lo2 <= TRUE_RATIO <= hi2
        assert lo2 <= lo and hi2 >= hi  # the episode level only ever widens
    assert hits_rounds / trials < 0.8
    assert hits_episodes / trials >= 0.93


def test_paired_ci_needs_aligned_rounds() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        stats.paired_ratio_ci([1.0, 2.0], [1.0])
    value, lo, hi = stats.paired_ratio_ci([2.0] * 10, [1.0] * 10, scale=0.5)
    assert (value, lo, hi) == (1.0, 1.0, 1.0)


def test_measure_paired_interleaves_and_records_rounds(fast: SamplingConfig) -> None:
    calls: list[str] = []
    prepared: list[str] = []

    def arm(name: str, n: int) -> Arm:
        def fn() -> int:
            calls.append(name)
            return sum(range(n))

        return Arm(name, fn, label=name.upper(), config={"n": n}, prepare=lambda: prepared.append(name))

    # At the 1% target the floor of rounds is min_rounds (a looser one would shrink it).
    cfg = dataclasses.replace(
        fast, target_rel_ci=0.01, min_rounds=12, min_episodes=3, episode_s=0.0, samples_per_round=2
    )
    comp = Comparison("ab", "a", "b", 1.5)
    ctx = RunContext(device="cpu", smoke=True, sampling=cfg, comparisons=(comp,))
    a, b = ctx.measure_paired([arm("a", 4000), arm("b", 1000)], group="ab")
    assert a.timing is not None and b.timing is not None
    assert a.timing.group == b.timing.group == "ab"
    assert a.timing.rounds is not None and b.timing.rounds is not None
    assert len(a.timing.rounds) == len(b.timing.rounds) >= 12
    assert a.timing.episode_rounds is not None and len(a.timing.rounds) % a.timing.episode_rounds == 0
    assert a.timing.stop_reason in ("ci_target", "decided", "time_budget", "max_rounds")
    assert len(a.timing.samples) == 2 * len(a.timing.rounds)
    # Each round runs both arms; the order alternates, so neither always goes first.
    assert prepared.count("a") >= len(a.timing.rounds) and prepared.count("b") >= len(b.timing.rounds)
    assert a.label == "A" and a.config == {"n": 4000} and a.status == "ok"


class _Judged(Repro[None]):
    id = "test-judged"
    title = "judged"
    upstream = ()
    seed_claim = "test"
    Params = type(None)
    requires = Requirements(cuda=False)
    metric = Metric("t(a)/t(b)", "test", 1.5)
    headline_rule = "first"

    def comparisons(self, params: None) -> list[Comparison]:
        return [
            Comparison("first", "a", "b", 1.5, label="t(a)/t(b)", headline=True, qualifiers={"side": "one"}),
            Comparison("second", "c", "d", 1.5, label="t(c)/t(d)", headline=True),
        ]

    def explain(self, params: None, result: RunResult, out: object) -> Finding:
        return Finding("because of the test", ("a detail",))


def _paired(name: str, rounds: list[float], device: str = "cuda", group: str = "g") -> VariantResult:
    t = timing_for(rounds)
    t = Timing(
        **{**{f.name: getattr(t, f.name) for f in dataclasses.fields(t)}, "group": group, "rounds": tuple(rounds)}
    )
    return VariantResult(name=name, label=name, config={}, status="ok", device=device, timing=t)


def test_judge_computes_the_ratio_the_status_and_the_lead() -> None:
    rng = random.Random(1)
    den = [1.0 + rng.gauss(0, 0.01) for _ in range(40)]
    num = [2.0 * d * (1 + rng.gauss(0, 0.002)) for d in den]
    v = _Judged().verdict(None, RunResult(variants=(_paired("a", num), _paired("b", den))))
    assert v.status == "reproduced" and v.paired is True and v.headline == "first"
    assert v.finding.startswith("Reproduced: t(a)/t(b) was 2.000x (95% CI ")
    assert "the whole CI is above the 1.5 threshold; because of the test." in v.finding
    assert v.details == ("a detail",) and v.variants == ("a", "b")
    (row,) = v.breakdown  # the second comparison had no variants: it is missing, not a row
    assert row["side"] == "one" and row["paired"] is True and row["n"] == 40 and row["headline"] is True


def test_judge_falls_to_the_next_headline_and_never_judges_a_cpu_run() -> None:
    den = [1.0] * 20
    cpu = RunResult(variants=(_paired("c", [3.0] * 20, "cpu"), _paired("d", den, "cpu")))
    v = _Judged().verdict(None, cpu)
    assert v.headline == "second" and v.status == "smoke"
    assert v.finding.startswith("Smoke run on cpu, not evidence about any GPU: t(c)/t(d) was 3.0000x (95% CI 3.0000-")
    assert all(r["status"] == "smoke" for r in v.breakdown)
    none = _Judged().verdict(None, RunResult(variants=()))
    assert none.status == "skipped" and "variant a was not measured" in none.finding


def test_as_smoke_relabels_an_older_repro_verdict() -> None:
    out = outcome([Comparison("x", "a", "b", 1.5)], [_paired("a", [2.0] * 10), _paired("b", [1.0] * 10)])
    assert out.headline is not None and out.headline.value == 2.0 and not out.smoke
    v = _Judged().verdict(None, RunResult(variants=(_paired("a", [2.0] * 10), _paired("b", [1.0] * 10))))
    s = as_smoke(v, "cuda")
    assert s.status == "smoke" and s.finding.startswith("Smoke run on cuda") and v.finding in s.details[0]
    assert as_smoke(dataclasses.replace(v, status="skipped"), "cpu").status == "skipped"


@pytest.mark.filterwarnings("ignore:repro.(spec|catalog|measure|verdict) is the first plugin API:DeprecationWarning")
def test_an_older_api_plugin_gets_a_paired_ci(tmp_path: Path) -> None:
    """A copy of 5090-linear as written before this API (its own verdict via ratio_verdict) gets paired rounds."""
    cli = CliRunner(env={"COLUMNS": "120"})
    args = ["run", "legacy-linear", "--repro-path", str(LEGACY), "--smoke", "--out", str(tmp_path)]
    r = cli.invoke(app, [*args, "--budget", "0.3", "--no-collect-env", "--set", "tf32_variants=false"])
    assert r.exit_code == 0, r.output
    (art,) = tmp_path.glob("*/legacy-linear.json")
    doc = json.loads(art.read_text())
    v = doc["verdict"]
    assert v["status"] == "smoke" and v["paired"] is True
    lin, man = ({x["name"]: x for x in doc["variants"]}[n] for n in ("linear_fp32", "manual_fp32"))
    assert lin["timing"]["group"] == man["timing"]["group"] == "linear_fp32+manual_fp32"
    assert len(lin["timing"]["rounds"]) == len(man["timing"]["rounds"]) >= 20
    assert "blocked_timing_median_s" in lin["extra"]
    assert "The repro's own words: " in v["details"][0]
    assert cli.invoke(app, ["validate", str(art)]).exit_code == 0


def test_the_writing_a_repro_example_runs_as_written(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "writing-a-repro.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    folder = tmp_path / "my_repros"
    folder.mkdir()
    (folder / "addmm_vs_mm.py").write_text(code)
    cli = CliRunner(env={"COLUMNS": "120"})
    args = ["run", "addmm-vs-mm", "--repro-path", str(folder), "--smoke", "--out", str(tmp_path / "out")]
    r = cli.invoke(app, [*args, "--budget", "0.2", "--no-collect-env"])
    assert r.exit_code == 0, r.output
    (art,) = (tmp_path / "out").glob("*/addmm-vs-mm.json")
    v = json.loads(art.read_text())["verdict"]
    assert v["status"] == "smoke" and v["paired"] is True and "addmm's heaviest kernel was" in v["finding"]


def test_the_shim_rejects_a_re_timing_that_times_something_else() -> None:
    from repro.run.execute import shim_disagrees

    blocked = RunResult(variants=(_paired("big", [166e-6] * 20), _paired("small", [8.4e-6] * 20)))
    # A late-bound closure re-timed after run(): both calls now read the last loop's small tensors.
    stale = {"big": _paired("big", [6.0e-6] * 20), "small": _paired("small", [5.4e-6] * 20)}
    assert shim_disagrees(["big", "small"], stale, blocked) == ["big", "small"]
    drifted = {"big": _paired("big", [175e-6] * 20), "small": _paired("small", [8.1e-6] * 20)}
    assert shim_disagrees(["big", "small"], drifted, blocked) == []


@pytest.mark.filterwarnings("ignore:repro.(spec|catalog|measure|verdict) is the first plugin API:DeprecationWarning")
def test_a_run_leaves_the_callers_torch_switches_as_they_were(tmp_path: Path) -> None:
    import torch

    from repro.run.execute import RunRequest, execute

    before = (torch.is_grad_enabled(), torch.backends.cuda.matmul.allow_tf32, torch.get_float32_matmul_precision())
    req = RunRequest("legacy-linear", smoke=True, repro_paths=[LEGACY], sampling=SamplingConfig(budget_s=0.1))
    req = dataclasses.replace(req, overrides={"tf32_variants": "false"}, collect_env=False)
    run_dir = tmp_path / "20261130T000000Z-abc123"
    run_dir.mkdir()
    doc, _ = execute(req, run_dir)
    assert doc["verdict"]["paired"] is True
    after = (torch.is_grad_enabled(), torch.backends.cuda.matmul.allow_tf32, torch.get_float32_matmul_precision())
    assert after == before


def test_worst_of_k_holds_each_ci_at_a_bonferroni_level() -> None:
    comps = [Comparison(f"c{i}", f"n{i}", f"d{i}", 1.5, headline=True) for i in range(4)]
    rng = random.Random(5)
    variants = []
    for i in range(4):
        den = [1.0 + rng.gauss(0, 0.02) for _ in range(60)]
        variants += [_paired(f"n{i}", [1.5 * d * (1 + rng.gauss(0, 0.02)) for d in den]), _paired(f"d{i}", den)]
    worst = outcome(comps, variants, "worst")
    first = outcome(comps, variants, "first")
    assert all(r.level == pytest.approx(1 - 0.05 / 4) for r in worst.ratios)
    assert all(r.level == 0.95 for r in first.ratios)
    for w, f in zip(worst.ratios, first.ratios, strict=True):
        assert w.ci_low <= f.ci_low and w.ci_high >= f.ci_high
    assert "98.8% CI" in worst.fmt(worst.headline)


def test_kernel_episodes_split_rounds_only_when_each_episode_has_two() -> None:
    assert kernel_episode(36, 6) == 6 and kernel_episode(37, 6) == 7
    assert kernel_episode(36, 1) is None and kernel_episode(10, 6) is None


def test_warm_up_calls_end_the_previous_range_and_count_for_nothing() -> None:
    def ev(name: str, ts: float, cat: str, dur: float = 1.0) -> dict[str, object]:
        return {"ph": "X", "name": name, "ts": ts, "cat": cat, "dur": dur}

    trace = {
        "traceEvents": [
            ev("gpu_repro_call_0", 0, "user_annotation"),
            ev("adam_kernel", 5, "kernel", 10.0),
            ev("gpu_repro_warm_0", 100, "user_annotation"),
            ev("adam_kernel", 105, "kernel", 99.0),  # the warm-up's own: not call 0's
            ev("gpu_repro_call_1", 200, "user_annotation"),
            ev("adam_kernel", 205, "kernel", 20.0),
            ev("other", 206, "kernel", 50.0),
        ]
    }
    assert per_call_device_time(trace, 2, lambda n: "adam" in n) == pytest.approx([10e-6, 20e-6])


def _kernel_paired(name: str, per_call: list[float], episode: int | None) -> VariantResult:
    v = _paired(name, [1.0] * len(per_call))
    extra = {"kernel_rounds_s": per_call, "kernel_group": "k", "kernel_episode_rounds": episode}
    return dataclasses.replace(v, extra=extra)


def test_kernel_rounds_in_episodes_widen_the_kernel_ratio_ci() -> None:
    """Synthetic per-call kernel times (not a GPU run): the ratio holds one value per episode."""
    rng = random.Random(5)
    level = [1.000, 1.002, 0.999, 1.001, 0.998, 1.0015]
    den = [33e-3 * (1 + rng.gauss(0, 0.0005)) for _ in range(36)]
    num = [d * level[i // 6] * (1 + rng.gauss(0, 0.0001)) for i, d in enumerate(den)]
    _, lo, hi, paired, _, basis = variant_ratio(
        _kernel_paired("a", num, 6), _kernel_paired("b", den, 6), basis="kernel"
    )
    assert paired and basis == "kernel" and lo <= 0.9985 and hi >= 1.0015, (lo, hi)
    _, lo1, hi1, _, _, _ = variant_ratio(_kernel_paired("a", num, None), _kernel_paired("b", den, None), basis="kernel")
    assert not (lo1 <= 0.9985 and hi1 >= 1.0015), (lo1, hi1)  # the rounds alone miss the episodes' spread
    # A dropped round (no matching kernel) misaligns the episodes: the rounds' CI stands.
    gap = [*num[:3], 0.0, *num[4:]]
    _, lo2, hi2, _, n2, _ = variant_ratio(_kernel_paired("a", gap, 6), _kernel_paired("b", den, 6), basis="kernel")
    assert n2 == 35 and not (lo2 <= 0.9985 and hi2 >= 1.0015), (lo2, hi2)


def test_the_first_plugin_api_warns_and_resolves_to_the_current_names() -> None:
    import importlib
    import sys

    for name in ("repro.spec", "repro.catalog", "repro.measure", "repro.verdict"):
        sys.modules.pop(name, None)
        with pytest.warns(DeprecationWarning, match=f"{name} is the first plugin API; import from repro.api"):
            module = importlib.import_module(name)
        assert module.__name__ == "repro.run.legacy"
    from repro.core.verdict import ratio_verdict
    from repro.run.catalog import register

    legacy = importlib.import_module("repro.catalog")
    assert legacy.register is register and legacy.ratio_verdict is ratio_verdict
