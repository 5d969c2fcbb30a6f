"""solve-512-cliff's API log: which cuBLAS and cuSOLVER entry points one solve_ex call made at each size.

The kernel names say which LU ran; this says which library function torch called for it, read from
the libraries' own loggers (cuBLAS's ``cublasLoggerConfigure``, cuSOLVER's ``cusolverDnLogger*``),
switched on at run time around one call per size in the process that already loaded them. Each
size logs to its own files; the function names are read off the log lines.
"""

from __future__ import annotations

import contextlib
import ctypes
import re
import tempfile
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

API_BATCH = 4  # the looped path logs one call per matrix: a small batch keeps the log short
_LIBS = {"cublas": re.compile(r"/libcublas\.so[.0-9]*$"), "cusolver": re.compile(r"/libcusolver\.so[.0-9]*$")}
# A logged call: the function's name before its parameter list (cuBLAS: "function cublasStatus_t
# cublasSgetrfBatched(...) called:") or in brackets (the cuSPARSE-style "[Api][cusolverDnSgetrf] ...").
_CALL = re.compile(r"\b((?:cublas|cusolverDn)[A-Z][A-Za-z0-9_]*)(?:\(|\])")
_SKIP = re.compile(r"Logger|GetVersion|GetProperty|Create|Destroy|SetStream|GetStream|SetMathMode|SetWorkspace")


def loaded(maps: str) -> dict[str, str]:
    """The paths of the cuBLAS and cuSOLVER libraries this process mapped (/proc/self/maps' text)."""
    out: dict[str, str] = {}
    for line in maps.splitlines():
        path = line.split(None, 5)[-1] if line.count(" ") >= 5 else ""
        for key, rule in _LIBS.items():
            if key not in out and rule.search(path):
                out[key] = path
    return out


def calls(log: str) -> dict[str, int]:
    """Function name -> times called, from a logger's text; set-up calls (handles, streams) left out."""
    got = Counter(m.group(1) for m in _CALL.finditer(log) if not _SKIP.search(m.group(1)))
    return dict(sorted(got.items()))


def api_log(torch: Any, sizes: Sequence[int], backend: str = "cusolver", batch: int = API_BATCH) -> dict[str, Any]:
    """Per size, the cuBLAS and cuSOLVER functions one ``solve_ex`` call made under ``backend``."""
    paths = loaded(Path("/proc/self/maps").read_text())
    missing = sorted(set(_LIBS) - set(paths))
    if missing:
        return {"error": f"not loaded in this process: {', '.join(missing)}"}
    cublas, cusolver = ctypes.CDLL(paths["cublas"]), ctypes.CDLL(paths["cusolver"])
    libc = ctypes.CDLL(None)
    out: dict[str, Any] = {"backend": backend, "batch": batch, "libraries": paths}
    saved = torch.backends.cuda.preferred_linalg_library()
    with tempfile.TemporaryDirectory(prefix="repro-api-") as tmp:
        logs = {str(n): {k: Path(tmp, f"{n}.{k}.log") for k in _LIBS} for n in sizes}
        status: dict[str, int] = {}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.backends.cuda.preferred_linalg_library(backend)
            for n in sizes:
                a = torch.randn(batch, n, n, device="cuda") + n * torch.eye(n, device="cuda")
                b = torch.randn(batch, n, 1, device="cuda")
                torch.linalg.solve_ex(a, b)  # any first-call set-up happens outside the log
                torch.cuda.synchronize()
                files = logs[str(n)]
                status["cublasLoggerConfigure"] = cublas.cublasLoggerConfigure(1, 0, 0, str(files["cublas"]).encode())
                status["cusolverDnLoggerOpenFile"] = cusolver.cusolverDnLoggerOpenFile(str(files["cusolver"]).encode())
                status["cusolverDnLoggerSetLevel"] = cusolver.cusolverDnLoggerSetLevel(5)  # 5: API trace
                try:
                    torch.linalg.solve_ex(a, b)
                    torch.cuda.synchronize()
                finally:
                    cusolver.cusolverDnLoggerSetLevel(0)
                    cublas.cublasLoggerConfigure(0, 0, 0, None)
                del a, b
        finally:
            # Another file for cuSOLVER's logger closes the last one; then every stdio stream is flushed.
            cusolver.cusolverDnLoggerOpenFile(str(Path(tmp, "end.log")).encode())
            libc.fflush(None)
            with warnings.catch_warnings(), contextlib.suppress(RuntimeError):
                warnings.simplefilter("ignore")
                torch.backends.cuda.preferred_linalg_library(saved)
        out["status"] = status  # each logger call's return code (0: success)
        out["sizes"] = {
            n: {k: calls(p.read_text(errors="replace")) if p.is_file() else None for k, p in files.items()}
            for n, files in logs.items()
        }
    return out


def api_clause(log: Mapping[str, Any]) -> str:
    """The API log in one clause (no full stop), "" when it did not run or read no call."""
    sizes = log.get("sizes")
    if not isinstance(sizes, Mapping) or not sizes:
        return ""
    said: list[str] = []
    for n, libs in sizes.items():
        named = [
            f"{fn}" + (f" x{k}" if k > 1 else "")
            for got in (libs or {}).values()
            if isinstance(got, Mapping)
            for fn, k in got.items()
            if isinstance(k, int)
        ]
        said.append(f"n={n} called {', '.join(named) if named else 'no logged LU function'}")
    if not any("called no" not in s for s in said):
        return ""
    return f"the cuBLAS/cuSOLVER API logs (one call each, batch {log.get('batch')}): {'; '.join(said)}"
