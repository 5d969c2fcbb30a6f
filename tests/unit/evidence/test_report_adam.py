"""fused-adam-capturable's report lines from its artifact: no headline when TE did not run, the seed's
method beside ours, and the TE install line (the H200 evidence3 artifact, re-judged by this tree and
given the fields a run of this tree records; the seed-method numbers below are synthetic)."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest
from evidence_run import section
from helpers import ROOT

from repro.core.results import RunResult, VariantResult, from_jsonable
from repro.evidence import artifact, band
from repro.evidence.artifact import to_jsonable, validation_errors
from repro.evidence.report import report
from repro.repros._adam_steps import SEED_METHOD, STEP_KERNELS, kernel_split, seed_entry, seed_method_note
from repro.repros._adam_words import TE_INSTALL
from repro.repros.fused_adam import AdamParams, FusedAdamCapturable

RID = "fused-adam-capturable"
RUN = ROOT / "artifacts" / "reference" / "h200" / "evidence3" / "all" / "20261201T162744Z-bc9a25"


def _rejudged(extra: dict[str, Any]) -> dict[str, Any]:
    """The committed H200 artifact with its variants re-judged by this tree's verdict, and ``extra`` added."""
    doc = artifact.load(RUN / f"{RID}.json")
    variants = [from_jsonable(VariantResult, v) for v in doc["variants"]]
    variants = [dataclasses.replace(v, extra={**v.extra, **kernel_split(v)}) if v.kernels else v for v in variants]
    params: dict[str, Any] = {k: tuple(x) if isinstance(x, list) else x for k, x in doc["repro"]["params"].items()}
    full = {k: x for k, x in doc["extra"].items() if k != "kernel_match"}  # this tree records kernel_counted
    full = {**full, "kernel_counted": STEP_KERNELS, **extra}
    verdict = FusedAdamCapturable().verdict(AdamParams(**params), RunResult(variants=tuple(variants), extra=full))
    return {
        **doc,
        "schema_version": artifact.ARTIFACT_SCHEMA_VERSION,
        "variants": [to_jsonable(v) for v in variants],
        "verdict": to_jsonable(verdict),
        "extra": full,
    }


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    seeds = [
        {**seed_entry("torch_fused", "torch AdamW(fused=True)", False, {"ratio": 1.0004}), "other_launches": 0.0},
        {**seed_entry("torch_foreach", "torch AdamW(foreach=True)", False, {"ratio": 0.8941}), "other_launches": 402.0},
    ]
    extra = {
        "claim_needs": dict(TE_INSTALL),
        "seed_method": seeds,
        "seed_method_how": SEED_METHOD,
        "seed_method_note": seed_method_note(seeds),
    }
    return _rejudged(extra)


def test_without_te_the_artifact_has_no_headline_value_and_still_validates(doc: dict[str, Any]) -> None:
    assert validation_errors(doc) == []
    v = doc["verdict"]
    assert v["status"] == "inconclusive" and v["value"] is None and v["headline"] == "te"
    assert band.key_of(doc) is None  # no headline number: nothing joins or reads a re-run band
    # The schema lets an inconclusive verdict go without a value only when the claim was not tested.
    tested = {**doc, "verdict": {**v, "claim": {"tested": True, "reason": None}}}
    assert validation_errors(tested) != []


