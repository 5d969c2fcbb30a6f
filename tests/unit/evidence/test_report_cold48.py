"""What evidence48's cold reader asked of the report, answered from that run's own artifacts: its pasted report had
lost solve's whole section to the last-resort cut at 17.6k characters, and the re-run paragraph was the longest
part of what a lean report keeps."""

from __future__ import annotations

from typing import Any

import pytest
from evidence_run import attached_of, with_catalog_prose
from helpers import ROOT

from repro.evidence import artifact
from repro.evidence.fitting import BARE_WORDS, CUT_NOTE
from repro.evidence.report import report
from repro.run import scripts

RUN = next((ROOT / "artifacts" / "reference" / "h200" / "evidence48" / "all").iterdir())


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return with_catalog_prose([artifact.load(p) for p in artifact.expand([RUN])])


def test_a_tight_limit_leaves_every_section_bare_before_any_is_cut(docs: list[dict[str, Any]]) -> None:
    pasted = report(docs, limit=18_600, declared=scripts.declared(docs), **attached_of(RUN))
    assert CUT_NOTE not in pasted and len(pasted) <= 18_600
    assert all(f"## `{d['repro']['id']}`" in pasted for d in docs)
    assert BARE_WORDS in pasted and "repro run solve-512-cliff" in pasted
    assert "- Seed's experiment vs ours:" in pasted and "- The seed's own seed.cu" not in pasted


def test_the_lean_re_run_paragraph_says_each_ci_against_this_runs_and_how_the_harness_ran(
    docs: list[dict[str, Any]],
) -> None:
    pasted = report(docs, declared=scripts.declared(docs), **attached_of(RUN))
    paragraph = next(ln for ln in pasted.splitlines() if ln.startswith("**Re-run**"))
    assert "graph-memset 1.490x (95% CI 1.482-1.494): CI misses ours (1.461-1.476)" in paragraph
    assert "run from its source tree (not installed)" in paragraph and "`attached/rerun-<id>.json`" in paragraph
    assert "re-run spread" not in paragraph  # the band's words stay in the full report


def test_a_re_runs_rows_are_matched_by_their_variants_across_a_relabel(docs: list[dict[str, Any]]) -> None:
    """This run's graph-memset against its re-run, the seed's row relabelled in one of them (as a newer harness
    labels it): the row that missed this run's CI is still set against it, not dropped as another comparison."""
    import copy
    import json

    from repro.evidence import model, reruns

    first = copy.deepcopy(next(d for d in docs if d["repro"]["id"] == "graph-memset"))
    for row in first["verdict"]["breakdown"]:
        row["comparison"] = str(row.get("comparison")).replace("(the seed's program)", "(relabelled)")
    again = json.loads((RUN / "attached" / "rerun-graph-memset.json").read_text())
    said = reruns._others_agree(model.run_of(again), model.run_of(first))
    assert said.startswith("; 3 of 4 other CIs overlap this run's (not: memset/kernel (the seed's program) 1.475x")
    assert "in one of the two runs only" not in said
    del first["verdict"]["breakdown"][-1]
    assert reruns._others_agree(model.run_of(again), model.run_of(first)).endswith(
        "; 1 other row in one of the two runs only"
    )


def test_the_left_out_note_names_only_the_re_run_words_the_full_form_had(docs: list[dict[str, Any]]) -> None:
    import json

    from repro.evidence import band, model, reruns

    typed = model.artifacts(docs)
    again = json.loads((RUN / "attached" / "rerun-5090-linear.json").read_text())
    assert reruns.lean_gone(typed, {"rerun-5090-linear.json": model.of(again)}, band.load())[:1] == [
        "the re-runs' band words, other comparisons and torch install"
    ]
    again["verdict"].update(value=None, ci_low=None, ci_high=None, breakdown=[])  # nothing to set against the band
    gone = reruns.lean_gone(typed, {"rerun-5090-linear.json": model.of(again)}, band.load())
    assert not any("band words" in g for g in gone)  # its rows still compared: this run has them, the re-run not
