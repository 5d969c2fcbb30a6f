"""The report as evidence a maintainer acts on: qualifiers, impact, scope, the size budget, kernel names, plots."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt
from typer.testing import CliRunner

from repro.cli.main import app
from repro.core import jsonfit
from repro.core.kernelnames import short_names
from repro.evidence import artifact, bundle, plots, render, standalone

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "artifacts" / "reference" / "h200" / "paired" / "all" / "20261129T233452Z-51a4de"
REPORTS = sorted((ROOT / "artifacts" / "reference").rglob("report.md"))


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return [artifact.load(p) for p in artifact.expand([RUN])]


def _by_id(docs: list[dict[str, Any]], rid: str) -> dict[str, Any]:
    return next(d for d in docs if d["repro"]["id"] == rid)


def _summary_row(text: str, rid: str) -> str:
    return next(ln for ln in text.splitlines() if ln.startswith(f"| {rid} |"))


def _json_blocks(text: str) -> list[str]:
    return re.findall(r"(?s)```json\n(.*?)\n```", text)


def test_summary_rows_carry_their_qualifiers_from_structured_fields(docs: list[dict[str, Any]]) -> None:
    text = render.report(docs)
    solve = _summary_row(text, "solve-512-cliff")
    assert "cusolver backend, batch 128" in solve and "default backend: at most 0.97x, not reproduced" in solve
    memset = _summary_row(text, "graph-memset")
    assert "pure CUDA twin; torch graph: 1.30x, reproduced" in memset
    assert "batch 2, no memory cap" in _summary_row(text, "lora-batch-scaling")
    assert "fp32 (TF32 off); tf32: 0.59x" in _summary_row(text, "5090-linear")
    # From the breakdown rows, not the prose: change a qualifier and the row follows.
    changed = copy.deepcopy(_by_id(docs, "solve-512-cliff"))
    for row in changed["verdict"]["breakdown"]:
        row["backend"] = {"default": "magma", "cusolver": "cusolver"}[row["backend"]]
    assert "magma backend: at most 0.97x" in _summary_row(render.report([changed]), "solve-512-cliff")


def test_impact_is_declared_per_repro_and_states_this_runs_cost(docs: list[dict[str, Any]]) -> None:
    text = render.report(docs)
    impacts = [ln for ln in text.splitlines() if ln.startswith("Impact: ")]
    assert len(impacts) == 5  # 1.1 artifacts: taken from the catalog's declaration
    solve = next(ln for ln in impacts if "solve\\_ex 128x512x512" in ln or "solve_ex 128x512x512" in ln)
    assert "108 ms per call against 11.2 ms" in solve
    doc = copy.deepcopy(_by_id(docs, "5090-linear"))
    doc["repro"]["impact"] = "Declared in the artifact."
    assert "Impact: Declared in the artifact. In this run" in render.report([doc])


def test_not_tested_here_lists_skips_missing_seed_gpus_and_the_one_stack(docs: list[dict[str, Any]]) -> None:
    text = render.report(docs)
    scope = text.split("## Not tested here", 1)[1].split("\n## ", 1)[0]
    assert "TE FusedAdam" in scope and "transformer" in scope
    assert "RTX 5090 (5090-linear, lora-batch-scaling)" in scope and "GB300" in scope and "RTX 6000 Ada" in scope
    assert "This run had NVIDIA H200" in scope
    assert "One software stack only (torch 2.11.0+cu130" in scope
    doc = copy.deepcopy(_by_id(docs, "5090-linear"))
    doc["repro"]["seed_gpus"] = ["H200"]  # a seed GPU this run had is not listed as missing
    assert "GPUs the seeds reported on" not in render.report([doc])


def _worst_case(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Five repros with an 81-variant solve sweep (synthetic: the real 24 variants' timings and
    kernels reused across n = 500..526 at three batches) and a long collect_env."""
    out = copy.deepcopy(docs)
    solve = _by_id(out, "solve-512-cliff")
    base = [v for v in solve["variants"] if v["status"] == "ok"]
    variants = []
    for i, (batch, n) in enumerate((b, n) for b in (16, 64, 128) for n in range(500, 527)):
        v = copy.deepcopy(base[i % len(base)])
        v["name"] = f"cusolver_b{batch}_n{n}"
        v["label"] = f"solve_ex {batch}x{n}x{n} (cusolver)"
        v["config"] = dict(v["config"], batch=batch, n=n, backend="cusolver")
        variants.append(v)
    solve["variants"] = variants
    solve["verdict"]["variants"] = ["cusolver_b128_n512", "cusolver_b128_n511"]
    for d in out:
        ce = d["fingerprint"]["collect_env"]["output"]
        d["fingerprint"]["collect_env"]["output"] = ce.replace("CPU:\n", "CPU:\n" + "Flags: x\n" * 3000)
    return out


