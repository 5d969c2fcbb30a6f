"""h100/evidence55's re-runs: gpu-final's time limit stopped them during solve-512-cliff's, which wrote no artifact.
The report says why that repro was not re-run, from the maker's note, and says nothing of it for the others."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evidence_run import attached_of, with_catalog_prose

from repro.evidence import artifact
from repro.evidence.report import report
from repro.run import scripts

ROOT = Path(__file__).resolve().parents[3]
RUN = ROOT / "artifacts" / "reference" / "h100" / "evidence55" / "all" / "20261205T153118Z-f99d37"
CUT = " (no artifact: the re-runs were stopped by their maker's time limit, `attached/NOTE.txt`)"


def _pasted(attached: dict[str, Any], **kw: Any) -> str:
    docs = with_catalog_prose([artifact.load(p) for p in artifact.expand([RUN])])
    return report(docs, declared=scripts.declared(docs), **attached, **kw)


def test_a_rerun_the_time_limit_stopped_before_its_artifact_says_so() -> None:
    attached = attached_of(RUN)
    assert "'the re-run lines of" in (RUN / "attached" / "NOTE.txt").read_text()
    assert not (RUN / "attached" / "rerun-solve-512-cliff.json").exists()
    pasted = _pasted(attached)
    assert f" Not re-run: solve-512-cliff{CUT}." in pasted
    assert pasted.count("no artifact: the re-runs were stopped") == 1


def test_without_the_note_a_missing_rerun_is_only_named() -> None:
    attached = attached_of(RUN)
    printed = {k: v for k, v in attached["printed"].items() if k != "NOTE.txt"}
    pasted = _pasted({**attached, "printed": printed})
    assert " Not re-run: solve-512-cliff." in pasted and "no artifact" not in pasted


def test_a_claim_short_of_the_repros_threshold_says_whose_threshold_failed() -> None:
    """graph-memset on this H100: the twin's memset nodes slower (whole CI above 1.0), under the repro's own 1.2
    (the seed gives no number): the status cell and the headline's item in Does-not-hold-for say the 1.2 is what
    failed, and no other item of that line is said to lie above 1.0."""
    docs = with_catalog_prose([artifact.load(p) for p in artifact.expand([RUN])])
    v = next(d for d in docs if d["repro"]["id"] == "graph-memset")["verdict"]
    assert v["status"] == "not_reproduced" and 1.0 < v["ci_low"] < v["ci_high"] < v["threshold"] == 1.2
    full = _pasted(attached_of(RUN), limit=10**9, max_lines=None)
    assert "| graph-memset | **not_reproduced** (above 1.0, under the repro's 1.2) |" in full
    line = next(ln for ln in full.splitlines() if ln.startswith("- Does not hold for: pure CUDA twin (headline"))
    assert line.startswith("- Does not hold for: pure CUDA twin (headline; above 1.0, under the repro's 1.2); ")
    assert line.count("above 1.0") == 1


def test_a_headline_short_of_its_threshold_leaves_the_other_rows_unqualified() -> None:
    """solve's headline set to 1.3x (CI 1.25-1.35, not reproduced at 1.5): the headline's item says it lies above
    1.0, the default backend's rows under 1.0 on the same line are not said to."""
    import copy

    from repro.evidence import model
    from repro.evidence.lines import scope_lines

    raw = copy.deepcopy(artifact.load(RUN / "solve-512-cliff.json"))
    raw["verdict"].update(status="not_reproduced", value=1.3, ci_low=1.25, ci_high=1.35)
    head = next(r for r in raw["verdict"]["breakdown"] if r["comparison"] == raw["verdict"]["headline"])
    head.update(status="not_reproduced", ratio=1.3, ci_low=1.25, ci_high=1.35)
    doc = model.of(raw)
    assert isinstance(doc, model.Artifact)
    (line,) = [ln for ln in scope_lines(doc) if ln.startswith("Does not hold for:")]
    assert "(headline; above 1.0, under the repro's 1.5); default backend (MAGMA here): at most 0.97x" in line
    assert line.count("above 1.0") == 1


def test_rerun_words_when_the_time_limit_struck_before_any_rerun_wrote_an_artifact() -> None:
    attached = attached_of(RUN)
    names = [n for n in attached["attached"] if not n.startswith("rerun-") or not n.endswith(".json")]
    pasted = _pasted({**attached, "reruns": {}, "attached": names})
    ids = "5090-linear, fused-adam-capturable, graph-memset, lora-batch-scaling, solve-512-cliff"
    assert f" Not re-run: {ids}{CUT}." in pasted
    # Without the note, nothing is said of re-runs that never were.
    printed = {k: v for k, v in attached["printed"].items() if k != "NOTE.txt"}
    assert "Not re-run" not in _pasted({**attached, "reruns": {}, "attached": names, "printed": printed})
