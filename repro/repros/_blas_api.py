"""5090-linear's API log: which cuBLAS and cuBLASLt functions one call of each form made.

The kernel names say which GEMM ran; this says which library entry point torch called for it
(nn.Linear may go through cuBLASLt with the bias in the GEMM's epilogue, the manual form through
cuBLAS and a separate add kernel). The libraries' own loggers (cuBLAS's ``cublasLoggerConfigure``,
cuBLASLt's ``cublasLtLoggerOpenFile`` and ``cublasLtLoggerSetLevel``) are switched on at run time
around one call of each form, after an untimed call, in the process that already loaded them.
"""

from __future__ import annotations

import ctypes
import os
import re
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from repro.repros._lu_api import call_words, calls, loaded, raw_logs

_LIBS = {"cublas": re.compile(r"/libcublas\.so[.0-9]*$"), "cublasLt": re.compile(r"/libcublasLt\.so[.0-9]*$")}
_NAMES = {"cublas": "cuBLAS", "cublasLt": "cuBLASLt"}
# cuBLASLt's level 2 ("trace"): the calls that launch kernels, with their parameters; set-up calls stay out.
_LT_TRACE = 2
# The variables that switch the libraries' loggers on at load.
_USER_LOGGING = (
    "CUBLAS_LOGINFO_DBG",
    "CUBLAS_LOGDEST_DBG",
    "CUBLASLT_LOG_LEVEL",
    "CUBLASLT_LOG_MASK",
    "CUBLASLT_LOG_FILE",
)


def loaded_blas(maps: str) -> dict[str, str]:
    """The paths of the cuBLAS and cuBLASLt libraries this process mapped (/proc/self/maps' text)."""
    return loaded(maps, _LIBS)


def form_calls(forms: Mapping[str, Callable[[], Any]], synchronize: Callable[[], None]) -> dict[str, Any]:
    """Per form, the cuBLAS and cuBLASLt functions one call made, from each loaded library whose build
    exports a logger (``no_logger`` names the others and why; ``error`` when neither could log)."""
    paths = loaded_blas(Path("/proc/self/maps").read_text())
    libs = {k: ctypes.CDLL(p) for k, p in paths.items()}
    have = {
        "cublas": "cublas" in libs and hasattr(libs["cublas"], "cublasLoggerConfigure"),
        "cublasLt": "cublasLt" in libs
        and hasattr(libs["cublasLt"], "cublasLtLoggerOpenFile")
        and hasattr(libs["cublasLt"], "cublasLtLoggerSetLevel"),
    }
    out: dict[str, Any] = {"libraries": paths}
    # A user's own logging (set at library load by these variables) is left alone: switching the loggers
    # here would end it for the rest of the process.
    theirs = sorted(k for k in _USER_LOGGING if os.environ.get(k))
    if theirs:
        out["error"] = f"not logged here: the user's own library logging is on ({', '.join(theirs)})"
        return out
    out["no_logger"] = {
        k: (f"{Path(paths[k]).name} exports no logger" if k in paths else "not loaded in this process")
        for k, ok in have.items()
        if not ok
    }
    if not any(have.values()):
        out["error"] = "no cuBLAS or cuBLASLt logger in this process"
        return out
    for lib, symbol, args in (
        ("cublas", "cublasLoggerConfigure", [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_char_p]),
        ("cublasLt", "cublasLtLoggerOpenFile", [ctypes.c_char_p]),
        ("cublasLt", "cublasLtLoggerSetLevel", [ctypes.c_int]),
    ):
        if have[lib]:
            getattr(libs[lib], symbol).argtypes = args
    libc = ctypes.CDLL(None)
    status: dict[str, int] = {}

    def logging(files: Mapping[str, Path] | None) -> None:
        """Every logger on, each to its file; or (None) off."""
        if have["cublas"]:
            path = str(files["cublas"]).encode() if files else None
            status["cublasLoggerConfigure"] = libs["cublas"].cublasLoggerConfigure(int(bool(files)), 0, 0, path)
        if have["cublasLt"]:
            if files:
                status["cublasLtLoggerOpenFile"] = libs["cublasLt"].cublasLtLoggerOpenFile(
                    str(files["cublasLt"]).encode()
                )
            status["cublasLtLoggerSetLevel"] = libs["cublasLt"].cublasLtLoggerSetLevel(_LT_TRACE if files else 0)

    with tempfile.TemporaryDirectory(prefix="repro-blas-") as tmp:
        logs = {name: {k: Path(tmp, f"{i}.{k}.log") for k in _LIBS if have[k]} for i, name in enumerate(forms)}
        try:
            for name, fn in forms.items():
                fn()  # any first-call set-up happens outside the log
                synchronize()
                logging(logs[name])
                try:
                    fn()
                    synchronize()
                finally:
                    logging(None)
        finally:
            if have["cublasLt"]:  # another file for cuBLASLt's logger closes the last one
                libs["cublasLt"].cublasLtLoggerOpenFile(str(Path(tmp, "end.log")).encode())
            libc.fflush(None)
        out["status"] = status  # each logger call's last return code (0: success)
        out["forms"] = {name: {k: _calls(p) for k, p in files.items()} for name, files in logs.items()}
        out["raw"] = raw_logs(logs)  # the loggers' own lines, per form and library
    return out


