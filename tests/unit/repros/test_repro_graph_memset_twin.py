"""graph-memset's pure CUDA twin: its output parsed into external variants (rounds, episodes, work
variants), and its run (the command line, failures, timeouts, quick runs, the GPU monitor).

Each twin here is recorded output or a stand-in script: nothing is compiled.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import stat
import statistics
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import TESTS

from repro.core.context import SamplingConfig
from repro.core.spec import build_params
from repro.core.stats import summarize
from repro.core.verdict import variant_ratio
from repro.evidence import artifact
from repro.repros import _memset_twin as twin_mod
from repro.repros import _twin
from repro.repros import graph_memset as gm
from repro.repros._memset_twin import parse_twin_output, twin_variants
from repro.repros.graph_memset import GraphMemset, MemsetParams
from repro.run.context import RunContext
from repro.run.execute import RunRequest, execute
from repro.run.schedule import QUICK_SKIP

RID = "graph-memset"


# What the twin printed for --ops 1000 --replays 4 --warmup 2 --rounds 2 (format of its printf calls).
# Real output of the twin on the H200 (tools: `graph_memset --ops 1000 --replays 4 --warmup 2 --rounds 2`).
CAPTURED = (TESTS / "fixtures" / "graph_memset_twin_h200.json").read_text()


# --------------------------------------------------------------------------- the twin's output


def test_parse_captured_output_into_external_variants(run_dir: Path, fast: SamplingConfig) -> None:
    doc = parse_twin_output(CAPTURED)
    assert doc["ops"] == 1000 and doc["device"] == "NVIDIA H200"
    build = _twin.TwinBuild(Path("/cache/graph_memset-sm_90-0"), True, "sm_90", "V13.0.88", "0" * 64)
    variants = twin_variants(doc, build, target_rel_ci=0.01, budget_s=300.0)
    # This output comes from a binary without the seed's program: its seed_* variants are left out.
    printed = [n for n, _ in twin_mod.TWIN_VARIANTS if n not in twin_mod.OPTIONAL_TWIN_VARIANTS]
    assert [v.name for v in variants] == [f"twin_{n}" for n in printed]
    memset = variants[0]
    assert memset.status == "ok" and memset.timing is not None
    assert memset.timing.method == "external" and memset.timing.stop_reason == "external"
    assert memset.timing.calls_per_sample == 1000 and memset.timing.warmup_calls == 2000
    assert memset.timing.samples[0] == pytest.approx(9.045439959e-07)
    assert memset.timing.elapsed_s == pytest.approx(sum(doc["variants"]["memset"]) * 1000)
    assert memset.median == pytest.approx(summarize(doc["variants"]["memset"]).median)
    assert memset.extra["gpu"] == "NVIDIA H200" and memset.extra["binary_cached"] is True
    # Work per op: 4 bytes for a memset, one FMA per element and iteration in the work kernel.
    assert memset.work is not None and memset.work.bytes == 4.0 and memset.work.ceiling == "copy"
    work_only = variants[2]
    assert work_only.work is not None and work_only.work.flops == 2.0 * 1048576 * 128
    ceilings = {"copy": {"value": 4000.0, "unit": "GB/s"}, "fp32": {"value": 50.0, "unit": "TFLOP/s"}}
    with_ceilings = twin_variants(doc, build, target_rel_ci=0.01, budget_s=300.0, ceilings=ceilings)
    assert all(v.achieved is not None and v.achieved.pct_of_ceiling is not None for v in with_ceilings)
    # This output predates the twin's "per_round" key: its variants carry no rounds and pair with nothing.
    assert all(v.timing is not None and v.timing.rounds is None and v.timing.group is None for v in variants)
    # The variants fit the artifact schema: put them into a real (CPU, skipped) artifact.
    skipped, _ = execute(RunRequest(RID, sampling=fast), run_dir)
    skipped["variants"] = artifact.to_jsonable(variants)
    assert artifact.validation_errors(skipped) == []


def with_per_round(text: str) -> str:
    """The captured output as the current twin prints it: --replays 4 --rounds 2 gives per_round
    = ceil(4 / 2) = 2 (graph_memset.cu), so replays 0-1 are round 0 and 2-3 round 1."""
    doc = json.loads(text)
    assert (doc["replays"], doc["rounds"]) == (4, 2)
    return json.dumps({**doc, "per_round": 2})


def test_twin_rounds_become_paired_timings(run_dir: Path, fast: SamplingConfig) -> None:
    doc = parse_twin_output(with_per_round(CAPTURED))
    build = _twin.TwinBuild(Path("/cache/graph_memset-sm_90-0"), True, "sm_90", "V13.0.88", "0" * 64)
    variants = {v.name: v for v in twin_variants(doc, build, target_rel_ci=0.01, budget_s=300.0)}
    memset = variants["twin_memset"].timing
    assert memset is not None and memset.group == "twin" and memset.samples == tuple(doc["variants"]["memset"])
    xs = doc["variants"]["memset"]
    assert memset.rounds == pytest.approx(((xs[0] + xs[1]) / 2, (xs[2] + xs[3]) / 2))  # median of each round
    assert {len(v.timing.rounds or ()) for v in variants.values() if v.timing is not None} == {2}
    skipped, _ = execute(RunRequest(RID, sampling=fast), run_dir)
    skipped["variants"] = artifact.to_jsonable(list(variants.values()))
    assert artifact.validation_errors(skipped) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "not one JSON object"),
        ("graph_memset: cudaSetDevice failed\n", "not one JSON object"),
        ('{"ops": 10}', "lacks a 'variants' object"),
        ('{"ops": 0, "variants": {}}', "'ops' must be a positive integer"),
        ('{"ops": 10, "variants": {"memset": [1e-6]}}', "no samples for variant 'fill'"),
        (CAPTURED.replace("9.045439959e-07", "-1"), "variant 'memset' has a sample that is not a positive number"),
    ],
)
def test_parse_rejects_malformed_output(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_twin_output(text)


def test_parse_needs_samples_only_for_the_variants_asked_for() -> None:
    doc = json.loads(CAPTURED)
    two = json.dumps({**doc, "variants": {n: doc["variants"][n] for n in ("memset", "fill")}})
    assert set(parse_twin_output(two, ["memset", "fill"])["variants"]) == {"memset", "fill"}
    with pytest.raises(ValueError, match="no samples for variant 'work_only'"):
        parse_twin_output(two)  # a full run asked for every variant
    with pytest.raises(ValueError, match="no samples for variant 'fill'"):
        parse_twin_output(json.dumps({**doc, "variants": {"memset": doc["variants"]["memset"]}}), ["memset", "fill"])


def test_work_variants_record_their_own_warm_up_replays() -> None:
    doc = parse_twin_output(with_per_round(CAPTURED))
    build = _twin.TwinBuild(Path("/cache/graph_memset-sm_90-0"), True, "sm_90", "V13.0.88", "0" * 64)
    ops = int(doc["ops"])

    def warm(d: dict[str, Any]) -> dict[str, int]:
        return {v.name: v.timing.warmup_calls // ops for v in twin_variants(d, build, 0.01, 300.0) if v.timing}

    old = warm(doc)  # a binary that prints no work_warmup warmed every variant alike
    assert set(old.values()) == {int(doc["warmup"])}
    new = warm({**doc, "work_warmup": 4})
    assert {n: w for n, w in new.items() if "work" in n} == {
        "twin_work_only": 4,
        "twin_memset_work": 4,
        "twin_fill_work": 4,
    }
    assert {w for n, w in new.items() if "work" not in n} == {int(doc["warmup"])}


def test_work_variants_pair_their_rounds_by_work_per_round() -> None:
    """--work-replays 2 --rounds 2 gives work_per_round 1: each work replay is a round, paired with the
    other work variant's replay of the same round, while the other variants keep rounds of 2."""
    doc = json.loads(with_per_round(CAPTURED))
    short = {n: (xs[:2] if "work" in n else xs) for n, xs in doc["variants"].items()}
    doc = parse_twin_output(json.dumps({**doc, "variants": short, "work_replays": 2, "work_per_round": 1}))
    build = _twin.TwinBuild(Path("/cache/graph_memset-sm_90-0"), True, "sm_90", "V13.0.88", "0" * 64)
    variants = {v.name: v for v in twin_variants(doc, build, target_rel_ci=0.01, budget_s=300.0)}
    for name in ("twin_work_only", "twin_memset_work", "twin_fill_work"):
        t = variants[name].timing
        assert t is not None and t.rounds == tuple(short[name.removeprefix("twin_")]) and t.stats.n == 2
    memset = variants["twin_memset"].timing
    # A variant's median is over its rounds (2 rounds of 2 replays each), the samples all kept.
    assert memset is not None and len(memset.rounds or ()) == 2 and memset.stats.n == 2 and len(memset.samples) == 4
    assert twin_mod.twin_per_round(doc, "memset_work") == 1 and twin_mod.twin_per_round(doc, "fill") == 2
    assert twin_mod.twin_per_round({"per_round": 5}, "fill_work") == 5  # an older twin: one per_round for all
    # A CI over its target is said over the replays and the rounds they fell in, not "rounds of" all replays.
    strict = {v.name: v for v in twin_variants(doc, build, target_rel_ci=1e-9, budget_s=300.0)}
    assert "above the 0.00% target over 4 twin replays in 2 rounds" in strict["twin_memset"].warnings[0]


