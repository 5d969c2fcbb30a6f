"""fused-adam-capturable's words on its outcome: the backends and their roles, the finding's sentence
(TE's headline, or what ran instead when TE did not), and the details beside it."""

from __future__ import annotations

from collections.abc import Mapping

from repro.api import Outcome, Ratio, VariantResult

BACKENDS: dict[str, str] = {
    "te": "TE FusedAdam",
    "torch_fused": "torch AdamW(fused=True)",
    "torch_foreach": "torch AdamW(foreach=True)",
}
# What each backend's comparison is for. torch's fused path keeps ``step`` on the device whether or not
# ``capturable`` is set, so its two forms launch the same kernels: its ratio is 1 by construction.
ROLES: dict[str, str] = {
    "te": "the seed's subject (headline)",
    "torch_fused": "control: the same kernels in both forms",
    "torch_foreach": "reference: its capturable form launches extra kernels",
}
MODES: dict[str, str] = {
    "regular": "capturable=False, eager",
    "capturable": "capturable=True, eager",
    "capturable_graph": "capturable=True, CUDA graph replay",
}
# The seed's number, quoted in every finding.
SEED_RATIO = 1.9
SEED_SAID = f"the seed's ~{SEED_RATIO}x (TE FusedAdam, GB300)"
# Why torch's backends get no per-kernel rounds by default when TE's FusedAdam does not run: without the
# claim's subject they decide nothing, and they cost seconds of profiled steps and idle gaps.
NO_CONTROL_KERNELS = "not timed per kernel: no per-kernel rounds without TE (--set control_kernels=true adds them)"
# Why torch's backends are not timed at all by default when TE's FusedAdam does not run on a GPU: they
# are its controls, and without it they say nothing about the claim (27 s of a 112 s `repro all` on an H200).
CONTROLS_WITHOUT_TE = (
    "a control of TE's FusedAdam, timed beside it only (--set controls_without_te=true times it anyway)"
)
# What the claim needs that a run may lack: the seed names no TE version.
TE_INSTALL = {
    "module": "transformer_engine",
    "pip": "transformer_engine[pytorch]",
    "note": "a TE build for your CUDA; the seed names no TE version",
}


def _ok(v: VariantResult | None) -> bool:
    return v is not None and v.status == "ok" and v.timing is not None


def finding(outcome: Outcome, have: Mapping[str, VariantResult]) -> tuple[str, tuple[str, ...]]:
    """The sentence on the headline (TE's, what it says of the seed) or, when TE did not run, on what
    ran instead; then the details: other comparisons, the kernel-time split, graph replay."""
    head = outcome.headline
    if head is None:
        sentence = instead(outcome)
    elif outcome.smoke:
        sentence = "whole-step times were compared (no per-kernel timing on CPU)"
    elif head.comparison.name != "te":
        sentence = f"that says nothing about {SEED_SAID}: TE FusedAdam was not measured here"
    elif head.status == "reproduced":
        sentence = f"TE FusedAdam's capturable kernels are slower, as the seed saw (~{SEED_RATIO}x on a GB300)"
    elif head.where == "below":
        sentence = f"so {SEED_SAID} does not hold here"
    else:
        sentence = f"so this run can neither confirm nor rule out {SEED_SAID}"
    if head is not None and head.basis != "kernel" and not outcome.smoke:
        sentence += "; per-kernel samples were missing, so whole-step times were compared"
    details = []
    others = []
    if head is not None:  # without a headline the sentence and the verdict's lead already say all of it
        others = [f"{r.comparison.label or r.comparison.name} {outcome.fmt(r)}" for r in outcome.ratios]
        others = [o for o, r in zip(others, outcome.ratios, strict=True) if r is not head]
        for name, _why in outcome.missing:
            if name in BACKENDS and f"{name}_regular" in have:
                others.append(f"{BACKENDS[name]} not measured ({_short_reason(have, name)})")
    if others:
        details.append(f"Other comparisons: {'; '.join(others)}.")
    split = [x for b in BACKENDS for x in [_split(b, have)] if x]
    if split:
        details.append(
            "From the kernel table of one profiled step of each form, capturable against regular: "
            + "; ".join(split)
            + (
                ". The ratios above, medians over paired rounds of profiled steps, count every kernel a step launches."
                if all(r.basis == "kernel" for r in ([head] if head is not None else outcome.ratios))
                else "."
            )
        )
    for b in BACKENDS:
        graph, reg = have.get(f"{b}_capturable_graph"), have.get(f"{b}_regular")
        if graph is not None and _ok(graph) and reg is not None and _ok(reg):
            details.append(
                f"{BACKENDS[b]}: graph replay of the capturable step took "
                f"{graph.median / reg.median:.2f}x the eager regular step."
            )
    return sentence, tuple(details)


def instead(outcome: Outcome) -> str:
    """What ran in place of TE's FusedAdam, each comparison with its role; none of it tests the claim."""
    parts = []
    for b in ("torch_foreach", "torch_fused"):
        kern, step = outcome.get(b), outcome.get(f"{b}_step")
        if kern is None and step is None:
            continue
        said = [f"kernel time per step {_fmt(outcome, kern)}"] if kern is not None else []
        said += [f"whole step {_fmt(outcome, step)}"] if step is not None else []
        parts.append(f"{BACKENDS[b]} ({ROLES[b]}): {', '.join(said)}")
    if not parts and any(CONTROLS_WITHOUT_TE in why for _, why in outcome.missing):
        return f"nothing was timed: each of torch's AdamW backends is {CONTROLS_WITHOUT_TE}"
    ran = "; ".join(parts) if parts else "no torch backend has both forms measured"
    if any(why == NO_CONTROL_KERNELS for _, why in outcome.missing):
        ran += f" ({NO_CONTROL_KERNELS.split(': ', 1)[1]})"
    return f"{ran}; none of these is TE's FusedAdam, so they say nothing about {SEED_SAID}"


def _fmt(outcome: Outcome, r: Ratio) -> str:
    said = outcome.fmt(r)
    return said if r.basis == r.comparison.basis else f"{said} (whole steps: no kernel samples)"


def _split(backend: str, have: Mapping[str, VariantResult]) -> str | None:
    """All kernels against the multi-tensor kernels alone, for one backend, from its variants' extra."""
    cap, reg = have.get(f"{backend}_capturable"), have.get(f"{backend}_regular")
    if cap is None or reg is None:
        return None
    nums = [x.extra.get(k) for k in ("step_kernels_us", "multi_tensor_kernels_us") for x in (cap, reg)]
    if not all(isinstance(n, int | float) and n > 0 for n in nums):
        return None
    a_cap, a_reg, m_cap, m_reg = (float(n) for n in nums)  # type: ignore[arg-type]
    return (
        f"{BACKENDS[backend]} all kernels {a_cap / 1e3:.4g}/{a_reg / 1e3:.4g} ms ({a_cap / a_reg:.3f}x), "
        f"multi-tensor (Adam) kernels only {m_cap / 1e3:.4g}/{m_reg / 1e3:.4g} ms ({m_cap / m_reg:.3f}x)"
    )


def _short_reason(have: Mapping[str, VariantResult], backend: str) -> str:
    for m in MODES:
        v = have.get(f"{backend}_{m}")
        if v is not None and v.status != "ok":
            reason = v.reason or v.status
            return reason if len(reason) <= 120 else reason[:117] + "..."
    return "incomplete"
