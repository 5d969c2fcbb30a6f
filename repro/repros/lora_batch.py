"""lora-batch-scaling: a LoRA training step on transformer blocks at FLUX's width, at batch 1, 2, 4.

Seed: an article on fine-tuning FLUX with LoRA on an RTX 5090 says batch size 2 is
"2x slower" than batch size 1. Twice the samples per step should take about twice
the time, so the question is whether *per-sample* time rose (a cliff: e.g. the
step spilled out of memory, or the allocator thrashed) or only the step time
doubled (linear scaling, which is no cliff at all). The same article says the
RTX 5090 has HBM2e memory; it has 32 GB of GDDR7, so that part of the seed is wrong.

The model is plain torch, no peft or diffusers: ``depth`` pre-norm transformer
blocks shaped like FLUX's (hidden 3072, 24 heads of 128, MLP ratio 4, 4608 tokens
= 4096 image + 512 text at 1024x1024) with frozen base weights and trainable
low-rank adapters (A: in->r, B: r->out, B zero-initialised, scale alpha/r with
alpha = r, as FLUX LoRA trainers commonly set it) on q, k, v, out, MLP up and
down. FLUX's adaLN modulation and its split image/text streams are left out:
they add little work and no new kernel shape. One timed step is zero_grad,
forward, an MSE loss against a fixed target, backward and AdamW on the adapters.

``--set memory_gb=32`` caps this process's CUDA allocator at 32 GiB to emulate a
32 GB card; a batch that then runs out of memory is recorded as an error variant
and the other batches still run.
"""

from __future__ import annotations

import dataclasses
import gc
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from repro.api import (
    Arm,
    Comparison,
    Context,
    Finding,
    Metric,
    Outcome,
    Plot,
    Repro,
    Requirements,
    RunResult,
    UsageError,
    VariantResult,
    Work,
    param,
    register,
    standalone,
)
from repro.repros._lora_finding import (
    FLUX_WIDTH,
    GIB,
    THRESHOLD,
    THRESHOLD_WHY,
    clocks_clause,
    gib,
    kernel_clause,
    lora_sentence,
    memory_sentence,
    oom,
    scope_clause,
)

# The projections that carry an adapter: name -> (in, out) in units of hidden, MLP ratio 4.
PROJECTIONS = {"q": (1, 1), "k": (1, 1), "v": (1, 1), "out": (1, 1), "up": (1, 4), "down": (4, 1)}


@dataclass(frozen=True)
class LoraParams:
    depth: int = param(4, help="transformer blocks (FLUX has 19 double + 38 single)", smoke=1, min=1, max=1000)
    rank: int = param(16, help="LoRA rank r", smoke=4, min=1, max=4096)
    tokens: int = param(
        4608,
        help="tokens per sample (4096 image + 512 text at 1024px)",
        smoke=32,
        min=1,
        max=1_000_000,
    )
    hidden: int = param(FLUX_WIDTH, help="model width", smoke=64, min=8, max=65536)
    heads: int = param(24, help="attention heads (hidden must divide by it)", smoke=4, min=1, max=1024)
    batches: tuple[int, ...] = param(
        (1, 2, 4),
        help="batch sizes to time; must include 1 and 2 (the metric)",
        smoke=(1, 2),
        min=1,
        max=4096,
    )
    dtype: str = param(
        "bfloat16",
        help="dtype of weights and activations",
        smoke="float32",
        choices=("bfloat16", "float32"),
    )
    memory_gb: float = param(
        0.0,
        help="cap the CUDA allocator at this many GiB to emulate a smaller card (0: no cap)",
        min=0.0,
    )

    def __post_init__(self) -> None:
        if self.hidden % self.heads:
            raise UsageError(
                f"--set hidden={self.hidden} heads={self.heads} for lora-batch-scaling: "
                "expected hidden divisible by heads"
            )
        if not {1, 2} <= set(self.batches):
            shown = ",".join(map(str, self.batches))
            raise UsageError(
                f"--set batches={shown} for lora-batch-scaling: expected it to include 1 and 2 (the metric is bs2/bs1)"
            )


