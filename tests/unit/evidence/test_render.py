"""The GitHub report: tables and details survive GitHub's renderer, the size limit holds, kernels are diffed."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, TESTS

from repro.core.context import SamplingConfig
from repro.core.results import Kernel, VariantResult
from repro.evidence import markdown, model, variants
from repro.evidence.report import PASTE_LIMIT, PASTE_LINES, REPORT_LIMIT, report
from repro.run.execute import RunRequest, execute

PLUGINS = TESTS / "plugins"


@pytest.fixture(scope="module")
def smoke_doc(tmp_path_factory: pytest.TempPathFactory, fast: SamplingConfig) -> dict[str, Any]:
    from repro.evidence.artifact import new_run_id

    run_dir = tmp_path_factory.mktemp("r") / new_run_id()
    run_dir.mkdir()
    doc, _ = execute(RunRequest("5090-linear", smoke=True, sampling=fast), run_dir)
    return doc


@pytest.fixture
def full_doc(smoke_doc: dict[str, Any]) -> dict[str, Any]:
    """The smoke artifact as a full run would be reported (a smoke report leaves the details out)."""
    doc: dict[str, Any] = json.loads(json.dumps(smoke_doc))
    doc["run"]["smoke"] = False
    return doc


def test_report_has_summary_sections_details_and_environment(full_doc: dict[str, Any]) -> None:
    text = report([full_doc])
    assert text.startswith("# gpu-repro report: run ")
    assert "| repro " in text and "| 5090-linear " in text
    assert "| variant " in text and "nn.Linear (FP32)" in text
    assert markdown.text(full_doc["verdict"]["finding"]) in text
    assert "- Kernels, " in text  # the verdict's pair, diffed
    assert "<details><summary>5090-linear: tables, warnings, time</summary>\n\n" in text
    assert "<details><summary>machine A: fingerprint, GPU state, libraries</summary>" in text
    run_id = full_doc["run"]["run_id"]
    assert f"pip install './{run_id}/harness/gpu_repro-" in text and "\nrepro run 5090-linear" in text
    assert len(text) <= PASTE_LIMIT and text.count("\n") < PASTE_LINES
    assert "_Smoke run:" not in text


def test_report_leaves_out_the_largest_details_first_and_says_so(full_doc: dict[str, Any]) -> None:
    big = json.loads(json.dumps(full_doc))
    big["verdict"]["details"] = ["a long sentence of the repro's own " * 700]
    text = report([big])
    assert len(text) <= PASTE_LIMIT
    # The bulk goes first (here the side measurement); the details block stays, compact.
    assert "report-full.md`: side measurements, variants tables, plots, times (" in text
    assert "<details><summary>5090-linear: tables" in text and "a long sentence" not in text
    huge = json.loads(json.dumps(big))
    huge["verdict"]["breakdown"] = [dict(huge["verdict"]["breakdown"][0], comparison=f"c{i}") for i in range(400)]
    text = report([huge])
    assert len(text) <= PASTE_LIMIT and "report-full.md`: side measurements" in text
    # too large: the details block goes whole
    assert (
        "in the bundle's `report-full.md`: " in text and "the details of 5090-linear" in text
    )  # too large: it goes whole
    assert "| 5090-linear " in text and "<summary>machine A:" in text  # the summary and the environment stay


def test_kernel_diff_names_appearing_disappearing_and_changed() -> None:
    def variant(*kernels: tuple[str, float]) -> VariantResult:
        rows = tuple(Kernel(name, 1, us, us, 1.0) for name, us in kernels)
        return VariantResult(name="v", label="v", config={}, status="ok", kernels=rows)

    a = variant(("gemm_a", 10.0), ("bias_add", 2.0))
    b = variant(("gemm_a", 20.0), ("gemm_epilogue", 5.0))
    lines = variants.kernel_diff(a, b)
    assert any(ln.startswith("+ `gemm_epilogue` appears") for ln in lines)
    assert any(ln.startswith("- `bias_add` disappears") for ln in lines)
    assert any(ln.startswith("~ `gemm_a` 10.0 -> 20.0") for ln in lines)


def test_kernel_diff_gives_launches_and_time_per_launch_when_the_launch_count_changes() -> None:
    def variant(*kernels: tuple[str, int, float]) -> VariantResult:
        # One profiled call: count launches of mean_us each, per_call = count.
        rows = tuple(Kernel(name, n, n * us, us, float(n)) for name, n, us in kernels)
        return VariantResult(name="v", label="v", config={}, status="ok", kernels=rows)

    # bs1 -> bs2 as the H200 lora run recorded it: 42 launches of 129.7 us, then 38 of 267.6 us.
    a = variant(("gemm_nnn", 42, 129.7), ("sdpa", 4, 1198.1))
    b = variant(("gemm_nnn", 38, 267.6), ("sdpa", 4, 2226.8))
    lines = variants.kernel_diff(a, b)
    assert "~ `gemm_nnn` 5447.4 -> 10168.8 us/call (42 -> 38 launches/call, 129.7 -> 267.6 us each)" in lines
    # The same launch count: the per-call times say it all, nothing is added.
    assert "~ `sdpa` 4792.4 -> 8907.2 us/call" in lines


def _grid_doc(smoke_doc: dict[str, Any], smoke: bool) -> dict[str, Any]:
    """A 10-variant grid like solve-512-cliff's smoke run (b2/b4 x n30..34), built from a real artifact."""
    doc: dict[str, Any] = json.loads(json.dumps(smoke_doc))
    template = doc["variants"][0]
    variants = []
    for batch in (2, 4):
        for n in range(30, 35):
            v = json.loads(json.dumps(template))
            v["name"] = v["label"] = f"default_b{batch}_n{n}"
            v["config"] = {"backend": "default", "batch": batch, "n": n}
            # Each variant gets its own kernel so any pairing shows up in the diff.
            v["kernels"] = [dict(template["kernels"][0], name=f"getrf_b{batch}_n{n}")]
            variants.append(v)
    doc["variants"] = variants
    doc["verdict"]["variants"] = ["default_b4_n32", "default_b4_n31"]
    doc["run"]["smoke"] = smoke
    doc["warnings"] = [f"{v['name']}: median CI half-width 2% did not reach the 1% target" for v in variants]
    return doc


