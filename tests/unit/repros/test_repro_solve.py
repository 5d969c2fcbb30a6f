"""solve-512-cliff: CPU smoke run end to end, params, LU path classification and the verdict (paired and not)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from helpers import full_text, timing_for

from repro.core.context import Arm, SamplingConfig
from repro.core.errors import UsageError
from repro.core.spec import Kernel, RunResult, Timing, VariantResult, build_params
from repro.evidence.artifact import validation_errors
from repro.repros import _lu_paths as lp
from repro.repros import solve_cliff as sc
from repro.repros._lu_paths import classify_path, lu_kernels
from repro.repros.solve_cliff import BACKENDS, Solve512Cliff, SolveParams
from repro.run.context import RunContext
from repro.run.execute import RunRequest, execute
from repro.run.schedule import QUICK_UNPROFILED

RID = "solve-512-cliff"


def test_smoke_run_on_cpu_writes_a_valid_artifact(run_dir: Path, fast: SamplingConfig) -> None:
    doc, path = execute(RunRequest(RID, smoke=True, sampling=fast), run_dir)
    assert path.is_file()
    assert validation_errors(doc) == []
    assert doc["run"]["device"] == "cpu" and doc["error"] is None
    names = [v["name"] for v in doc["variants"]]
    assert names == [f"default_b{b}_n{n}" for b in (2, 4) for n in range(30, 34)]
    for v in doc["variants"]:
        assert v["status"] == "ok", v["reason"]
        assert v["kernel_source"] == "cpu" and v["kernels"]
        assert v["extra"]["path"] == lp.PATH_CPU
        assert any("lu_factor" in k for k in v["extra"]["lu_kernels"])
        n, b = v["config"]["n"], v["config"]["batch"]
        assert v["work"]["flops"] == pytest.approx(b * (2 / 3 * n**3 + 2 * n * n))
        # Every size of one (backend, batch) was timed in the same interleaved rounds.
        assert v["timing"]["group"] == f"default_b{b}" and v["timing"]["rounds"]
    for b in (2, 4):
        sweep = [v["timing"]["rounds"] for v in doc["variants"] if v["config"]["batch"] == b]
        assert len({len(r) for r in sweep}) == 1
    verdict = doc["verdict"]
    assert verdict["status"] == "smoke"  # a CPU run never judges the cliff
    assert verdict["ci_low"] <= verdict["value"] <= verdict["ci_high"]
    rows = verdict["breakdown"]
    assert [(r["backend"], r["batch"]) for r in rows] == [("default", 2), ("default", 4)]
    for r in rows:
        assert r["status"] == "smoke" and r["paired"] is True and r["basis"] == "time"
        assert (r["num"], r["den"]) == (f"default_b{r['batch']}_n32", f"default_b{r['batch']}_n31")
        assert r["scale"] == pytest.approx((31 / 32) ** 3) and r["threshold"] == 1.5
        assert r["ci_low"] <= r["ratio"] <= r["ci_high"]
    # headline_rule "worst": the largest ratio among those whose CI clears the threshold, else the largest.
    clear = [r for r in rows if r["where"] == "above"]
    head = max(clear or rows, key=lambda r: r["ratio"])
    assert [r["headline"] for r in rows] == [r is head for r in rows]
    assert verdict["value"] == head["ratio"] and verdict["headline"] == head["comparison"]
    assert verdict["finding"].startswith(
        f"Smoke run on cpu, not evidence about any GPU: work-scaled t(32)/t(31), default backend, batch {head['batch']}"
    )
    assert f"the LU ran {lp.PATH_CPU} on both sides" in verdict["finding"]
    assert "Reproduced" not in full_text(verdict_obj(verdict))
    grid = doc["extra"]["time_grid"]
    assert set(grid) == {"default"} and set(grid["default"]) == {"2", "4"}
    assert set(grid["default"]["4"]) == {str(n) for n in range(30, 34)}
    assert grid["default"]["4"]["32"]["median_s"] > 0 and grid["default"]["4"]["32"]["path"] == lp.PATH_CPU
    assert doc["extra"]["has_magma"] is None and doc["extra"]["sizes"] == list(range(30, 34))


def verdict_obj(doc_verdict: dict[str, Any]) -> Any:
    """The artifact's verdict as the object full_text reads."""
    return SimpleNamespace(finding=doc_verdict["finding"], details=doc_verdict["details"])


