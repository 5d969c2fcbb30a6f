"""What a report takes from the plugin registry, handed in as plain data: rendering itself reads no registry.

The caller (the CLI, or ``repro.run.scripts.declared``) looks each artifact's repro up in the
catalog and passes the result to ``report.report``, ``plots.figures`` and ``scope``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from repro.core.results import Plot
from repro.evidence.model import Artifact

__all__ = ["NONE", "Declarations", "Declared", "key", "of"]


@dataclass(frozen=True)
class Declared:
    """What the catalog declares for one artifact's repro.

    An artifact's own fields (schema 1.2; ``untested`` 1.5) come first for ``impact``, ``seed_gpus``,
    ``untested`` and ``plots``: a report describes a run in the words of the harness that made it;
    these fill in for an artifact that lacks them.
    ``script`` is the only script a report shows: regenerated from the catalog's code for the
    artifact's repro id and params, never read from the artifact (a crafted artifact could put any
    program in its ``repro.script``).
    """

    impact: str | None = None
    stack: str | None = None
    seed_gpus: tuple[str, ...] | None = None
    untested: tuple[str, ...] | None = None
    plots: tuple[Plot, ...] | None = None
    script: str | None = None
    # With a script: what a reader should know about it (its source differs from the artifact's).
    # Without one: why none could be regenerated.
    script_note: str | None = None
    # The sha256 of the catalog's own source of the repro (the harness rendering the report): where it is not
    # the artifact's, a script this harness regenerates can differ from one made by the harness that ran.
    source: str | None = None


NONE = Declared()

Declarations = Mapping[tuple[str, str], Declared]


def key(doc: Artifact) -> tuple[str, str]:
    """Which artifact a ``Declared`` belongs to: its run id and repro id."""
    return doc.run.run_id, doc.repro.id


def of(doc: Artifact, declared: Declarations | None) -> Declared:
    """The declarations for ``doc``, or ``NONE`` when the caller passed none for it."""
    return (declared or {}).get(key(doc), NONE)
