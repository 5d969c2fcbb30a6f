"""fused-adam-capturable: an AdamW step with capturable=True vs capturable=False, per kernel.

Seed: NVIDIA/TransformerEngine#3777 reports Transformer Engine's FusedAdam about
1.9x slower per kernel with ``capturable=True`` than with ``capturable=False`` on a
GB300, benchmarked on 201 fp32 tensors of 320 * 65536 elements (lr 1.6e-3, betas
(0.9, 0.95), eps 1e-8, weight decay 0.1, AdamW mode, fp32 moments).

The capturable form keeps lr, the step count and the bias corrections on the GPU,
so a CUDA graph can replay the step; TE then runs a different kernel
(``AdamCapturableFunctor``) that reads those values from device memory. Both forms
move the same bytes, so a memory-bound kernel should take the same time.

Backends, each on the same parameter and gradient tensors:

- TE ``FusedAdam`` when ``transformer_engine.pytorch`` imports (never at module load);
- ``torch.optim.AdamW(fused=True)``: note that torch's fused path keeps ``step`` on
  the device whether or not ``capturable`` is set, so its two forms launch the same
  kernels and ``capturable`` only changes the graph-capture checks;
- ``torch.optim.AdamW(foreach=True)`` as a reference (its capturable form does the
  bias corrections with extra foreach kernels on device scalars).

Each backend's regular step is timed eagerly, its capturable step eagerly and by
CUDA graph replay. The metric is per kernel, as in the seed: the per-step device
time of the optimizer kernels, read from the profiler one step at a time.
"""

from __future__ import annotations

import dataclasses
import gc
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from repro import stats
from repro.catalog import register
from repro.measure import Context
from repro.spec import (
    Metric,
    Repro,
    Requirements,
    RunResult,
    VariantResult,
    Verdict,
    Work,
    param,
)
from repro.verdict import CI_LEVEL, decide, fmt_ratio, measured, unavailable

BACKENDS: dict[str, str] = {
    "te": "TE FusedAdam",
    "torch_fused": "torch AdamW(fused=True)",
    "torch_foreach": "torch AdamW(foreach=True)",
}
MODES: dict[str, str] = {
    "regular": "capturable=False, eager",
    "capturable": "capturable=True, eager",
    "capturable_graph": "capturable=True, CUDA graph replay",
}
# The seed's number, quoted in every finding.
SEED_RATIO = 1.9
# Kernel names that belong to an optimizer step: torch's fused AdamW runs
# multi_tensor_apply_kernel<FusedOptimizerTensorListMetadata<4>, FusedAdamMathFunctor<...>>,
# its foreach path multi_tensor_apply_kernel<..., *Functor> for every _foreach_* op,
# TE multi_tensor_apply_kernel<..., AdamFunctor / AdamCapturableFunctor>. Left out on
# purpose: the small fill / compare / copy kernels TE's capturable step launches for
# its overflow buffer and step counter (vectorized_elementwise_kernel), which are
# bookkeeping, not the per-kernel cost the seed measured (they stay in step time).
KERNEL_KEYS = ("adam", "multi_tensor", "foreach")
# Fewer per-step kernel samples than this cannot bound a median at the level the
# two-set ratio CI needs (sqrt(0.95) per set needs n >= 7); below it, step time is used.
MIN_KERNEL_SAMPLES = 7
_CAPTURABLE_WARNING = r"This instance was constructed with capturable=True"


def optimizer_kernel(name: str) -> bool:
    """Whether a device kernel is one of the optimizer's own (see KERNEL_KEYS)."""
    low = name.lower()
    return any(key in low for key in KERNEL_KEYS)


@dataclass(frozen=True)
class Params:
    n_tensors: int = param(201, help="parameter tensors (the seed used 201)", smoke=4, min=1, max=100_000)
    numel: int = param(
        320 * 65536,
        help="elements per tensor (the seed used 320*65536; 201 of those are ~17 GB per fp32 set)",
        smoke=4096,
        min=1,
        max=2**31 - 1,
    )
    lr: float = param(1.6e-3, help="learning rate", min=0.0)
    beta1: float = param(0.9, help="Adam beta1", min=0.0, max=1.0)
    beta2: float = param(0.95, help="Adam beta2", min=0.0, max=1.0)
    eps: float = param(1e-8, help="Adam epsilon", min=0.0)
    weight_decay: float = param(0.1, help="decoupled (AdamW) weight decay", min=0.0)
    backends: tuple[str, ...] = param(
        ("te", "torch_fused", "torch_foreach"),
        help="optimizer implementations to time",
        choices=tuple(BACKENDS),
    )
    graph: bool = param(True, help="also time the capturable step by CUDA graph replay")
    kernel_iters: int = param(
        30,
        help="steps profiled one at a time for the per-kernel samples",
        smoke=10,
        min=MIN_KERNEL_SAMPLES,
        max=10_000,
    )