def test_the_summary_reads_no_headline_and_the_section_says_what_ran(doc: dict[str, Any]) -> None:
    text = report([doc])
    lines = text.splitlines()
    row = next(ln for ln in lines if ln.startswith(f"| {RID} |"))
    head = next(ln for ln in lines if ln.startswith("| repro |"))
    cells = dict(zip([h.strip() for h in head.split("|")], [c.strip() for c in row.split("|")], strict=True))
    assert cells["status"] == "**inconclusive**" and "1.000x" not in row
    assert cells["headline ratio (CI)"] == "not run (`transformer_engine` not importable)"
    assert cells["earlier runs landed within (other GPUs; same GPU)"] == "-"
    sec = section(text, RID)
    said = (
        "the seed's claim was not tested (TE FusedAdam: kernel time per step, capturable/regular: "
        "variant te_capturable was skipped: transformer_engine.pytorch is not importable"
    )
    assert said in sec and doc["verdict"]["finding"].startswith("Inconclusive, " + said)
    note = "_Ratios on basis kernel: profiler time per step of every kernel, memset and copy launched inside the step"
    assert note in sec and "leaving out" not in sec
    said = "torch AdamW(foreach=True) (reference: its capturable form launches extra kernels): kernel time per step"
    assert said in sec
    assert "torch AdamW(fused=True) (control: the same kernels in both forms)" in sec
    assert "differs beyond the band" not in sec
    # The split the H200's kernel tables give: all kernels against the multi-tensor kernels alone
    assert "torch AdamW(foreach=True) all kernels 104.8/88.82 ms (1.180x), multi-tensor (Adam) kernels only" in sec


def test_the_seed_method_line_shows_both_numbers_and_why_they_differ(doc: dict[str, Any]) -> None:
    sec = section(report([doc]), RID)
    line = next(ln for ln in sec.splitlines() if ln.startswith("- The seed's method, re-run here"))
    rows = {r["comparison"]: r for r in doc["verdict"]["breakdown"]}
    ours = rows["torch_foreach"]["ratio"]
    assert "applied to what is not the seed's subject: torch AdamW(fused=True) 1.000x (ours " in line
    assert f"torch AdamW(foreach=True) 0.894x (ours {ours:.3f}x)" in line
    why = next(ln for ln in sec.splitlines() if ln.startswith("- Why the seed's method and ours differ:"))
    assert "The seed's program averages the device time per launch of the kernels named adam (torch's foreach" in why
    assert "torch AdamW(foreach=True) (402 per capturable step)" in why
    assert "on the seed's subject" not in line  # TE did not run


def test_the_rerun_line_names_the_te_install_the_claim_needs(doc: dict[str, Any]) -> None:
    sec = section(report([doc]), RID)
    assert (
        "To test the seed's claim, the re-run needs `transformer_engine` installed: "
        "`pip install 'transformer_engine[pytorch]'` (a TE build for your CUDA; the seed names no TE version)."
    ) in sec
    # Older artifacts record the standalone script's memory only, and say whose it is.
    sized = {**doc, "extra": {**doc["extra"], "claim_needs": {**TE_INSTALL, "gpu_memory_gib": 94.2}}}
    assert (
        "(a TE build for your CUDA; the seed names no TE version; about 94.2 GiB of GPU memory at these sizes for its "
        "standalone script)."
    ) in section(report([sized]), RID)
    needs = {**TE_INSTALL, "run_gpu_memory_gib": 109.9, "gpu_memory_gib": 94.2, "seed_gpu_memory_gib": 62.8}
    both = {**doc, "extra": {**doc["extra"], "claim_needs": needs}}
    assert (
        "about 109.9 GiB of GPU memory at these sizes (its standalone script: about 94.2 GiB; the seed's program, one "
        "form at a time: about 62.8 GiB))."
    ) in section(report([both]), RID)  # an H200: room enough
    # On a GPU with less memory than the run holds, the line says so and how to size it down.
    small = copy.deepcopy(both)
    small["fingerprint"]["gpu"]["memory_total_bytes"] = 85_045_706_752
    assert (
        "about 62.8 GiB), more than this GPU's 79.2 GiB (about 130 of its 201 tensors fit in 90% of it): "
        "`--set n_tensors=...` or a larger GPU)."
    ) in section(report([small]), RID)
    # A malformed requirement in the open extra is not rendered as a command
    bad = {**doc, "extra": {**doc["extra"], "claim_needs": {**TE_INSTALL, "pip": "te; rm -rf /"}}}
    assert "pip install 'te" not in report([bad]) and "needs `transformer_engine` installed." in report([bad])