def test_twin_episodes_widen_its_paired_ci(fast: SamplingConfig) -> None:
    """Synthetic twin output (not a GPU run): 60 rounds of one replay each, in 12 episodes of 5.
    The memset/fill ratio holds a different value in each episode (a power state that lasts
    an episode), and the CI must cover the episodes' spread, not only the rounds' noise."""
    rng = random.Random(3)
    level = [1.25 + 0.04 * (e % 4) for e in range(12)]
    fill = [1e-6 * (1 + rng.gauss(0, 0.002)) for _ in range(60)]
    memset = [f * level[i // 5] * (1 + rng.gauss(0, 0.001)) for i, f in enumerate(fill)]
    doc = {
        "ops": 1000,
        "replays": 60,
        "rounds": 60,
        "per_round": 1,
        "episodes": 12,
        "episode_rounds": 5,
        "variants": {n: (memset if n.startswith("memset") else fill) for n, _ in twin_mod.TWIN_VARIANTS},
    }
    build = _twin.TwinBuild(Path("/cache/graph_memset-sm_90-0"), True, "sm_90", "V13.0.88", "0" * 64)
    have = {v.name: v for v in twin_variants(parse_twin_output(json.dumps(doc)), build, 0.01, 300.0)}
    timing = have["twin_memset"].timing
    assert timing is not None and timing.episode_rounds == 5
    # The variant's own CI is over its rounds (n = 60 rounds, not replays), widened over the episodes.
    eps = sorted(statistics.median(timing.rounds[i : i + 5]) for i in range(0, 60, 5)) if timing.rounds else []
    assert timing.stats.n == 60 and timing.stats.ci_low <= eps[2] and timing.stats.ci_high >= eps[9]
    value, lo, hi, paired, _, _ = variant_ratio(have["twin_memset"], have["twin_fill"])
    assert paired and lo <= 1.26 and hi >= 1.36, (value, lo, hi)
    # The same rounds without their episodes: the CI of the rounds alone misses the spread.
    flat = {
        k: dataclasses.replace(v, timing=dataclasses.replace(v.timing, episode_rounds=None))
        for k, v in have.items()
        if v.timing is not None
    }
    _, lo1, hi1, _, _, _ = variant_ratio(flat["twin_memset"], flat["twin_fill"])
    assert hi1 - lo1 < (hi - lo) / 2


# --------------------------------------------------------------------------- running the twin


def _fake_binary(tmp_path: Path, body: str) -> _twin.TwinBuild:
    script = tmp_path / "fake_twin"
    script.write_text(f"#!{sys.executable}\nimport sys\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return _twin.TwinBuild(script, True, "sm_90", "Cuda compilation tools\nV13.0.88", "0" * 64)


def test_twin_run_turns_its_output_into_variants(
    tmp_path: Path, fast: SamplingConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv_file = tmp_path / "argv.json"
    out = with_per_round(CAPTURED)
    body = f"import json; json.dump(sys.argv[1:], open({str(argv_file)!r}, 'w')); sys.stdout.write({out!r})"
    monkeypatch.setattr(gm, "build_twin", lambda *_, **__: _fake_binary(tmp_path, body))
    p = build_params(RID, MemsetParams, {"ops": "1000", "twin_replays": "4", "twin_rounds": "2", "twin_warmup": "2"})
    variants, info = GraphMemset()._twin(p, RunContext(device="cpu", smoke=False, sampling=fast), 3)
    assert [v.status for v in variants] == ["ok"] * 5
    assert json.loads(argv_file.read_text()) == [
        "--device", "3", "--ops", "1000", "--replays", "4", "--rounds", "2", "--warmup", "2", "--work-iters", "128",
        "--episodes", "10", "--gap-ms", "0",  # no idle gaps off CUDA
        "--work-replays", "100",
    ]  # fmt: skip
    assert info["variants"] == [n for n, _ in twin_mod.TWIN_VARIANTS]  # a full run asks for every variant
    assert info["status"] == "ok" and info["gpu"] == "NVIDIA H200" and info["nvcc"] == "V13.0.88"
    assert all(v.timing is not None and v.timing.group == "twin" and len(v.timing.rounds or ()) == 2 for v in variants)
    assert info["source_sha256"] == hashlib.sha256(twin_mod.TWIN_SOURCE.read_bytes()).hexdigest()


def test_twin_failure_is_an_error_variant_with_its_stderr(
    tmp_path: Path, fast: SamplingConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = "sys.stderr.write('graph_memset: cudaSetDevice(o.device) failed: cudaErrorNoDevice\\n'); sys.exit(1)"
    monkeypatch.setattr(gm, "build_twin", lambda *_, **__: _fake_binary(tmp_path, body))
    variants, info = GraphMemset()._twin(MemsetParams(), RunContext(device="cpu", smoke=False, sampling=fast), 0)
    assert [v.status for v in variants] == ["error"] * len(twin_mod.TWIN_VARIANTS)
    reason = variants[0].reason
    assert reason is not None
    assert "exited 1: graph_memset: cudaSetDevice(o.device) failed: cudaErrorNoDevice" in reason
    assert info["status"] == "error"


def test_twin_timeout_is_an_error_variant(
    tmp_path: Path, fast: SamplingConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gm, "build_twin", lambda *_, **__: _fake_binary(tmp_path, "import time; time.sleep(30)"))
    p = build_params(RID, MemsetParams, {"twin_timeout_s": "1"})
    variants, _ = GraphMemset()._twin(p, RunContext(device="cpu", smoke=False, sampling=fast), 0)
    reason = variants[0].reason
    assert {v.status for v in variants} == {"error"} and reason is not None and "past its 1 s limit" in reason


def test_twin_is_skipped_without_nvcc(fast: SamplingConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_twin, "find_nvcc", lambda: None)
    variants, info = GraphMemset()._twin(MemsetParams(), RunContext(device="cpu", smoke=False, sampling=fast), 0)
    assert [v.status for v in variants] == ["skipped"] * len(twin_mod.TWIN_VARIANTS)
    assert all(
        v.reason is not None and "nvcc not found on PATH or at /usr/local/cuda/bin/nvcc" in v.reason for v in variants
    )
    assert info["status"] == "skipped"


def test_a_quick_twin_runs_only_the_headline_pair_and_skips_the_rest(
    tmp_path: Path, fast: SamplingConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv_file = tmp_path / "argv.json"
    doc = json.loads(with_per_round(CAPTURED))
    printed = {**doc, "variants": {n: doc["variants"][n] for n in ("memset", "fill")}}
    out = json.dumps(printed)
    body = f"import json; json.dump(sys.argv[1:], open({str(argv_file)!r}, 'w')); sys.stdout.write({out!r})"
    monkeypatch.setattr(gm, "build_twin", lambda *_, **__: _fake_binary(tmp_path, body))
    p = build_params(RID, MemsetParams, {"ops": "1000", "twin_replays": "4", "twin_rounds": "2"})
    ctx = RunContext(device="cpu", smoke=False, sampling=fast, quick=True)
    ctx.comparisons = tuple(c for c in GraphMemset().comparisons(p) if c.headline)
    variants, info = GraphMemset()._twin(p, ctx, 0)
    argv = json.loads(argv_file.read_text())
    assert argv[argv.index("--variants") + 1] == "memset,fill" and info["variants"] == ["memset", "fill"]
    status = {v.name: v.status for v in variants}
    assert status == {f"twin_{n}": "ok" if n in ("memset", "fill") else "skipped" for n, _ in twin_mod.TWIN_VARIANTS}
    assert {v.reason for v in variants if v.status == "skipped"} == {QUICK_SKIP}
    assert info["status"] == "ok"


class _FakeMonitor:
    """What RunContext._monitor returns with NVML: a context manager with before and summary()."""

    def __init__(self) -> None:
        self.before: dict[str, Any] = {"compute_pids": [111]}
        self.entered = False

    def __enter__(self) -> _FakeMonitor:
        self.entered = True
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def summary(self) -> dict[str, Any]:
        assert self.entered
        return {"sm_clock_min_mhz": 1500, "throttled": ["sw_power_cap"], "other_pids": [111, 222]}


def test_the_twin_variants_carry_the_gpu_monitor_around_its_process(
    tmp_path: Path, fast: SamplingConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = f"sys.stdout.write({with_per_round(CAPTURED)!r})"
    monkeypatch.setattr(gm, "build_twin", lambda *_, **__: _fake_binary(tmp_path, body))
    monitor = _FakeMonitor()
    ctx = RunContext(device="cpu", smoke=False, sampling=fast)
    monkeypatch.setattr(ctx, "_monitor", lambda *_, **__: monitor)
    p = build_params(RID, MemsetParams, {"ops": "1000", "twin_replays": "4", "twin_rounds": "2", "twin_warmup": "2"})
    variants, _ = GraphMemset()._twin(p, ctx, 0)
    assert [v.status for v in variants] == ["ok"] * 5 and monitor.entered
    for v in variants:
        # 222 appeared only while the twin ran (the twin itself); 111 was on the GPU before it.
        assert v.gpu_monitor == {"sm_clock_min_mhz": 1500, "throttled": ["sw_power_cap"], "other_pids": [111]}
    # Without NVML there is no monitor and nothing is made up.
    plain, _ = GraphMemset()._twin(p, RunContext(device="cpu", smoke=False, sampling=fast), 0)
    assert all(v.gpu_monitor is None for v in plain)


# --------------------------------------------------------------------------- more twin runs while the CI is wide


def _twin_output(memset: list[float], fill: list[float], per_round: int = 1, episode: int = 2) -> _twin.TwinRun:
    doc = {"ops": 1000, "per_round": per_round, "episode_rounds": episode, "variants": {"memset": memset, "fill": fill}}
    return _twin.TwinRun(stdout=json.dumps(doc), wall_s=2.0)


def test_a_tight_twin_runs_once_and_a_wide_one_again_until_tight_or_out_of_runs() -> None:
    from repro.repros._memset_twin import TWIN_RUNS, headline_halfwidth, twin_runs

    steady = _twin_output([1.5e-6] * 12, [1.0e-6] * 12)
    calls: list[int] = []

    def once(out: _twin.TwinRun) -> _twin.TwinRun:
        calls.append(1)
        return out

    wall, doc = twin_runs(lambda: once(steady), ["memset", "fill"], 0.02, 60.0)
    assert (len(calls), doc["twin_runs"], wall) == (1, 1, 2.0) and headline_halfwidth(doc) == pytest.approx(0.0)
    # Two of six episodes far off: the widened CI is over 2%, so the twin runs again (and again), each run's
    # replays appended to the last's.
    wild = _twin_output([1.5e-6] * 8 + [1.2e-6] * 4, [1.0e-6] * 12)
    width = headline_halfwidth(json.loads(wild.stdout))
    assert width is not None and width > 0.02
    calls.clear()
    wall, doc = twin_runs(lambda: once(wild), ["memset", "fill"], 0.02, 60.0)
    assert len(calls) == TWIN_RUNS == doc["twin_runs"] and wall == 2.0 * TWIN_RUNS
    assert len(doc["variants"]["memset"]) == 12 * TWIN_RUNS == len(doc["variants"]["fill"])
    # A wide first run followed by steady ones: it stops once the CI over all episodes is narrow enough.
    runs = iter([wild, steady, steady, steady])
    calls.clear()
    _, doc = twin_runs(lambda: once(next(runs)), ["memset", "fill"], 0.02, 60.0)
    # Two runs: 12 episodes, 2 of them off, and the 95% CI of their medians (order statistics 3 and 10) is tight.
    assert doc["twin_runs"] == len(calls) == 2 and headline_halfwidth(doc) == pytest.approx(0.0)
    # The budget bounds the runs: one more only where it would end within it, as long as the last one took.
    for budget, want in ((3.9, 1), (4.0, 2), (5.9, 2), (6.0, 3)):
        calls.clear()
        wall, doc = twin_runs(lambda: once(wild), ["memset", "fill"], 0.02, budget)
        assert doc["twin_runs"] == len(calls) == want and wall == 2.0 * want


def test_output_without_rounds_is_never_run_again() -> None:
    from repro.repros._memset_twin import headline_halfwidth, twin_runs

    bare = _twin_output([1.5e-6, 1.2e-6, 1.9e-6], [1.0e-6] * 3, per_round=0)
    assert headline_halfwidth(json.loads(bare.stdout)) is None
    _, doc = twin_runs(lambda: bare, ["memset", "fill"], 0.02, 60.0)
    assert doc["twin_runs"] == 1


def test_a_run_with_a_partial_last_round_is_not_extended() -> None:
    from repro.repros._memset_twin import twin_runs

    # 11 replays in rounds of 2: the last round holds one, so a second run's rounds would start mid-round.
    partial = _twin_output([1.5e-6] * 7 + [1.2e-6] * 4, [1.0e-6] * 11, per_round=2)
    _, doc = twin_runs(lambda: partial, ["memset", "fill"], 0.0, 60.0)
    assert doc["twin_runs"] == 1


def test_a_run_whose_rounds_end_mid_episode_is_not_extended() -> None:
    from repro.repros._memset_twin import twin_runs

    # 12 rounds in episodes of 5: the last episode holds 2, so a second run's episodes would straddle the two runs.
    short = _twin_output([1.5e-6] * 8 + [1.2e-6] * 4, [1.0e-6] * 12, episode=5)
    _, doc = twin_runs(lambda: short, ["memset", "fill"], 0.0, 60.0)
    assert doc["twin_runs"] == 1


def test_a_failed_second_run_keeps_the_first() -> None:
    from repro.repros._memset_twin import twin_runs

    wild = _twin_output([1.5e-6] * 8 + [1.2e-6] * 4, [1.0e-6] * 12)
    runs = iter([wild])

    def once() -> _twin.TwinRun:
        try:
            return next(runs)
        except StopIteration:
            raise _twin.TwinRunError("twin exited 1") from None

    _, doc = twin_runs(once, ["memset", "fill"], 0.02, 60.0)
    assert doc["twin_runs"] == 1 and doc["twin_rerun_error"] == "twin exited 1"
    assert len(doc["variants"]["memset"]) == 12
