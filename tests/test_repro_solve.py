"""solve-512-cliff: CPU smoke run end to end, params, LU path classification and the verdict rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import full_text, timing_for

from repro.artifact import validation_errors
from repro.errors import UsageError
from repro.execute import RunRequest, execute
from repro.measure import Context, SamplingConfig
from repro.repros import solve_cliff as sc
from repro.repros.solve_cliff import Params, Solve512Cliff, classify_path, lu_kernels
from repro.spec import Kernel, RunResult, VariantResult, build_params

RID = "solve-512-cliff"


def test_smoke_run_on_cpu_writes_a_valid_artifact(run_dir: Path, fast: SamplingConfig) -> None:
    doc, path = execute(RunRequest(RID, smoke=True, sampling=fast), run_dir)
    assert path.is_file()
    assert validation_errors(doc) == []
    assert doc["run"]["device"] == "cpu" and doc["error"] is None
    names = [v["name"] for v in doc["variants"]]
    assert names == [f"default_b{b}_n{n}" for b in (2, 4) for n in range(30, 35)]
    for v in doc["variants"]:
        assert v["status"] == "ok", v["reason"]
        assert v["kernel_source"] == "cpu" and v["kernels"]
        assert v["extra"]["path"] == sc.PATH_CPU
        assert any("lu_factor" in k for k in v["extra"]["lu_kernels"])
        n, b = v["config"]["n"], v["config"]["batch"]
        assert v["work"]["flops"] == pytest.approx(b * (2 / 3 * n**3 + 2 * n * n))
    verdict = doc["verdict"]
    assert verdict["status"] == "smoke"  # a CPU run never judges the cliff
    assert verdict["ci_low"] <= verdict["value"] <= verdict["ci_high"]
    rows = verdict["breakdown"]
    assert [(r["backend"], r["batch"]) for r in rows] == [("default", 2), ("default", 4)]
    assert all(r["path_n31"] == r["path_n32"] == sc.PATH_CPU for r in rows)
    assert verdict["value"] == max(r["ratio"] for r in rows) or verdict["status"] == "reproduced"
    assert " ".join([verdict["finding"], *verdict["details"]]).endswith("Smoke run on cpu, not evidence about any GPU.")
    grid = doc["extra"]["time_grid"]
    assert set(grid) == {"default"} and set(grid["default"]) == {"2", "4"}
    assert set(grid["default"]["4"]) == {str(n) for n in range(30, 35)}
    assert grid["default"]["4"]["32"]["median_s"] > 0 and grid["default"]["4"]["32"]["path"] == sc.PATH_CPU
    assert doc["extra"]["has_magma"] is None and doc["extra"]["sizes"] == list(range(30, 35))


def test_non_default_backends_are_skipped_on_cpu(fast: SamplingConfig) -> None:
    p = build_params(RID, Params, {"backends": "default,cusolver,magma", "batches": "2"}, smoke=True)
    res = Solve512Cliff().run(p, Context(device="cpu", smoke=True, sampling=fast))
    skipped = {v.name: v for v in res.variants if v.status == "skipped"}
    assert set(skipped) == {"cusolver", "magma"}
    assert all("CUDA ops only" in v.reason for v in skipped.values())
    assert [v.name for v in res.variants if v.status == "ok"] == [f"default_b2_n{n}" for n in range(30, 35)]
    assert res.extra["backends"] == ["default"]


class _FailingAt(Context):
    """A CPU context whose measure fails at one point, as an OOM or backend error would."""

    fail_name: str = ""

    def measure(self, name: str, fn: Any, **kw: Any) -> VariantResult:  # type: ignore[override]
        if name == self.fail_name:
            raise RuntimeError("CUDA out of memory (simulated)")
        return super().measure(name, fn, **kw)


def test_one_failing_point_is_an_error_variant_and_the_rest_still_count(fast: SamplingConfig) -> None:
    p = build_params(RID, Params, {}, smoke=True)
    ctx = _FailingAt(device="cpu", smoke=True, sampling=fast)
    ctx.fail_name = "default_b2_n32"
    res = Solve512Cliff().run(p, ctx)
    bad = res.variant("default_b2_n32")
    assert bad.status == "error" and "out of memory" in bad.reason
    assert res.extra["time_grid"]["default"]["2"]["32"] == {"median_s": None, "path": None, "status": "error"}
    verdict = Solve512Cliff().verdict(p, res)
    assert [r["batch"] for r in verdict.breakdown] == [4]


def test_params_defaults_smoke_and_rejects() -> None:
    p = Params()
    assert (p.n_min, p.n_max, p.cliff_n, p.batches, p.rhs_cols) == (508, 516, 512, (16, 64, 128), 1)
    assert p.backends == ("default", "cusolver", "magma") and p.point_budget_s == 0.5
    smoke = build_params(RID, Params, {}, smoke=True)
    assert (smoke.n_min, smoke.n_max, smoke.cliff_n, smoke.batches, smoke.backends) == (
        30,
        34,
        32,
        (2, 4),
        ("default",),
    )
    gpu_small = build_params(RID, Params, {"n_min": "126", "n_max": "130", "cliff_n": "128", "rhs_cols": "4"})
    assert gpu_small.cliff_n == 128 and gpu_small.rhs_cols == 4
    with pytest.raises(UsageError, match="expected n_min <= cliff_n - 1 and cliff_n <= n_max"):
        build_params(RID, Params, {"cliff_n": "128"})
    with pytest.raises(UsageError, match="expected one of default, cusolver, magma"):
        build_params(RID, Params, {"backends": "default,lapack"})
    with pytest.raises(UsageError, match="at most once"):
        build_params(RID, Params, {"batches": "16,16"})


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
    "Params)",
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
        (MAGMA_POINT, sc.PATH_MAGMA),
        (["strtri_diag_lower_kernel(magma_diag_t, int, float const *, int, float*)"], sc.PATH_MAGMA),
        (NATIVE_POINT, sc.PATH_NATIVE),
        (CUBLAS_BATCHED_POINT, sc.PATH_CUBLAS),
        (CUSOLVER_POINT, sc.PATH_CUSOLVER),
        # Generic BLAS kernels alone say nothing about the LU path.
        (CUBLAS_BATCHED_POINT[2:], sc.PATH_UNKNOWN),
        (["void isamax_kernel_batched(int, float**, int, int, int, int**)"], sc.PATH_MAGMA),
        # A batched triangular solve (getrs) is not an LU factorization.
        (
            ["void getrs_batched_kernel<float, 32>(int, int, float const* const*, int, int const*, float**, int)"],
            sc.PATH_UNKNOWN,
        ),
        ([], sc.PATH_UNKNOWN),
    ],
)
def test_path_is_read_off_kernel_names(names: list[str], path: str) -> None:
    assert classify_path(names) == path


def test_path_on_cpu_is_lapack_whatever_the_names() -> None:
    assert classify_path(["aten::linalg_lu_factor_ex", "aten::linalg_lu_solve"], "cpu") == sc.PATH_CPU
    assert classify_path(CUSOLVER_POINT, "cpu") == sc.PATH_CPU


def test_lu_kernels_lists_the_deciding_kernels_first() -> None:
    table = [
        Kernel(name=n, count=1, total_us=10.0 - i, mean_us=1.0, per_call=1.0) for i, n in enumerate(CUSOLVER_POINT)
    ]
    # the batched trsm (CUSOLVER_POINT[2]) is generic BLAS and says nothing about the path
    assert lu_kernels(table) == [CUSOLVER_POINT[0], CUSOLVER_POINT[1], CUSOLVER_POINT[3]]
    generic = [Kernel(name="ampere_sgemm_64x64_nn", count=1, total_us=1.0, mean_us=1.0, per_call=1.0)]
    assert lu_kernels(generic) == ["ampere_sgemm_64x64_nn"]


# --------------------------------------------------------------------------- verdict on synthetic samples


def _point(backend: str, batch: int, n: int, median: float, spread: float = 0.002, path: str = "") -> VariantResult:
    samples = [median * (1 + spread * ((i % 11) - 5) / 5) for i in range(40)]
    timing = timing_for(samples, method="cuda_events", calls_per_sample=1, budget_s=0.5)
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


def _grid(times: dict[tuple[str, int], tuple[float, float]], paths: dict[str, tuple[str, str]]) -> RunResult:
    variants = []
    for (backend, batch), (t511, t512) in times.items():
        p511, p512 = paths[backend]
        variants += [_point(backend, batch, 511, t511, path=p511), _point(backend, batch, 512, t512, path=p512)]
    return RunResult(variants=tuple(variants), extra={"torch": "2.11.0+cu130"})


PATHS = {
    "default": (sc.PATH_MAGMA, sc.PATH_MAGMA),
    "cusolver": (sc.PATH_CUBLAS, sc.PATH_CUSOLVER),
}


def test_verdict_reproduced_when_one_row_clears_the_threshold() -> None:
    p = Params(batches=(16, 128), backends=("default", "cusolver"))
    res = _grid(
        {
            ("default", 16): (1.0e-3, 1.0e-3),
            ("default", 128): (4.0e-3, 4.0e-3),
            ("cusolver", 16): (1.0e-3, 1.2e-3),
            ("cusolver", 128): (2.0e-3, 11.0e-3),
        },
        PATHS,
    )
    v = Solve512Cliff().verdict(p, res)
    scale = (511 / 512) ** 3
    assert v.status == "reproduced"
    assert v.value == pytest.approx(5.5 * scale, rel=1e-3)
    assert v.ci_low >= 1.5 and v.ci_low <= v.value <= v.ci_high
    rows = {(r["backend"], r["batch"]): r for r in v.breakdown}
    assert set(rows) == {("default", 16), ("default", 128), ("cusolver", 16), ("cusolver", 128)}
    assert rows[("cusolver", 128)]["status"] == "reproduced"
    assert rows[("cusolver", 16)]["status"] == "not_reproduced"
    assert rows[("default", 16)]["ratio"] == pytest.approx(scale, rel=1e-3)
    assert rows[("cusolver", 128)]["path_n511"] == sc.PATH_CUBLAS
    assert rows[("cusolver", 128)]["path_n512"] == sc.PATH_CUSOLVER
    assert v.finding.startswith("Reproduced: with the cusolver backend at batch 128, solve_ex at n=512 took 5.47x")
    assert f"the LU switched from {sc.PATH_CUBLAS} at n=511 to {sc.PATH_CUSOLVER} at n=512" in full_text(v)
    assert "Below the threshold at every batch: default." in full_text(v) and "Smoke run" not in full_text(v)


def test_verdict_not_reproduced_when_every_row_scales_smoothly() -> None:
    p = Params(batches=(16, 128), backends=("default", "cusolver"))
    res = _grid(
        {
            ("default", 16): (1.0e-3, 1.01e-3),
            ("default", 128): (4.0e-3, 4.0e-3),
            ("cusolver", 16): (1.0e-3, 1.1e-3),
            ("cusolver", 128): (2.0e-3, 2.4e-3),
        },
        {"default": (sc.PATH_MAGMA, sc.PATH_MAGMA), "cusolver": (sc.PATH_CUBLAS, sc.PATH_CUBLAS)},
    )
    v = Solve512Cliff().verdict(p, res)
    assert v.status == "not_reproduced"
    assert v.value == pytest.approx(1.2 * (511 / 512) ** 3, rel=1e-3)
    assert v.finding.startswith("Not reproduced: no linalg backend showed the cliff on torch 2.11.0+cu130")
    assert "with the cusolver backend at batch 128" in full_text(v)
    assert "the whole CI is below the 1.5 threshold" in full_text(v)
    assert f"the LU ran {sc.PATH_CUBLAS} on both sides" in full_text(v)


def test_a_point_estimate_over_the_threshold_with_a_straddling_ci_is_not_a_cliff() -> None:
    p = Params(batches=(64,), backends=("cusolver",))
    res = RunResult(
        variants=(
            _point("cusolver", 64, 511, 1.0e-3, spread=0.6, path=sc.PATH_CUBLAS),
            _point("cusolver", 64, 512, 1.7e-3, spread=0.6, path=sc.PATH_CUSOLVER),
        ),
        extra={"torch": "2.11.0+cu130"},
    )
    v = Solve512Cliff().verdict(p, res)
    assert v.value > 1.5 and v.ci_low < 1.5 <= v.ci_high
    assert v.status == "not_reproduced"
    assert "inconclusive: the CI straddles the 1.5 threshold" in full_text(v)


def test_verdict_without_any_measured_pair_says_why() -> None:
    p = Params(batches=(16,), backends=("cusolver",))
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
