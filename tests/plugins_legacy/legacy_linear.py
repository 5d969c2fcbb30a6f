"""A copy of 5090-linear as written against the repro API before paired comparisons (the shim test).

Seed: an article on the RTX 5090 found ``nn.Linear(768, 768)`` on x[256, 196, 768]
fp32 about 2.7x slower than ``x @ w.t() + b`` (the RTX 4090 showed ~1.0); upstream
pytorch/pytorch#150725. Both compute the same thing; nn.Linear folds the bias into
one addmm (cuBLASLt epilogue) while the manual form runs a plain GEMM and a
separate add, so a gap points at the GEMM heuristic cuBLAS picks for each call.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # The first API's module names exist only at import time (repro/__init__.py's finder maps them
    # onto repro.run.legacy), so mypy reads the modules that hold those names now. Its Repro took no
    # type argument, which is Repro[Any]. At run time this plugin imports what such a plugin imports.
    from repro.core.context import Context
    from repro.core.results import Metric, RunResult, VariantResult, Verdict, Work
    from repro.core.spec import Repro as _Repro
    from repro.core.spec import Requirements, param
    from repro.core.verdict import fmt_ratio, ratio_verdict, short_kernel, top_kernel
    from repro.run.catalog import register

    Repro = _Repro[Any]
else:
    from repro.catalog import register
    from repro.measure import Context
    from repro.spec import Metric, Repro, Requirements, RunResult, VariantResult, Verdict, Work, param
    from repro.verdict import fmt_ratio, ratio_verdict, short_kernel, top_kernel


@dataclass(frozen=True)
class LinearParams:
    batch: int = param(256, help="leading batch dimension of x", smoke=4, min=1, max=65536)
    tokens: int = param(196, help="tokens per sample (ViT-B/16 at 224px has 196)", smoke=16, min=1, max=65536)
    features: int = param(768, help="in and out features of the Linear", smoke=64, min=1, max=16384)
    tf32_variants: bool = param(True, help="also time both forms with TF32 on")


@contextlib.contextmanager
def tf32(enabled: bool) -> Iterator[None]:
    """Set TF32 for matmuls and restore the user's setting afterwards."""
    import torch

    saved = (torch.backends.cuda.matmul.allow_tf32, torch.get_float32_matmul_precision())
    torch.backends.cuda.matmul.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved[0]
        torch.set_float32_matmul_precision(saved[1])


def _kernel_clause(lin: VariantResult, man: VariantResult) -> str:
    """Which GEMM cuBLAS chose for each form, and what the manual form ran besides (no full stop)."""
    a, b = top_kernel(lin), top_kernel(man)
    extra = sorted({k.name for k in man.kernels} - {k.name for k in lin.kernels})
    if a == b:
        clause = f"cuBLAS ran the same GEMM for both ({short_kernel(a)})"
    else:
        clause = f"cuBLAS chose {short_kernel(a)} for nn.Linear and {short_kernel(b)} for the manual form"
    if extra:
        clause += f", the manual form adding {len(extra)} more kernel(s) ({short_kernel(extra[0], 60)})"
    return clause


@register
class LegacyLinear(Repro):
    id = "legacy-linear"
    title = "nn.Linear slower than x @ w.t() + b in fp32 (RTX 5090)"
    upstream = ("https://github.com/pytorch/pytorch/issues/150725",)
    seed_claim = (
        "On an RTX 5090, nn.Linear(768, 768) on x[256,196,768] fp32 took ~2.7x the time of "
        "x @ w.t() + b; on an RTX 4090 the two were equal (~1.0x)."
    )
    Params = LinearParams
    requires = Requirements(cuda=True, cpu_smoke=True)
    metric = Metric(
        name="t(linear)/t(manual), fp32, TF32 off",
        description="median time of nn.Linear over median time of x @ w.t() + b, same inputs",
        threshold=1.5,  # halfway between the 4090's ~1.0 and the 5090's ~2.7
    )

    def run(self, p: LinearParams, ctx: Context) -> RunResult:
        import torch

        torch.manual_seed(0)
        dev = torch.device(ctx.device)
        lin = torch.nn.Linear(p.features, p.features, device=dev, dtype=torch.float32)
        x = torch.randn(p.batch, p.tokens, p.features, device=dev, dtype=torch.float32)
        w, b = lin.weight.detach(), lin.bias.detach()
        m, k = p.batch * p.tokens, p.features
        flops = 2.0 * m * k * p.features + m * p.features  # GEMM plus the bias add
        moved = 4.0 * (m * k + k * p.features + p.features + m * p.features)

        def linear() -> Any:
            return lin(x)

        def manual() -> Any:
            return x @ w.t() + b

        variants = []
        modes = [False, True] if p.tf32_variants else [False]
        with torch.no_grad():
            for on in modes:
                precision = "tf32" if on else "fp32"
                with tf32(on):
                    if on and not ctx.cuda:
                        continue  # TF32 is a tensor-core mode; on CPU it is the same fp32 path
                    for name, fn in (("linear", linear), ("manual", manual)):
                        variants.append(
                            ctx.measure(
                                f"{name}_{precision}",
                                fn,
                                label=("nn.Linear" if name == "linear" else "x @ w.t() + b")
                                + f" ({precision.upper()})",
                                config={"form": name, "allow_tf32": on, "shape": [p.batch, p.tokens, p.features]},
                                work=Work(flops=flops, bytes=moved, ceiling=precision),
                            )
                        )
            torch.testing.assert_close(linear(), manual(), rtol=1e-3, atol=1e-3)
        return RunResult(variants=tuple(variants))

    def verdict(self, p: LinearParams, result: RunResult) -> Verdict:
        lin, man = result.variant("linear_fp32"), result.variant("manual_fp32")
        tf32_note = ""
        if "linear_tf32" in {v.name for v in result.variants}:
            on = result.variant("linear_tf32")
            if on.timing and lin.timing:
                tf32_note = f" With TF32 on, nn.Linear ran {lin.median / on.median:.1f}x faster than with it off."

        def finding(value: float, lo: float, hi: float, status: str, qualifier: str) -> str:
            if lin.kernel_source == "cuda":
                kernels = _kernel_clause(lin, man)
            else:
                kernels = (
                    f"in a smoke run on {lin.device}, not evidence about any GPU, the heaviest ops were "
                    f"{top_kernel(lin)} and {top_kernel(man)}"
                )
            if status == "reproduced":
                head = f"Reproduced: nn.Linear took {fmt_ratio(value, lo, hi)} the time of x @ w.t() + b in fp32"
            else:
                head = (
                    f"Not reproduced: nn.Linear took {fmt_ratio(value, lo, hi)} the time of x @ w.t() + b "
                    f"in fp32 ({qualifier} the {self.metric.threshold} threshold; the seed saw ~2.7x on an RTX 5090)"
                )
            return f"{head}; {kernels}.{tf32_note}"

        return ratio_verdict(self.metric, lin, man, finding=finding)
