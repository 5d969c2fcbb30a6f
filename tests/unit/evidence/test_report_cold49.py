"""What evidence49's run held that its report has to show: its quick run was stopped by the call's timeout at
solve-512-cliff, whose attached artifact is an error, not a headline."""

from __future__ import annotations

from typing import Any

import pytest
from evidence_run import attached_of, with_catalog_prose
from helpers import ROOT

from repro.evidence import artifact
from repro.evidence.report import report
from repro.run import scripts

RUN = next((ROOT / "artifacts" / "reference" / "h200" / "evidence49" / "all").iterdir())


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return with_catalog_prose([artifact.load(p) for p in artifact.expand([RUN])])


def test_a_later_run_whose_repro_ended_in_an_error_names_it(docs: list[dict[str, Any]]) -> None:
    full = report(docs, limit=10**9, max_lines=None, declared=scripts.declared(docs), **attached_of(RUN))
    later = full[full.index("Later runs attached:") :].split(" Standalone scripts")[0]
    quick = later[later.index("`repro all --quick`") :]
    assert quick.startswith("`repro all --quick` on this GPU (headline comparisons only): 3 headline CI(s) overlap")
    assert "no headline there: solve-512-cliff (interrupted by SIGTERM after 6.3 s; the batch stopped here)" in quick
    loose = later[: later.index("`repro all --quick`")]
    assert "no headline there" not in loose


def test_a_later_run_that_reads_otherwise_is_named_though_its_ci_overlaps(docs: list[dict[str, Any]]) -> None:
    """The loose run's lora CI (0.926-1.021) overlaps this run's (0.924-0.960) but holds 1.0, which this run's
    finding calls outside its CI: the paragraph says so, not only that the CIs overlap."""
    full = report(docs, limit=10**9, max_lines=None, declared=scripts.declared(docs), **attached_of(RUN))
    later = full[full.index("Later runs attached:") :].split(" Standalone scripts")[0]
    loose = later[later.index("`repro all --target-ci 0.02 --budget 2`") :]
    said = "4 headline CI(s) overlap this run's; read otherwise there: lora-batch-scaling's CI 0.926-1.021 holds 1.0"
    assert said + ", this run's does not" in loose
    assert "read otherwise" not in later[: later.index("`repro all --target-ci")]


def test_the_band_note_says_where_a_repro_module_file_ran_in_none_of_its_bands_runs() -> None:
    """evidence49's graph-memset module file ran in none of the 105 band runs before it: the note under the table
    says so and where the commits that changed it are listed; with this run's own point in the band, no such note."""
    from dataclasses import replace

    from repro.evidence import band, model
    from repro.evidence.report_parts import band_notes

    doc = model.run_of(artifact.load(RUN / "graph-memset.json"))
    sha = (doc.repro.source_sha256 or "")[:12]
    bands = band.load()
    b = band.lookup(doc, bands)
    assert b is not None and b.same_source(sha)[0] >= 1  # the committed band holds this run itself
    before = replace(
        b, points=tuple(replace(p, run_sources=tuple(s for s in p.run_sources if s != sha)) for p in b.points)
    )
    note = band_notes([doc], [before], history=True)
    known = before.same_source(sha)[1]
    assert (
        f"graph-memset's module file (byte for byte) ran in none of its band's {known} runs: attached/harness" in note
    )
    assert "module file" not in band_notes([doc], [b], history=True)
    assert "harness-history" not in band_notes([doc], [before])