def step_flops(p: LoraParams, batch: int) -> float:
    """Matmul FLOPs of one training step (2 per multiply-add); elementwise work is left out.

    Forward: every projection is 2 * rows * in * out for the frozen base plus
    2 * rows * r * (in + out) for its adapter; attention adds 4 * b * t^2 * d
    (Q @ K^T and P @ V). Backward: the base weights are frozen, so they need only
    input gradients (1x their forward); the adapters need input and weight
    gradients (2x); attention needs dQ, dK, dV and dP (2x, counting useful work,
    not the recomputation flash attention does). So a step is about
    2x base + 3x adapters + 3x attention, less than the 3x forward of full training.
    The first block's q/k/v read the input, which needs no gradient, so their base
    projections get no backward at all.
    """
    d, r, t = p.hidden, p.rank, p.tokens
    rows = batch * t
    base = sum(2.0 * rows * (i * d) * (o * d) for i, o in PROJECTIONS.values())
    lora = sum(2.0 * rows * r * (i * d + o * d) for i, o in PROJECTIONS.values())
    attn = 4.0 * batch * t * t * d
    first_qkv_input_grads = sum(2.0 * rows * (i * d) * (o * d) for k, (i, o) in PROJECTIONS.items() if k in "qkv")
    return p.depth * (2.0 * base + 3.0 * lora + 3.0 * attn) - first_qkv_input_grads


def _memory_fraction(torch: Any) -> float:
    """The process's current allocator cap, to restore after ours (1.0 where torch cannot say)."""
    getter = getattr(torch.cuda, "get_per_process_memory_fraction", None)
    try:
        return float(getter()) if getter is not None else 1.0
    except Exception:  # an older torch without a readable cap: 1.0 is its default
        return 1.0


def _build(p: LoraParams, device: Any, dtype: Any) -> tuple[list[dict[str, tuple[Any, ...]]], list[Any]]:
    """Per block, per projection: (frozen weight, frozen bias, adapter A, adapter B); and the adapters."""
    import torch

    blocks, adapters = [], []
    for _ in range(p.depth):
        block = {}
        for name, (i, o) in PROJECTIONS.items():
            fan_in, fan_out = i * p.hidden, o * p.hidden
            w = torch.empty(fan_out, fan_in, device=device, dtype=dtype).normal_(std=fan_in**-0.5)
            b = torch.zeros(fan_out, device=device, dtype=dtype)
            a = torch.empty(p.rank, fan_in, device=device, dtype=dtype)
            torch.nn.init.kaiming_uniform_(a, a=math.sqrt(5))  # peft's LoRA A init
            a.requires_grad_(True)
            bb = torch.zeros(fan_out, p.rank, device=device, dtype=dtype, requires_grad=True)
            block[name] = (w, b, a, bb)
            adapters += [a, bb]
        blocks.append(block)
    return blocks, adapters


# The adapters' scale, alpha / r with alpha = r; the step multiplies by it (a kernel per adapter) even at 1.0.
LORA_SCALE = 1.0