def _calls(path: Path) -> dict[str, int]:
    """The functions a log file names; cuBLASLt's own tag in each line (``[cublasLt]``) is not one."""
    got = calls(path.read_text(errors="replace")) if path.is_file() else {}
    return {fn: k for fn, k in got.items() if fn != "cublasLt"}


# What one cuBLASLt trace line says of the GEMM it launched, as (its field, our word, a rewrite of its value).
_LT_FIELDS: tuple[tuple[str, str, Callable[[str], str]], ...] = (
    ("epilogue", "epilogue", lambda v: v.removeprefix("EPILOGUE_")),
    ("algoId", "algo", str),
    ("tile", "tile", lambda v: v.removeprefix("MATMUL_TILE_")),
    ("stages", "stages", lambda v: v.removeprefix("MATMUL_STAGES_")),
    ("smCountTarget", "SM count target", str),
    ("workSpaceSizeInBytes", "workspace", lambda v: f"{int(v) / 2**20:g} MiB" if v.isdigit() else v),
)


def lt_params(raw: str) -> str:
    """``epilogue BIAS, algo 55, tile 128x128, stages 8x3, workspace 1 MiB``: what the first cuBLASLt trace line
    of a log says of the GEMM it launched; "" without one."""
    line = next((ln for ln in raw.splitlines() if "[Trace]" in ln), "")
    said = []
    for field, words, how in _LT_FIELDS:
        m = re.search(rf"\b{field}=([A-Za-z0-9_x]{{1,40}})", line)
        if m:
            said.append(f"{words} {how(m.group(1))}")
    return ", ".join(said)


def forms_clause(log: Any) -> str:
    """The API log in one clause (no full stop): each form's functions, and what cuBLASLt's trace says of the GEMM
    it launched (``lt_params``); "" when it read no call."""
    forms = log.get("forms") if isinstance(log, Mapping) else None
    if not isinstance(forms, Mapping) or not forms:
        return ""
    raw = log.get("raw")
    said = []
    for name, libs in forms.items():
        named = call_words(libs, _NAMES)
        got = raw.get(name) if isinstance(raw, Mapping) else None
        lt = got.get("cublasLt") if isinstance(got, Mapping) else None
        params = f" [cuBLASLt's trace: {words}]" if isinstance(lt, str) and (words := lt_params(lt)) else ""
        said.append(f"{name} called {', '.join(named) if named else 'no logged function'}{params}")
    if all(s.endswith("no logged function") for s in said):
        return ""
    logged = [_NAMES[k] for k in _LIBS if k not in (log.get("no_logger") or {})]
    return f"the {'/'.join(logged)} API log (one fp32 call each): {'; '.join(said)}"
