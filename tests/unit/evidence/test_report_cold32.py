"""What evidence32's cold read found shown wrongly or not at all, answered on that run's own artifacts: a headline
far from the band's median while the band's farthest GPUs widen it, a re-run on the same GPU set against one GPU's
spread rather than the spread between GPUs, and the seeds' programs shipped as the seeds gave them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
from evidence_run import attached_of, with_catalog_prose

from repro.evidence import artifact, band, model, seeds
from repro.evidence.markdown import fmt_pct
from repro.evidence.report import report
from repro.run import scripts

ROOT = Path(__file__).resolve().parents[3]
RUN = ROOT / "artifacts" / "reference" / "h200" / "evidence32" / "all" / "20261203T100428Z-4f0e34"


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return with_catalog_prose([artifact.load(p) for p in artifact.expand([RUN])])


def _row(text: str, rid: str) -> str:
    return next(ln for ln in text.splitlines() if ln.startswith(f"| {rid} |"))


def test_a_headline_far_from_the_bands_median_says_so_in_its_row(docs: list[dict[str, Any]]) -> None:
    """graph-memset read 1.29x on a GPU whose twin fill node reads slow: the band's ±17% comes from such GPUs, so
    the row says how far this run lies from the GPUs' median; rows inside the band without them say nothing."""
    pasted = report(docs, declared=scripts.declared(docs), **attached_of(RUN))
    doc = next(d for d in docs if d["repro"]["id"] == "graph-memset")
    # The shipped band less this run and its attached runs, as the report takes it.
    attached = attached_of(RUN).get("reruns") or {}
    ids = [d["run"]["run_id"] for d in docs] + [a["run"]["run_id"] for a in attached.values() if "run" in a]
    memset = band.lookup(doc, band.without(band.load(), ids))
    assert memset is not None and (few := memset.outliers) is not None
    off = doc["verdict"]["value"] / memset.center - 1
    assert off < -few[1]  # beyond the band without its farthest GPUs
    assert f"of {memset.center:.3g}x ({len(memset.points)} GPUs" in _row(pasted, "graph-memset")
    # Outside the band without its farthest GPUs, inside the whole band widened by this run's CI (wider than one
    # GPU's re-run spread here).
    said = f"this run -{fmt_pct(abs(off) * 100)}, outside the band without them, consistent with it widened by this "
    assert said + "run's CI)" in _row(pasted, "graph-memset")
    for rid in ("5090-linear", "solve-512-cliff"):
        assert "outside the band" not in _row(pasted, rid)
    # A run of a GPU outside a band without outliers is said too.
    moved = [
        d if d["verdict"]["value"] is None else dict(d, verdict=dict(d["verdict"], value=d["verdict"]["value"] * 1.2))
        for d in docs
    ]
    assert "this run +" in _row(report(moved, declared=scripts.declared(moved)), "solve-512-cliff")


def test_a_rerun_on_this_runs_gpu_is_set_against_one_gpus_spread(docs: list[dict[str, Any]]) -> None:
    full = report(docs, declared=scripts.declared(docs), limit=sys.maxsize, max_lines=None, **attached_of(RUN))
    said = full.split("Re-run here from this run's first bundle", 1)[1].split("Not re-run", 1)[0]
    assert said.count("within twice one GPU's re-run spread (±") == 2 and "consistent with the band" not in said


def test_the_seeds_programs_are_the_seeds_own() -> None:
    """fused-adam's seed program needs Transformer Engine, as the seed's does: the stand-in for the speed baseline
    (torch's fused AdamW where TE is missing) is seeds_raw.py's, and the bundle's README says so."""
    body = seeds.programs()["fused-adam-capturable"]["seed.py"]
    assert "from transformer_engine.pytorch.optimizers import FusedAdam" in body
    assert "ImportError" not in body and "torch.optim.AdamW" not in body
    assert "tools/seeds_raw.py adds" in seeds.about() and "its 1.00x is not about TE" in seeds.about()
    spec = importlib.util.spec_from_file_location("seeds_raw", ROOT / "tools" / "seeds_raw.py")
    assert spec is not None and spec.loader is not None
    raw = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(raw)  # its runs are under __main__: loading only builds the programs
    # The baseline's stand-in: the seed's program with its optimizer line wrapped, nothing else changed.
    stand_in = raw.S001
    assert "except ImportError:\n        opt = torch.optim.AdamW(params, " in stand_in
    assert stand_in.replace(raw._STAND_IN, raw._TE) == body


@pytest.mark.parametrize(
    "name",
    [
        "evidence30",
        "evidence31",
        "evidence32",
        "evidence33",
        "evidence34",
        "evidence35",
        "evidence36",
        "evidence37",
        "evidence38",
        "evidence39",
        "evidence40",
        "evidence41",
        "evidence42",
        "evidence43",
        "evidence44",
        "evidence45",
        "evidence46",
        "evidence47",
        "evidence48",
        "evidence49",
        "h100/evidence52",
        "evidence53",
        "evidence55",
        "h100/evidence55",
        "h100/evidence56",
        "h100/evidence57",
    ],
)
def test_the_recent_runs_render_whole_and_name_their_stack_line_if_left_out(name: str) -> None:
    """Today's prose on the recent runs' numbers: every section kept, and the one-stack line or its name in the
    Left-out note; evidence33's and evidence45's own report.md were cut at the size limit (solve's section lost;
    evidence45's by 205 characters, before the Kernels and Episodes lines could be spared)."""
    run = next((ROOT / "artifacts" / "reference" / ("" if "/" in name else "h200") / name / "all").iterdir())
    docs = with_catalog_prose([artifact.load(p) for p in artifact.expand([run])])
    pasted = report(docs, declared=scripts.declared(docs), **attached_of(run))
    assert "Report cut at the size limit" not in pasted and len(pasted) <= 20_000
    assert all(f"## `{d['repro']['id']}`" in pasted for d in docs)
    # The one-stack line is kept, or the Left-out note names it (the line stays in report-full.md).
    assert "- One software stack only" in pasted or "and on its one software stack._" in pasted
    if name in ("evidence33", "evidence45"):
        assert "Report cut at the size limit" in (run / "report.md").read_text()  # as that run wrote it
    if name == "evidence33":
        assert ("_Run order" in pasted) != ("; the run-order line;" in pasted)  # shown, or named as left out


def test_the_lean_attach_line_names_traces_only_where_there_are_some(docs: list[dict[str, Any]]) -> None:
    from repro.evidence.report_parts import attach_words

    typed = [a for a in (model.of(d) for d in docs) if isinstance(a, model.Artifact)]
    lean = attach_words(typed, "`x.bundle.tar.gz`", ["README.txt"], lean=True)
    assert "raw samples, traces, logs" in lean and "`attached/`: 1 file added after the run._" in lean
    bare_docs = [dict(d, variants=[dict(v, kernels=[], profiled_iterations=0) for v in d["variants"]]) for d in docs]
    untraced = [a for a in (model.of(d) for d in bare_docs) if isinstance(a, model.Artifact)]
    assert "raw samples, logs, the harness wheel" in attach_words(untraced, "`x.bundle.tar.gz`", [], lean=True)