def test_worst_case_report_fits_and_keeps_evidence_intact(docs: list[dict[str, Any]]) -> None:
    worst = _worst_case(docs)
    assert len(_by_id(worst, "solve-512-cliff")["variants"]) == 81
    text = render.report(worst)
    assert len(text) <= render.REPORT_LIMIT
    blocks = _json_blocks(text)
    assert blocks
    for body in blocks:
        json.loads(body)  # whatever was kept still parses
    # Each distinct fingerprint once (all five share one machine), referred to by machine.
    assert text.count("full fingerprint (used by") == 1
    assert text.count("fingerprint: machine A under Environment") == 5
    assert "Versions of relevant libraries" in text
    assert "Libraries this process loaded" in text and "cusolver 12.0.4" in text
    assert "`20261129T233452Z-51a4de.bundle.tar.gz`" in text
    assert "the full artifacts are in `20261129T233452Z-51a4de.bundle.tar.gz`" in text  # where something went
    assert text.count("standalone script (plain torch") == 5


def test_fit_json_cuts_only_at_element_boundaries() -> None:
    value = {"a": list(range(5000)), "b": {"c": ["x" * 50] * 300, "d": {"e": {"f": [1, 2, 3]}}}, "s": "y" * 9000}
    for limit in (200, 800, 3000, 20000):
        text, cut = jsonfit.fit_json(value, limit)
        assert cut and (text == "" or len(text) <= limit)
        if text:
            json.loads(text)
    assert jsonfit.fit_json({"a": 1}, 100) == (json.dumps({"a": 1}, indent=1), False)


def test_collect_env_keeps_its_library_section() -> None:
    out = (RUN / "5090-linear.json").read_text()
    ce = json.loads(out)["fingerprint"]["collect_env"]["output"]
    short = jsonfit.shorten_collect_env(ce + "\n" * 0, 2500)
    assert len(short) <= 2600 and "Versions of relevant libraries" in short
    assert short.split("Versions of relevant libraries", 1)[1] == ce.split("Versions of relevant libraries", 1)[1]


def test_kernel_names_are_short_and_tell_apart(docs: list[dict[str, Any]]) -> None:
    adam = _by_id(docs, "fused-adam-capturable")
    names = [k["name"] for v in adam["variants"] for k in v["kernels"]]
    short = short_names(names)
    assert len(set(short.values())) == len(set(names))
    assert all(len(s) <= 95 for s in short.values())
    assert "multi_tensor_apply_kernel<FusedOptimizerTensorListMetadata, FusedAdamMathFunctor>" in short.values()
    assert short_names(["Memset (Device)", "Memset (Unknown)"]) == {
        "Memset (Device)": "Memset (Device)",
        "Memset (Unknown)": "Memset (Unknown)",
    }
    text = render.report([adam])
    cells = [ln.split(" | ")[0] for ln in text.splitlines() if ln.startswith("| `")]
    assert len(cells) == len(set(cells)) and not any("anonymou" in c for c in cells)


def test_diffs_once_per_pair_and_small_percentages(docs: list[dict[str, Any]]) -> None:
    text = render.report(docs)
    pairs = re.findall(r"- \*\*(\S+) -> (\S+)\*\*", text)
    assert pairs and len({frozenset(p) for p in pairs}) == len(pairs)
    assert "0.21% of fp32" in text and "| 0% of" not in text
    assert render.fmt_pct(96.4) == "96%" and render.fmt_pct(4.23) == "4.2%" and render.fmt_pct(0.0021) == "0.0021%"


