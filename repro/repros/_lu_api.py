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
_SKIP = re.compile(r"Logger|GetVersion|GetProperty|Create|Destroy|SetStream|GetStream|MathMode|SetWorkspace")


def loaded(maps: str, libs: Mapping[str, re.Pattern[str]] = _LIBS) -> dict[str, str]:
    """The paths of the libraries ``libs`` names (key -> a rule for the path; by default cuBLAS and cuSOLVER)
    that this process mapped (/proc/self/maps' text)."""
    out: dict[str, str] = {}
    for line in maps.splitlines():
        path = line.split(None, 5)[-1] if line.count(" ") >= 5 else ""
        for key, rule in libs.items():
            if key not in out and rule.search(path):
                out[key] = path
    return out


def calls(log: str) -> dict[str, int]:
    """Function name -> times called, from a logger's text; set-up calls (handles, streams) left out."""
    got = Counter(m.group(1) for m in _CALL.finditer(log) if not _SKIP.search(m.group(1)))
    return dict(sorted(got.items()))


_NAMES = {"cublas": "cuBLAS", "cusolver": "cuSOLVER"}


def call_words(libs: object, names: Mapping[str, str] | None = None) -> list[str]:
    """``fn`` or ``fn xN`` for each function a log read ({library: {function: times}}), each followed by its
    library's name in brackets when ``names`` (library key -> name) is given."""
    if not isinstance(libs, Mapping):
        return []
    return [
        fn + (f" x{k}" if k > 1 else "") + (f" ({names.get(str(lib), str(lib))})" if names is not None else "")
        for lib, got in libs.items()
        if isinstance(got, Mapping)
        for fn, k in got.items()
        if isinstance(k, int)
    ]


# The most of one log file an artifact keeps (a single call's log is a few kB; the cap bounds a chatty build).
RAW_LIMIT = 16_000


def raw_logs(files: Mapping[str, Mapping[str, Path]]) -> dict[str, dict[str, str]]:
    """Each log file's text as written, up to RAW_LIMIT characters (a cut one says so at its end)."""
    out: dict[str, dict[str, str]] = {}
    for name, by_lib in files.items():
        for lib, path in by_lib.items():
            got = path.read_text(errors="replace") if path.is_file() else ""
            cut = f"\n[cut at {RAW_LIMIT} of {len(got)} characters]" if len(got) > RAW_LIMIT else ""
            out.setdefault(str(name), {})[lib] = got[:RAW_LIMIT] + cut
    return out


def api_log(torch: Any, sizes: Sequence[int], backend: str = "cusolver", batch: int = API_BATCH) -> dict[str, Any]:
    """Per size, the cuBLAS and cuSOLVER functions one ``solve_ex`` call made under ``backend``, from
    each library whose build exports a logger (``no_logger`` names the others and why)."""
    paths = loaded(Path("/proc/self/maps").read_text())
    missing = sorted(set(_LIBS) - set(paths))
    if missing:
        return {"error": f"not loaded in this process: {', '.join(missing)}"}
    cublas, cusolver = ctypes.CDLL(paths["cublas"]), ctypes.CDLL(paths["cusolver"])
    libc = ctypes.CDLL(None)
    have = {
        "cublas": hasattr(cublas, "cublasLoggerConfigure"),
        "cusolver": hasattr(cusolver, "cusolverDnLoggerOpenFile") and hasattr(cusolver, "cusolverDnLoggerSetLevel"),
    }
    out: dict[str, Any] = {"backend": backend, "batch": batch, "libraries": paths}
    out["no_logger"] = {k: f"{Path(paths[k]).name} exports no logger" for k, ok in have.items() if not ok}
    if not any(have.values()):
        return out
    saved = torch.backends.cuda.preferred_linalg_library()
    with tempfile.TemporaryDirectory(prefix="repro-api-") as tmp:
        logs = {str(n): {k: Path(tmp, f"{n}.{k}.log") for k in _LIBS if have[k]} for n in sizes}
        status: dict[str, int] = {}

        def logging(files: Mapping[str, Path] | None) -> None:
            """Every logger on, each to its file; or (None) off."""
            if have["cublas"]:
                path = str(files["cublas"]).encode() if files else None
                status["cublasLoggerConfigure"] = cublas.cublasLoggerConfigure(int(bool(files)), 0, 0, path)
            if have["cusolver"]:
                if files:
                    status["cusolverDnLoggerOpenFile"] = cusolver.cusolverDnLoggerOpenFile(
                        str(files["cusolver"]).encode()
                    )
                status["cusolverDnLoggerSetLevel"] = cusolver.cusolverDnLoggerSetLevel(5 if files else 0)  # 5: API

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.backends.cuda.preferred_linalg_library(backend)
            for n in sizes:
                a = torch.randn(batch, n, n, device="cuda") + n * torch.eye(n, device="cuda")
                b = torch.randn(batch, n, 1, device="cuda")
                torch.linalg.solve_ex(a, b)  # any first-call set-up happens outside the log
                torch.cuda.synchronize()
                logging(logs[str(n)])
                try:
                    torch.linalg.solve_ex(a, b)
                    torch.cuda.synchronize()
                finally:
                    logging(None)
                del a, b
        finally:
            if have["cusolver"]:  # another file for cuSOLVER's logger closes the last one
                cusolver.cusolverDnLoggerOpenFile(str(Path(tmp, "end.log")).encode())
            libc.fflush(None)  # then every stdio stream is flushed
            with warnings.catch_warnings(), contextlib.suppress(RuntimeError):
                warnings.simplefilter("ignore")
                torch.backends.cuda.preferred_linalg_library(saved)
        out["status"] = status  # each logger call's last return code (0: success)
        out["sizes"] = {
            n: {k: calls(p.read_text(errors="replace")) if p.is_file() else {} for k, p in files.items()}
            for n, files in logs.items()
        }
        out["raw"] = raw_logs(logs)  # the loggers' own lines, per size and library
    return out


def api_clause(log: Mapping[str, Any]) -> str:
    """The API log in one clause (no full stop), "" when it did not run or read no call."""
    sizes = log.get("sizes")
    if not isinstance(sizes, Mapping) or not sizes:
        return ""
    logged = sorted({k for libs in sizes.values() if isinstance(libs, Mapping) for k in libs})
    said: list[str] = []
    for n, libs in sizes.items():
        named = call_words(libs)
        none = f"no {'/'.join(_NAMES.get(k, k) for k in logged)} function"
        said.append(f"n={n} called {', '.join(named) if named else none}")
    if all(" called no " in s for s in said):
        return ""
    which = "/".join(_NAMES.get(k, k) for k in logged)
    unlogged = [_NAMES.get(k, k) for k in sorted(log.get("no_logger") or {})]
    without = f"; {', '.join(unlogged)} has no logger in this build" if unlogged else ""
    return f"the {which} API log (one call each, batch {log.get('batch')}{without}): {'; '.join(said)}"
