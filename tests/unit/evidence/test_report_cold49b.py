"""What a second reader of evidence49's report, rendered again, asked: lora's finding (per sample under linear
scaling, 1.0 outside the CI) stood in its section without the later run on the same GPU whose CI holds 1.0, and the
Re-run-elsewhere lines named one widening or the other with no rule saying which."""

from __future__ import annotations

from typing import Any

import pytest
from evidence_run import attached_of, pasted, section, with_catalog_prose
from helpers import ROOT

from repro.evidence import artifact, band, model
from repro.evidence.lines import band_line
from repro.evidence.report import PASTE_LIMIT, PASTE_LINES, report
from repro.evidence.reruns import otherwise
from repro.run import scripts

RUN = next((ROOT / "artifacts" / "reference" / "h200" / "evidence49" / "all").iterdir())
LOOSE = "`repro all --target-ci 0.02 --budget 2` on this GPU"


@pytest.fixture(scope="module")
def pasted_report() -> str:
    return pasted(RUN)


def test_a_finding_that_a_later_run_reads_otherwise_says_so_in_its_own_section(pasted_report: str) -> None:
    lora = section(pasted_report, "lora-batch-scaling").split("\n")[1]
    assert lora.startswith("**inconclusive** (suspect: power cap") and "per sample 6% under linear scaling" in lora
    assert lora.endswith(
        f" Read otherwise later: {LOOSE}: CI 0.926-1.021 holds 1.0, this run's does not "
        "(`attached/loose-lora-batch-scaling.json`)."
    )
    # The other four repros' later runs read as this run does: no such words in their sections.
    for rid in ("5090-linear", "fused-adam-capturable", "graph-memset", "solve-512-cliff"):
        assert "Read otherwise later" not in section(pasted_report, rid)
    assert len(pasted_report) <= PASTE_LIMIT and pasted_report.count("\n") < PASTE_LINES


def _later(name: str, **verdict: Any) -> dict[str, Any]:
    raw = artifact.load(RUN / "attached" / name)
    raw["verdict"].update(verdict)
    return {name: model.of(raw)}


def test_read_otherwise_names_another_status_and_a_side_of_the_threshold_and_nothing_that_agrees() -> None:
    first = model.run_of(artifact.load(RUN / "graph-memset.json"))
    assert otherwise(first, _later("loose-graph-memset.json")) == ""  # same status, same sides of 1.0 and 1.2
    said = otherwise(first, _later("loose-graph-memset.json", ci_low=1.19, status="inconclusive"))
    assert said.startswith(f" Read otherwise later: {LOOSE}: inconclusive (here reproduced), CI 1.190-")
    assert said.count(LOOSE) == 1  # the later run named once, its status and its CI after it
    assert "holds the threshold 1.2, this run's does not (`attached/loose-graph-memset.json`)." in said
    # A re-run from the bundle counts as well, and a later run that ended in an error says nothing here.
    assert "Read otherwise later" in otherwise(first, _later("rerun-graph-memset.json", ci_low=1.1))
    errored = artifact.load(RUN / "attached" / "loose-graph-memset.json")
    errored["error"] = {"kind": "interrupted", "message": "interrupted by SIGTERM", "signal": "SIGTERM"}
    assert otherwise(first, {"loose-graph-memset.json": model.of(errored)}) == ""


def test_the_band_line_names_both_widenings_when_the_band_has_a_same_gpu_spread() -> None:
    """The slack is the larger of this run's CI and one GPU's re-run spread (agreement.slack): both are named, so
    a reader can see which applied, whichever is larger."""
    docs = with_catalog_prose([artifact.load(p) for p in artifact.expand([RUN])])
    full = report(docs, limit=10**9, max_lines=None, declared=scripts.declared(docs), **attached_of(RUN))
    # fused-adam's line (no headline here) gives a comparison it did not run: not a band of its headline.
    lines = [ln for ln in full.splitlines() if ln.startswith("- Re-run elsewhere") and "has no headline" not in ln]
    assert len(lines) == 4 and all("widened by the larger of this run's CI (±" in ln for ln in lines)
    assert all("and one GPU's re-run spread (±" in ln for ln in lines)
    doc = model.run_of(artifact.load(RUN / "solve-512-cliff.json"))
    b = band.lookup(doc)
    assert b is not None and b.same_gpu is not None
    from dataclasses import replace

    single = replace(b, points=tuple(replace(p, run_values=p.run_values[:1]) for p in b.points))
    assert single.same_gpu is None  # one run per GPU: no re-run spread, the run's CI alone widens the band
    alone = band_line(doc, [single]) or ""
    assert "widened by this run's CI (±0.5" in alone and "larger of" not in alone
