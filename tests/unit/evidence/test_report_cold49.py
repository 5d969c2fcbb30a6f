"""What evidence49's cold reader asked of the full report, answered from that run's own artifacts: its quick run was
stopped at solve-512-cliff (an error, not a headline), its loose run's lora CI holds 1.0 though it overlaps, and the
band column gave no way to see that graph-memset's module file had changed since every band run."""

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
def later() -> str:
    """The full report's Later-runs sentences, rendered from the committed run."""
    docs = with_catalog_prose([artifact.load(p) for p in artifact.expand([RUN])])
    full = report(docs, limit=10**9, max_lines=None, declared=scripts.declared(docs), **attached_of(RUN))
    return full[full.index("Later runs attached:") :].split(" Standalone scripts")[0]


def test_a_later_run_whose_repro_ended_in_an_error_names_it(later: str) -> None:
    quick = later[later.index("`repro all --quick`") :]
    assert quick.startswith("`repro all --quick` on this GPU (headline comparisons only): 3 headline CI(s) overlap")
    said = "no headline there, as solve-512-cliff was stopped by a SIGTERM, the batch ending there (`interrupted by"
    assert said + " SIGTERM after 6.3 s; the batch stopped here`)" in quick
    assert "no headline there" not in later[later.index("`repro all --target-ci") :]


def test_a_later_run_that_reads_otherwise_is_named_though_its_ci_overlaps(later: str) -> None:
    """The loose run's lora CI (0.926-1.021) overlaps this run's (0.924-0.960) but holds 1.0, which this run's
    finding calls outside its CI: the paragraph says so, not only that the CIs overlap."""
    loose = later[later.index("`repro all --target-ci 0.02 --budget 2`") :]
    assert loose.startswith(
        "`repro all --target-ci 0.02 --budget 2` on this GPU (a looser CI target, less sampling): 4 headline CI(s) "
        "overlap this run's (half-widths 0.5-4.9%, this run's 0.5-1.9%; suspect there: lora-batch-scaling); read "
        "otherwise there: lora-batch-scaling's CI 0.926-1.021 holds 1.0, this run's does not "
        "(`attached/loose-lora-batch-scaling.json`); valid there, suspect here: solve-512-cliff 9.52x (99.2% CI "
        "9.48-9.57, worst of 6)."
    )
    assert "read otherwise" not in later[: later.index("`repro all --target-ci")]


def test_the_band_note_says_where_a_repro_module_file_ran_in_none_of_its_bands_runs() -> None:
    """evidence49's graph-memset module file ran in none of the 105 band runs before it: the note under the table
    says so and where the commits that changed it are listed; with this run's own point in the band, no such note."""
    from dataclasses import replace

    from repro.evidence import band, model
    from repro.evidence.lines import band_notes

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
        f"graph-memset's module file ran in none of its band's {known} runs (attached/harness-history.txt marks" in note
    )
    assert "module file" not in band_notes([doc], [b], history=True)
    assert "harness-history" not in band_notes([doc], [before])


def _later(name: str, edit: Any = None) -> tuple[list[Any], dict[str, Any]]:
    """This run's artifacts and one attached later artifact (``attached/name``), edited by ``edit``."""
    import copy
    import json

    from repro.evidence import model

    docs = [model.of(artifact.load(p)) for p in artifact.expand([RUN])]
    raw = copy.deepcopy(json.loads((RUN / "attached" / name).read_text()))
    if edit is not None:
        edit(raw)
    return docs, {name: model.of(raw)}


def test_an_overlapping_later_headline_on_the_other_side_of_the_threshold_or_another_status_is_named() -> None:
    from repro.evidence import reruns

    def straddle(raw: dict[str, Any]) -> None:  # graph-memset's loose CI across its 1.2 threshold, 1.0 outside
        raw["verdict"].update(ci_low=1.19, ci_high=1.4701, status="not_reproduced")

    docs, later = _later("loose-graph-memset.json", straddle)
    said = reruns.others(docs, later)
    assert "1 headline CI(s) overlap this run's" in said
    assert "read otherwise there: graph-memset not_reproduced (here reproduced), its CI 1.190-1.470 holds the " in said
    assert "threshold 1.2, this run's does not (`attached/loose-graph-memset.json`)" in said
    assert "holds 1.0" not in said and "excludes 1.0" not in said

    def near_one(raw: dict[str, Any]) -> None:  # lora's loose CI just above 1.0, this run's holds none of it
        raw["verdict"].update(ci_low=1.0004, ci_high=1.02, value=1.01)

    docs, later = _later("loose-lora-batch-scaling.json", near_one)
    ours = next(d for d in docs if d.repro.id == "lora-batch-scaling")
    assert ours.verdict.ci_high is not None and ours.verdict.ci_high < 1.0004  # so the two CIs miss: not said
    assert "read otherwise" not in reruns.others(docs, later)


def test_the_decimals_show_a_ci_on_its_side_of_1() -> None:
    from repro.evidence import reruns

    docs, later = _later("loose-lora-batch-scaling.json", lambda raw: raw["verdict"].update(ci_high=1.0004))
    assert "lora-batch-scaling's CI 0.9263-1.0004 holds 1.0, this run's does not" in reruns.others(docs, later)


def test_a_later_run_whose_every_repro_errored_gives_no_count() -> None:
    from repro.evidence import reruns

    docs, later = _later("quick-solve-512-cliff.json")
    said = reruns.others(docs, later)
    assert "headline CI(s)" not in said and "no headline there, as solve-512-cliff was stopped by a SIGTERM" in said
    assert "on another GPU or none recorded" in said  # no sibling named the GPU


def test_the_band_note_names_each_run_whose_module_file_ran_in_none_of_the_bands_runs() -> None:
    """Two runs in one report, of the same band: the note is not dropped for the second run's module file."""
    from dataclasses import replace

    from repro.evidence import band, model
    from repro.evidence.lines import band_notes

    new = model.run_of(artifact.load(RUN / "graph-memset.json"))
    old = model.run_of(
        artifact.load(next((ROOT / "artifacts/reference/h200/evidence48/all").iterdir()) / "graph-memset.json")
    )
    sha = (new.repro.source_sha256 or "")[:12]
    b = band.lookup(new, band.load())
    assert b is not None and band.lookup(old, [b]) is b and old.repro.source_sha256 != new.repro.source_sha256
    before = replace(
        b, points=tuple(replace(p, run_sources=tuple(x for x in p.run_sources if x != sha)) for p in b.points)
    )
    note = band_notes([old, new], [before], history=True)
    assert f"graph-memset's module file in run {new.run.run_id} ran in none of its band's" in note
    assert f"in run {old.run.run_id}" not in note  # its module file is in the band
