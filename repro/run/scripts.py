"""Standalone scripts and declarations from the plugin registry, for `repro script` and for the reports the CLI renders.

A report reads no registry (``repro.evidence.declared``): its caller builds the ``Declared``
data here and passes it in. A script comes only from the catalog's code for the repro id and
params; the ``repro.script`` an artifact recorded is never used (a crafted artifact could put
any program there).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from repro.core.errors import UsageError
from repro.core.spec import build_params
from repro.evidence import artifact, model
from repro.evidence.declared import Declared, key
from repro.evidence.model import Artifact, Doc
from repro.run import catalog

__all__ = ["declared", "regenerate", "script_for"]


def script_for(
    repro_id: str,
    overrides: Mapping[str, str],
    *,
    smoke: bool = False,
    only: str | None = None,
    repro_paths: Iterable[Path] = (),
) -> str:
    """The standalone script of ``repro_id`` with its params (defaults, smoke preset, overrides).

    A repro that declares no script is a UsageError (exit 2) naming it.
    """
    cls = catalog.get(repro_id, repro_paths)
    params = build_params(cls.id, cls.Params, overrides, smoke=smoke)
    text = cls().script(params, only)
    if text is None:
        raise UsageError(f"{repro_id} declares no standalone script; expected a repro whose class defines script()")
    return text


def regenerate(doc: Artifact | Mapping[str, Any], repro_paths: Iterable[Path] = ()) -> tuple[str | None, str | None]:
    """The standalone script of an artifact's repro, from this catalog's code for its repro id and params: the
    one ``repro script ID`` prints for them (its headline comparisons with their controls), so the bundle ships
    the script whose output a run's maker attaches.

    Returns ``(script, note)``: with a script, the note says when this checkout's source of the
    repro differs from the one that made the artifact; without one, it says why none was made.
    """
    a = model.run_of(doc)
    rid = a.repro.id
    cls = catalog.load(repro_paths).get(rid)
    if cls is None:
        return None, f"{rid} is not in this installation's catalog"
    raw = {k: ",".join(map(str, v)) if isinstance(v, list) else str(v) for k, v in a.repro.params.items()}
    notes: list[str] = []
    try:
        params = build_params(cls.id, cls.Params, raw)
        script = cls().script(params)
    except Exception as exc:  # params this catalog does not accept, or a plugin's script() failing: no script
        return None, f"this catalog's {rid} could not build a script for the artifact's params ({type(exc).__name__})"
    if script is None:
        return None, "; ".join(notes) or f"{rid} declares no standalone script"
    here, there = artifact.source_sha256(catalog.source_file(cls.id)), a.repro.source_sha256
    if there and here != there:
        notes.append(
            f"made from this installation's source of {rid} (sha256 {str(here)[:12]}), which differs from the "
            f"source that made the artifact ({str(there)[:12]})"
        )
    return script, "; ".join(notes) or None


def declared(
    docs: Sequence[Doc | Mapping[str, Any]], repro_paths: Iterable[Path] = ()
) -> dict[tuple[str, str], Declared]:
    """For each run artifact (cliff searches have none), what the catalog declares for its repro, script included."""
    paths = list(repro_paths)
    classes = catalog.load(paths)
    out: dict[tuple[str, str], Declared] = {}
    for doc in model.artifacts(docs):
        cls = classes.get(doc.repro.id)
        script, note = regenerate(doc, paths)
        if cls is None:
            out[key(doc)] = Declared(script_note=note)
            continue
        out[key(doc)] = Declared(
            impact=cls.impact or None,
            stack=cls.stack or None,
            seed_gpus=tuple(cls.seed_gpus),
            untested=tuple(cls.untested),
            plots=tuple(cls.plots),
            script=script,
            script_note=note,
            source=artifact.source_sha256(catalog.source_file(cls.id)),
        )
    return out
