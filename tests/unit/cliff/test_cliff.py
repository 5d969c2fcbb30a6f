"""`repro cliff`: the search on synthetic curves (known steps, noise, drift), and the command end to end on CPU.

Every curve here is synthetic: made-up seconds with a step placed at a known integer, never a
measurement.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT
from typer.testing import CliRunner

from repro.cli.main import app
from repro.cliff.search import Point, SearchConfig, Step, coarse_grid, find_steps
from repro.core.errors import UsageError
from repro.core.spec import Repro
from repro.evidence import artifact, cliff_report

ROUNDS = 24
EPISODE = 4  # 6 episodes of 4 rounds, as measure_paired records them


def cube(n: int) -> float:
    return float(n) ** 3


def synthetic(
    curve: Callable[[int], float],
    seed: int,
    *,
    noise: float = 0.03,
    drift: float = 0.05,
    kernels: Callable[[int], tuple[str, ...]] = lambda v: ("gemm",),
    calls: list[Sequence[int]] | None = None,
) -> Callable[[Sequence[int]], Mapping[int, Point]]:
    """A Measure: each group gets per-round drift shared by its values, plus each value's own noise."""
    rng = random.Random(seed)

    def measure(values: Sequence[int]) -> Mapping[int, Point]:
        if calls is not None:
            calls.append(tuple(values))
        # A slow or fast state per group (as between processes) and per round (as within one).
        state = math.exp(rng.gauss(0, 0.10))
        drifts = [state * math.exp(rng.gauss(0, drift)) for _ in range(ROUNDS)]
        return {
            v: Point(v, tuple(curve(v) * d * math.exp(rng.gauss(0, noise)) for d in drifts), EPISODE, kernels(v))
            for v in values
        }

    return measure


def lu_time(step_at: int | None, factor: float = 1.3) -> Callable[[int], float]:
    """Seconds that grow as n^3 (flat once scaled by work), times ``factor`` from ``step_at`` up."""
    return lambda n: 1e-3 * (n / 480) ** 3 * (factor if step_at is not None and n >= step_at else 1.0)


CFG = SearchConfig(480, 560, work=cube)


def resolved(steps: Sequence[Step]) -> list[tuple[int, int]]:
    return [(s.lo, s.hi) for s in steps if s.resolved]


def test_coarse_grid_spreads_evenly_and_is_dense_on_small_ranges() -> None:
    assert coarse_grid(480, 560, 9) == (480, 490, 500, 510, 520, 530, 540, 550, 560)
    assert coarse_grid(700, 800, 9)[0] == 700 and coarse_grid(700, 800, 9)[-1] == 800
    assert coarse_grid(10, 14, 9) == (10, 11, 12, 13, 14)


def test_finds_a_known_step_exactly_in_19_of_20_noisy_runs() -> None:
    hits = 0
    for seed in range(20):
        found = find_steps(synthetic(lu_time(512), seed), CFG)
        hits += resolved(found.steps) == [(511, 512)] and len(found.steps) == 1
    assert hits >= 19


def test_reports_no_step_on_a_smooth_curve_in_19_of_20_noisy_runs() -> None:
    # Scaled time drifts up by 8% over the range (0.1% per unit): smooth, nowhere a step.
    def smooth(n: int) -> float:
        return lu_time(None)(n) * (1 + 0.001 * (n - 480))

    clean = sum(not find_steps(synthetic(smooth, seed), CFG).steps for seed in range(20))
    assert clean >= 19


def test_large_round_to_round_drift_does_not_fake_a_step() -> None:
    # Rounds swing by 20% (shared by the values timed together): far more than the 10% threshold.
    clean = sum(not find_steps(synthetic(lu_time(None), s, drift=0.20), CFG).steps for s in range(20))
    assert clean >= 19


def smooth_rise(n: int) -> float:
    """Scaled time drifts up by 8% over 480..560 (0.1% per unit): smooth, nowhere a step."""
    return lu_time(None)(n) * (1 + 0.001 * (n - 480))


def test_very_noisy_smooth_curve_gives_no_step_in_19_of_20_runs() -> None:
    # 20% noise per value and round: a median ratio over the threshold alone calls a step in
    # about a quarter of these runs; the paired CI's condition keeps them clean.
    clean = sum(not find_steps(synthetic(smooth_rise, seed, noise=0.2), CFG).steps for seed in range(20))
    assert clean >= 19


