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
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from repro.api import (
    QUICK_UNPROFILED,
    Arm,
    Comparison,
    Context,
    Finding,
    Metric,
    Outcome,
    Plot,
    Ratio,
    Repro,
    Requirements,
    RunResult,
    Sweep,
    UsageError,
    VariantResult,
    Work,
    param,
    register,
    standalone,
)
from repro.repros._lu_api import api_clause, api_log
from repro.repros._lu_paths import (
    PATH_UNKNOWN,
    classify_path,
    lu_kernels,
    per_matrix_clause,
)
from repro.repros._solve_seed import seed_clause, seed_snippet
from repro.repros._solve_steps import neighbour_steps

BACKENDS = ("default", "cusolver", "magma")
THRESHOLD = 1.5
# Recorded in the verdict and shown in the report's details.
THRESHOLD_WHY = (
    "smooth scaling reads near 1.0 once work-scaled, a real cliff several-fold (the seed saw ~10x); 1.5 sits "
    "between them (the steps without a cliff: the Beside-the-cutoff line)"
)
# A point's sample length from which it is timed once per round (SamplingConfig.long_sample_s).
LONG_SAMPLE_S = 0.004


@dataclass(frozen=True)
class SolveParams:
    # One size either side of the pair shows that the step is at cliff_n and not a slope;
    # a wider sweep is --set n_min=... n_max=... away (and `repro cliff` finds the edge).
    n_min: int = param(510, help="smallest matrix size timed", smoke=30, min=2, max=8192)
    n_max: int = param(513, help="largest matrix size timed", smoke=33, min=2, max=8192)
    cliff_n: int = param(
        512, help="size where the cliff starts; the metric compares it with cliff_n - 1", smoke=32, min=3, max=8192
    )
    batches: tuple[int, ...] = param((16, 64, 128), help="batch sizes to time", smoke=(2, 4), min=1, max=65536)
    rhs_cols: int = param(1, help="columns of the right-hand side B (batch, n, rhs_cols)", min=1, max=4096)
    # "magma" is left out by default: where torch has MAGMA, "default" already picks it for
    # batched LU (and where it has not, magma would only skip); --set backends=... adds it.
    backends: tuple[str, ...] = param(
        ("default", "cusolver"),
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


CONTROL = "(control)"


def control_pairs(heads: Sequence[tuple[str, str, int]]) -> list[tuple[str, str, int]]:
    """The default backend at each batch where a script's headline (name, backend, batch) runs
    another backend and no headline already times the default one; labelled as the control."""
    timed = {batch for _, backend, batch in heads if backend == "default"}
    out: list[tuple[str, str, int]] = []
    for _, backend, batch in heads:
        if backend != "default" and batch not in timed:
            timed.add(batch)
            out.append((f"default/b{batch} {CONTROL}", "default", batch))
    return out


def _bracket_cliff_n(overrides: Mapping[str, str]) -> dict[str, str]:
    """n_min and n_max around a --set cliff_n, for the batch sweep (which times cliff_n alone)."""
    if "cliff_n" not in overrides:
        return {}
    n = int(overrides["cliff_n"].strip())
    return {"n_min": str(n - 1), "n_max": str(n)}


@register
class Solve512Cliff(Repro[SolveParams]):
    id = "solve-512-cliff"
    title = "torch.linalg.solve_ex far slower at 512x512 than at 511x511 (batched LU cutoff)"
    upstream = ("https://github.com/pytorch/pytorch/issues/181999",)
    seed_experiment = (
        "Seed: torch.linalg.solve_ex on a float32 randn batch of 64 at n=511 against n=512, default and cuSOLVER, "
        "one warm-up call then one call timed by CUDA events (re-run here: the finding gives it); the seed "
        "does not say which backend gave its ~10x or whether its build had MAGMA. Ours: randn + n*I (no row "
        "swaps), n 510-513 at batches 16, 64 and 128 under both backends, CUDA events in paired rounds, "
        "each ratio scaled by the LU work ((n-1)/n)^3 so smooth scaling reads 1.0."
    )
    seed_claim = (
        "torch.linalg.solve_ex on batches of 512x512 float32 systems ran far slower than on 511x511 "
        "(~10x at batch 128 on an RTX 6000 Ada): PyTorch switched from cuBLAS batched LU to looped cuSOLVER at n=512."
    )
    requires = Requirements(cuda=True, cpu_smoke=True)
    metric = Metric(
        name="t(cliff_n)/t(cliff_n-1) x ((cliff_n-1)/cliff_n)^3, worst backend and batch",
        description=(
            "median solve_ex time at n=cliff_n over n=cliff_n-1, scaled by the LU work ratio so smooth "
            "scaling is 1.0; the largest over linalg backends and batch sizes"
        ),
        threshold=THRESHOLD,
        threshold_why=THRESHOLD_WHY,
    )
    # Any backend and batch whose whole CI clears the threshold is the cliff; the headline
    # is the largest such ratio (else the largest overall).
    headline_rule = "worst"
    impact = (
        "Batched dense solves of a few hundred unknowns (Gauss-Newton and Kalman steps, implicit layers) "
        "cross n=512 as they grow, often at a power of two; from n=512 the affected backend solves a batch one "
        "matrix at a time (a batch of one loops at 511 too), so the larger the batch, the more a call costs "
        "against 511."
    )
    # The rule was read in the two versions of pytorch/pytorch's BatchLinearAlgebra.cpp the project's source
    # index held (commits 7cf55ed6b736 and 006b3e67c188); that index gave no date, tag or history for them.
    stack = (
        "the LU routine changed, so the cutoff is in the caller: lu_factor "
        "(aten/src/ATen/native/cuda/linalg/BatchLinearAlgebra.cpp) sends a square batch of two or more with n < 512 "
        "to cuBLAS getrfBatched; n >= 512, a batch of one or a non-square matrix go to looped cuSOLVER getrf under "
        "the cusolver preference (source read at pytorch/pytorch 7cf55ed6b736 and 006b3e67c188, not this build's)."
    )
    seed_gpus = ("RTX 6000 Ada",)
    untested = (
        "the headline on the seed's plain randn matrices, whose row swaps this run timed only in the seed's snippet "
        "(batch 64, one call per size)",
        "PyTorch 2.13 or later, where a batch-aware heuristic replaced the cutoff, per the seed document, unchecked",
        "a torch build without MAGMA (there, by the source, the default takes cuSOLVER)",
        "this build's own lu_factor source (read at other commits)",
        "looped cuSOLVER getrf at n=511 (a batch of one takes it), to tell the cutoff from getrf's own cost",
        "a cuSOLVER API log and ncu metrics of getrf_pivot (no cuSOLVER logger in this build; no ncu run)",
        "the upstream fix's commit and first release (not read here)",
        "the issue's own timings and build (not read: was its ~10x a MAGMA-less default or a chosen cuSOLVER)",
        "other GPUs (H100, A100, Blackwell); ROCm (lu_factor keeps the same cutoff there)",
    )
    plots = (
        Plot(
            "n",
            x="n",
            x_label="matrix size n (unknowns)",
            group_by=("backend", "batch"),
            log_y=True,
            y_label="median time per solve_ex call",
        ),
    )
    config_keys = ("backend", "batch", "n", "rhs_cols", "dtype")
    # `repro cliff solve-512-cliff --param n --range 480:560 --set backends=cusolver --set batches=64`
    # times one backend and one batch at each n; LU work grows as n^3 per matrix, times the batch.
    sweeps = (
        Sweep(
            "n",
            "matrix size (one backend, one batch)",
            min=2,
            max=8192,
            default=512,
            work=lambda p, n: lu_solve_flops(p.batches[0], n, p.rhs_cols),
            single=("backends", "batches"),
            tag=classify_path,
            replaces=("n_min", "n_max", "cliff_n"),
        ),
        Sweep(
            "batch",
            "systems per call at n = cliff_n (one backend)",
            min=1,
            max=65536,
            default=128,
            work=lambda p, b: lu_solve_flops(b, p.cliff_n, p.rhs_cols),
            single=("backends",),
            tag=classify_path,
            # n_min and n_max are not timed here, but SolveParams requires them to bracket cliff_n.
            replaces=("batches", "n_min", "n_max"),
            derive=_bracket_cliff_n,
        ),
    )

    def variants(self, p: SolveParams) -> list[str]:
        # A backend that cannot run here is one skipped variant named after it.
        points = [
            point_name(backend, batch, n)
            for backend in p.backends
            for batch in p.batches
            for n in range(p.n_min, p.n_max + 1)
        ]
        return [*p.backends, *points]

    def comparisons(self, p: SolveParams) -> list[Comparison]:
        scale = ((p.cliff_n - 1) / p.cliff_n) ** 3
        return [
            Comparison(
                f"{backend}/b{batch}",
                point_name(backend, batch, p.cliff_n),
                point_name(backend, batch, p.cliff_n - 1),
                THRESHOLD,
                label=f"work-scaled t({p.cliff_n})/t({p.cliff_n - 1}), {backend} backend, batch {batch}",
                scale=scale,
                headline=True,
                qualifiers={"backend": backend, "batch": batch},
            )
            for backend in p.backends
            for batch in p.batches
        ]

    def script(self, p: SolveParams, only: str | None = None) -> str:
        chosen = standalone.comparison_filter(self.comparisons(p), only, self.id)
        heads = [(c.name, c.qualifiers["backend"], c.qualifiers["batch"]) for c in chosen]
        controls = control_pairs(heads)
        body = f"""
        N, SEED, RHS = {p.cliff_n}, {p.seed}, {p.rhs_cols}
        {standalone.py_assign("HEADLINE", heads)}
        # Control: the default backend at each headline batch that runs another one.
        {standalone.py_assign("CONTROLS", controls)}


        def system(batch, n):
            # The harness's systems: random + n*I (well conditioned), seeded per (batch, n).
            gen = torch.Generator(device=DEVICE)
            gen.manual_seed(SEED * 1_000_003 + batch * 8191 + n)
            a = torch.randn(batch, n, n, device=DEVICE, generator=gen) + n * torch.eye(n, device=DEVICE)
            return a, torch.randn(batch, n, RHS, device=DEVICE, generator=gen)


        def cliff(label, backend, batch):
            if DEVICE == "cuda":
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # the preference flag warns that it is experimental
                    torch.backends.cuda.preferred_linalg_library(backend)
            (a1, b1), (a0, b0) = system(batch, N), system(batch, N - 1)
            # Work-scaled: x ((N-1)/N)^3, so smooth O(n^3) scaling reads 1.0.
            compare(
                label,
                f"solve_ex n={{N}}",
                lambda: torch.linalg.solve_ex(a1, b1),
                f"solve_ex n={{N - 1}}",
                lambda: torch.linalg.solve_ex(a0, b0),
                scale=((N - 1) / N) ** 3,
            )


        for label, backend, batch in HEADLINE + CONTROLS:
            cliff(label, backend, batch)
        """
        return standalone.build(self.id, self.title, p, body, imports=("warnings",))

    def run(self, p: SolveParams, ctx: Context) -> RunResult:
        import torch

        sizes = list(range(p.n_min, p.n_max + 1))
        # Every point here is a solve of at least 4 ms (4.4 ms at batch 16 on an H200), so each is
        # timed once per round with no untimed call before it (see SamplingConfig.long_sample_s):
        # with three samples and a warm-up call each, 24 rounds of the 24 points took 22.4 s
        # (artifacts/reference/h200/speed/run1/all1, five 0.5 s gaps among them).
        cfg = dataclasses.replace(
            ctx.sampling,
            budget_s=min(p.point_budget_s, ctx.sampling.budget_s),
            long_sample_s=min(ctx.sampling.long_sample_s, LONG_SAMPLE_S),
        )
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
            # Every size of one (backend, batch) is a group: the judged pair (cliff_n - 1, cliff_n)
            # gets a paired CI, and the sizes around it are timed under the same drift. All the
            # groups share one schedule of rounds; each arm sets its backend before its block.
            groups: dict[str, list[Arm]] = {}
            failed: dict[str, list[VariantResult]] = {}
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
                    group = f"{backend}_b{batch}"
                    arms, failed[group] = self._check(p, ctx, backend, batch, sizes, notes)
                    if arms:
                        groups[group] = arms
            try:
                measured = ctx.measure_groups(groups, sampling=cfg) if groups else {}
            except Exception as exc:  # an OOM or a backend error: every timed point carries it
                measured = {
                    g: [ctx.errored(a.name, a.label, exc, **a.config) for a in arms] for g, arms in groups.items()
                }
            for group, done in failed.items():
                have = {int(v.config["n"]): v for v in [*done, *measured.get(group, [])]}
                for n in sizes:
                    v = have[n]
                    if v.status == "ok" and v.kernel_source != QUICK_UNPROFILED:  # a quick run reads no path
                        path = classify_path([k.name for k in v.kernels], ctx.device)
                        v = dataclasses.replace(v, extra={**v.extra, "path": path, "lu_kernels": lu_kernels(v.kernels)})
                    variants.append(v)
                    cell = grid.setdefault(str(v.config["backend"]), {}).setdefault(str(v.config["batch"]), {})
                    cell[str(n)] = {
                        "median_s": v.median if v.status == "ok" else None,
                        "path": v.extra.get("path"),
                        "status": v.status,
                    }
        finally:
            if saved is not None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    torch.backends.cuda.preferred_linalg_library(saved)
        # The seed's own snippet, after the rounds (its first call would otherwise warm ours).
        seed = None
        if ctx.cuda and ctx.untimed("seed_method") is None and backends:
            try:
                pair = [p.cliff_n - 1, p.cliff_n]
                seed = seed_snippet(torch, [b for b in ("default", "cusolver") if b in backends], pair)
            except Exception as exc:  # the rounds stand; the seed's number is missing and says why
                seed = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
        # Which library functions the cusolver backend called on each side of the cutoff.
        api = None
        if ctx.cuda and ctx.untimed("api_log") is None and "cusolver" in backends:
            try:
                api = api_log(torch, [p.cliff_n - 1, p.cliff_n])
            except Exception as exc:  # the rounds stand; the log is missing and says why
                api = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
        extra = {
            "torch": torch.__version__,
            "has_magma": bool(torch.cuda.has_magma) if ctx.cuda else None,
            "preferred_linalg_library_at_start": str(saved) if saved is not None else None,
            "backends": backends,
            "sizes": sizes,
            "cliff_n": p.cliff_n,
            "time_grid": grid,
            **({"seed_method": seed} if seed is not None else {}),
            **({"api_log": api} if api is not None else {}),
        }
        return RunResult(variants=tuple(variants), extra=extra, notes=tuple(dict.fromkeys(notes)))

    def sweep_arm(self, p: SolveParams, sweep: str, value: int, ctx: Context) -> Arm:
        """solve_ex at one (n or batch) under the one backend asked for; ``prepare`` sets that backend
        again before each block, since the arms of a group are interleaved with nothing else between."""
        import torch

        backend = p.backends[0]
        why_not = self._unavailable(backend, ctx, torch)
        if why_not:
            raise RuntimeError(f"{backend} backend: {why_not}")

        def prefer() -> None:
            if ctx.cuda:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # the preference warns once that it is experimental
                    torch.backends.cuda.preferred_linalg_library(backend)

        prefer()
        n, batch = (value, p.batches[0]) if sweep == "n" else (p.cliff_n, value)
        got = self._arm(p, ctx, backend, batch, n, [])
        if not isinstance(got, Arm):
            raise RuntimeError(f"{sweep}={value}: {got.reason}")
        return dataclasses.replace(got, prepare=prefer)

    @staticmethod
    def _unavailable(backend: str, ctx: Context, torch: Any) -> str | None:
        if not ctx.cuda:
            if backend != "default":
                return f"preferred_linalg_library steers CUDA ops only; on {ctx.device} every backend is LAPACK"
            return None
        if backend == "magma" and not torch.cuda.has_magma:
            return f"torch {torch.__version__} was built without MAGMA (torch.cuda.has_magma is False)"
        return None

    def _check(
        self, p: SolveParams, ctx: Context, backend: str, batch: int, sizes: Sequence[int], notes: list[str]
    ) -> tuple[list[Arm], list[VariantResult]]:
        """Every size of one (backend, batch), checked: (the arms to time, the points that failed).

        Each arm sets its backend before its block (``prepare``), since the groups of all
        backends are interleaved in one schedule."""
        import torch

        def prefer() -> None:
            if ctx.cuda:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # the preference warns once that it is experimental
                    torch.backends.cuda.preferred_linalg_library(backend)

        arms: list[Arm] = []
        failed: list[VariantResult] = []
        for n in sizes:
            arm = self._arm(p, ctx, backend, batch, n, notes)
            if isinstance(arm, Arm):
                arms.append(dataclasses.replace(arm, prepare=prefer))
            else:
                failed.append(arm)
        return arms, failed

    def _arm(
        self, p: SolveParams, ctx: Context, backend: str, batch: int, n: int, notes: list[str]
    ) -> Arm | VariantResult:
        """One checked (backend, batch, n) point ready to time, or the error that stopped it."""
        import torch

        name = point_name(backend, batch, n)
        label = f"solve_ex {batch}x{n}x{n} ({backend})"
        config: dict[str, Any] = {
            "backend": backend,
            "batch": batch,
            "n": n,
            "rhs_cols": p.rhs_cols,
            "dtype": "float32",
        }
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
        except Exception as exc:  # one failing point (OOM, a backend error) must not sink the grid
            return ctx.errored(name, label, exc, **config)
        return Arm(
            name,
            solve,
            label=label,
            config=config,
            work=Work(
                flops=lu_solve_flops(batch, n, p.rhs_cols),
                bytes=4.0 * batch * (n * n + 2 * n * p.rhs_cols),
                ceiling="fp32",
            ),
        )

    def explain(self, p: SolveParams, result: RunResult, outcome: Outcome) -> Finding:
        head = outcome.headline
        if head is None:
            return Finding("")
        have = {v.name: v for v in result.variants}
        below, at = p.cliff_n - 1, p.cliff_n
        p_below = have[head.comparison.den].extra.get("path", PATH_UNKNOWN)
        p_at = have[head.comparison.num].extra.get("path", PATH_UNKNOWN)
        torch_version = result.extra.get("torch", "this torch")
        # The path labels are classify_path's reading of the kernel names the profiler saw.
        api = result.extra.get("api_log")
        said = api_clause(api) if isinstance(api, Mapping) else ""
        if isinstance(api, Mapping) and isinstance(api.get("error"), str):
            said = f"the API log failed: {api['error']}"
        named = " (paths from kernel names)" if outcome.device == "cuda" else ""
        if have[head.comparison.num].kernel_source == QUICK_UNPROFILED:
            path = f"the LU path was not read: {QUICK_UNPROFILED}"
        elif p_below != p_at:
            path = f"the LU switched from {p_below} at n={below} to {p_at} at n={at} on torch {torch_version}{named}"
        else:
            path = f"the LU ran {p_at} on both sides on torch {torch_version}{named}"
        # The API log backs the kernel names' paths; it lives in the details.
        details = [f"{said[0].upper()}{said[1:]}."] if said else []
        if not said and outcome.device == "cuda":
            details.append("No API trace of the LU paths.")
        if outcome.smoke:
            return Finding(path)
        sentence = "; ".join([*_backend_words(head, outcome, result.extra.get("has_magma")), path])
        group = [v for v in result.variants if v.name.startswith(head.comparison.num.rsplit("_n", 1)[0] + "_n")]
        if per := per_matrix_clause(group, int(head.comparison.qualifiers["batch"])):
            details.append(f"{per[0].upper()}{per[1:]}.")
        seed = result.extra.get("seed_method")
        medians = {v.name: v.median for v in result.variants if v.timing is not None}
        if isinstance(seed, Mapping) and (said := seed_clause(seed, medians)):
            sentence += f"; {said}"
        hits = [r for r in outcome.ratios if r.status == "reproduced"]
        others = [f"{r.comparison.name} {r.value:.2f}x" for r in hits if r is not head]
        if others:
            details.append(f"Also over {THRESHOLD}: {', '.join(others)}.")
        rest = sorted(
            {r.comparison.qualifiers["backend"] for r in outcome.ratios}
            - {r.comparison.qualifiers["backend"] for r in hits}
        )
        unsure = [
            b
            for b in rest
            if any(r.comparison.qualifiers["backend"] == b and r.where == "straddles" for r in outcome.ratios)
        ]
        clear = [b for b in rest if b not in unsure]
        if clear:
            details.append(f"Below the threshold at every batch: the {', '.join(clear)} backend(s).")
        if unsure:
            details.append(f"Inconclusive (a CI straddles the threshold): the {', '.join(unsure)} backend(s).")
        if not hits:
            details.append("The seed saw ~10x at batch 128 on an RTX 6000 Ada.")
        details += [x for x in [neighbour_steps(result.extra.get("time_grid"), p.cliff_n, p.batches)] if x]
        return Finding(sentence, tuple(details))


def _backend_words(head: Ratio, outcome: Outcome, has_magma: Any) -> list[str]:
    """Which backend the headline ran under and whether a user gets it without asking, then the
    default backend's own ratios where the headline is another backend's (from the rows)."""
    backend = head.comparison.qualifiers["backend"]
    default_is = {True: "MAGMA here", False: "cuSOLVER here: no MAGMA"}.get(has_magma)
    opt_in = "torch.backends.cuda.preferred_linalg_library('cusolver')"
    out: list[str] = []
    if head.status == "reproduced" and backend == "cusolver":
        out.append(
            {
                True: f"the cliff shows under the cuSOLVER backend: opt-in here ({opt_in}; torch.cuda.has_magma is "
                "True), by PyTorch's source (at other commits, untested here) the default only in builds without MAGMA",
                False: "the cliff shows under the cuSOLVER backend, which this torch (torch.cuda.has_magma is False) "
                "also uses by default",
            }.get(has_magma, f"the cliff shows under the cuSOLVER backend: opt-in ({opt_in}) where torch has MAGMA")
        )
    elif head.status == "reproduced":
        out.append(
            f"the cliff shows under the {backend} backend"
            + (f" ({default_is})" if backend == "default" and default_is else "")
        )
    rows = [r for r in outcome.ratios if r.comparison.qualifiers["backend"] == "default"]
    if backend != "default" and rows:
        said = ", ".join(f"{r.value:.2f}x" for r in rows)
        batches = ", ".join(str(r.comparison.qualifiers["batch"]) for r in rows)
        held = [r for r in rows if r.status == "reproduced"]
        verdict = "a cliff too" if held else "no cliff"
        out.append(f"the default backend ({default_is or 'unrecorded'}) showed {verdict}: {said} at batches {batches}")
    return out
