"""The GitHub report: tables and details survive GitHub's renderer, the size limit holds, kernels are diffed."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from repro import render
from repro.execute import RunRequest, execute

PLUGINS = Path(__file__).parent / "plugins"


@pytest.fixture(scope="module")
def smoke_doc(tmp_path_factory: pytest.TempPathFactory, fast) -> dict:
    from repro.artifact import new_run_id

    run_dir = tmp_path_factory.mktemp("r") / new_run_id()
    run_dir.mkdir()
    doc, _ = execute(RunRequest("5090-linear", smoke=True, sampling=fast), run_dir)
    return doc


def test_report_has_summary_variants_kernels_finding_and_details(smoke_doc: dict) -> None:
    text = render.report([smoke_doc])
    assert text.startswith("# gpu-repro report: run ")
    assert "| repro " in text and "| 5090-linear " in text
    assert "| variant " in text and "linear_fp32" in text
    assert smoke_doc["verdict"]["finding"] in text
    assert "Kernel diff (the verdict's pair first)" in text
    assert "<details><summary>5090-linear: full fingerprint</summary>\n\n" in text
    assert "Rerun: `repro run 5090-linear --smoke`" in text
    assert len(text) <= render.REPORT_LIMIT


def test_report_shrinks_largest_details_first_and_says_so(smoke_doc: dict) -> None:
    big = json.loads(json.dumps(smoke_doc))
    big["fingerprint"]["collect_env"]["output"] = "x" * 200_000
    text = render.report([big], limit=60_000)
    assert len(text) <= 60_000
    assert "To fit GitHub's size limit this report shortened" in text
    assert "| 5090-linear " in text  # the summary is never what goes


def test_kernel_diff_names_appearing_disappearing_and_changed() -> None:
    a = {
        "kernels": [
            {"name": "gemm_a", "count": 1, "total_us": 10.0, "per_call": 1.0},
            {"name": "bias_add", "count": 1, "total_us": 2.0, "per_call": 1.0},
        ]
    }
    b = {
        "kernels": [
            {"name": "gemm_a", "count": 1, "total_us": 20.0, "per_call": 1.0},
            {"name": "gemm_epilogue", "count": 1, "total_us": 5.0, "per_call": 1.0},
        ]
    }
    lines = render.kernel_diff(a, b)
    assert any(ln.startswith("+ `gemm_epilogue` appears") for ln in lines)
    assert any(ln.startswith("- `bias_add` disappears") for ln in lines)
    assert any(ln.startswith("~ `gemm_a` 10.0 -> 20.0") for ln in lines)


def test_table_cells_escape_pipes() -> None:
    assert render.md_cell("a|b\nc") == "a\\|b c"


@pytest.mark.skipif(shutil.which("cmark-gfm") is None, reason="cmark-gfm not installed (CI installs it)")
def test_github_renderer_keeps_tables_and_details(smoke_doc: dict) -> None:
    text = render.report([smoke_doc])
    html = subprocess.run(
        ["cmark-gfm", "-e", "table", "--unsafe"], input=text, capture_output=True, text=True, check=True
    ).stdout
    assert html.count("<table>") >= 3  # summary, variants, kernels
    assert "<th>repro</th>" in html and "<td>5090-linear</td>" in html
    assert html.count("<details>") == text.count("<details>") >= 2
    # the blank line after <summary> makes the body a code block, not raw text
    assert "<summary>5090-linear: full fingerprint</summary>\n<pre><code" in html


REFERENCE_REPORTS = sorted((Path(__file__).resolve().parent.parent / "artifacts" / "reference").rglob("report.md"))


@pytest.mark.skipif(shutil.which("cmark-gfm") is None, reason="cmark-gfm not installed (CI installs it)")
@pytest.mark.parametrize("path", REFERENCE_REPORTS, ids=[p.parent.parent.name for p in REFERENCE_REPORTS])
def test_committed_reports_fit_and_render_on_github(path: Path) -> None:
    text = path.read_text()
    assert len(text) <= render.REPORT_LIMIT
    html = subprocess.run(
        ["cmark-gfm", "-e", "table", "--unsafe"], input=text, capture_output=True, text=True, check=True
    ).stdout
    assert html.count("<table>") >= 2
    assert html.count("<details>") == text.count("<details>") >= 1
    assert html.count("</details>") == html.count("<details>")


def test_reference_reports_exist() -> None:
    assert any(p.parent.parent.name == "all" for p in REFERENCE_REPORTS)
