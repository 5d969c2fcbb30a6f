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
    """graph-memset on this H100: memset nodes slower, as the seed says (whole CI above 1.0), under the repro's own
    1.2 (the seed gives no number): the status cell and the Does-not-hold-for line say the 1.2 is what failed."""
    doc = next(
        d
        for d in with_catalog_prose([artifact.load(p) for p in artifact.expand([RUN])])
        if "memset" in d["repro"]["id"]
    )
    v = doc["verdict"]
    assert v["status"] == "not_reproduced" and 1.0 < v["ci_low"] < v["ci_high"] < v["threshold"] == 1.2
    full = _pasted(attached_of(RUN), limit=10**9, max_lines=None)
    assert "| graph-memset | **not_reproduced** (above 1.0, under the repro's 1.2) |" in full
    line = next(ln for ln in full.splitlines() if ln.startswith("- Does not hold for: pure CUDA twin (headline)"))
    assert line.endswith(" (at the repro's 1.2 threshold, not at 1.0)")
    # A run whose headline falls below 1.0 keeps the bare line: solve's default backend on this run.
    solve = next(ln for ln in full.splitlines() if ln.startswith("- Does not hold for: default backend"))
    assert "not at 1.0" not in solve