def _forward(x: Any, blocks: Sequence[Mapping[str, tuple[Any, ...]]], heads: int, scale: float) -> Any:
    """Pre-norm blocks: x + attn(LN(x)), then x + MLP(LN(x)), each projection with its adapter."""
    import torch.nn.functional as F

    def proj(h: Any, wts: tuple[Any, ...]) -> Any:
        w, b, a, bb = wts
        return F.linear(h, w, b) + F.linear(F.linear(h, a), bb) * scale

    batch, tokens, d = x.shape
    for blk in blocks:
        h = F.layer_norm(x, (d,))
        q, k, v = (proj(h, blk[n]).view(batch, tokens, heads, d // heads).transpose(1, 2) for n in "qkv")
        o = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(batch, tokens, d)
        x = x + proj(o, blk["out"])
        h = F.layer_norm(x, (d,))
        x = x + proj(F.gelu(proj(h, blk["up"]), approximate="tanh"), blk["down"])
    return x


@register
class LoraBatchScaling(Repro[LoraParams]):
    id = "lora-batch-scaling"
    title = "LoRA fine-tuning step at batch 2 '2x slower' than batch 1 (FLUX, RTX 5090)"
    # The seed is an article, not an issue thread; no upstream tracker has it yet.
    upstream = ()
    seed_source = "an article on FLUX LoRA fine-tuning on an RTX 5090; the seed gives no URL, title, author or date"
    seed_experiment = (
        "The seed gives no program. Ours: LoRA on transformer blocks at FLUX's width (3072, 4608 tokens, 4 "
        "blocks, bf16), one training step at batch 1, 2 and 4 in paired rounds; the metric is per-sample "
        "time at batch 2 over batch 1, so linear scaling reads 1.0."
    )
    seed_claim = (
        "An article on FLUX LoRA fine-tuning on an RTX 5090 found batch size 2 about 2x slower than "
        "batch size 1 (it also calls the 5090's memory HBM2e; the card has 32 GB of GDDR7)."
    )
    requires = Requirements(cuda=True, cpu_smoke=True)
    impact = (
        "LoRA fine-tuning of diffusion transformers such as FLUX on a single 24-32 GB card is where batch "
        "size is chosen; a real per-sample slowdown at batch 2 would make batching cost throughput instead "
        "of buying it, while linear scaling means batch 2 only halves the steps per second."
    )
    seed_gpus = ("RTX 5090",)
    # The model here is a plain-torch block stack; a cliff would come from memory (spills, allocator thrash).
    untested = (
        "the real FLUX pipeline (diffusers/peft or the article's trainer) on a 32 GB card, where memory pressure "
        "may change the per-sample cost",
        "the article itself (not found here: no URL or title), so whether its '2x slower' was per step or per sample",
        "another host CPU, or a CUDA-graphed or compiled step: the timed step holds the host's gaps, which a batch "
        "shares between more samples",
    )
    # The article saw it on an RTX 5090 (sm_120) only: on another architecture the claim is not tested.
    claim_arch = ("12.0",)
    # The article's pipeline never runs here (the seed gives no program): transformer blocks at FLUX's width
    # stands in, so no GPU's ratio answers the article's claim, and the status says so.
    stand_in = "a stand-in model, not the article's FLUX pipeline"
    plots = (
        Plot(
            "batch",
            x="batch",
            x_label="batch size (samples per step)",
            per_x=True,
            y_label="median step time per sample",
        ),
    )
    config_keys = ("batch", "tokens", "hidden", "heads", "depth", "rank", "dtype")
    metric = Metric(
        name="per-sample t(bs2)/t(bs1)",
        description="median step time at batch 2 over batch 1, halved: 1.0 is linear scaling, not a cliff",
        threshold=THRESHOLD,
        threshold_why=THRESHOLD_WHY,
    )

    def variants(self, p: LoraParams) -> list[str]:
        return [f"bs{b}" for b in sorted(set(p.batches))]

    def comparisons(self, p: LoraParams) -> list[Comparison]:
        out = []
        for b in sorted(set(p.batches)):
            if b == 1:
                continue
            out.append(
                Comparison(
                    f"bs{b}/bs1",
                    f"bs{b}",
                    "bs1",
                    THRESHOLD,
                    label=f"per-sample t(batch {b})/t(batch 1)",
                    scale=1.0 / b,
                    headline=b == 2,
                    qualifiers={"batch": b, "memory_cap_gib": p.memory_gb or None},
                )
            )
        return out

    def script(self, p: LoraParams, only: str | None = None) -> str:
        chosen = standalone.comparison_filter(self.comparisons(p), only, self.id)
        pairs = [(c.name, int(c.qualifiers["batch"])) for c in chosen]
        body = f"""
        DEPTH, RANK, TOKENS, HIDDEN, HEADS = {p.depth}, {p.rank}, {p.tokens}, {p.hidden}, {p.heads}
        DTYPE, MEMORY_GB = torch.{p.dtype}, {p.memory_gb!r}
        SCALE = {LORA_SCALE!r}  # alpha / r with alpha = r: a multiply (one kernel) per adapter, as the harness times
        # name -> (in, out) in units of HIDDEN: the projections that carry an adapter.
        PROJECTIONS = {PROJECTIONS!r}
        if MEMORY_GB and DEVICE == "cuda":  # emulate a smaller card, as --set memory_gb does
            total = torch.cuda.get_device_properties(0).total_memory
            torch.cuda.set_per_process_memory_fraction(min(1.0, MEMORY_GB * 2**30 / total))
        torch.manual_seed(0)
        blocks, adapters = [], []
        for _ in range(DEPTH):
            block = {{}}
            for name, (i, o) in PROJECTIONS.items():
                fan_in, fan_out = i * HIDDEN, o * HIDDEN
                w = torch.empty(fan_out, fan_in, device=DEVICE, dtype=DTYPE).normal_(std=fan_in**-0.5)
                bias = torch.zeros(fan_out, device=DEVICE, dtype=DTYPE)
                a = torch.empty(RANK, fan_in, device=DEVICE, dtype=DTYPE)
                torch.nn.init.kaiming_uniform_(a, a=math.sqrt(5))
                a.requires_grad_(True)
                bb = torch.zeros(fan_out, RANK, device=DEVICE, dtype=DTYPE, requires_grad=True)
                block[name] = (w, bias, a, bb)
                adapters += [a, bb]
            blocks.append(block)
        opt = torch.optim.AdamW(adapters, lr=1e-4)


        def proj(h, wts):
            w, bias, a, bb = wts
            return F.linear(h, w, bias) + F.linear(F.linear(h, a), bb) * SCALE


        def forward(x):
            batch, tokens, d = x.shape
            for blk in blocks:
                h = F.layer_norm(x, (d,))
                q, k, v = (proj(h, blk[n]).view(batch, tokens, HEADS, d // HEADS).transpose(1, 2) for n in "qkv")
                o = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(batch, tokens, d)
                x = x + proj(o, blk["out"])
                x = x + proj(F.gelu(proj(F.layer_norm(x, (d,)), blk["up"]), approximate="tanh"), blk["down"])
            return x


        def step_at(batch):
            x = torch.randn(batch, TOKENS, HIDDEN, device=DEVICE, dtype=DTYPE)
            target = torch.randn(batch, TOKENS, HIDDEN, device=DEVICE, dtype=torch.float32)

            def step():
                opt.zero_grad(set_to_none=True)
                F.mse_loss(forward(x).float(), target).backward()
                opt.step()

            return step


        # (comparison, batch): each batch's step against batch 1's
        {standalone.py_assign("PAIRS", pairs)}
        one = step_at(1)
        for label, batch in PAIRS:
            # Per-sample time: t(batch b) / t(batch 1) x 1/b, so linear scaling reads 1.0.
            compare(label, f"step, batch {{batch}}", step_at(batch), "step, batch 1", one, scale=1 / batch)
        """
        return standalone.build(
            self.id, self.title, p, body, imports=("math",), extra_imports=("import torch.nn.functional as F",)
        )

    def run(self, p: LoraParams, ctx: Context) -> RunResult:
        import torch

        torch.manual_seed(0)
        dev = torch.device(ctx.device)
        dtype = getattr(torch, p.dtype)
        notes: list[str] = []
        cap_gib = None
        saved_fraction = 1.0
        parameters: dict[str, int] | None = None
        if p.memory_gb > 0 and not ctx.cuda:
            notes.append(f"memory_gb={p.memory_gb:g} ignored: the allocator cap exists only on CUDA")
        elif p.memory_gb > 0:
            total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
            if p.memory_gb * GIB >= total:
                notes.append(f"memory_gb={p.memory_gb:g} is not below this GPU's {total / GIB:.1f} GiB; no cap set")
            else:
                # Cached blocks from earlier work would count against the cap; start clean.
                # The cap covers the caching allocator only, not the CUDA context (~0.5 GiB
                # on a real card), so it is slightly kinder than the card it emulates.
                gc.collect()
                torch.cuda.empty_cache()
                saved_fraction = _memory_fraction(torch)
                torch.cuda.set_per_process_memory_fraction(p.memory_gb * GIB / total)
                cap_gib = p.memory_gb
        try:
            try:
                blocks, adapters = _build(p, dev, dtype)
            except Exception as exc:  # e.g. the model alone does not fit under the cap
                variants = [
                    ctx.errored(f"bs{b}", f"LoRA step, batch {b}", exc, batch=b) for b in sorted(set(p.batches))
                ]
            else:
                # Counted from the tensors built, so the finding's scope is the stack that ran.
                total = sum(t.numel() for blk in blocks for wts in blk.values() for t in wts)
                parameters = {"total": total, "trainable": sum(a.numel() for a in adapters)}
                variants = self._batches(p, ctx, blocks, adapters, dtype)
        finally:
            if cap_gib is not None:
                torch.cuda.set_per_process_memory_fraction(saved_fraction)
        return RunResult(
            variants=tuple(variants),
            extra={
                "memory_cap_gib": cap_gib,
                "row_qualifiers": {"memory_cap_gib": cap_gib},
                "flops_per_sample": step_flops(p, 1),
                "parameters": parameters,
                "batch_table": [_row(v, next((x for x in variants if x.name == "bs1"), None)) for v in variants],
            },
            notes=tuple(notes),
        )

    def _batches(
        self, p: LoraParams, ctx: Context, blocks: Any, adapters: list[Any], dtype: Any
    ) -> list[VariantResult]:
        """Check each batch size alone (peak memory, retries, out of memory), then time the
        ones that fit in interleaved rounds, so drift hits every batch size alike."""
        import torch

        batches = sorted(set(p.batches))
        opt = torch.optim.AdamW(adapters, lr=1e-4)
        arms: list[Arm] = []
        done: dict[int, VariantResult] = {}
        memory: dict[int, dict[str, Any]] = {}
        for batch in batches:
            untimed = ctx.untimed(f"bs{batch}")  # a quick run neither checks nor times a batch no headline uses
            arm = (
                ctx.skipped(f"bs{batch}", f"LoRA step, batch {batch}", untimed, batch=batch)
                if untimed is not None
                else self._arm(batch, p, ctx, blocks, opt, dtype)
            )
            if isinstance(arm, Arm):
                try:
                    if ctx.cuda:
                        torch.cuda.reset_peak_memory_stats()
                        torch.cuda.reset_accumulated_memory_stats()  # so num_alloc_retries counts this batch
                    arm.fn()
                    ctx.synchronize()
                    arms.append(arm)
                except Exception as exc:  # OOM, or a kernel/plan failure under the cap: this batch only
                    done[batch] = ctx.errored(arm.name, arm.label, exc, **arm.config)
                finally:
                    opt.zero_grad(set_to_none=True)
                memory[batch] = _memory(ctx)
            else:
                done[batch] = arm
            gc.collect()  # an OOM's traceback holds the failed step's tensors until collected
            if ctx.cuda:
                torch.cuda.empty_cache()
        try:
            for v in ctx.measure_paired(arms, group="batches") if arms else []:
                done[int(v.config["batch"])] = v
        except Exception as exc:  # e.g. out of memory once batches share the allocator: all of them
            for a in arms:
                done[int(a.config["batch"])] = ctx.errored(a.name, a.label, exc, **a.config)
        out = []
        for batch in batches:
            v = done[batch]
            extra: dict[str, Any] = {"per_sample_s": v.median / batch if v.timing is not None else None}
            extra.update(memory.get(batch) or _memory_none())
            out.append(dataclasses.replace(v, extra={**v.extra, **extra}))
        return out

    def _arm(self, batch: int, p: LoraParams, ctx: Context, blocks: Any, opt: Any, dtype: Any) -> Arm | VariantResult:
        """One batch size's training step, ready to time (or the error making its inputs)."""
        import torch
        import torch.nn.functional as F

        name, label = f"bs{batch}", f"LoRA step, batch {batch}"
        config: dict[str, Any] = {
            "batch": batch,
            "tokens": p.tokens,
            "hidden": p.hidden,
            "heads": p.heads,
            "depth": p.depth,
            "rank": p.rank,
            "dtype": p.dtype,
        }
        scale = LORA_SCALE
        try:
            x = torch.randn(batch, p.tokens, p.hidden, device=ctx.device, dtype=dtype)
            target = torch.randn(batch, p.tokens, p.hidden, device=ctx.device, dtype=torch.float32)
        except Exception as exc:  # the inputs alone do not fit under the cap
            return ctx.errored(name, label, exc, **config)

        def step() -> None:
            # A training step needs autograd whatever the caller's grad mode is.
            with torch.enable_grad():
                opt.zero_grad(set_to_none=True)
                out = _forward(x, blocks, p.heads, scale)
                F.mse_loss(out.float(), target).backward()
                opt.step()

        work = Work(flops=step_flops(p, batch), ceiling="bf16" if p.dtype == "bfloat16" else "fp32")
        return Arm(name, step, label=label, config=config, work=work)

    def explain(self, p: LoraParams, result: RunResult, outcome: Outcome) -> Finding:
        cap = result.extra.get("memory_cap_gib")
        head = outcome.headline
        if head is None:
            have = {v.name: v for v in result.variants}
            missing = [v for v in (have.get("bs1"), have.get("bs2")) if v is not None and v.timing is None]
            if cap is not None and any(oom(v) for v in missing):
                return Finding("", (f"Under the {cap:g} GiB cap, batch 2 or batch 1 ran out of memory.",))
            return Finding("")
        sentence = f"{lora_sentence(head)}; {scope_clause(p.depth, p.hidden, result)}"
        if kernels := kernel_clause(result, head):
            sentence += f"; {kernels}"
        sag, clocks = clocks_clause(result)
        if sag:
            sentence += f"; {sag}"
        details = tuple(d for d in (memory_sentence(result, cap), clocks) if d)
        return Finding(sentence, details)


def _memory_none() -> dict[str, Any]:
    return {"peak_allocated_bytes": None, "peak_reserved_bytes": None, "num_alloc_retries": None, "num_ooms": None}


# --------------------------------------------------------------------------- verdict pieces


def _memory(ctx: Context) -> dict[str, Any]:
    """Peak allocator use and allocator retries since the batch began; nulls on CPU."""
    if not ctx.cuda:
        return {
            "peak_allocated_bytes": None,
            "peak_reserved_bytes": None,
            "num_alloc_retries": None,
            "num_ooms": None,
        }
    import torch

    st = torch.cuda.memory_stats()
    return {
        "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(),
        "num_alloc_retries": st.get("num_alloc_retries"),
        "num_ooms": st.get("num_ooms"),
    }


def _row(v: VariantResult, bs1: VariantResult | None) -> dict[str, Any]:
    batch = v.config.get("batch")
    per = v.extra.get("per_sample_s")
    per1 = bs1.extra.get("per_sample_s") if bs1 is not None else None
    return {
        "batch": batch,
        "status": v.status if v.status != "error" or not oom(v) else "out of memory",
        "step_ms": v.median * 1e3 if v.timing is not None else None,
        "per_sample_ms": per * 1e3 if per is not None else None,
        "per_sample_vs_bs1": per / per1 if per is not None and per1 else None,
        "tflops": v.achieved.tflops if v.achieved is not None else None,
        "peak_allocated_gib": gib(v.extra.get("peak_allocated_bytes")),
        "peak_reserved_gib": gib(v.extra.get("peak_reserved_bytes")),
        "alloc_retries": v.extra.get("num_alloc_retries"),
    }
