"""5090-linear's API log: reading the cuBLAS and cuBLASLt loggers' lines, and the report's clause."""

from __future__ import annotations

from pathlib import Path

import pytest

from repro.repros import _blas_api as ba

CUBLAS_LOG = """I! cuBLAS (v13.1) function cublasStatus_t cublasSgemm_v2(cublasContext*, cublasOperation_t, int) called:
i!  handle: type=cublasHandle_t; val=POINTER (IN HEX:0x0x5581)
I! cuBLAS (v13.1) function cublasStatus_t cublasSetMathMode(cublasContext*, cublasMath_t) called:
"""
LT_LOG = """[2026-12-02 03:10:00][cublasLt][4242][Trace][cublasLtMatmul] A=SZ=0 Atype=R_32F B=SZ=0 epilogue=BIAS
[2026-12-02 03:10:00][cublasLt][4242][Trace][cublasLtMatmul] A=SZ=0 Atype=R_32F
"""


def test_the_loggers_lines_give_the_functions_called(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_text(CUBLAS_LOG)
    (tmp_path / "b.log").write_text(LT_LOG)
    assert ba._calls(tmp_path / "a.log") == {"cublasSgemm_v2": 1}  # math-mode set-up left out
    assert ba._calls(tmp_path / "b.log") == {"cublasLtMatmul": 2}  # the [cublasLt] tag is no call
    assert ba._calls(tmp_path / "missing.log") == {}


def test_the_libraries_are_found_in_the_process_maps() -> None:
    maps = (
        "7f00-7f01 r-xp 00000000 08:01 1 /venv/nvidia/cu13/lib/libcublasLt.so.13\n"
        "7f02-7f03 r-xp 00000000 08:01 2 /venv/nvidia/cu13/lib/libcublas.so.13\n"
        "7f04-7f05 r-xp 00000000 08:01 3 /usr/lib/libc.so.6\n"
    )
    assert ba.loaded_blas(maps) == {
        "cublasLt": "/venv/nvidia/cu13/lib/libcublasLt.so.13",
        "cublas": "/venv/nvidia/cu13/lib/libcublas.so.13",
    }


def test_the_clause_names_each_forms_calls_or_nothing() -> None:
    log = {
        "forms": {
            "nn.Linear": {"cublas": {}, "cublasLt": {"cublasLtMatmul": 1}},
            "x @ w.t() + b": {"cublas": {"cublasSgemm_v2": 1}, "cublasLt": {"cublasLtSSSMatmul": 1}},
        },
        "no_logger": {},
    }
    assert ba.forms_clause(log) == (
        "the cuBLAS/cuBLASLt API log (one fp32 call each): nn.Linear called cublasLtMatmul (cuBLASLt); "
        "x @ w.t() + b called cublasSgemm_v2 (cuBLAS), cublasLtSSSMatmul (cuBLASLt)"
    )
    silent = {"forms": {"nn.Linear": {"cublas": {}}, "manual": {"cublas": {}}}, "no_logger": {"cublasLt": "x"}}
    assert ba.forms_clause(silent) == "" and ba.forms_clause({"error": "x"}) == "" and ba.forms_clause(None) == ""


def test_on_cpu_nothing_is_logged_and_the_reason_is_said() -> None:
    got = ba.form_calls({"f": lambda: None}, lambda: None)  # this process loaded no cuBLAS
    assert got["error"] == "no cuBLAS or cuBLASLt logger in this process"
    assert got["no_logger"] == {"cublas": "not loaded in this process", "cublasLt": "not loaded in this process"}


def test_the_users_own_library_logging_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUBLASLT_LOG_LEVEL", "5")
    got = ba.form_calls({"f": lambda: None}, lambda: None)
    assert got["error"] == "not logged here: the user's own library logging is on (CUBLASLT_LOG_LEVEL)"
    assert "forms" not in got


def test_the_clause_gives_what_cublaslts_trace_says_of_each_forms_gemm() -> None:
    """evidence52's log (H100): nn.Linear's GEMM carried the bias in its epilogue with a 1 MiB workspace; the manual
    form's, the same algorithm, none."""
    import json

    from helpers import ROOT

    run = next((ROOT / "artifacts" / "reference" / "h100" / "evidence52" / "all").iterdir())
    log = json.loads((run / "5090-linear.json").read_text())["extra"]["api_log"]
    assert ba.forms_clause(log) == (
        "the cuBLAS/cuBLASLt API log (one fp32 call each): nn.Linear called cublasLtMatmul (cuBLASLt) [cuBLASLt's "
        "trace: epilogue BIAS, algo 55, tile 128x128, stages 8x3, workspace 1 MiB]; x @ w.t() + b called "
        "cublasSgemm_v2 (cuBLAS), cublasLtSSSMatmul (cuBLASLt) [cuBLASLt's trace: algo 55, tile 128x128, stages 8x3, "
        "SM count target 132, workspace 0 MiB]"
    )
    assert ba.lt_params("no trace here") == "" and ba.lt_params("[Trace] algoId=<script>") == ""
