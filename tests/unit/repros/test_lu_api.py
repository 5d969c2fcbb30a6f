"""solve-512-cliff's API log: library paths from /proc/self/maps, calls from logger text, the clause."""

from __future__ import annotations

from pathlib import Path

from repro.repros._lu_api import RAW_LIMIT, api_clause, calls, loaded, raw_logs

MAPS = """\
7f00-7f10 r-xp 00000000 08:01 1 /usr/lib/python3/site-packages/nvidia/cu13/lib/libcublasLt.so.13
7f10-7f20 r-xp 00000000 08:01 2 /usr/lib/python3/site-packages/nvidia/cu13/lib/libcublas.so.13
7f20-7f30 r-xp 00000000 08:01 3 /usr/lib/python3/site-packages/nvidia/cu13/lib/libcusolver.so.12
7f30-7f40 rw-p 00000000 00:00 0
"""

CUBLAS_LOG = """\
I! cuBLAS (v13.1) function cublasStatus_t cublasSetStream_v2(cublasContext*, CUstream_st*) called:
i!  handle: type=cublasHandle_t; val=POINTER (IN HEX:0x0x55)
I! cuBLAS (v13.1) function cublasStatus_t cublasSgetrfBatched(cublasContext*, int, float* const*, ...) called:
i!  n: type=int; val=511
I! cuBLAS (v13.1) function cublasStatus_t cublasGetMathMode(cublasContext*, cublasMath_t*) called:
I! cuBLAS (v13.1) function cublasStatus_t cublasStrsmBatched(cublasContext*, ...) called:
I! cuBLAS (v13.1) function cublasStatus_t cublasStrsmBatched(cublasContext*, ...) called:
"""

CUSOLVER_LOG = """\
[2026-12-01 10:00:00][cuSOLVER][123][Api][cusolverDnLoggerSetLevel] level=5
[2026-12-01 10:00:00][cuSOLVER][123][Api][cusolverDnXgetrf] handle=0x1 m=512 n=512
[2026-12-01 10:00:00][cuSOLVER][123][Api][cusolverDnXgetrf] handle=0x1 m=512 n=512
"""


def test_loaded_finds_cublas_and_cusolver_but_not_cublaslt() -> None:
    got = loaded(MAPS)
    assert got == {
        "cublas": "/usr/lib/python3/site-packages/nvidia/cu13/lib/libcublas.so.13",
        "cusolver": "/usr/lib/python3/site-packages/nvidia/cu13/lib/libcusolver.so.12",
    }
    assert loaded("") == {}


def test_calls_counts_functions_in_both_log_styles_and_drops_set_up() -> None:
    # Set-up and queries (a stream, the math mode: 14 per call on the H200's torch) are not the LU's calls.
    assert calls(CUBLAS_LOG) == {"cublasSgetrfBatched": 1, "cublasStrsmBatched": 2}
    assert calls(CUSOLVER_LOG) == {"cusolverDnXgetrf": 2}
    assert calls("nothing logged") == {}


def test_api_clause_names_each_side_and_is_empty_without_calls() -> None:
    log = {
        "batch": 4,
        "sizes": {
            "511": {"cublas": {"cublasSgetrfBatched": 1}, "cusolver": {}},
            "512": {"cublas": {}, "cusolver": {"cusolverDnXgetrf": 4}},
        },
    }
    said = api_clause(log)
    assert said == (
        "the cuBLAS/cuSOLVER API log (one call each, batch 4): n=511 called cublasSgetrfBatched; "
        "n=512 called cusolverDnXgetrf x4"
    )
    empty = {"batch": 4, "sizes": {"511": {"cublas": {}, "cusolver": {}}, "512": {"cublas": {}, "cusolver": {}}}}
    assert api_clause(empty) == ""
    assert api_clause({"error": "not loaded in this process: cusolver"}) == ""


def test_api_clause_says_which_library_had_no_logger() -> None:
    # As on the H200's stack: libcusolver.so.12 (cuSOLVER 12.0.4) exports no cusolverDnLogger* functions.
    log = {
        "batch": 4,
        "no_logger": {"cusolver": "libcusolver.so.12 exports no logger"},
        "sizes": {"511": {"cublas": {"cublasSgetrfBatched": 1}}, "512": {"cublas": {}}},
    }
    assert api_clause(log) == (
        "the cuBLAS API log (one call each, batch 4; cuSOLVER has no logger in this build): "
        "n=511 called cublasSgetrfBatched; n=512 called no cuBLAS function"
    )
    assert api_clause({"batch": 4, "no_logger": {"cublas": "x", "cusolver": "y"}}) == ""


def test_the_raw_logs_are_kept_as_written_and_a_long_one_says_where_it_was_cut(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_text(CUBLAS_LOG)
    (tmp_path / "b.log").write_text("x" * (RAW_LIMIT + 5))
    files = {
        "511": {"cublas": tmp_path / "a.log", "cusolver": tmp_path / "none.log"},
        "512": {"cublas": tmp_path / "b.log"},
    }
    got = raw_logs(files)
    assert got["511"] == {"cublas": CUBLAS_LOG, "cusolver": ""}  # a logger that wrote nothing: empty
    assert got["512"]["cublas"] == "x" * RAW_LIMIT + f"\n[cut at {RAW_LIMIT} of {RAW_LIMIT + 5} characters]"