@dataclass(frozen=True)
class PairRatio:
    """capturable/regular for one backend, with the samples it came from."""

    value: float
    lo: float
    hi: float
    basis: str  # "kernel" (optimizer kernels' device time per step) or "step" (whole step time)


def _te_fused_adam() -> tuple[Any, str | None]:
    """TE's FusedAdam class, or None and why not; imported here, never at module load."""
    try:
        from transformer_engine.pytorch.optimizers import FusedAdam
    except Exception as exc:  # ImportError, or a TE build that fails to load its library
        why = f"transformer_engine.pytorch is not importable: {type(exc).__name__}: {exc}"
        return None, why.splitlines()[0]
    return FusedAdam, None


def _make_optimizer(backend: str, capturable: bool, tensors: list[Any], p: Params, te_cls: Any) -> Any:
    import torch

    common = {"lr": p.lr, "betas": (p.beta1, p.beta2), "eps": p.eps, "weight_decay": p.weight_decay}
    if backend == "te":
        # Keywords only: TE moved bias_correction/adam_w_mode behind the `*` across versions.
        return te_cls(tensors, adam_w_mode=True, capturable=capturable, **common)
    if backend == "torch_fused":
        return torch.optim.AdamW(tensors, fused=True, capturable=capturable, **common)
    return torch.optim.AdamW(tensors, foreach=True, capturable=capturable, **common)