def test_non_default_backends_are_skipped_on_cpu(fast: SamplingConfig) -> None:
    p = build_params(RID, SolveParams, {"backends": "default,cusolver,magma", "batches": "2"}, smoke=True)
    res = Solve512Cliff().run(p, RunContext(device="cpu", smoke=True, sampling=fast))
    skipped = {v.name: v for v in res.variants if v.status == "skipped"}
    assert set(skipped) == {"cusolver", "magma"}
    assert all(v.reason is not None and "CUDA ops only" in v.reason for v in skipped.values())
    assert [v.name for v in res.variants if v.status == "ok"] == [f"default_b2_n{n}" for n in range(30, 34)]
    assert res.extra["backends"] == ["default"]
    # Comparisons of the skipped backends have no variants: the verdict rests on default alone.
    v = Solve512Cliff().verdict(p, res)
    assert v.status == "smoke" and [r["comparison"] for r in v.breakdown] == ["default/b2"]


def test_one_failing_point_is_an_error_variant_and_the_rest_still_count(
    fast: SamplingConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    real = torch.linalg.solve_ex

    def solve_ex(a: Any, b: Any, **kw: Any) -> Any:  # one point fails its check, as an OOM would
        if tuple(a.shape) == (2, 32, 32):
            raise RuntimeError("CUDA out of memory (simulated)")
        return real(a, b, **kw)

    monkeypatch.setattr(torch.linalg, "solve_ex", solve_ex)
    p = build_params(RID, SolveParams, {}, smoke=True)
    res = Solve512Cliff().run(p, RunContext(device="cpu", smoke=True, sampling=fast))
    bad = res.variant("default_b2_n32")
    assert bad.status == "error" and bad.reason is not None and "out of memory" in bad.reason
    assert res.extra["time_grid"]["default"]["2"]["32"] == {"median_s": None, "path": None, "status": "error"}
    # The rest of that sweep is still timed, in paired rounds among themselves.
    rest = [res.variant(f"default_b2_n{n}") for n in (30, 31, 33)]
    assert all(v.status == "ok" and v.timing is not None and v.timing.group == "default_b2" for v in rest)
    assert len({len(v.timing.rounds or ()) for v in rest if v.timing is not None}) == 1
    verdict = Solve512Cliff().verdict(p, res)
    assert [r["batch"] for r in verdict.breakdown] == [4]
    assert verdict.headline == "default/b4" and verdict.status == "smoke"


class _SweepFails(RunContext):
    """A CPU context whose paired timing of one (backend, batch) fails, as an OOM mid-sweep would."""

    fail_group: str = ""

    def _setup_arm(self, arm: Arm, cfg: SamplingConfig) -> Any:
        if arm.name.startswith(self.fail_group + "_"):
            raise RuntimeError("CUDA out of memory (simulated, while timing)")
        return super()._setup_arm(arm, cfg)


def test_a_failing_sweep_costs_that_sweep_not_the_grid(fast: SamplingConfig) -> None:
    p = build_params(RID, SolveParams, {}, smoke=True)
    ctx = _SweepFails(device="cpu", smoke=True, sampling=fast)
    ctx.fail_group = "default_b4"
    res = Solve512Cliff().run(p, ctx)
    assert [v.status for v in res.variants] == ["ok"] * 4 + ["error"] * 4
    assert all("while timing" in (v.reason or "") for v in res.variants[4:])
    assert {e["status"] for e in res.extra["time_grid"]["default"]["4"].values()} == {"error"}
    verdict = Solve512Cliff().verdict(p, res)
    assert [r["batch"] for r in verdict.breakdown] == [2]


def test_params_defaults_smoke_and_rejects() -> None:
    p = SolveParams()
    assert (p.n_min, p.n_max, p.cliff_n, p.batches, p.rhs_cols) == (510, 513, 512, (16, 64, 128), 1)
    assert p.backends == ("default", "cusolver") and p.point_budget_s == 0.5
    smoke = build_params(RID, SolveParams, {}, smoke=True)
    assert (smoke.n_min, smoke.n_max, smoke.cliff_n, smoke.batches, smoke.backends) == (
        30,
        33,
        32,
        (2, 4),
        ("default",),
    )
    assert build_params(RID, SolveParams, {"backends": "default,cusolver,magma"}).backends == BACKENDS
    gpu_small = build_params(RID, SolveParams, {"n_min": "126", "n_max": "130", "cliff_n": "128", "rhs_cols": "4"})
    assert gpu_small.cliff_n == 128 and gpu_small.rhs_cols == 4
    with pytest.raises(UsageError, match="expected n_min <= cliff_n - 1 and cliff_n <= n_max"):
        build_params(RID, SolveParams, {"cliff_n": "128"})
    with pytest.raises(UsageError, match="expected one of default, cusolver, magma"):
        build_params(RID, SolveParams, {"backends": "default,lapack"})
    with pytest.raises(UsageError, match="at most once"):
        build_params(RID, SolveParams, {"batches": "16,16"})


def test_comparisons_one_per_backend_and_batch() -> None:
    p = SolveParams(batches=(16, 128), backends=("default", "cusolver"))
    comps = Solve512Cliff().comparisons(p)
    assert [c.name for c in comps] == ["default/b16", "default/b128", "cusolver/b16", "cusolver/b128"]
    c = comps[3]
    assert (c.num, c.den, c.threshold, c.headline) == ("cusolver_b128_n512", "cusolver_b128_n511", 1.5, True)
    assert c.scale == pytest.approx((511 / 512) ** 3) and dict(c.qualifiers) == {"backend": "cusolver", "batch": 128}
    assert Solve512Cliff.headline_rule == "worst"


# --------------------------------------------------------------------------- LU path classification

# Names as CUPTI reports them. MAGMA's and PyTorch's come from their sources
# (magmablas/slaswp_batched.cu, src/sgetrf_batched.cpp; aten/src/ATen/native/cuda/linalg/
# LURecBlas3Kernel.cu). cuBLAS and cuSOLVER are closed source: theirs are representative
# of the routine-named kernels those libraries ship, next to generic BLAS kernels
# (trsm, gemm) that every path also launches.
MAGMA_POINT = [
    "void gemm_template_batched_nn_kernel<float, 16, 16, 32, 16, 16, 8, 16, 8, 16, 16, 32, 0, 0>(int, int, int, "
    "float const* const*, int, int, float const* const*, int, int, float**, int, int, float, float, int, int)",
    "slaswp_rowparallel_kernel(int, int, int, float*, int, float*, int, int, int, int**)",
    "setup_pivinfo_kernel_batched(int**, int**, int, int, int)",
    "void trsm_left_kernel<float, 256, 4, false, false, false, true, true>(cublasTrsmParams<float>, float, float "
    "const*, int)",
]
NATIVE_POINT = [
    "void at::native::(anonymous namespace)::batched_panel_register_resident_fused_kernel<float>(float*, long, int, "
    "int, int, int, int, int*, int*)",
    "void at::native::(anonymous namespace)::laswp_rowparallel_kernel<float>(float*, long, int, int const*, int, int, "
    "int, int, int, int)",
    "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x128_8x4_nn_align1>(cutlass_80_simt_sgemm_128x128_8x4_nn_align1::"
    "SolveParams)",
]
# cuBLAS and cuSOLVER are closed source: these are the names the H200 reference run
# (torch 2.11.0+cu130, cuBLAS 13.1.0, cuSOLVER 12.0.4) recorded at batch 16, n=511 and
# n=512 under the cusolver backend.
CUBLAS_BATCHED_POINT = [
    "void getrf_panel<float, float, 4, 4, 3, 3, 4, true>(int, float* const*, int, int*, int*, int)",
    "void laswp_kernel<float, false>(int, float* const*, int, int, int, int const*, int, int, int)",
    "void batch_trsm_left_kernel<float, 64, 4, 3, false, false, true>(cublasTrsmBatchParams2<float>, float, "
    "float const*, int)",
    "void batch_trsm_left_kernel<float, 64, 4, 3, false, false, false>(cublasTrsmBatchParams2<float>, float, "
    "float const*, int)",
]
CUSOLVER_POINT = [
    "void getrf_pivot<getrf_params_<float, 512, 1, 512, 512, 1> >(int, int, int, void*, int, long*, int, "
    "getrf_params_<float, 512, 1, 512, 512, 1>::data_type*, unsigned int*, unsigned int*, getrf_params_<float, 512, "
    "1, 512, 512, 1>::data_type*, unsigned int, unsigned int, unsigned int, int*)",
    "void ipiv_lower_small<float, 512>(int, void*, int, long*, int, int)",
    "void batch_trsm_left_kernel<float, 64, 4, 3, false, false, true>(cublasTrsmBatchParams2<float>, float, "
    "float const*, int)",
    "void create_pivot_v2<512>(int, int*, long*, int)",
]


@pytest.mark.parametrize(
    ("names", "path"),
    [
        (MAGMA_POINT, lp.PATH_MAGMA),
        (["strtri_diag_lower_kernel(magma_diag_t, int, float const *, int, float*)"], lp.PATH_MAGMA),
        (NATIVE_POINT, lp.PATH_NATIVE),
        (CUBLAS_BATCHED_POINT, lp.PATH_CUBLAS),
        (CUSOLVER_POINT, lp.PATH_CUSOLVER),
        # Generic BLAS kernels alone say nothing about the LU path.
        (CUBLAS_BATCHED_POINT[2:], lp.PATH_UNKNOWN),
        (["void isamax_kernel_batched(int, float**, int, int, int, int**)"], lp.PATH_MAGMA),
        # A batched triangular solve (getrs) is not an LU factorization.
        (
            ["void getrs_batched_kernel<float, 32>(int, int, float const* const*, int, int const*, float**, int)"],
            lp.PATH_UNKNOWN,
        ),
        ([], lp.PATH_UNKNOWN),
    ],
)
def test_path_is_read_off_kernel_names(names: list[str], path: str) -> None:
    assert classify_path(names) == path


def test_path_on_cpu_is_lapack_whatever_the_names() -> None:
    assert classify_path(["aten::linalg_lu_factor_ex", "aten::linalg_lu_solve"], "cpu") == lp.PATH_CPU
    assert classify_path(CUSOLVER_POINT, "cpu") == lp.PATH_CPU


def test_lu_kernels_lists_the_deciding_kernels_first() -> None:
    table = [
        Kernel(name=n, count=1, total_us=10.0 - i, mean_us=1.0, per_call=1.0) for i, n in enumerate(CUSOLVER_POINT)
    ]
    # the batched trsm (CUSOLVER_POINT[2]) is generic BLAS and says nothing about the path
    assert lu_kernels(table) == [CUSOLVER_POINT[0], CUSOLVER_POINT[1], CUSOLVER_POINT[3]]
    generic = [Kernel(name="ampere_sgemm_64x64_nn", count=1, total_us=1.0, mean_us=1.0, per_call=1.0)]
    assert lu_kernels(generic) == ["ampere_sgemm_64x64_nn"]


# --------------------------------------------------------------------------- verdict on synthetic samples

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
    assert lead[2] == "torch.cuda.has_magma is True), the default only in builds without MAGMA"
    assert lead[3] == "the default backend (MAGMA here) showed no cliff: 0.97x, 0.97x at batches 16, 128"
    assert lead[4].startswith(f"the LU switched from {lp.PATH_CUBLAS} at n=511 to {lp.PATH_CUSOLVER} at n=512")
    assert v.finding.endswith("on torch 2.11.0+cu130 (paths from kernel names, no API trace).")
    # With the libraries' API logs the finding names the entry point each side called.
    log = {
        "batch": 4,
        "sizes": {"511": {"cublas": {"cublasSgetrfBatched": 1}}, "512": {"cusolver": {"cusolverDnXgetrf": 4}}},
    }
    logged = Solve512Cliff().verdict(p, dataclasses.replace(res, extra={**res.extra, "api_log": log}))
    assert logged.finding.endswith(
        "(paths from kernel names; the cuBLAS/cuSOLVER API log (one call each, batch 4): n=511 called "
        "cublasSgetrfBatched; n=512 called cusolverDnXgetrf x4)."
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


class _Sampled(RunContext):
    """A CPU context that keeps the sampling rules each paired schedule was given."""

    given: list[SamplingConfig] = []

    def measure_groups(
        self, groups: Mapping[str, Sequence[Arm]], *, sampling: SamplingConfig | None = None
    ) -> dict[str, list[VariantResult]]:
        self.given.append(sampling or self.sampling)
        return super().measure_groups(groups, sampling=sampling)


def test_every_point_is_timed_once_per_round_from_4_ms(fast: SamplingConfig) -> None:
    p = build_params(RID, SolveParams, {}, smoke=True)
    ctx = _Sampled(device="cpu", smoke=True, sampling=fast)
    ctx.given = []
    Solve512Cliff().run(p, ctx)
    assert [c.long_sample_s for c in ctx.given] == [min(fast.long_sample_s, 0.004)]
    assert ctx.given[0].budget_s == min(p.point_budget_s, fast.budget_s)


def test_the_finding_gives_the_lu_kernel_per_matrix_at_each_size() -> None:
    from repro.api import Kernel
    from repro.repros._lu_paths import per_matrix_clause

    def point(n: int, name: str, us: float, launches: float) -> VariantResult:
        k = Kernel(name, count=int(launches), total_us=us, mean_us=us / launches, per_call=launches)
        other = Kernel("void elementwise_kernel<copy>", count=1, total_us=us * 2, mean_us=us * 2, per_call=1)
        return VariantResult(f"cusolver_b128_n{n}", "x", {"n": n}, "ok", kernels=(other, k))

    got = per_matrix_clause(
        [
            point(511, "void getrf_panel<float, 32>(float* const*)", 10_240.0, 1),
            point(512, "void getrf_pivot<getrf_params_<float, 512>>(int)", 99_712.0, 128),
            VariantResult("cusolver_b128_n513", "x", {"n": 513}, "error"),  # nothing profiled: left out
        ],
        128,
    )
    assert got.startswith("the LU's heaviest kernel per matrix at batch 128: n=511 ")
    assert "n=511 " in got and "getrf_panel" in got and "(80 us); n=512 " in got and got.endswith("(779 us)")
    assert "elementwise" not in got and "n=513" not in got
    assert per_matrix_clause([], 128) == ""
    two = per_matrix_clause(
        [
            point(510, "void getrf_panel<float>(float* const*)", 10_112.0, 1),
            point(511, "void getrf_panel<float>(float* const*)", 10_240.0, 1),
        ],
        128,
    )
    assert two.endswith(": n=510-511 getrf_panel (79, 80 us)")