def test_kernel_diff_pairs_only_the_verdicts_pair_and_the_same_contrast(smoke_doc: dict[str, Any]) -> None:
    doc = _grid_doc(smoke_doc, smoke=False)
    pairs = [(a.name, b.name) for a, b in variants.diff_pairs(model.run_of(doc))]
    assert pairs[0] == ("default_b4_n31", "default_b4_n32")
    # Besides the verdict's pair, only n=31 -> n=32 at another setting (the same contrast).
    assert pairs[1:] == [("default_b2_n31", "default_b2_n32")]
    # Without a named pair only variants one config value apart are paired, never b2_n30 -> b4_n34.
    doc["verdict"]["variants"] = None
    for a, b in variants.diff_pairs(model.run_of(doc)):
        assert len(variants._contrast(a, b)) == 1, (a.name, b.name)


def test_smoke_report_of_a_ten_variant_run_is_compact(smoke_doc: dict[str, Any]) -> None:
    grid = _grid_doc(smoke_doc, smoke=True)
    text = report([smoke_doc, grid])
    assert len(text) < 12_000, len(text)
    assert "to fit one screen" not in text and "## Environment" not in text  # a smoke run has no machine to describe
    assert "_Smoke run: shrunken sizes" in text
    assert "| default_b4_n32 " in text and "| default_b2_n30 " not in text  # only the verdict's pair is tabled
    assert "- Kernels, " not in text and "Script: `" not in text  # nothing of a smoke run is evidence
    assert "did not reach the 1% target (default_b2_n30, default_b2_n31, default_b2_n32" in text  # one line, grouped
    full = report([_grid_doc(smoke_doc, smoke=False)])
    assert "<details>" in full and "- Kernels, default_b4_n31 -> default_b4_n32 (kernel time per call " in full


def test_table_cells_escape_pipes() -> None:
    assert markdown.md_cell("a|b\nc") == "a\\|b c"


@pytest.mark.skipif(shutil.which("cmark-gfm") is None, reason="cmark-gfm not installed (CI installs it)")
def test_github_renderer_keeps_tables_and_details(full_doc: dict[str, Any]) -> None:
    text = report([full_doc])
    html = subprocess.run(
        ["cmark-gfm", "-e", "table", "--unsafe"], input=text, capture_output=True, text=True, check=True
    ).stdout
    assert html.count("<table>") >= 3  # summary, variants, comparisons
    assert "<th>repro</th>" in html and "<td>5090-linear</td>" in html
    assert html.count("<details>") == text.count("<details>") >= 2
    # the blank line after <summary> makes the body markdown: the machine's list renders as a list
    assert "libraries</summary>\n<p><strong>Machine A</strong>" in html
    assert "<pre><code>Versions of relevant libraries:" in html or "collect_env" in html


REFERENCE_REPORTS = sorted((ROOT / "artifacts" / "reference").rglob("report.md"))


@pytest.mark.skipif(shutil.which("cmark-gfm") is None, reason="cmark-gfm not installed (CI installs it)")
@pytest.mark.parametrize("path", REFERENCE_REPORTS, ids=[p.parent.parent.name for p in REFERENCE_REPORTS])
def test_committed_reports_fit_and_render_on_github(path: Path) -> None:
    text = path.read_text()
    assert len(text) <= REPORT_LIMIT
    html = subprocess.run(
        ["cmark-gfm", "-e", "table", "--unsafe"], input=text, capture_output=True, text=True, check=True
    ).stdout
    # Every markdown table renders as a table (a `repro cliff` report has one or two, `repro all`'s many).
    tables = sum(1 for ln in text.splitlines() if re.fullmatch(r"\|( *:?-{3,}:? *\|)+", ln.strip()))
    assert html.count("<table>") == tables >= 1
    assert html.count("<details>") == text.count("<details>")
    assert html.count("</details>") == html.count("<details>")
    if "\n## Environment" in text:  # a `repro all` report: its fingerprint and JSON sit in details blocks
        assert html.count("<details>") >= 1


def test_reference_reports_exist() -> None:
    assert any(p.parent.parent.name == "all" for p in REFERENCE_REPORTS)
