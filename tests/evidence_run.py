"""The committed H200 evidence run that the report tests render: the ``docs`` and ``rendered``
fixtures (a plugin of tests/conftest.py; the run's numbers with today's prose, see
``with_catalog_prose``) and helpers to pick the run apart."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT

from repro.evidence import artifact, bundle, model
from repro.evidence.model import Artifact
from repro.evidence.report import report
from repro.run import scripts

EVIDENCE = ROOT / "artifacts" / "reference" / "h200" / "evidence" / "all" / "20261201T111151Z-438281"


# The repro's prose an artifact records from the catalog (repro.run.execute.repro_section).
PROSE = ("title", "seed_claim", "impact", "seed_source", "seed_experiment")


def with_catalog_prose(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The artifacts as this harness would write them for the same numbers: each repro's prose
    (PROSE) from today's catalog. A report renders an artifact in its own words, so tests of how
    today's words read against a committed run's measurements render these."""
    from repro.run import catalog

    out = copy.deepcopy(docs)
    for d in out:
        cls = catalog.get(d["repro"]["id"])
        for name in PROSE:
            d["repro"][name] = getattr(cls, name) or None
    return out


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return with_catalog_prose([artifact.load(p) for p in artifact.expand([EVIDENCE])])


@pytest.fixture(scope="module")
def rendered(docs: list[dict[str, Any]]) -> str:
    return report(docs, declared=scripts.declared(docs))


@pytest.fixture(scope="module")
def roomy(docs: list[dict[str, Any]]) -> str:
    """The same report with room for every line (``report-full.md``'s form): the lines a pasted report leaves
    out to fit are tested here, whatever tier today's prose lands it in."""
    return report(docs, declared=scripts.declared(docs), limit=sys.maxsize, max_lines=None)


def typed(run: Path, rid: str) -> Artifact:
    """Repro ``rid``'s artifact of run folder ``run``, typed."""
    got = model.of(artifact.load(run / f"{rid}.json"))
    assert isinstance(got, Artifact)
    return got


def by_id(docs: list[dict[str, Any]], rid: str) -> dict[str, Any]:
    """A deep copy of the artifact of repro ``rid``, free to be changed by a test."""
    return copy.deepcopy(next(d for d in docs if d["repro"]["id"] == rid))


def section(text: str, rid: str) -> str:
    """Repro ``rid``'s section of a rendered report."""
    return text.split(f"## `{rid}`", 1)[1].split("\n## ", 1)[0]


def attached_of(run: Path) -> dict[str, Any]:
    """``report``'s keywords for what a run folder's ``attached/`` holds, as ``repro bundle`` and ``repro report``
    read it (``bundle.attached_inputs``)."""
    return bundle.attached_inputs(run)


def pasted(run: Path, **kw: Any) -> str:
    """Run folder ``run``'s report as ``repro report`` renders it: today's prose (``with_catalog_prose``), what
    its ``attached/`` holds as the bundle reads it, and ``kw`` (``limit``, ``max_lines``) for ``report``."""
    from repro.cli.evidence import _rendered

    docs = with_catalog_prose([artifact.load(p) for p in artifact.expand([run])])
    return _rendered(docs, run, **attached_of(run), **kw)
