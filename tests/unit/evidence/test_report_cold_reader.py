"""The H200 run an outside maintainer read cold (artifacts/reference/h200/evidence2, their list in
cold-reader-questions.md), rendered again with today's prose (``with_catalog_prose``), as this harness would
write the same numbers: each item they flagged is answered from the artifact's numbers."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from evidence_run import by_id, section, with_catalog_prose
from helpers import ROOT

from repro.core.claim import not_tested_here
from repro.core.results import Verdict
from repro.evidence import artifact, bundle
from repro.evidence.report import PASTE_LIMIT, PASTE_LINES, REPORT_LIMIT, report
from repro.run import scripts

RUN = ROOT / "artifacts" / "reference" / "h200" / "evidence2" / "all" / "20261201T140815Z-ef07ad"


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return with_catalog_prose([artifact.load(p) for p in artifact.expand([RUN])])


@pytest.fixture(scope="module")
def rendered(docs: list[dict[str, Any]]) -> str:
    return report(docs, declared=scripts.declared(docs))


def visible(text: str, rid: str) -> str:
    return str(section(text, rid)).split("<details>", 1)[0]


def line(text: str, start: str) -> str:
    return next(ln for ln in text.splitlines() if ln.startswith(start))


def test_the_report_fits_one_screen_keeping_every_section(rendered: str) -> None:
    assert len(rendered) <= PASTE_LIMIT and rendered.count("\n") + 1 <= PASTE_LINES
    # Every repro keeps its section; the machine's block stays or the note names it as left out, and the
    # bundle's report-full.md has whatever is left out.
    assert "Report cut" not in rendered and rendered.count("## `") >= 5
    note = next((ln for ln in rendered.splitlines() if ln.startswith("_Left out here")), "")
    machine = "<details><summary>machine A: fingerprint, GPU state, libraries</summary>" in rendered
    assert machine != ("the environment" in note)
    assert not note or "report-full.md" in note or "`repro report --full`" in note  # a re-render: its own full form


def test_lora_off_its_seeds_architecture_is_inconclusive_as_5090_linear(docs: list[dict[str, Any]]) -> None:
    from repro.repros.lora_batch import LoraBatchScaling

    doc = by_id(docs, "lora-batch-scaling")
    raw = doc["verdict"]
    fields = {**raw, "breakdown": tuple(raw["breakdown"]), "details": tuple(raw["details"])}
    fields["variants"] = tuple(raw["variants"])
    gpu = doc["fingerprint"]["gpu"]
    v = not_tested_here(Verdict(**fields), LoraBatchScaling.claim_arch, gpu["compute_capability"], gpu["name"])
    assert v.status == "inconclusive" and v.claim is not None and v.claim["tested"] is False
    doc["verdict"] = artifact.to_jsonable(v)
    doc["repro"]["claim_arch"] = ["12.0"]
    assert artifact.validation_errors(doc) == []
    row = line(report([doc]), "| lora-batch-scaling")
    assert "| **inconclusive** (suspect) | not tested: not on this architecture | 0.93x (95% CI 0.92-0.96) |" in row
    said = visible(report([doc]), "lora-batch-scaling")
    assert "instead, on this GPU: per-sample t(batch 2)/t(batch 1) was 0.93x" in said


def test_a_baseline_skipped_by_design_is_not_listed_as_not_tested(rendered: str, docs: list[dict[str, Any]]) -> None:
    scope = rendered.split("## Not tested here", 1)[1].split("\n\n**Re-run**", 1)[0]
    assert "graph-memset: nothing" not in scope and "mm_only is the no-op baseline" not in rendered
    assert "fused-adam-capturable: TE FusedAdam (capturable=False, eager;" in scope  # what a comparison lacked
    # A comparison that needed the skipped variant makes it "not tested" again.
    doc = by_id(docs, "graph-memset")
    reason = doc["variants"][0]["reason"]
    doc["verdict"]["not_run"] = [{"comparison": "empty", "label": "empty", "reason": f"variant empty: {reason}"}]
    assert "graph-memset: nothing (skipped: an empty graph" in report([doc])


def test_a_filtered_kernel_ratio_comes_with_the_whole_step_ratio(docs: list[dict[str, Any]]) -> None:
    rendered = report(docs, limit=10**9, max_lines=None)  # whole: the pasted one may leave the tables out
    row = line(rendered, "| fused-adam-capturable")
    assert "| 1.002x (95% CI 1.001-1.003), whole steps 1.003x (ratio of medians) |" in row
    adam = section(rendered, "fused-adam-capturable")
    assert "capturable/regular was 1.002x (95% CI 1.001-1.003), whole steps 1.003x (ratio of medians)" in adam
    # 109.5 ms against 93.9 ms: capturable foreach steps were slower, whatever the filtered kernels say.
    assert "| torch_foreach | 0.89x (0.89-0.90); whole steps 1.17x | no | 12 |" in adam
    assert "leaving out `elementwise_kernel<gpu_kernel_impl_nocast<BinaryFunctor<DivFunctor>>>` (25.4 ms/step" in adam
    assert "Other backends, capturable/regular" not in adam  # the table says it, with the whole steps


def test_the_n_column_counts_what_the_median_is_taken_over(rendered: str, docs: list[dict[str, Any]]) -> None:
    timing = by_id(docs, "5090-linear")["variants"][0]["timing"]
    assert (timing["stats"]["n"], len(timing["rounds"]), len(timing["samples"])) == (102, 102, 306)
    # The variants tables: in the report as written beside the bundle (no paste limit).
    full = report(docs, limit=REPORT_LIMIT, max_lines=None)
    assert "| nn.Linear (FP32) | 1.28 ms (1.28-1.29 ms) | 102 rounds |" in section(full, "5090-linear")
    assert "| twin: fill kernel node | 618 ns (618-618 ns) | 500 samples |" in section(full, "graph-memset")
    assert "n: rounds (each a median of samples) or samples." in full


def test_the_memset_kernel_diff_says_it_is_not_the_twins(rendered: str) -> None:
    memset = visible(rendered, "graph-memset")
    kernels = line(memset, "- Kernels")
    assert kernels.startswith("- Kernels of a profiled pair (the headline's was not profiled): fill kernel (zero")
    assert line(visible(rendered, "solve-512-cliff"), "- Kernels").startswith("- Kernels, solve_ex 128x511x511")


def test_the_memset_impact_states_the_per_op_cost_from_the_medians(docs: list[dict[str, Any]]) -> None:
    # The Impact line: in the report as written beside the bundle (a pasted one may leave it out to fit).
    full = report(docs, declared=scripts.declared(docs), limit=REPORT_LIMIT, max_lines=None)
    impact = line(visible(full, "graph-memset"), "- Impact: ")
    assert "can vanish" not in impact and "per call" not in impact
    assert (
        "Here: +307 ns per op (925 ns against 618 ns); where it did not hold, per op: +33.7 ns (torch graph), "
        in impact
    )
    # (memset+mm) - (fill+mm) = 34.18 us - 32.95 us: the penalty grew while the ratio shrank to 1.04x.
    assert "+1.23 us (torch graph, with matmul), +1.31 us (pure CUDA twin, with work kernel)." in impact


def test_5090_linear_asserts_nothing_unmeasured_and_diffs_denominator_to_numerator(rendered: str) -> None:
    linear = visible(rendered, "5090-linear")
    assert "never from" not in rendered and "moves a ratio by percents" not in rendered
    # The headline is t(nn.Linear)/t(manual): from the manual form (1168.988 + 114.399 us of kernels per
    # call) to nn.Linear (1176.989 us); the CUDA-event medians (1.38 and 1.28 ms) are another measure, shown beside.
    head = "- Kernels, x @ w.t() + b (FP32) -> nn.Linear (FP32) (kernel time per call 1.28 ms -> 1.18 ms; timed 1.38 ms"
    assert head in linear


def test_a_seed_without_a_url_says_so_and_keeps_its_source(rendered: str) -> None:
    assert "no link recorded" not in rendered
    thread = "NVIDIA forums thread 'Slowdown in CUDA graph execution using cudaMemsetAsync (vs. a fill kernel)'"
    assert f"- Seed claim ({thread}; the seed gives no URL): in a CUDA graph" in rendered
    assert "- Seed claim (the seed gives no URL): An article on FLUX LoRA fine-tuning on an RTX 5090" in rendered


def test_the_attach_line_names_the_traces_per_repro(roomy: str, docs: list[dict[str, Any]]) -> None:
    attach = line(roomy, "_The CI covers").split("_Attach ", 1)[1]
    assert "traces of every repro (not of graph-memset's CUDA twin: CUDA events only);" in attach
    doc = by_id(docs, "5090-linear")
    for v in doc["variants"]:
        v.update(kernels=[], profiled_iterations=0)
    assert "no traces; none of 5090-linear (not profiled)" in report([doc])
    two = [doc, by_id(docs, "graph-memset")]
    assert "traces of graph-memset (not of graph-memset's CUDA twin" in report(two)
    assert "; none of 5090-linear (not profiled)" in report(two)
    # A twin that recorded no nsys on the machine says why it has no trace; one from before says nothing.
    memset = by_id(docs, "graph-memset")
    memset["extra"]["twin"]["nsys"] = None
    assert "CUDA twin: CUDA events only, no nsys here" in report([memset])
    memset["extra"]["twin"]["nsys"] = "/usr/local/cuda/bin/nsys"
    assert "CUDA twin: CUDA events only);" in report([memset])


def test_the_bundle_keeps_a_trace_named_by_joined_groups(tmp_path: Path) -> None:
    run = tmp_path / RUN.name
    (run / "traces").mkdir(parents=True)
    shutil.copy(RUN / "5090-linear.json", run / "5090-linear.json")
    shutil.copytree(RUN / "traces" / "5090-linear", run / "traces" / "5090-linear")
    _, planned = bundle.plan(run)
    names = [m[0] for m in planned.members]
    assert f"{RUN.name}/traces/5090-linear/fp32+tf32.trace.json.gz" in names
