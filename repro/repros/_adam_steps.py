"""fused-adam-capturable's kernel-time rules: what counts as a step's device time, the multi-tensor
kernels a profiler table read by name picks out, and the seed's own method (6 profiled steps)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from repro.api import Context, VariantResult, short_kernel

# Kernel names a profiler table read by name gives to an Adam step: torch's fused AdamW runs
# multi_tensor_apply_kernel<FusedOptimizerTensorListMetadata<4>, FusedAdamMathFunctor<...>>, its
# foreach path multi_tensor_apply_kernel<..., *Functor> for every _foreach_* op, TE
# multi_tensor_apply_kernel<..., AdamFunctor / AdamCapturableFunctor>. A step launches more than
# these: torch's capturable foreach step divides by its device-side bias corrections with one
# elementwise_kernel<..., DivFunctor> per tensor (full-size math, not bookkeeping), and TE's
# capturable step fills and copies its step counter and overflow buffer. So these names are
# recorded beside the step's kernel time, never used for it.
MULTI_TENSOR_KEYS = ("adam", "multi_tensor", "foreach")
# The seed's method: "Adam kernel time from the profiler over 6 steps", one optimizer then the other.
SEED_STEPS = 6
SEED_METHOD = (
    f"{SEED_STEPS} consecutive steps of one form profiled, then {SEED_STEPS} of the other; the multi-tensor "
    "kernels' device time per step, where the seed's program takes the mean per launch of its kernels named adam; "
    "capturable over regular"
)
STEP_KERNELS = "every kernel, memset and copy launched inside the step's profiled range"
_CAPTURABLE_WARNING = r"This instance was constructed with capturable=True"


def step_kernel(name: str) -> bool:
    """Every piece of device work in a step's range counts toward its kernel time (``name`` unused)."""
    del name
    return True


def multi_tensor_kernel(name: str) -> bool:
    """Whether a device kernel's name is one of the multi-tensor (Adam) kernels (see MULTI_TENSOR_KEYS)."""
    low = name.lower()
    return any(key in low for key in MULTI_TENSOR_KEYS)


def per_step_us(v: VariantResult, match: Callable[[str], bool] = step_kernel) -> float | None:
    """Device time (us) per step of ``v``'s kernels whose names ``match``, from its kernel table
    (one profiled call); None without a CUDA kernel table."""
    if v.status != "ok" or not v.kernels or v.kernel_source != "cuda":
        return None
    return sum(k.mean_us * k.per_call for k in v.kernels if match(k.name))


def kernel_split(v: VariantResult) -> dict[str, Any]:
    """What a reader needs to see the step's kernel time against the multi-tensor kernels alone:
    both per-step times (us) from the kernel table, and the launches per step the second leaves out."""
    others = [k for k in v.kernels if not multi_tensor_kernel(k.name)]
    top = max(others, key=lambda k: k.mean_us * k.per_call, default=None)
    return {
        "step_kernels_us": per_step_us(v),
        "multi_tensor_kernels_us": per_step_us(v, multi_tensor_kernel),
        "other_launches_per_step": sum(k.per_call for k in others),
        "other_kernels": len(others),
        # The one of them with the most device time a step: what the extra launches mostly are.
        **(
            {
                "other_top": short_kernel(top.name),
                "other_top_us": top.mean_us * top.per_call,
                "other_top_launches": top.per_call,
            }
            if top is not None
            else {}
        ),
    }


def seed_method(ctx: Context, steps: Mapping[str, Callable[[], Any]]) -> dict[str, float]:
    """The seed's method on ``steps`` ({"capturable": fn, "regular": fn}): for each form in turn, one
    profiler session of SEED_STEPS consecutive steps; the multi-tensor kernels' device time summed
    over them and divided by SEED_STEPS. Returns both per-step times (s) and their ratio."""
    mean: dict[str, float] = {}
    for form in ("capturable", "regular"):
        got = ctx.kernel_rounds({form: steps[form]}, SEED_STEPS, multi_tensor_kernel)[form]
        mean[form] = sum(got) / SEED_STEPS
    ratio = mean["capturable"] / mean["regular"] if mean["regular"] > 0 else float("nan")
    return {"capturable_s": mean["capturable"], "regular_s": mean["regular"], "ratio": ratio}


def seed_entry(comparison: str, label: str, subject: bool, got: Mapping[str, float]) -> dict[str, Any]:
    """One entry of the artifact's ``extra["seed_method"]``: whose steps, whether they are the seed's
    subject, and the seed-method numbers beside the comparison (``comparison``) that measured ours."""
    return {"comparison": comparison, "label": label, "subject": subject, "steps": SEED_STEPS, **got}


def _top(entry: Mapping[str, Any]) -> str:
    """``, most of their time N x kernel (X ms a step)`` where the capturable form's split recorded it."""
    name, us, n = entry.get("other_top"), entry.get("other_top_us"), entry.get("other_top_launches")
    if not isinstance(name, str) or not isinstance(us, int | float) or not isinstance(n, int | float):
        return ""
    return f", most of their time {n:g} x {name} ({us / 1e3:.3g} ms a step)"


def seed_method_note(entries: Sequence[Mapping[str, Any]]) -> str:
    """One sentence on why the seed's method and ours differ, from what this run recorded."""
    words = (
        "The seed's program averages the device time per launch of the kernels named adam (torch's foreach ones "
        "have none: here adam, multi_tensor or foreach names are summed per step, which is per launch times "
        f"launches per step); ours counts {STEP_KERNELS}, in paired rounds"
    )
    split = [e for e in entries if e.get("other_launches") and e.get("label")]
    if split:
        said = ", ".join(f"{e['label']} ({e['other_launches']:g} per capturable step{_top(e)})" for e in split)
        words += f", so the two part where a capturable step launches other kernels: {said}"
    return words + "."


def first_step(opt: Any) -> None:
    """One step outside any timing: allocates the moments and spends torch's one-time warning.

    torch warns once per instance when a capturable optimizer steps outside graph
    capture; the eager capturable variant does exactly that on purpose.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_CAPTURABLE_WARNING)
        opt.step()


def free_gpu_bytes() -> int | None:
    """Free memory on the current GPU, or None where it cannot be read."""
    try:
        import torch

        return int(torch.cuda.mem_get_info()[0])
    except Exception:  # no readable CUDA device: do not guess, let the run try
        return None


def run_bytes(n_tensors: int, numel: int) -> int:
    """The run's fp32 sets in bytes (``no_room``): params, grads, two optimizers' two moments, foreach's
    temporaries."""
    return 7 * 4 * n_tensors * numel


def no_room(n_tensors: int, numel: int) -> str | None:
    """Why this GPU cannot hold the run's fp32 sets, with a numel that fits; None when it can (or free
    memory cannot be read). The sets: params, grads and two optimizers' moments (regular and capturable
    live at once, so their steps can be interleaved), and one more for the foreach path's temporaries."""
    need = run_bytes(n_tensors, numel)
    free = free_gpu_bytes()
    if free is None or need <= free:
        return None
    fit = max(1, int(numel * free / need))
    return (
        f"needs about {need / 2**30:.0f} GiB of GPU memory, {free / 2**30:.0f} GiB free; "
        f"try --set numel={fit} (or fewer n_tensors)"
    )
