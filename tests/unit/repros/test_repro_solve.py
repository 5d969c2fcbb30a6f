"""solve-512-cliff: CPU smoke run end to end, failures and sampling on CPU, params, comparisons, and the
LU path read off kernel names.

The verdict on synthetic samples (paired and not) is in test_repro_solve_verdict.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from helpers import full_text

from repro.core.context import Arm, SamplingConfig
from repro.core.errors import UsageError
from repro.core.spec import Kernel, VariantResult, build_params
from repro.evidence.artifact import validation_errors
from repro.repros import _lu_paths as lp
from repro.repros._lu_paths import classify_path, lu_kernels
from repro.repros.solve_cliff import BACKENDS, Solve512Cliff, SolveParams
from repro.run.context import RunContext
from repro.run.execute import RunRequest, execute

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


def test_two_sizes_whose_lu_kernels_shorten_alike_name_their_instantiations_and_launches() -> None:
    """evidence52's cuSOLVER getrf_pivot: one instantiation per matrix at n=512, another launched twice at n=513."""
    from repro.api import Kernel
    from repro.repros._lu_paths import per_matrix_clause

    def point(n: int, name: str, us: float, launches: float) -> VariantResult:
        k = Kernel(name, count=int(launches), total_us=us, mean_us=us / launches, per_call=launches)
        return VariantResult(f"cusolver_b128_n{n}", "x", {"n": n}, "ok", kernels=(k,))

    got = per_matrix_clause(
        [
            point(511, "void getrf_panel<float, float, 4>(int, float* const*)", 10_206.9, 1),
            point(512, "void getrf_pivot<getrf_params_<float, 512, 1, 512, 512, 1> >(int)", 114_352.7, 128),
            point(513, "void getrf_pivot<getrf_params_<float, 512, 2, 512, 256, 1> >(int)", 116_412.8, 256),
        ],
        128,
    )
    assert got.endswith(
        "n=511 getrf_panel (80 us); n=512 getrf_pivot<getrf_params_<float, 512, 1, 512, 512, 1>> (893 us); "
        "n=513 getrf_pivot<getrf_params_<float, 512, 2, 512, 256, 1>> (909 us, 2 launches per matrix)"
    ), got
    # One kernel at two sizes, launched once and twice per matrix: two runs, each with its own count, either order.
    same = "void getrf_pivot<getrf_params_<float, 512, 1> >(int)"
    for order in ((1, 2), (2, 1)):
        two = per_matrix_clause([point(511 + i, same, 1e5 * k, 128 * k) for i, k in enumerate(order)], 128)
        assert "n=511-512" not in two and two.count("getrf_pivot<getrf_params_>") == 2
        assert ("(1,562 us, 2 launches per matrix)" in two) and "(781 us)" in two


def test_the_steps_beside_the_cutoff_are_given_from_the_grids_medians() -> None:
    """evidence52's grid (H100): no step below the cutoff, about 1.11x past it on both backends."""
    import json

    from helpers import ROOT

    from repro.repros._solve_steps import neighbour_steps

    run = next((ROOT / "artifacts" / "reference" / "h100" / "evidence52" / "all").iterdir())
    grid = json.loads((run / "solve-512-cliff.json").read_text())["extra"]["time_grid"]
    assert neighbour_steps(grid, 512, [16, 64, 128]) == (
        "Beside the cutoff, work-scaled t(n+1)/t(n) from the grid's medians (no CI): 510->511 default 0.98x, 0.98x, "
        "0.98x, cusolver 1.00x, 0.98x, 0.99x; 512->513 default 1.09x, 1.14x, 1.11x, cusolver 1.11x, 1.11x, 1.11x "
        "(batches 16, 64, 128)."
    )
    del grid["cusolver"]["64"]["513"]  # a batch without the size: that backend's step is left out
    assert "512->513 default 1.09x, 1.14x, 1.11x (batches" in neighbour_steps(grid, 512, [16, 64, 128])
    assert neighbour_steps(None, 512, [16]) == "" and neighbour_steps({}, 512, [16]) == ""