def test_a_step_under_large_shared_drift_is_found_in_19_of_20_runs() -> None:
    # Per-round drift of 0.25, shared by the values timed together: it widens each point's own
    # CI over rounds far past a x1.3 step (so unpaired CIs overlap) but cancels in the paired ratio.
    hits = 0
    for seed in range(20):
        found = find_steps(synthetic(lu_time(512), seed, drift=0.25), CFG)
        hits += resolved(found.steps) == [(511, 512)] and len(found.steps) == 1
    assert hits >= 19
    clean = sum(not find_steps(synthetic(smooth_rise, s, noise=0.2, drift=0.25), CFG).steps for s in range(20))
    assert clean >= 19


def episodic(curve: Callable[[int], float], seed: int, spread: float) -> Callable[[Sequence[int]], Mapping[int, Point]]:
    """A Measure whose points each keep a state per episode (not shared with the other points)."""
    rng = random.Random(seed)

    def measure(values: Sequence[int]) -> Mapping[int, Point]:
        out = {}
        for v in values:
            states = [math.exp(rng.gauss(0, spread)) for _ in range(ROUNDS // EPISODE)]
            rounds = tuple(curve(v) * states[i // EPISODE] * math.exp(rng.gauss(0, 0.005)) for i in range(ROUNDS))
            out[v] = Point(v, rounds, EPISODE, ("gemm",))
        return out

    return measure


def test_states_that_last_an_episode_do_not_fake_a_step() -> None:
    # Rounds within an episode agree closely; each point's episodes differ by ~30%. Taken round
    # by round the ratio's CI is too narrow (about 9 of 20 runs then call a step); the episodes
    # are the independent units.
    clean = sum(not find_steps(episodic(lu_time(None), s, 0.3), CFG).steps for s in range(20))
    assert clean >= 19


def test_max_points_3_still_refines_once() -> None:
    found = find_steps(synthetic(lu_time(512), 0), SearchConfig(480, 560, work=cube, max_points=3))
    assert found.grid == (480, 560) and found.groups == 2 and found.points_measured == 3
    (step,) = found.steps
    assert (step.lo, step.hi, step.resolved) == (480, 520, False) and "max-points" in step.note


def test_refinement_times_far_fewer_points_than_the_dense_grid() -> None:
    calls: list[Sequence[int]] = []
    found = find_steps(synthetic(lu_time(512), 1, calls=calls), CFG)
    assert resolved(found.steps) == [(511, 512)]
    assert found.dense_points == 81
    # 9 grid points, then one new value per bisection of 510..520 (515, 512/513, 511/512...).
    assert found.points_measured <= 14 < found.dense_points // 4
    assert tuple(calls[0]) == coarse_grid(480, 560, 9)
    assert all(len(c) == 3 for c in calls[1:])  # each refinement re-times both ends with the middle


def test_step_reports_its_paired_ci_and_the_kernels_on_each_side() -> None:
    def names(n: int) -> tuple[str, ...]:
        return ("getrf_panel",) if n < 512 else ("getrf_pivot", "ipiv_lower_small")

    (step,) = find_steps(synthetic(lu_time(512, 5.0), 3, kernels=names), CFG).steps
    assert (step.lo, step.hi, step.resolved) == (511, 512, True)
    assert step.ci_low <= step.ratio <= step.ci_high and step.ci_low > 4.0 and step.ci_high < 6.0
    assert step.kernels_before == ("getrf_panel",) and step.kernels_after == ("getrf_pivot", "ipiv_lower_small")
    assert (step.only_before, step.only_after) == (("getrf_panel",), ("getrf_pivot", "ipiv_lower_small"))


def test_kernels_that_differ_are_named_even_when_they_are_not_the_heaviest() -> None:
    common = tuple(f"trsm_{i}" for i in range(6))  # heavier than the LU kernels on both sides

    def names(n: int) -> tuple[str, ...]:
        return (*common, "getrf_panel" if n < 512 else "getrf_pivot")

    (step,) = find_steps(synthetic(lu_time(512, 5.0), 4, kernels=names), CFG).steps
    assert step.kernels_before == common[:5] == step.kernels_after
    assert (step.only_before, step.only_after) == (("getrf_panel",), ("getrf_pivot",))


def test_finds_a_step_down_and_a_step_up_in_one_range() -> None:
    def two(n: int) -> float:
        return lu_time(None)(n) * (0.6 if 497 <= n < 541 else 1.0)

    found = find_steps(synthetic(two, 5), CFG)
    assert resolved(found.steps) == [(496, 497), (540, 541)]
    down, up = found.steps
    assert down.ratio < 1 < up.ratio


def test_a_gradual_ramp_is_not_called_a_step_between_adjacent_values() -> None:
    # +3% per unit from 505 to 515: every adjacent pair is under the threshold.
    def ramp(n: int) -> float:
        return lu_time(None)(n) * (1 + 0.03 * min(max(n - 505, 0), 10))

    found = find_steps(synthetic(ramp, 2, noise=0.01, drift=0.01), CFG)
    assert resolved(found.steps) == []
    assert any("spread over" in s.note for s in found.steps)


def test_without_work_scaling_a_cubic_curve_steps() -> None:
    # The same curve, compared as raw time: n^3 grows ~6-7% per 2 units, >10% per grid interval.
    # n^3 grows 6-7% per 10 units: over a 5% threshold as raw time, flat once scaled by work.
    raw = SearchConfig(480, 560, threshold=0.05, work=None, max_points=12)
    scaled = SearchConfig(480, 560, threshold=0.05, work=cube, max_points=12)
    assert find_steps(synthetic(lu_time(None), 0, noise=0.005, drift=0.005), raw).steps
    assert not find_steps(synthetic(lu_time(None), 0, noise=0.005, drift=0.005), scaled).steps


def test_budget_stops_refinement_and_leaves_the_interval_unnarrowed() -> None:
    now = [0.0]

    def clock() -> float:
        return now[0]

    inner = synthetic(lu_time(512), 0)

    def slow(values: Sequence[int]) -> Mapping[int, Point]:
        now[0] += 10.0
        return inner(values)

    found = find_steps(slow, SearchConfig(480, 560, work=cube, budget_s=25), clock=clock)
    assert found.stop_reason == "budget" and found.groups == 3
    (step,) = found.steps
    assert not step.resolved and step.lo <= 511 and step.hi >= 512 and "budget" in step.note


def test_max_points_caps_distinct_values() -> None:
    found = find_steps(synthetic(lu_time(512), 0), SearchConfig(480, 560, work=cube, max_points=10))
    assert found.stop_reason == "max_points" and found.points_measured == 10
    assert [(s.lo, s.hi, s.resolved) for s in found.steps] == [(510, 515, False)]


def test_a_failing_measurement_ends_the_search_with_what_it_found() -> None:
    inner = synthetic(lu_time(512), 0)
    calls = []

    def flaky(values: Sequence[int]) -> Mapping[int, Point]:
        calls.append(values)
        if len(calls) == 2:
            raise RuntimeError("CUDA out of memory")
        return inner(values)

    found = find_steps(flaky, CFG)
    assert found.stop_reason == "error" and "out of memory" in found.notes[-1]
    assert [(s.lo, s.hi, s.resolved) for s in found.steps] == [(510, 520, False)]


# --------------------------------------------------------------------------- the command


@pytest.fixture
def cli() -> CliRunner:
    return CliRunner(env={"COLUMNS": "120", "TERM": "dumb"})


def files_under(path: Path) -> list[Path]:
    return [p for p in path.rglob("*") if p.is_file()] if path.exists() else []


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["solve-512-cliff", "--param", "m", "--range", "480:560"], "--param 'm' for solve-512-cliff: not sweepable"),
        (["solve-512-cliff", "--param", "n", "--range", "512:512"], "expected LO < HI"),
        (["solve-512-cliff", "--param", "n", "--range", "560:480"], "expected LO < HI"),
        (["solve-512-cliff", "--param", "n", "--range", "480-560"], "expected LO:HI"),
        (["solve-512-cliff", "--param", "n", "--range", "1:40"], "expected values within 2..8192"),
        (["5090-linear", "--param", "features", "--range", "700:20000"], "expected values within 1..16384"),
        (["graph-memset", "--param", "n", "--range", "1:4"], "graph-memset declares no sweepable params"),
        (
            ["solve-512-cliff", "--param", "n", "--range", "480:560", "--set", "backends=cusolver"],
            "--set batches=16,64,128",
        ),
        (["solve-512-cliff", "--param", "n", "--range", "30:34", "--set", "nope=1"], "unknown parameter 'nope'"),
        (["solve-512-cliff", "--param", "n", "--range", "3_0:3_4"], "expected LO:HI"),
        (["solve-512-cliff", "--param", "n", "--range", "\u0663\u0660:\u0663\u0664"], "expected LO:HI"),
        (["5090-linear", "--param", "features", "--range", "700:800", "--set", "features=900"], "--set features=900"),
        (
            ["solve-512-cliff", "--param", "batch", "--range", "1:8", "--set", "batches=2,4"],
            "the sweep of batch sets it",
        ),
        (["solve-512-cliff", "--param", "n", "--range", "30:34", "--set", "n_max=40"], "the sweep of n sets it"),
        (["solve-512-cliff", "--param", "batch", "--range", "1:8", "--set", "n_min=5"], "the sweep of batch sets it"),
        (["5090-linear", "--param", "features", "--range", "700:800", "--budget", "inf"], "--budget inf: expected a"),
        (["5090-linear", "--param", "features", "--range", "700:800", "--budget", "nan"], "--budget nan: expected a"),
        (
            ["5090-linear", "--param", "features", "--range", "700:800", "--grid", "10000"],
            "--grid 10000: expected 2..128",
        ),
        (["5090-linear", "--param", "features", "--range", "700:800", "--max-points", "10000"], "expected 3..128"),
        (["5090-linear", "--param", "features", "--range", "700:800", "--threshold", "10"], "> 0 and < 10"),
        (
            [
                "solve-512-cliff",
                "--param",
                "n",
                "--range",
                "30:34",
                "--smoke",
                "--set",
                "batches=2",
                "--max-points",
                "2",
            ],
            "--max-points 2",
        ),
        (
            [
                "solve-512-cliff",
                "--param",
                "n",
                "--range",
                "30:34",
                "--smoke",
                "--set",
                "batches=2",
                "--metric",
                "flops",
            ],
            "--metric 'flops'",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    cli: CliRunner, tmp_path: Path, args: list[str], expected: str
) -> None:
    out = tmp_path / "out"
    r = cli.invoke(app, ["cliff", *args, "--out", str(out)])
    assert r.exit_code == 2, r.output
    assert expected in r.output and r.output.count("\n") == 1, r.output
    assert files_under(out) == []


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real `repro cliff` on CPU (solve_ex, --smoke): the pipeline end to end."""
    out = tmp_path_factory.mktemp("cliff")
    r = CliRunner(env={"COLUMNS": "120", "TERM": "dumb"}).invoke(
        app,
        [
            "cliff", "solve-512-cliff", "--param", "n", "--range", "30:34", "--set", "batches=2", "--smoke",
            "--grid", "3", "--max-points", "4", "--out", str(out), "--no-collect-env",
        ],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    (run_dir,) = [d for d in out.iterdir() if d.is_dir()]
    return run_dir


def test_smoke_cliff_writes_a_valid_artifact_report_and_plot(smoke_run: Path, cli: CliRunner) -> None:
    path = smoke_run / "solve-512-cliff.cliff-n.json"
    doc = artifact.load(path)  # validated against the cliff schema
    assert doc["kind"] == "gpu-repro.cliff" and doc["schema_version"] == "1.0"
    assert doc["status"] == "smoke" and doc["run"]["device"] == "cpu"
    assert doc["sweep"]["range"] == [30, 34] and doc["search"]["grid"] == [30, 32, 34]
    assert 3 <= doc["search"]["points_measured"] <= 4
    assert all(p["kernels"] for p in doc["points"])  # the profiler's names (aten ops on CPU)
    assert "--set batches=2" in doc["run"]["rerun"]
    report = (smoke_run / "report.md").read_text()
    assert "where the cliff starts in `n` (30..34)" in report and "solve-512-cliff.cliff-n.png" in report
    assert "rises by more than 10% or falls to below 1/1.1 (-9.1%)" in report
    assert doc["sweep"]["grid_points"] == len(doc["search"]["grid"]) == 3
    assert (smoke_run / "solve-512-cliff.cliff-n.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = cli.invoke(app, ["validate", str(smoke_run)])
    assert r.exit_code == 0 and f"ok: {path}" in r.output


def test_validate_rejects_a_broken_cliff_artifact_against_its_own_schema(
    smoke_run: Path, cli: CliRunner, tmp_path: Path
) -> None:
    doc = json.loads((smoke_run / "solve-512-cliff.cliff-n.json").read_text())
    doc["steps"] = [{"lo": 1}]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    r = cli.invoke(app, ["validate", str(bad)])
    assert r.exit_code == 2 and "fails the cliff schema v1 at steps/0" in r.output


def test_report_out_regenerates_the_plot_beside_the_report(smoke_run: Path, cli: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "r.md"
    r = cli.invoke(app, ["report", str(smoke_run / "solve-512-cliff.cliff-n.json"), "--out", str(out)])
    assert r.exit_code == 0, r.output
    png = tmp_path / "r.solve-512-cliff.cliff-n.png"
    assert png.is_file() and f"]({png.name})" in out.read_text()


def _other_machine(doc: dict[str, object], tmp: Path, steps: list[dict[str, object]], gpu: str) -> Path:
    """The smoke artifact relabelled as a run elsewhere, with the given (synthetic) steps."""
    d = json.loads(json.dumps(doc))
    d["steps"], d["status"] = steps, "step" if steps else "no_step"
    run = tmp / gpu.replace(" ", "_")
    run.mkdir()
    path = run / "solve-512-cliff.cliff-n.json"
    path.write_text(json.dumps(d))
    artifact.load(path)
    return run


def test_compare_shows_two_machines_boundaries_and_whether_they_differ(
    smoke_run: Path, cli: CliRunner, tmp_path: Path
) -> None:
    doc = json.loads((smoke_run / "solve-512-cliff.cliff-n.json").read_text())
    step = {
        "lo": 31, "hi": 32, "resolved": True, "ratio": 5.0, "ci_low": 4.8, "ci_high": 5.2, "before_s": 1e-3,
        "after_s": 5e-3, "kernels_before": ["a"], "kernels_after": ["b"], "only_before": ["a"], "only_after": ["b"],
        "tag_before": "", "tag_after": "", "note": "",
    }  # fmt: skip
    a = _other_machine(doc, tmp_path, [step], "GPU one")
    b = _other_machine(doc, tmp_path, [], "GPU two")
    r = cli.invoke(app, ["compare", str(a), str(b), "--json"])
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.output)["cliffs"]
    assert row["sweep"] == "solve-512-cliff.cliff-n" and row["same_boundaries"] is False
    r = cli.invoke(app, ["compare", str(a), str(b)])
    assert "## Cliff boundaries" in r.output and "31 -&gt; 32 5.00x" in r.output and "**differ**" in r.output
    assert "no step (grid spacing" in r.output
    assert cliff_report.boundary(json.loads((a / "solve-512-cliff.cliff-n.json").read_text())).startswith("31 -> 32")


PLUGIN = '''
"""Test-only plugin: a sleep that grows tenfold from a known integer on, declared sweepable."""

from __future__ import annotations

import time
from dataclasses import dataclass

from repro.api import Arm, Context, Metric, Repro, Requirements, Sweep, param, register

STEP_AT = 13


@dataclass(frozen=True)
class SleepParams:
    k: int = param(10, help="the swept knob", min=1, max=100)


@register
class SleepStep(Repro[SleepParams]):
    id = "sleep-step"
    title = "a sleep that grows tenfold from k = 13"
    upstream = ()
    seed_claim = "synthetic"
    requires = Requirements(cuda=False)
    metric = Metric(name="t", description="t", threshold=1.5)
    sweeps = (Sweep("k", "the knob", min=1, max=100, default=13, work=lambda p, k: 1.0),)

    def sweep_arm(self, p: SleepParams, sweep: str, value: int, ctx: Context) -> Arm:
        # Tenfold, not threefold: on a loaded machine a 1 ms sleep oversleeps by a scheduler slice
        # (a few ms), which brought a 1 ms -> 3 ms step within the noise (seen under make test).
        seconds = 0.010 if value >= STEP_AT else 0.001
        return Arm(f"k{value}", lambda: time.sleep(seconds), calls_per_sample=1)
'''


def _sleep_step_cliff(cli: CliRunner, tmp_path: Path, *options: str) -> dict[str, Any]:
    """`repro cliff sleep-step --param k --range 1:30 OPTIONS` with PLUGIN on --repro-path; its artifact."""
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "sleep_step.py").write_text(PLUGIN)
    out = tmp_path / "out"
    args = ["cliff", "sleep-step", "--param", "k", "--range", "1:30", *options, "--no-collect-env"]
    r = cli.invoke(app, [*args, "--repro-path", str(plugins), "--out", str(out)])
    assert r.exit_code == 0, r.output
    (path,) = out.glob("*/sleep-step.cliff-k.json")
    return artifact.load(path)


def test_a_plugin_declares_a_sweep_and_the_command_finds_its_step(cli: CliRunner, tmp_path: Path) -> None:
    doc = _sleep_step_cliff(cli, tmp_path, "--grid", "5")
    # A CPU run proves the pipeline and is never judged, but it still reports what it found.
    assert doc["status"] == "smoke" and doc["run"]["device"] == "cpu"
    assert [(s["lo"], s["hi"], s["resolved"]) for s in doc["steps"]] == [(12, 13, True)], doc["finding"]
    assert doc["search"]["points_measured"] < 30 // 2


COMMITTED = sorted((ROOT / "artifacts" / "reference").rglob("*.cliff-*.json"))


def test_the_h200_cliff_evidence_is_committed() -> None:
    # The acceptance runs of issue 14 (artifacts/reference/h200/cliff/README.md): without them the
    # golden test below would be parametrized over nothing and pass vacuously.
    names = {p.relative_to(ROOT / "artifacts" / "reference" / "h200" / "cliff").parts[0] for p in COMMITTED}
    assert {"solve-cusolver", "solve-default", "linear-features"} <= names, names
    final = artifact.load(next(p for p in COMMITTED if "/cliff/solve-cusolver/" in str(p)))
    assert [(s["lo"], s["hi"]) for s in final["steps"] if s["resolved"]][:1] == [(511, 512)]


@pytest.mark.parametrize("path", COMMITTED, ids=[str(p.relative_to(ROOT)) for p in COMMITTED])
def test_committed_cliff_artifacts_validate_and_hang_together(path: Path) -> None:
    doc = artifact.load(path)
    assert doc["kind"] == "gpu-repro.cliff"
    assert doc["search"]["points_measured"] == len({p["value"] for p in doc["points"]})
    lo, hi = doc["sweep"]["range"]
    assert all(lo <= p["value"] <= hi for p in doc["points"])
    for s in doc["steps"]:
        assert s["resolved"] == (s["hi"] == s["lo"] + 1) and s["ci_low"] <= s["ratio"] <= s["ci_high"]
    assert doc["status"] in ("step", "no_step", "error")
    if doc["status"] != "error":
        assert (doc["status"] == "step") == bool(doc["steps"])
    assert "where the cliff starts" in cliff_report.section(doc)


def test_plot_takes_artifact_strings_literally(smoke_run: Path) -> None:
    doc = json.loads((smoke_run / "solve-512-cliff.cliff-n.json").read_text())
    doc["sweep"]["param"] = "n $\\frac{1}{$"  # broken math: matplotlib raises on it when drawing
    png = cliff_report.plot_png(doc)
    assert png is not None and png[:4] == b"\x89PNG"


def test_list_json_shows_the_declared_sweeps(cli: CliRunner) -> None:
    r = cli.invoke(app, ["list", "--json"])
    rows = {row["id"]: row for row in json.loads(r.output)}
    assert [w["name"] for w in rows["solve-512-cliff"]["sweeps"]] == ["n", "batch"]
    assert [w["name"] for w in rows["5090-linear"]["sweeps"]] == ["features", "tokens"]
    assert rows["graph-memset"]["sweeps"] == []


def test_bundle_packs_the_cliff_artifact_and_its_plot(smoke_run: Path, tmp_path: Path) -> None:
    import tarfile

    from repro.evidence import bundle

    path = bundle.build(smoke_run, tmp_path / "b.tar.gz")
    with tarfile.open(path) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames()}
    assert {"solve-512-cliff.cliff-n.json", "solve-512-cliff.cliff-n.png", "report.md"} <= names


# --------------------------------------------------------------------------- review fixes (#14)

HOSTILE = "<img src=x onerror=alert(1)>\n# H1 [x](javascript:alert(1)) | *b*"


def _outside_code(md: str) -> str:
    """The markdown with its code spans removed (inside one, text is literal)."""
    return re.sub(r"`[^`\n]*`", "", md)


def _hostile_step(resolved: bool) -> dict[str, object]:
    return {
        "lo": 30, "hi": 31 if resolved else 33, "resolved": resolved, "ratio": 3.0, "ci_low": 2.9, "ci_high": 3.1,
        "before_s": 1e-3, "after_s": 3e-3, "kernels_before": [HOSTILE], "kernels_after": ["b"],
        "only_before": [HOSTILE], "only_after": ["b"], "tag_before": HOSTILE, "tag_after": "", "note": HOSTILE,
    }  # fmt: skip


def _assert_inert(md: str) -> None:
    bare = _outside_code(md)
    assert "<img" not in bare
    assert not re.search(r"(?<!\\)\]\(javascript", bare)  # an escaped \](...) is literal text
    assert not [line for line in md.splitlines() if line.lstrip().startswith("# ")], md


def test_section_and_compare_render_hostile_artifact_strings_inert(smoke_run: Path) -> None:
    doc = json.loads((smoke_run / "solve-512-cliff.cliff-n.json").read_text())
    doc["finding"], doc["search"]["notes"], doc["warnings"] = HOSTILE, [HOSTILE], [HOSTILE]
    doc["points"][0]["kernels"], doc["points"][0]["tag"] = [HOSTILE], HOSTILE
    doc["steps"] = [_hostile_step(False)]
    doc["error"] = {"kind": "exception", "message": HOSTILE}
    doc["sweep"]["param"] = HOSTILE  # the schema refuses it; the section must not rely on that
    _assert_inert(cliff_report.section(doc, plot_link=HOSTILE))
    rows = cliff_report.compare_rows([("a", [doc]), ("b", [doc])])
    _assert_inert(cliff_report.compare_markdown(rows, ["a", "b"], ["a", "b"]))


@pytest.mark.parametrize("param", ["a/b", "x" * 300, "n\x00", "<img src=x>\n# H1", "n.x"])
def test_schema_refuses_a_param_that_is_not_an_identifier_and_report_out_says_so(
    smoke_run: Path, cli: CliRunner, tmp_path: Path, param: str
) -> None:
    doc = json.loads((smoke_run / "solve-512-cliff.cliff-n.json").read_text())
    doc["sweep"]["param"] = param
    assert cliff_report.plot_name("r", doc) is None  # the guard holds without the schema too
    bad = tmp_path / "in" / "bad.json"
    bad.parent.mkdir()
    bad.write_text(json.dumps(doc))
    out = tmp_path / "r.md"
    r = cli.invoke(app, ["report", str(bad), "--out", str(out)])
    assert r.exit_code == 2 and "sweep/param" in r.output and r.output.count("\n") == 1, r.output
    assert list(tmp_path.glob("r*")) == []


def test_plot_name_is_the_key_beside_the_report(smoke_run: Path) -> None:
    doc = json.loads((smoke_run / "solve-512-cliff.cliff-n.json").read_text())
    assert cliff_report.plot_name("r", doc) == "r.solve-512-cliff.cliff-n.png"
    assert cliff_report.plot_name("x" * 240, doc) is None  # past NAME_MAX


def test_compare_cannot_tell_when_a_step_was_not_narrowed(smoke_run: Path, cli: CliRunner, tmp_path: Path) -> None:
    doc = json.loads((smoke_run / "solve-512-cliff.cliff-n.json").read_text())
    step = {**_hostile_step(False), "kernels_before": ["a"], "only_before": ["a"], "tag_before": "", "note": ""}
    a = _other_machine(doc, tmp_path, [step], "GPU one")
    b = _other_machine(doc, tmp_path, [], "GPU two")
    r = cli.invoke(app, ["compare", str(a), str(b), "--json"])
    (row,) = json.loads(r.output)["cliffs"]
    assert row["same_boundaries"] is None and row["unresolved"] is True
    r = cli.invoke(app, ["compare", str(a), str(b)])
    assert "cannot tell (a step not narrowed)" in r.output and "| same |" not in r.output


def test_a_schema_failure_at_write_keeps_the_data(smoke_run: Path, tmp_path: Path) -> None:
    from repro.cliff import run as cliff_run
    from repro.core.errors import ReproError

    doc = json.loads((smoke_run / "solve-512-cliff.cliff-n.json").read_text())
    doc["sweep"]["budget_s"] = None
    path = tmp_path / "solve-512-cliff.cliff-n.json"
    with pytest.raises(ReproError, match="fails its schema: sweep/budget_s") as exc:
        cliff_run.write(doc, path)
    kept = tmp_path / "solve-512-cliff.cliff-n.json.invalid"
    assert str(kept) in str(exc.value) and json.loads(kept.read_text())["points"] == doc["points"]
    assert not path.exists()


def test_rerun_command_is_shell_quoted_and_uses_the_parsed_range() -> None:
    import shlex

    from repro.cliff.run import CliffRequest, rerun_command

    req = CliffRequest("solve-512-cliff", "n", " 0480:560", overrides={"backends": "a b;rm -rf x"})
    argv = shlex.split(rerun_command(req))
    assert argv[:7] == ["repro", "cliff", "solve-512-cliff", "--param", "n", "--range", "480:560"]
    assert argv[7:] == ["--set", "backends=a b;rm -rf x"]


def _work(p: object, v: int) -> float:
    return 1.0


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"name": "n x"}, "expected an identifier"),
        ({"name": "n.x"}, "expected an identifier"),
        ({"default": 11}, "min <= default <= max"),
        ({"min": 5, "max": 5, "default": 5}, "min < max"),
    ],
)
def test_a_bad_sweep_declaration_is_refused(kwargs: dict[str, Any], expected: str) -> None:
    from repro.core.spec import Sweep

    args: dict[str, object] = {"name": "k", "help": "h", "min": 1, "max": 10, "default": 5, "work": _work, **kwargs}
    with pytest.raises(UsageError, match=expected):
        Sweep(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("sweep_kwargs", "expected"),
    [
        ({"single": ("nope",)}, "'nope' is not a param"),
        ({"single": ("k",)}, "single='k' names a param that is not a tuple"),
        ({"replaces": ("nope",)}, "'nope' is not a param"),
    ],
)
def test_register_refuses_a_sweep_naming_params_it_cannot_use(sweep_kwargs: dict[str, Any], expected: str) -> None:
    from repro.core.spec import Metric, Requirements, Sweep
    from repro.run import catalog

    @dataclass(frozen=True)
    class KParams:
        k: int = 1
        ks: tuple[int, ...] = (1,)

    class Bad(Repro[KParams]):
        id = "bad-sweep-decl"
        title = "t"
        upstream = ()
        seed_claim = "synthetic"
        Params = KParams
        requires = Requirements(cuda=False)
        metric = Metric(name="t", description="t", threshold=1.5)
        sweeps = (Sweep("k", "h", min=1, max=10, default=5, work=_work, **sweep_kwargs),)

    with pytest.raises(UsageError, match=expected):
        catalog.register(Bad)
    assert "bad-sweep-decl" not in catalog.load()


def test_max_points_3_refines_and_records_the_grid_it_used(cli: CliRunner, tmp_path: Path) -> None:
    doc = _sleep_step_cliff(cli, tmp_path, "--max-points", "3")
    assert doc["search"]["grid"] == [1, 30] and doc["sweep"]["grid_points"] == 2
    assert doc["search"]["groups"] == 2 and doc["search"]["points_measured"] == 3


def test_batch_sweep_at_another_cliff_n_needs_no_n_min_or_n_max() -> None:
    from repro.cliff.run import CliffRequest, resolve

    for smoke in (False, True):
        one = {"backends": "default"}
        r = resolve(CliffRequest("solve-512-cliff", "batch", "1:8", {"cliff_n": "700", **one}, smoke=smoke))
        assert (r.params.n_min, r.params.cliff_n, r.params.n_max) == (699, 700, 700)
    r = resolve(CliffRequest("solve-512-cliff", "batch", "1:8", {"backends": "default"}, smoke=True))
    assert (r.params.n_min, r.params.cliff_n, r.params.n_max) == (30, 32, 33)  # the smoke preset, untouched
