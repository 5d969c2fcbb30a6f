"""solve-512-cliff's verdict on synthetic samples: the worst-row rule, paired and unpaired CIs, the LU
paths and backends the finding names, and what it says when no pair was measured."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest
from helpers import full_text, timing_for

from repro.core.spec import RunResult, Timing, VariantResult
from repro.repros import _lu_paths as lp
from repro.repros import solve_cliff as sc
from repro.repros.solve_cliff import Solve512Cliff, SolveParams
from repro.run.schedule import QUICK_UNPROFILED

SCALE = (511 / 512) ** 3


# A slow drift of the GPU over the rounds (up to 45%), the same for every size in a round.
DRIFT = [1 + 0.5 * ((i * 7) % 10) / 10 for i in range(24)]


def paired_timing(rounds: Sequence[float], group: str, episode: int | None = None) -> Timing:
    """A Timing as measure_paired records it: one value per round (here one sample per round)."""
    t = timing_for(list(rounds), method="cuda_events", calls_per_sample=1, budget_s=0.5)
    return dataclasses.replace(t, group=group, rounds=tuple(rounds), episode_rounds=episode)


def _point(
    backend: str,
    batch: int,
    n: int,
    median: float,
    spread: float = 0.002,
    path: str = "",
    drift: Sequence[float] | None = None,
) -> VariantResult:
    """A timed point: unpaired samples around ``median``; with ``drift``, paired rounds of its sweep."""
    if drift is None:
        samples = [median * (1 + spread * ((i % 11) - 5) / 5) for i in range(40)]
        timing = timing_for(samples, method="cuda_events", calls_per_sample=1, budget_s=0.5)
    else:  # a little per-round jitter that differs between sizes, so the paired CI is not zero-width
        rounds = [median * d * (1 + spread * (((i + n) % 3) - 1)) for i, d in enumerate(drift)]
        timing = paired_timing(rounds, f"{backend}_b{batch}")
    return VariantResult(
        name=sc.point_name(backend, batch, n),
        label="",
        config={"backend": backend, "batch": batch, "n": n},
        status="ok",
        device="cuda",
        timing=timing,
        kernel_source="cuda",
        extra={"path": path},
    )


def _grid(
    times: dict[tuple[str, int], tuple[float, float]],
    paths: dict[str, tuple[str, str]],
    drift: Sequence[float] | None = None,
) -> RunResult:
    variants = []
    for (backend, batch), (t511, t512) in times.items():
        p511, p512 = paths[backend]
        variants += [
            _point(backend, batch, 511, t511, path=p511, drift=drift),
            _point(backend, batch, 512, t512, path=p512, drift=drift),
        ]
    return RunResult(variants=tuple(variants), extra={"torch": "2.11.0+cu130"})


PATHS = {
    "default": (lp.PATH_MAGMA, lp.PATH_MAGMA),
    "cusolver": (lp.PATH_CUBLAS, lp.PATH_CUSOLVER),
}


ROW_KEYS = {
    "comparison", "label", "num", "den", "ratio", "ci_low", "ci_high", "threshold", "ci_level", "status", "where",
    "paired", "n", "scale", "basis", "headline", "backend", "batch",
}  # fmt: skip


def test_verdict_reproduced_when_one_row_clears_the_threshold() -> None:
    p = SolveParams(batches=(16, 128), backends=("default", "cusolver"))
    res = _grid(
        {
            ("default", 16): (1.0e-3, 1.0e-3),
            ("default", 128): (4.0e-3, 4.0e-3),
            ("cusolver", 16): (1.0e-3, 1.2e-3),
            ("cusolver", 128): (2.0e-3, 11.0e-3),
        },
        PATHS,
        drift=DRIFT,
    )
    v = Solve512Cliff().verdict(p, res)
    assert v.status == "reproduced" and v.headline == "cusolver/b128" and v.paired is True
    assert v.variants == ("cusolver_b128_n512", "cusolver_b128_n511")
    assert v.value == pytest.approx(5.5 * SCALE, rel=1e-2)
    assert v.ci_low is not None and v.value is not None and v.ci_high is not None
    assert v.ci_low >= 1.5 and v.ci_low <= v.value <= v.ci_high
    rows = {(r["backend"], r["batch"]): r for r in v.breakdown}
    assert set(rows) == {("default", 16), ("default", 128), ("cusolver", 16), ("cusolver", 128)}
    assert all(set(r) == ROW_KEYS for r in rows.values())
    assert all(r["paired"] is True and r["n"] == len(DRIFT) for r in rows.values())
    assert [r["headline"] for r in v.breakdown] == [False, False, False, True]
    assert rows[("cusolver", 128)]["status"] == "reproduced" and rows[("cusolver", 128)]["where"] == "above"
    assert rows[("cusolver", 16)]["status"] == "not_reproduced"
    assert rows[("default", 16)]["ratio"] == pytest.approx(SCALE, rel=1e-2)
    assert v.finding.startswith(
        "Reproduced: work-scaled t(512)/t(511), cusolver backend, batch 128 was "
        f"{v.value:.2f}x ({v.ci_level * 100:.3g}% CI {v.ci_low:.2f}-{v.ci_high:.2f}), the whole CI is above the 1.5 "
        "threshold; "
    )
    # Worst of 4 (2 backends x 2 batches): each CI is held at 1 - 0.05/4 (Bonferroni).
    assert v.ci_level == pytest.approx(0.9875) and "98.8% CI" in v.finding
    assert "the whole CI is above the 1.5 threshold" in v.finding
    assert f"the LU switched from {lp.PATH_CUBLAS} at n=511 to {lp.PATH_CUSOLVER} at n=512" in v.finding
    assert "on torch 2.11.0+cu130" in v.finding
    assert "Below the threshold at every batch: the default backend(s)." in v.details
    assert "Smoke run" not in full_text(v) and "The seed saw" not in full_text(v)


def _magma_run(has_magma: bool | None) -> tuple[SolveParams, RunResult]:
    """The H200 shape: the default backend (MAGMA where torch has it) scales smoothly, cuSOLVER jumps."""
    p = SolveParams(batches=(16, 128), backends=("default", "cusolver"))
    res = _grid(
        {
            ("default", 16): (1.0e-3, 0.97e-3 / SCALE),
            ("default", 128): (4.0e-3, 3.88e-3 / SCALE),
            ("cusolver", 16): (1.0e-3, 2.0e-3 / SCALE),
            ("cusolver", 128): (2.0e-3, 19.0e-3 / SCALE),
        },
        PATHS,
        drift=DRIFT,
    )
    return p, dataclasses.replace(res, extra={**res.extra, "has_magma": has_magma})


def test_the_finding_opens_with_the_cusolver_backend_and_the_default_backends_ratios() -> None:
    p, res = _magma_run(True)
    v = Solve512Cliff().verdict(p, res)
    assert v.status == "reproduced" and v.headline == "cusolver/b128"
    lead = v.finding.split("; ")
    assert lead[1] == (
        "the cliff shows under the cuSOLVER backend: opt-in here (torch.backends.cuda.preferred_linalg_library"
        "('cusolver')"
    )
    assert lead[2] == (
        "torch.cuda.has_magma is True), by PyTorch's source (at other commits, untested here) the default only in "
        "builds without MAGMA"
    )
    assert lead[3] == "the default backend (MAGMA here) showed no cliff: 0.97x, 0.97x at batches 16, 128"
    assert lead[4].startswith(f"the LU switched from {lp.PATH_CUBLAS} at n=511 to {lp.PATH_CUSOLVER} at n=512")
    assert v.finding.endswith("on torch 2.11.0+cu130 (paths from kernel names).")
    assert "No API trace of the LU paths." in v.details
    # With the libraries' API logs the details name the entry point each side called.
    log = {
        "batch": 4,
        "sizes": {"511": {"cublas": {"cublasSgetrfBatched": 1}}, "512": {"cusolver": {"cusolverDnXgetrf": 4}}},
    }
    logged = Solve512Cliff().verdict(p, dataclasses.replace(res, extra={**res.extra, "api_log": log}))
    assert logged.finding.endswith("(paths from kernel names).")
    assert logged.details[0] == (
        "The cuBLAS/cuSOLVER API log (one call each, batch 4): n=511 called cublasSgetrfBatched; n=512 called "
        "cusolverDnXgetrf x4."
    )
    assert "PyTorch 2.13 or later" in " ".join(Solve512Cliff.untested)
    assert "a torch build without MAGMA" in " ".join(Solve512Cliff.untested)
    # has_magma not recorded: the opt-in is said as a rule, the default backend as unrecorded.
    p, res = _magma_run(None)
    u = Solve512Cliff().verdict(p, res)
    assert "the cliff shows under the cuSOLVER backend: opt-in (torch.backends" in u.finding
    assert "the default backend (unrecorded) showed no cliff" in u.finding


def test_without_magma_the_default_backend_is_named_cusolver() -> None:
    p, res = _magma_run(False)
    v = Solve512Cliff().verdict(p, res)
    assert "the cliff shows under the cuSOLVER backend, which this torch (torch.cuda.has_magma is False) also uses" in (
        v.finding
    )
    assert "the default backend (cuSOLVER here: no MAGMA) showed no cliff: 0.97x, 0.97x at batches 16, 128" in (
        v.finding
    )
    # A default backend that jumps too (a build without MAGMA) is not called "no cliff".
    jumps = {("default", 16): (1.0e-3, 2.0e-3 / SCALE), ("cusolver", 16): (1.0e-3, 2.0e-3 / SCALE)}
    res2 = _grid(jumps, {"default": PATHS["cusolver"], "cusolver": PATHS["cusolver"]}, drift=DRIFT)
    p2 = SolveParams(batches=(16,), backends=("default", "cusolver"))
    v2 = Solve512Cliff().verdict(p2, dataclasses.replace(res2, extra={**res2.extra, "has_magma": False}))
    assert v2.status == "reproduced" and "no cliff" not in v2.finding
    # Both rows read 2.00x; the worst rule heads with the first, the default backend, named for what it is here.
    assert v2.headline == "default/b16"
    assert "; the cliff shows under the default backend (cuSOLVER here: no MAGMA); " in v2.finding
    jumps[("cusolver", 16)] = (1.0e-3, 3.0e-3 / SCALE)
    res3 = _grid(jumps, {"default": PATHS["cusolver"], "cusolver": PATHS["cusolver"]}, drift=DRIFT)
    v3 = Solve512Cliff().verdict(p2, dataclasses.replace(res3, extra={**res3.extra, "has_magma": False}))
    assert v3.headline == "cusolver/b16"
    assert "the default backend (cuSOLVER here: no MAGMA) showed a cliff too: 2.00x at batches 16" in v3.finding


def test_worst_rule_heads_with_the_largest_row_that_cleared_the_threshold() -> None:
    p = SolveParams(batches=(64, 128), backends=("default", "cusolver"))
    res = RunResult(
        variants=(
            # default/b64: a large point estimate, but its CI straddles 1.5 (unpaired, wide spread).
            _point("default", 64, 511, 1.0e-3, spread=0.6, path=lp.PATH_MAGMA),
            _point("default", 64, 512, 2.2e-3, spread=0.6, path=lp.PATH_MAGMA),
            _point("cusolver", 64, 511, 1.0e-3, path=lp.PATH_CUBLAS, drift=DRIFT),
            _point("cusolver", 64, 512, 1.7e-3 / SCALE, path=lp.PATH_CUSOLVER, drift=DRIFT),
            _point("cusolver", 128, 511, 1.0e-3, path=lp.PATH_CUBLAS, drift=DRIFT),
            _point("cusolver", 128, 512, 1.9e-3 / SCALE, path=lp.PATH_CUSOLVER, drift=DRIFT),
        ),
        extra={"torch": "2.11.0+cu130"},
    )
    v = Solve512Cliff().verdict(p, res)
    rows = {r["comparison"]: r for r in v.breakdown}
    assert set(rows) == {"default/b64", "cusolver/b64", "cusolver/b128"}  # default/b128 was not measured
    assert rows["default/b64"]["where"] == "straddles" and rows["default/b64"]["ratio"] > 1.9
    assert rows["default/b64"]["paired"] is False and rows["cusolver/b64"]["paired"] is True
    assert v.status == "reproduced" and v.headline == "cusolver/b128"
    assert v.value == pytest.approx(1.9, rel=1e-2)
    assert "Also over 1.5: cusolver/b64 1.70x." in v.details
    assert "Inconclusive (a CI straddles the threshold): the default backend(s)." in v.details


def test_paired_rounds_cancel_drift_that_would_sink_a_two_sample_ci() -> None:
    p = SolveParams(batches=(64,), backends=("cusolver",))
    paired = RunResult(
        variants=(
            _point("cusolver", 64, 511, 1.0e-3, path=lp.PATH_CUBLAS, drift=DRIFT),
            _point("cusolver", 64, 512, 1.7e-3 / SCALE, path=lp.PATH_CUSOLVER, drift=DRIFT),
        ),
        extra={"torch": "2.11.0+cu130"},
    )
    v = Solve512Cliff().verdict(p, paired)
    assert v.status == "reproduced" and v.paired is True and v.value == pytest.approx(1.7, rel=1e-2)
    assert v.ci_low is not None and v.ci_low >= 1.5
    # The same numbers without their rounds (the older two-sample CI) cannot tell the drift apart.
    unpaired = RunResult(
        variants=tuple(
            dataclasses.replace(x, timing=dataclasses.replace(x.timing, group=None, rounds=None))
            for x in paired.variants
            if x.timing is not None
        ),
        extra=paired.extra,
    )
    u = Solve512Cliff().verdict(p, unpaired)
    assert u.ci_low is not None and u.ci_high is not None
    assert u.paired is False and u.ci_low < 1.5 <= u.ci_high and u.status == "not_reproduced"
    assert u.finding.startswith("Not reproduced (inconclusive): ")
    # Rounds from two different sweeps are not paired either.
    timing = paired.variants[1].timing
    assert timing is not None and timing.rounds is not None
    other = dataclasses.replace(paired.variants[1], timing=paired_timing(timing.rounds, "x"))
    assert Solve512Cliff().verdict(p, RunResult(variants=(paired.variants[0], other))).paired is False


def test_verdict_not_reproduced_when_every_row_scales_smoothly() -> None:
    # Unpaired samples (no rounds): the two-sample CI stands in.
    p = SolveParams(batches=(16, 128), backends=("default", "cusolver"))
    res = _grid(
        {
            ("default", 16): (1.0e-3, 1.01e-3),
            ("default", 128): (4.0e-3, 4.0e-3),
            ("cusolver", 16): (1.0e-3, 1.1e-3),
            ("cusolver", 128): (2.0e-3, 2.4e-3),
        },
        {"default": (lp.PATH_MAGMA, lp.PATH_MAGMA), "cusolver": (lp.PATH_CUBLAS, lp.PATH_CUBLAS)},
    )
    v = Solve512Cliff().verdict(p, res)
    assert v.status == "not_reproduced" and v.paired is False
    assert v.value == pytest.approx(1.2 * SCALE, rel=1e-3)  # no row cleared it: the largest heads
    assert all(r["paired"] is False and r["n"] == 40 for r in v.breakdown)
    assert v.finding.startswith("Not reproduced: work-scaled t(512)/t(511), cusolver backend, batch 128 was 1.19x")
    assert "the whole CI is below the 1.5 threshold" in v.finding
    assert f"the LU ran {lp.PATH_CUBLAS} on both sides on torch 2.11.0+cu130" in v.finding
    assert "Below the threshold at every batch: the cusolver, default backend(s)." in v.details
    assert "The seed saw ~10x at batch 128 on an RTX 6000 Ada." in v.details


def test_a_point_estimate_over_the_threshold_with_a_straddling_ci_is_not_a_cliff() -> None:
    p = SolveParams(batches=(64,), backends=("cusolver",))
    res = RunResult(
        variants=(
            _point("cusolver", 64, 511, 1.0e-3, spread=0.6, path=lp.PATH_CUBLAS),
            _point("cusolver", 64, 512, 1.7e-3, spread=0.6, path=lp.PATH_CUSOLVER),
        ),
        extra={"torch": "2.11.0+cu130"},
    )
    v = Solve512Cliff().verdict(p, res)
    assert v.value is not None and v.ci_low is not None and v.ci_high is not None
    assert v.value > 1.5 and v.ci_low < 1.5 <= v.ci_high
    assert v.status == "not_reproduced" and v.breakdown[0]["where"] == "straddles"
    assert v.finding.startswith("Not reproduced (inconclusive): ")
    assert "the CI straddles the 1.5 threshold" in v.finding
    assert "Inconclusive (a CI straddles the threshold): the cusolver backend(s)." in v.details


def test_verdict_without_any_measured_pair_says_why() -> None:
    p = SolveParams(batches=(16,), backends=("cusolver",))
    failed = VariantResult(
        name="cusolver_b16_n512",
        label="",
        config={"backend": "cusolver", "batch": 16, "n": 512},
        status="error",
        reason="RuntimeError: CUDA out of memory",
    )
    res = RunResult(variants=(_point("cusolver", 16, 511, 1e-3), failed))
    v = Solve512Cliff().verdict(p, res)
    assert v.status == "error" and v.value is None  # a point that failed is an error, not a skip
    assert "cusolver_b16_n512 was error: RuntimeError: CUDA out of memory" in full_text(v)


def test_a_quick_run_reads_no_lu_path_and_the_finding_says_so() -> None:
    p = SolveParams(batches=(128,), backends=("cusolver",))
    res = _grid({("cusolver", 128): (2.0e-3, 11.0e-3)}, PATHS, drift=DRIFT)
    quick = RunResult(
        variants=tuple(dataclasses.replace(v, kernel_source=QUICK_UNPROFILED, extra={}) for v in res.variants),
        extra=res.extra,
    )
    v = Solve512Cliff().verdict(p, quick)
    assert v.status == Solve512Cliff().verdict(p, res).status == "reproduced"
    assert f"the LU path was not read: {QUICK_UNPROFILED}" in v.finding and "switched" not in v.finding
