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
    pasted = report(docs, limit=17_500, declared=scripts.declared(docs), **attached_of(RUN))
    assert CUT_NOTE not in pasted and len(pasted) <= 17_500
    assert all(f"## `{d['repro']['id']}`" in pasted for d in docs)
    assert BARE_WORDS in pasted and "repro run solve-512-cliff" in pasted
    assert "- Seed's experiment vs ours:" in pasted and "- The seed's own seed.cu" not in pasted


def test_the_lean_re_run_paragraph_says_each_ci_against_this_runs_and_how_the_harness_ran(
    docs: list[dict[str, Any]],
) -> None:
    pasted = report(docs, declared=scripts.declared(docs), **attached_of(RUN))
    paragraph = next(ln for ln in pasted.splitlines() if ln.startswith("**Re-run**"))
    assert "graph-memset 1.490x (95% CI 1.482-1.494): CI misses this run's (1.461-1.476)" in paragraph
    assert "run from its source tree (not installed)" in paragraph and "`attached/rerun-<id>.json`" in paragraph
    assert "re-run spread" not in paragraph  # the band's words stay in the full report