def test_standalone_script_of_an_old_artifact_is_its_headline(docs: list[dict[str, Any]]) -> None:
    script = standalone.from_artifact(_by_id(docs, "solve-512-cliff"))
    assert script and "[('cusolver/b128', 'cusolver', 128)]" in script
    memset = standalone.from_artifact(_by_id(docs, "graph-memset"))  # twin headline: the torch side instead
    assert memset and "memset/fill (torch graph)" in memset
    text = render.report(docs)
    assert "git checkout 86fbd015412f36e83090fd6f1003545dcee2b5a4" in text and "pip install -e ." in text


# --------------------------------------------------------------------------- plots


def test_plots_are_drawn_with_units_and_referenced_with_their_finding(
    docs: list[dict[str, Any]], tmp_path: Path
) -> None:
    pytest.importorskip("matplotlib")
    figs = plots.figures(docs, tmp_path)
    assert {f.file for f in figs} == {"plots/solve-512-cliff.n.png", "plots/lora-batch-scaling.batch.png"}
    for f in figs:
        assert f.drawn and (tmp_path / f.file).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    solve = next(f for f in figs if f.repro_id == "solve-512-cliff")
    assert "9.66x (backend cusolver, batch 128, from 511 to 512)" in solve.alt
    text = render.report(docs, figures=figs)
    assert f"![{render.text(solve.alt)}](plots/solve-512-cliff.n.png)" in text
    # Never overwritten: a second pass keeps the file as it is.
    before = (tmp_path / solve.file).stat().st_mtime_ns
    plots.figures(docs, tmp_path)
    assert (tmp_path / solve.file).stat().st_mtime_ns == before


