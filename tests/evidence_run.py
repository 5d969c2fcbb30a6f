"""The committed H200 evidence run that the report tests render: the ``docs`` and ``rendered``
fixtures (a plugin of tests/conftest.py) and helpers to pick the run apart."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from helpers import ROOT

from repro.evidence import artifact
from repro.evidence.report import report
from repro.run import scripts

EVIDENCE = ROOT / "artifacts" / "reference" / "h200" / "evidence" / "all" / "20261201T111151Z-438281"


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return [artifact.load(p) for p in artifact.expand([EVIDENCE])]


@pytest.fixture(scope="module")
def rendered(docs: list[dict[str, Any]]) -> str:
    return report(docs, declared=scripts.declared(docs))


def by_id(docs: list[dict[str, Any]], rid: str) -> dict[str, Any]:
    """A deep copy of the artifact of repro ``rid``, free to be changed by a test."""
    return copy.deepcopy(next(d for d in docs if d["repro"]["id"] == rid))


def section(text: str, rid: str) -> str:
    """Repro ``rid``'s section of a rendered report."""
    return text.split(f"## `{rid}`", 1)[1].split("\n## ", 1)[0]
