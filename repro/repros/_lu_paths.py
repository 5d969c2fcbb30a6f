"""solve-512-cliff's LU paths: which LU implementation ran, read off the names of the kernels one call launched.

The labels are a reading of kernel names, not an API trace: cuBLAS and cuSOLVER are closed
source, so their rules match the names a run recorded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from repro.api import Kernel, VariantResult, short_kernel

# LU paths, as read from kernel names (see classify_path).
PATH_NATIVE = "batched LU (PyTorch native kernels)"
PATH_MAGMA = "batched getrf (MAGMA)"
PATH_CUBLAS = "batched getrf (cuBLAS getrfBatched)"
PATH_CUSOLVER = "looped getrf (cuSOLVER getrf)"
PATH_CPU = "CPU LAPACK getrf"
PATH_UNKNOWN = "unclassified"

# cuBLAS and cuSOLVER are closed source: their two rules below match the names the
# H200 reference run recorded, then a loose fallback (an LU kernel carries getrf or
# getf2). The MAGMA names were recorded there too; the at::native names are read from
# PyTorch's source and have not been seen in a run.
# MAGMA's kernels are open (magmablas/, src/*getrf_batched.cpp): plain global
# functions whose names start with a LAPACK routine and its precision letter
# (slaswp_rowparallel_kernel, sgetf2_*) or end in _kernel_batched
# (setup_pivinfo_kernel_batched, isamax_kernel_batched). PyTorch's own batched LU
# (LURecBlas3Kernel.cu) lives in at::native. Order matters: the first match wins.
_PATH_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (PATH_NATIVE, re.compile(r"at::native\b.*(batched_panel|laswp_rowparallel|setup_pivinfo|build_trsm_ptr)")),
    (
        PATH_MAGMA,
        re.compile(
            r"magma|^(void\s+)?[sdcz](getf2|getrf|laswp|trtri|lacpy)|^(void\s+)?i[sdcz]amax\w*batched|\w+_kernel_batched\b",
            re.I,
        ),
    ),
    # Seen on the H200 (cuSOLVER 12.0.4): the looped path launches getrf_pivot,
    # ipiv_lower_small and create_pivot_v2 once per matrix; cuBLAS getrfBatched
    # launches one getrf_panel over an array of matrix pointers (float* const*).
    (PATH_CUSOLVER, re.compile(r"getrf_pivot|ipiv_lower|create_pivot", re.I)),
    (PATH_CUBLAS, re.compile(r"getrf_panel|(getrf|getf2)\w*batch|batch\w*(getrf|getf2)", re.I)),
    (PATH_CUSOLVER, re.compile(r"getrf|getf2", re.I)),
)


def classify_path(kernel_names: Iterable[str], device: str = "cuda") -> str:
    """Which LU implementation ran, from the names of the kernels one call launched."""
    if device != "cuda":
        return PATH_CPU
    names = list(kernel_names)
    for path, rule in _PATH_RULES:
        if any(rule.search(n) for n in names):
            return path
    return PATH_UNKNOWN


# On CPU the LU is an aten op (aten::linalg_lu_factor_ex), not a library kernel the rules above name.
_LU_OP = re.compile(r"lu_factor", re.I)


def lu_kernels(kernels: Sequence[Kernel], limit: int = 3) -> list[str]:
    """The heaviest kernels that decided the path (for the finding and the report): those a path
    rule names, or the LU ops themselves; the heaviest of all where neither is there."""
    hits = [k for k in kernels if _LU_OP.search(k.name) or any(rule.search(k.name) for _, rule in _PATH_RULES)]
    return [k.name for k in (hits or list(kernels))[:limit]]


def _template_args(name: str) -> str:
    """The arguments of a kernel name's outermost template (``getrf_params_<float, 512, 2, 512, 256, 1>`` of
    ``void getrf_pivot<getrf_params_<float, 512, 2, 512, 256, 1> >(...)``), up to 80 characters; "" without one."""
    start = name.find("<")
    depth = 0
    for i in range(start, len(name)) if start >= 0 else ():
        depth += {"<": 1, ">": -1}.get(name[i], 0)
        if depth == 0:
            got = name[start + 1 : i].strip()
            return got if len(got) <= 80 else ""
    return ""


def per_matrix_clause(variants: Sequence[VariantResult], batch: int) -> str:
    """The heaviest LU kernel of each size's profiled call and its microseconds per matrix (its time per
    call over ``batch``), sizes in the variants' order, a run of sizes with the same kernel and launches said
    once; "" when none was profiled (no full stop). Where two sizes' kernels share a short name but not their
    instantiation, each is named with its template's arguments; where a size launches it more than once per matrix, how
    many times."""
    runs: list[tuple[str, float, list[str], list[str]]] = []  # (full kernel name, launches per matrix, sizes, us)
    for v in variants:
        top = lu_kernels(v.kernels, limit=1) if v.kernels else []
        kernel = next((k for k in v.kernels if top and k.name == top[0]), None)
        if kernel is None or batch <= 0:
            continue
        n, per = str(v.config.get("n", "?")), f"{kernel.us_per_call / batch:,.0f}"
        launches = float(kernel.per_call) / batch
        if runs and runs[-1][:2] == (kernel.name, launches):
            runs[-1][2].append(n)
            runs[-1][3].append(per)
        else:
            runs.append((kernel.name, launches, [n], [per]))
    shorts = [short_kernel(name, 48) for name, *_ in runs]
    said = []
    for (name, times, sizes, us), short in zip(runs, shorts, strict=True):
        shared = any(s == short and other != name for (other, *_), s in zip(runs, shorts, strict=True))
        args = _template_args(name) if shared else ""
        label = f"{short.split('<')[0]}<{args}>" if args else short
        each = f", {times:g} launches per matrix" if times != 1 and times == int(times) else ""
        said.append(f"n={sizes[0]}{'-' + sizes[-1] if len(sizes) > 1 else ''} {label} ({', '.join(us)} us{each})")
    return f"the LU's heaviest kernel per matrix at batch {batch}: {'; '.join(said)}" if said else ""