def test_band_plot_labels_axes_with_units(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    from matplotlib.axes import Axes

    seen: dict[str, str] = {}
    real = Axes.set_ylabel

    def spy(self: Axes, label: str, *a: Any, **k: Any) -> Any:
        seen["y"] = label
        return real(self, label, *a, **k)

    monkeypatch.setattr(Axes, "set_ylabel", spy)
    s = plots.Series("a", (1.0, 2.0), (2e-3, 4e-3), (1.9e-3, 3.8e-3), (2.1e-3, 4.2e-3))
    plots.band_plot(tmp_path / "p.png", [s], title="t", x_label="batch size (samples)", y_label="time")
    assert seen["y"] == "time (ms)"
    with pytest.raises(FileExistsError):
        plots.band_plot(tmp_path / "p.png", [s], title="t", x_label="x", y_label="time")


def test_without_matplotlib_the_report_says_how_to_draw(
    docs: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plots, "available", lambda: "matplotlib is not installed here")
    figs = plots.figures(docs, tmp_path)
    assert figs and not any(f.drawn for f in figs) and not (tmp_path / "plots").exists()
    text = render.report(docs, figures=figs)
    assert "not drawn (matplotlib is not installed here; pip install 'gpu-repro\\[plots\\]'" in text
    assert "It would show: median time per solve\\_ex call" in text or "It would show: median time per solve_ex" in text


def test_repro_report_out_draws_plots_beside_the_report_and_bundle_packs_them(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    run = tmp_path / RUN.name
    shutil.copytree(RUN, run)
    res = CliRunner().invoke(app, ["report", str(run), "--out", str(run / "report.v2.md")])
    assert res.exit_code == 0, res.output
    assert (run / "plots" / "solve-512-cliff.n.png").is_file()
    assert "](plots/solve-512-cliff.n.png)" in (run / "report.v2.md").read_text()
    again = CliRunner().invoke(app, ["report", str(run), "--out", str(run / "report.v2.md")])
    assert again.exit_code == 2 and "exists" in again.output
    import tarfile

    path = bundle.build(run)
    with tarfile.open(path) as tf:
        assert f"{RUN.name}/plots/solve-512-cliff.n.png" in tf.getnames()


# --------------------------------------------------------------------------- rendering


def _gfm_counts(text: str) -> dict[str, int]:
    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    html = md.render(text)
    return {
        "tables": html.count("<table>"),
        "details_open": len(re.findall(r"<details>", html)),
        "details_close": html.count("</details>"),
        "images": html.count("<img "),
    }


def _expected(text: str) -> dict[str, int]:
    outside = re.sub(r"(?ms)^(`{3,})[^\n]*\n.*?^\1\s*$", "", text)  # code fences hold no structure
    return {
        "tables": len(re.findall(r"(?m)^\|(?:-{3,}\|)+$|^\|[-| :]+\|$", outside)),
        "details_open": outside.count("<details>"),
        "details_close": outside.count("</details>"),
        "images": len(re.findall(r"!\[[^\n]*?\]\([^)\s]+\.png\)", outside)),
    }


@pytest.mark.parametrize("path", REPORTS, ids=[str(p.relative_to(ROOT / "artifacts" / "reference")) for p in REPORTS])
def test_committed_reports_render_with_tables_details_and_images_intact(path: Path) -> None:
    text = path.read_text()
    got, want = _gfm_counts(text), _expected(text)
    assert got == want, (got, want)
    assert got["details_open"] == got["details_close"]
    if shutil.which("cmark-gfm"):  # GitHub's own renderer agrees where it is installed
        html = subprocess.run(
            ["cmark-gfm", "-e", "table", "--unsafe"], input=text, capture_output=True, text=True, check=True
        ).stdout
        assert (html.count("<table>"), html.count("<details>"), html.count("<img ")) == (
            got["tables"],
            got["details_open"],
            got["images"],
        )


def test_a_fresh_report_renders_intact_too(docs: list[dict[str, Any]], tmp_path: Path) -> None:
    figs = plots.describe(docs)
    figs = [plots.Figure(f.repro_id, f.sweep, f.file, f.alt, True) for f in figs]  # as if drawn
    text = render.report(_worst_case(docs), figures=figs)
    got, want = _gfm_counts(text), _expected(text)
    assert got == want and got["images"] == 2 and got["tables"] >= 15
    if shutil.which("cmark-gfm"):
        html = subprocess.run(
            ["cmark-gfm", "-e", "table", "--unsafe"], input=text, capture_output=True, text=True, check=True
        ).stdout
        assert html.count("<table>") == got["tables"] and html.count("<img ") == 2
        assert html.count("<details>") == html.count("</details>") == got["details_open"]


def test_a_smoke_run_says_in_its_scope_that_it_proves_only_the_pipeline(docs: list[dict[str, Any]]) -> None:
    doc = copy.deepcopy(_by_id(docs, "5090-linear"))
    doc["run"].update(smoke=True, device="cpu")
    text = render.report([doc])
    scope = text.split("## Not tested here", 1)[1]
    assert "5090-linear: a smoke run on cpu (shrunken sizes): it proves the pipeline, not the cliff." in scope
    assert "standalone script" not in text and "<details>" not in text  # a smoke report stays short


def test_two_machines_get_a_fingerprint_each_and_rows_say_which(docs: list[dict[str, Any]]) -> None:
    two = copy.deepcopy(docs[:2])
    two[1]["fingerprint"]["gpu"]["uuid"] = "another-gpu"
    two[1]["fingerprint"]["gpu"]["state"]["power_w"] = 1.0  # state alone never makes a machine
    text = render.report(two)
    assert text.count("full fingerprint (used by") == 2
    assert "machine A: full fingerprint (used by 5090-linear)" in text
    assert "machine B: full fingerprint (used by fused-adam-capturable)" in text
    same = copy.deepcopy(docs[:2])
    same[1]["fingerprint"]["gpu"]["state"]["power_w"] = 1.0
    assert render.report(same).count("full fingerprint (used by") == 1


def test_an_error_artifact_without_variants_still_reports(docs: list[dict[str, Any]]) -> None:
    doc = copy.deepcopy(_by_id(docs, "lora-batch-scaling"))
    doc["variants"] = []
    doc["verdict"].update(status="error", value=None, ci_low=None, ci_high=None, breakdown=[], variants=[])
    doc["verdict"]["finding"] = "Not measured: the repro crashed"
    doc["error"] = {"kind": "crash", "message": "segfault", "exit_code": -11, "signal": "SIGSEGV"}
    text = render.report([doc])
    assert "lora-batch-scaling: not measured (error): Not measured: the repro crashed" in text
    assert "Impact: " in text and "In this run" not in text  # no pair, no cost sentence
