"""solve-512-cliff: torch.linalg.solve_ex at n=512 against n=511, per linalg backend and batch size.

Seed: John Carmack noticed ``torch.linalg.solve_ex`` on a batch of 512x512 systems
running far slower than on 511x511 ones (an RTX 6000 Ada showed ~10x at batch 128).
The cause is a hard cutoff in PyTorch's CUDA LU dispatch
(aten/src/ATen/native/cuda/linalg/BatchLinearAlgebra.cpp, ``lu_factor``): on the
cuSOLVER path a batched square input went to cuBLAS ``getrfBatched`` when n < 512
and to a loop of cuSOLVER ``getrf`` calls, one per matrix, from n = 512 up
(pytorch/pytorch#181999). The issue that seeded this repro says a batch-aware
heuristic replaced the cutoff in PyTorch 2.13; that was not run here (the reference
runs used 2.11). The "default" preference picks MAGMA's batched LU when PyTorch was built
with MAGMA, so the cliff shows only under ``preferred_linalg_library('cusolver')``
there, and under every preference in builds without MAGMA.

Each point solves a float32 batch of well-conditioned systems (random + n*I, fixed
seed) with ``rhs_cols`` right-hand sides, for every n in [n_min, n_max] (so the
report shows the shape around the cliff, not two points), every batch size and every
backend this build offers. The metric per (backend, batch) is t(cliff_n) /
t(cliff_n - 1) scaled by the LU work ratio ((n-1)/n)^3, so smooth scaling reads 1.0.
Which LU path ran at each point is read off the kernel names the profiler saw.
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from repro import stats
from repro.catalog import register
from repro.errors import UsageError
from repro.measure import Context, SamplingConfig
from repro.spec import Kernel, Metric, Repro, Requirements, RunResult, VariantResult, Verdict, Work, param
from repro.verdict import CI_LEVEL, decide, fmt_ratio, measured, unavailable

BACKENDS = ("default", "cusolver", "magma")

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


def lu_kernels(kernels: Sequence[Kernel], limit: int = 3) -> list[str]:
    """The heaviest kernels that decided the path (for the finding and the report)."""
    hits = [k for k in kernels if any(rule.search(k.name) for _, rule in _PATH_RULES)]
    return [k.name for k in (hits or list(kernels))[:limit]]


@dataclass(frozen=True)
class Params:
    n_min: int = param(508, help="smallest matrix size timed", smoke=30, min=2, max=8192)
    n_max: int = param(516, help="largest matrix size timed", smoke=34, min=2, max=8192)
    cliff_n: int = param(
        512, help="size where the cliff starts; the metric compares it with cliff_n - 1", smoke=32, min=3, max=8192
    )
    batches: tuple[int, ...] = param((16, 64, 128), help="batch sizes to time", smoke=(2, 4), min=1, max=65536)
    rhs_cols: int = param(1, help="columns of the right-hand side B (batch, n, rhs_cols)", min=1, max=4096)
    backends: tuple[str, ...] = param(
        BACKENDS,
        help="torch.backends.cuda.preferred_linalg_library values to try (magma only where torch has it)",
        smoke=("default",),
        choices=BACKENDS,
    )
    point_budget_s: float = param(
        0.5, help="sampling budget per (backend, batch, n) point, seconds", smoke=0.05, min=0.01, max=60.0
    )
    seed: int = param(0, help="seed of the random systems", min=0, max=2**31 - 1)

    def __post_init__(self) -> None:
        if not self.n_min <= self.cliff_n - 1 < self.cliff_n <= self.n_max:
            raise UsageError(
                f"--set n_min={self.n_min} n_max={self.n_max} cliff_n={self.cliff_n} for solve-512-cliff: "
                "expected n_min <= cliff_n - 1 and cliff_n <= n_max (the metric needs both sizes)"
            )
        if len(set(self.backends)) != len(self.backends) or len(set(self.batches)) != len(self.batches):
            raise UsageError("--set backends/batches for solve-512-cliff: expected each value at most once")


def point_name(backend: str, batch: int, n: int) -> str:
    return f"{backend}_b{batch}_n{n}"


def lu_solve_flops(batch: int, n: int, k: int) -> float:
    """LU with partial pivoting (2/3 n^3) plus two triangular solves per column (2 n^2 k)."""
    return batch * (2.0 / 3.0 * n**3 + 2.0 * n * n * k)


@register
class Solve512Cliff(Repro):
    id = "solve-512-cliff"
    title = "torch.linalg.solve_ex far slower at 512x512 than at 511x511 (batched LU cutoff)"
    upstream = ("https://github.com/pytorch/pytorch/issues/181999",)
    seed_claim = (
        "torch.linalg.solve_ex on batches of 512x512 float32 systems ran far slower than on 511x511 "
        "(~10x at batch 128 on an RTX 6000 Ada): PyTorch switched from cuBLAS batched LU to looped cuSOLVER at n=512."
    )
    Params = Params
    requires = Requirements(cuda=True, cpu_smoke=True)
    metric = Metric(
        name="t(cliff_n)/t(cliff_n-1) x ((cliff_n-1)/cliff_n)^3, worst backend and batch",
        description=(
            "median solve_ex time at n=cliff_n over n=cliff_n-1, scaled by the LU work ratio so smooth "
            "scaling is 1.0; the largest over linalg backends and batch sizes"
        ),
        # Smooth scaling reads 1.0 and run-to-run noise is a few percent; a real cliff is
        # several-fold (the seed saw ~10x). 1.5 sits far from both, so one backend/batch
        # whose whole CI clears it is a cliff, not noise.
        threshold=1.5,
    )

    def run(self, p: Params, ctx: Context) -> RunResult:
        import torch

        sizes = list(range(p.n_min, p.n_max + 1))
        cfg = dataclasses.replace(ctx.sampling, budget_s=min(p.point_budget_s, ctx.sampling.budget_s))
        variants: list[VariantResult] = []
        notes: list[str] = []
        backends: list[str] = []
        for backend in p.backends:
            why_not = self._unavailable(backend, ctx, torch)
            if why_not:
                variants.append(ctx.skipped(backend, f"{backend} linalg backend", why_not, backend=backend))
            else:
                backends.append(backend)

        saved = torch.backends.cuda.preferred_linalg_library() if ctx.cuda else None
        grid: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
        try:
            for backend in list(backends):
                if ctx.cuda:
                    # Setting a non-default preference warns once per process that the flag is
                    # experimental; that is recorded, not raised.
                    try:
                        with warnings.catch_warnings(record=True) as caught:
                            warnings.simplefilter("always")
                            torch.backends.cuda.preferred_linalg_library(backend)
                    except RuntimeError as exc:  # e.g. a build without cuSOLVER refuses the preference
                        variants.append(ctx.skipped(backend, f"{backend} linalg backend", str(exc), backend=backend))
                        backends.remove(backend)
                        continue
                    notes += [f"{w.category.__name__}: {w.message}" for w in caught]
                for batch in p.batches:
                    for n in sizes:
                        v = self._point(p, ctx, backend, batch, n, cfg, notes)
                        variants.append(v)
                        grid.setdefault(backend, {}).setdefault(str(batch), {})[str(n)] = {
                            "median_s": v.median if v.status == "ok" else None,
                            "path": v.extra.get("path"),
                            "status": v.status,
                        }
        finally:
            if saved is not None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    torch.backends.cuda.preferred_linalg_library(saved)
        extra = {
            "torch": torch.__version__,
            "has_magma": bool(torch.cuda.has_magma) if ctx.cuda else None,
            "preferred_linalg_library_at_start": str(saved) if saved is not None else None,
            "backends": backends,
            "sizes": sizes,
            "cliff_n": p.cliff_n,
            "time_grid": grid,
        }
        return RunResult(variants=tuple(variants), extra=extra, notes=tuple(dict.fromkeys(notes)))

    @staticmethod
    def _unavailable(backend: str, ctx: Context, torch: Any) -> str | None:
        if not ctx.cuda:
            if backend != "default":
                return f"preferred_linalg_library steers CUDA ops only; on {ctx.device} every backend is LAPACK"
            return None
        if backend == "magma" and not torch.cuda.has_magma:
            return f"torch {torch.__version__} was built without MAGMA (torch.cuda.has_magma is False)"
        return None

    def _point(
        self, p: Params, ctx: Context, backend: str, batch: int, n: int, cfg: SamplingConfig, notes: list[str]
    ) -> VariantResult:
        """Check, time and classify solve_ex at one (backend, batch, n)."""
        import torch

        name = point_name(backend, batch, n)
        label = f"solve_ex {batch}x{n}x{n} ({backend})"
        config = {"backend": backend, "batch": batch, "n": n, "rhs_cols": p.rhs_cols, "dtype": "float32"}
        try:
            dev = torch.device(ctx.device)
            gen = torch.Generator(device=dev)
            gen.manual_seed(p.seed * 1_000_003 + batch * 8191 + n)
            a = torch.randn(batch, n, n, device=dev, generator=gen) + n * torch.eye(n, device=dev)
            b = torch.randn(batch, n, p.rhs_cols, device=dev, generator=gen)

            def solve() -> Any:
                return torch.linalg.solve_ex(a, b)

            # The first call under MAGMA warns once that MAGMA is deprecated; record it.
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                x, info = solve()
            notes += [f"{w.category.__name__}: {w.message}" for w in caught]
            bad = int((info != 0).sum())
            rel = float((torch.linalg.norm(a @ x - b) / torch.linalg.norm(b)).item())
            if bad or not rel < 1e-2:  # garbage, not rounding: these systems are diagonally dominant
                raise RuntimeError(f"solve_ex returned {bad} non-zero infos and relative residual {rel:.2e}")
            v = ctx.measure(
                name,
                solve,
                label=label,
                config=config,
                work=Work(
                    flops=lu_solve_flops(batch, n, p.rhs_cols),
                    bytes=4.0 * batch * (n * n + 2 * n * p.rhs_cols),
                    ceiling="fp32",
                ),
                sampling=cfg,
            )
        except Exception as exc:  # one failing point (OOM, a backend error) must not sink the grid
            return ctx.errored(name, label, exc, **config)
        path = classify_path([k.name for k in v.kernels], ctx.device)
        return dataclasses.replace(v, extra={**v.extra, "path": path, "lu_kernels": lu_kernels(v.kernels)})

    def verdict(self, p: Params, result: RunResult) -> Verdict:
        rows, missing = cliff_rows(result.variants, p.cliff_n, p.batches, self.metric.threshold)
        if not rows:
            errored = any(" was error: " in m for m in missing)
            return unavailable(
                self.metric,
                "; ".join(missing) or "no (backend, batch) pair was measured",
                status="error" if errored else "skipped",
            )
        hits = [r for r in rows if r["status"] == "reproduced"]
        # The headline row is the largest ratio among those whose CI cleared the threshold
        # (so value, CI and status agree), else the largest overall.
        worst = max(hits or rows, key=lambda r: r["ratio"])
        status = "reproduced" if hits else "not_reproduced"
        finding = self._finding(p, result, rows, hits, worst)
        return measured(
            self.metric,
            worst["ratio"],
            worst["ci_low"],
            worst["ci_high"],
            status,
            finding,
            rows,
            (
                point_name(worst["backend"], worst["batch"], p.cliff_n),
                point_name(worst["backend"], worst["batch"], p.cliff_n - 1),
            ),
        )

    def _finding(
        self,
        p: Params,
        result: RunResult,
        rows: Sequence[Mapping[str, Any]],
        hits: Sequence[Mapping[str, Any]],
        worst: Mapping[str, Any],
    ) -> str:
        below, at = p.cliff_n - 1, p.cliff_n
        p_below, p_at = worst[f"path_n{below}"], worst[f"path_n{at}"]
        ratio = fmt_ratio(worst["ratio"], worst["ci_low"], worst["ci_high"])
        where = f"the {worst['backend']} backend at batch {worst['batch']}"
        torch_version = result.extra.get("torch", "this torch")
        if p_below != p_at:
            switch = f"the LU switched from {p_below} at n={below} to {p_at} at n={at}"
        else:
            switch = f"the LU ran {p_at} on both sides"
        if hits:
            text = (
                f"Reproduced: with {where}, solve_ex at n={at} took {ratio} the work-scaled time of n={below} "
                f"on torch {torch_version}, and {switch}."
            )
            others = [f"{r['backend']}/batch {r['batch']} {r['ratio']:.2f}x" for r in hits if r is not worst]
            if others:
                text += f" Also over {self.metric.threshold}: {', '.join(others)}."
            rest = sorted({r["backend"] for r in rows} - {r["backend"] for r in hits})
            unsure = [b for b in rest if any(r["backend"] == b and r["ci_high"] >= self.metric.threshold for r in rows)]
            below = [b for b in rest if b not in unsure]
            if below:
                text += f" Below the threshold at every batch: {', '.join(below)}."
            if unsure:
                text += f" Inconclusive (a CI straddles the threshold): {', '.join(unsure)}."
        else:
            _, qualifier = decide(worst["ci_low"], worst["ci_high"], self.metric.threshold)
            text = (
                f"Not reproduced: no linalg backend showed the cliff on torch {torch_version}; the largest "
                f"work-scaled t({at})/t({below}) was {ratio} with {where} ({qualifier} the "
                f"{self.metric.threshold} threshold; the seed saw ~10x at batch 128), and {switch}."
            )
        if result.variants and all(v.device == "cpu" for v in result.variants if v.status == "ok"):
            text += " Smoke run on cpu, not evidence about any GPU."
        return text


def cliff_rows(
    variants: Sequence[VariantResult], cliff_n: int, batches: Sequence[int], threshold: float
) -> tuple[list[dict[str, Any]], list[str]]:
    """One breakdown row per (backend, batch) with both sides measured; and why others are missing."""
    by_name = {v.name: v for v in variants}
    backends = list(dict.fromkeys(str(v.config.get("backend")) for v in variants if "n" in v.config))
    scale = ((cliff_n - 1) / cliff_n) ** 3
    rows: list[dict[str, Any]] = []
    missing: list[str] = []
    for backend in backends:
        for batch in batches:
            lo_v = by_name.get(point_name(backend, batch, cliff_n - 1))
            hi_v = by_name.get(point_name(backend, batch, cliff_n))
            if lo_v is None or hi_v is None:
                continue
            if lo_v.timing is None or hi_v.timing is None:
                bad = lo_v if lo_v.timing is None else hi_v
                missing.append(f"{bad.name} was {bad.status}: {bad.reason}")
                continue
            value, lo, hi = stats.ratio_ci(hi_v.timing.samples, lo_v.timing.samples, CI_LEVEL, scale)
            status, _ = decide(lo, hi, threshold)
            rows.append(
                {
                    "backend": backend,
                    "batch": batch,
                    "ratio": value,
                    "ci_low": lo,
                    "ci_high": hi,
                    "status": status,
                    f"path_n{cliff_n - 1}": lo_v.extra.get("path", PATH_UNKNOWN),
                    f"path_n{cliff_n}": hi_v.extra.get("path", PATH_UNKNOWN),
                }
            )
    return rows, missing