def _first_step(opt: Any) -> None:
    """One step outside any timing: allocates the moments and spends torch's one-time warning.

    torch warns once per instance when a capturable optimizer steps outside graph
    capture; the eager capturable variant does exactly that on purpose.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_CAPTURABLE_WARNING)
        opt.step()


@register
class FusedAdamCapturable(Repro):
    id = "fused-adam-capturable"
    title = "FusedAdam capturable=True slower than capturable=False (TE #3777)"
    upstream = ("https://github.com/NVIDIA/TransformerEngine/issues/3777",)
    seed_claim = (
        "On a GB300, Transformer Engine's FusedAdam with capturable=True took ~1.9x the time per "
        "kernel of capturable=False (201 fp32 tensors of 320*65536 elements, AdamW, fp32 moments)."
    )
    Params = Params
    requires = Requirements(cuda=True, cpu_smoke=True)  # torch's fused AdamW also runs on CPU
    metric = Metric(
        name="t(capturable)/t(regular), optimizer kernels per step",
        description=(
            "median per-step device time of the optimizer kernels with capturable=True over "
            "capturable=False, eager, same tensors; TE FusedAdam whenever it ran, else torch fused AdamW"
        ),
        # Both forms move the same bytes; a memory-bound kernel 30% slower is a real
        # regression well outside run-to-run noise (~1-2%) and still under the seed's 1.9.
        threshold=1.3,
    )

    def run(self, p: Params, ctx: Context) -> RunResult:
        import torch

        torch.manual_seed(0)
        dev = torch.device(ctx.device)
        elements = p.n_tensors * p.numel
        if ctx.cuda:
            # params + grads + the two moments, fp32, with one more set of headroom for the
            # foreach path's temporaries; a card that cannot hold them gets skipped
            # variants that say so, not an out-of-memory crash before any variant exists.
            need = 5 * 4 * elements
            free = _free_gpu_bytes()
            if free is not None and need > free:
                fit = max(1, int(p.numel * free / need))
                reason = (
                    f"needs about {need / 2**30:.0f} GiB of GPU memory, {free / 2**30:.0f} GiB free; "
                    f"try --set numel={fit} (or fewer n_tensors)"
                )
                return RunResult(
                    variants=tuple(
                        ctx.skipped(f"{b}_{m}", _label(b, m), reason, backend=b, mode=m)
                        for b in p.backends
                        for m in MODES
                        if m != "capturable_graph" or p.graph
                    )
                )
        # One set of parameters and gradients serves every backend; the grads are
        # set once and left in place (step() never clears them), so each step
        # does the same work. Each optimizer's moments are freed before the next.
        tensors = []
        for _ in range(p.n_tensors):
            t = torch.nn.Parameter(torch.randn(p.numel, device=dev, dtype=torch.float32).mul_(0.02))
            t.grad = torch.randn(p.numel, device=dev, dtype=torch.float32).mul_(1e-3)
            tensors.append(t)
        # What a step must move at the least, fp32 throughout: read p, g, m, v and
        # write p, m, v = 7 accesses * 4 bytes per element. The foreach path moves
        # more (it materialises sqrt(v) and the denominator), so its share of the
        # copy ceiling shows that overhead.
        work = Work(bytes=7.0 * 4.0 * elements, ceiling="copy")
        # TE is CUDA-only; on CPU it is not even imported (its import can be slow or fail noisily).
        te_cls, te_why = (None, "TE FusedAdam runs only on CUDA")
        if ctx.cuda and "te" in p.backends:
            te_cls, te_why = _te_fused_adam()

        variants: list[VariantResult] = []
        for backend in BACKENDS:
            if backend not in p.backends:
                continue
            if backend == "te" and te_cls is None:
                variants += [ctx.skipped(f"te_{m}", _label("te", m), str(te_why), backend="te") for m in MODES]
                continue
            variants += self._backend(backend, p, ctx, tensors, work, te_cls)
            gc.collect()  # drop the optimizer and any graph (and its private pool) before the next
            if ctx.cuda:
                torch.cuda.empty_cache()
        notes = []
        if not ctx.cuda:
            notes.append("CPU smoke run: no kernel timing and no graph replay; ratios use whole-step time")
        return RunResult(
            variants=tuple(variants),
            extra={
                "bytes_per_step": work.bytes,
                "elements": elements,
                "kernel_match": list(KERNEL_KEYS),
            },
            notes=tuple(notes),
        )

    def _backend(
        self, backend: str, p: Params, ctx: Context, tensors: list[Any], work: Work, te_cls: Any
    ) -> list[VariantResult]:
        """The three variants of one backend; one failing leaves the others standing."""
        out: list[VariantResult] = []
        base = {"backend": backend, "n_tensors": p.n_tensors, "numel": p.numel, "dtype": "float32"}
        for capturable in (False, True):
            modes = ["capturable", "capturable_graph"] if capturable else ["regular"]
            if capturable and backend == "torch_foreach" and not ctx.cuda:
                reason = "torch's capturable foreach AdamW needs params on a CUDA/XPU/HPU device"
                out += [ctx.skipped(f"{backend}_{m}", _label(backend, m), reason, **base) for m in modes]
                continue
            try:
                opt = _make_optimizer(backend, capturable, tensors, p, te_cls)
            except Exception as exc:  # e.g. fused=True unsupported on this device
                why = f"could not build the optimizer: {type(exc).__name__}: {exc}".splitlines()[0]
                out += [ctx.skipped(f"{backend}_{m}", _label(backend, m), why, **base) for m in modes]
                continue
            try:
                _first_step(opt)
            except Exception as exc:  # e.g. no room for the moments: this backend is out
                out += [ctx.errored(f"{backend}_{m}", _label(backend, m), exc, **base) for m in modes]
            else:
                out += [self._variant(backend, m, opt, ctx, p, work, base) for m in modes]
            finally:
                opt.state.clear()  # the moments: two more fp32 sets of the whole model
                del opt
        return out

    def _variant(
        self,
        backend: str,
        mode: str,
        opt: Any,
        ctx: Context,
        p: Params,
        work: Work,
        base: Mapping[str, Any],
    ) -> VariantResult:
        name, label = f"{backend}_{mode}", _label(backend, mode)
        config = {
            **base,
            "capturable": mode != "regular",
            "timed": "graph" if mode.endswith("graph") else "eager",
        }
        if mode == "capturable_graph":
            if not p.graph:
                return ctx.skipped(name, label, "graph replay turned off (--set graph=false)", **config)
            if not ctx.cuda:
                return ctx.skipped(name, label, "CUDA graph replay needs CUDA", **config)
        step: Callable[[], Any] = opt.step
        try:
            if mode == "capturable_graph":
                # The per-kernel metric comes from the eager variants; replay is
                # timed as a whole step (graph kernels cannot be split per step).
                return ctx.measure(name, step, label=label, config=config, work=work, graph=True)
            v = ctx.measure(name, step, label=label, config=config, work=work)
        except Exception as exc:  # an OOM or a capture failure costs this variant, not the run
            return ctx.errored(name, label, exc, **config)
        if not ctx.cuda:
            return v
        try:
            ks = ctx.kernel_samples(step, p.kernel_iters, optimizer_kernel)
        except Exception as exc:  # keep the step timing; the verdict falls back to it and says so
            note = f"per-kernel samples failed ({type(exc).__name__}: {exc})".splitlines()[0]
            return dataclasses.replace(v, warnings=(*v.warnings, note))
        return _with_extra(v, {"kernel_samples_s": ks, "kernel_match": list(KERNEL_KEYS)})

    def verdict(self, p: Params, result: RunResult) -> Verdict:
        have = {v.name: v for v in result.variants}
        ratios: dict[str, PairRatio | None] = {
            b: pair_ratio(have.get(f"{b}_capturable"), have.get(f"{b}_regular")) for b in BACKENDS
        }
        # Headline rule, fixed before looking at any number: TE FusedAdam is the seed's
        # own optimizer, so whenever it ran it answers the seed. Otherwise torch's fused
        # AdamW speaks (every container has it), and the finding says TE was not measured;
        # the foreach path is a reference and speaks only when neither fused one ran.
        head = "torch_fused"
        if ratios["te"] is not None:
            head = "te"
        elif ratios["torch_fused"] is None and ratios["torch_foreach"] is not None:
            head = "torch_foreach"
        rows = tuple(_row(b, have, ratios[b]) for b in BACKENDS if any(n.startswith(b + "_") for n in have))
        chosen = ratios[head]
        if chosen is None:
            return _not_measured(self.metric, have, rows)
        status, qualifier = decide(chosen.lo, chosen.hi, self.metric.threshold)
        return measured(
            self.metric,
            chosen.value,
            chosen.lo,
            chosen.hi,
            status,
            finding(head, chosen, status, qualifier, self.metric.threshold, ratios, have),
            rows,
            (f"{head}_capturable", f"{head}_regular"),
        )


# --------------------------------------------------------------------------- verdict pieces


def _free_gpu_bytes() -> int | None:
    """Free memory on the current GPU, or None where it cannot be read."""
    try:
        import torch

        return int(torch.cuda.mem_get_info()[0])
    except Exception:  # no readable CUDA device: do not guess, let the run try
        return None


def _label(backend: str, mode: str) -> str:
    return f"{BACKENDS[backend]}, {MODES[mode]}"


def _with_extra(v: VariantResult, extra: Mapping[str, Any]) -> VariantResult:
    return dataclasses.replace(v, extra={**v.extra, **extra})


def _ok(v: VariantResult | None) -> bool:
    return v is not None and v.status == "ok" and v.timing is not None


def pair_ratio(cap: VariantResult | None, reg: VariantResult | None) -> PairRatio | None:
    """capturable/regular with its CI, from per-step kernel samples when both have enough.

    Without them (CPU, or no kernel matched) the whole-step samples stand in.
    """
    if cap is None or reg is None or not (_ok(cap) and _ok(reg)):
        return None
    kc, kr = cap.extra.get("kernel_samples_s") or [], reg.extra.get("kernel_samples_s") or []
    if len(kc) >= MIN_KERNEL_SAMPLES and len(kr) >= MIN_KERNEL_SAMPLES:
        num, den, basis = kc, kr, "kernel"
    else:
        num, den, basis = cap.timing.samples, reg.timing.samples, "step"  # type: ignore[union-attr]
    value, lo, hi = stats.ratio_ci(num, den, CI_LEVEL)
    return PairRatio(value=value, lo=lo, hi=hi, basis=basis)


def _ms(v: VariantResult | None) -> float | None:
    return v.median * 1e3 if v is not None and _ok(v) else None


def _row(backend: str, have: Mapping[str, VariantResult], r: PairRatio | None) -> dict[str, Any]:
    reg, cap, gr = (have.get(f"{backend}_{m}") for m in MODES)
    reg_ms, graph_ms = _ms(reg), _ms(gr)
    gbps = reg.achieved.gbps if reg is not None and reg.achieved is not None else None
    return {
        "backend": BACKENDS[backend],
        "regular_ms": reg_ms,
        "capturable_ms": _ms(cap),
        "graph_replay_ms": graph_ms,
        "ratio": r.value if r else None,
        "ci_low": r.lo if r else None,
        "ci_high": r.hi if r else None,
        "basis": r.basis if r else None,
        "graph_vs_regular": graph_ms / reg_ms if graph_ms and reg_ms else None,
        "regular_gbps": gbps,
        "status": "measured" if r else _why_not(reg, cap),
    }


def _why_not(*vs: VariantResult | None) -> str:
    for v in vs:
        if v is not None and v.status != "ok":
            return f"{v.status}: {v.reason}"
    return "not run"


def _not_measured(metric: Metric, have: Mapping[str, VariantResult], rows: Sequence[Mapping[str, Any]]) -> Verdict:
    reasons = [f"{v.name} {v.status} ({v.reason})" for v in have.values() if v.status != "ok"]
    errored = any(v.status == "error" for v in have.values())
    base = unavailable(
        metric,
        "no backend has both a regular and a capturable step measured: " + ("; ".join(reasons) or "none selected"),
        status="error" if errored else "skipped",
    )
    return dataclasses.replace(base, breakdown=tuple(rows))


def finding(
    head: str,
    r: PairRatio,
    status: str,
    qualifier: str,
    threshold: float,
    ratios: Mapping[str, PairRatio | None],
    have: Mapping[str, VariantResult],
) -> str:
    """One plain sentence on the headline backend, then one on the others and graph replay."""
    if r.basis == "kernel":
        what, per = (
            "the capturable step's optimizer kernels took",
            "the device time of the regular step's optimizer kernels",
        )
    else:
        what, per = "the capturable step took", "the time of the regular step"
    seed = f"the seed saw ~{SEED_RATIO}x with TE FusedAdam on GB300"
    ratio = fmt_ratio(r.value, r.lo, r.hi)
    cap = have.get(f"{head}_capturable")
    device = cap.device if cap is not None else None
    if r.basis == "step" and device != "cuda":
        head_s = (
            f"Smoke run on {device}, not evidence about any GPU: with {BACKENDS[head]}, "
            f"{what} {ratio} {per} ({qualifier} the {threshold} threshold; {seed})"
        )
    elif status == "reproduced":
        head_s = f"Reproduced: with {BACKENDS[head]}, {what} {ratio} {per} ({seed})"
    else:
        seed_s = f"the seed's ~{SEED_RATIO}x (TE FusedAdam, GB300)"
        if head != "te":
            # Only TE's own FusedAdam can refute a claim about TE's FusedAdam.
            consequence = f"which says nothing about {seed_s}: TE FusedAdam was not measured here"
        elif qualifier.startswith("the whole CI is below"):
            consequence = f"so {seed_s} does not hold here"
        else:
            consequence = f"so this run can neither confirm nor rule out {seed_s}"
        head_s = (
            f"Not reproduced: with {BACKENDS[head]}, {what} {ratio} {per} "
            f"({qualifier} the {threshold} threshold), {consequence}"
        )
    if r.basis == "step" and device == "cuda":
        head_s += "; per-kernel samples were missing, so whole-step times were compared"
    others = []
    for b, rb in ratios.items():
        if b == head:
            continue
        if rb is not None:
            others.append(f"{BACKENDS[b]} {fmt_ratio(rb.value, rb.lo, rb.hi)}")
        elif f"{b}_regular" in have:
            others.append(f"{BACKENDS[b]} not measured ({_short_reason(have, b)})")
    graph = have.get(f"{head}_capturable_graph")
    reg = have.get(f"{head}_regular")
    tail = ""
    if others:
        tail += f" Other backends, capturable/regular: {'; '.join(others)}."
    if graph is not None and _ok(graph) and reg is not None and _ok(reg):
        tail += f" Graph replay of the capturable step took {graph.median / reg.median:.2f}x the eager regular step."
    return f"{head_s}.{tail}"


def _short_reason(have: Mapping[str, VariantResult], backend: str) -> str:
    for m in MODES:
        v = have.get(f"{backend}_{m}")
        if v is not None and v.status != "ok":
            reason = v.reason or v.status
            return reason if len(reason) <= 120 else reason[:117] + "..."
    return "incomplete"
