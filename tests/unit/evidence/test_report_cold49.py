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
