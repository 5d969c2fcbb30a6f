"""The seeds' own programs this package holds (``data/seed_programs.json``), which the bundle ships
under ``seeds/<repro id>/`` beside the harness's re-implementation of each."""

from __future__ import annotations

import functools
import json
from pathlib import Path

SEED_PROGRAMS = Path(__file__).resolve().parent / "data" / "seed_programs.json"


@functools.cache
def _load() -> dict[str, object]:
    got = json.loads(SEED_PROGRAMS.read_text())
    return got if isinstance(got, dict) else {}


def about() -> str:
    """Where the programs come from and which seeds have none (the data's ``_about``)."""
    return str(_load().get("_about", ""))


def posted(repro_id: str) -> str | None:
    """Where the seed's source posted its program, and how the copy this project could read differs from
    the program held here (the data's ``_posted``); None where nothing is said."""
    said = _load().get("_posted")
    got = said.get(repro_id) if isinstance(said, dict) else None
    return str(got) if got else None


def checked(repro_id: str) -> str | None:
    """Why the seed's claim could not be checked against the source it cites (the data's ``_checked``); None
    where it was, or where the seed cites no source."""
    said = _load().get("_checked")
    got = said.get(repro_id) if isinstance(said, dict) else None
    return str(got) if got else None


def programs() -> dict[str, dict[str, str]]:
    """Repro id -> {file name: text} of the seed's own program."""
    return {
        k: {str(f): str(body) for f, body in v.items()}
        for k, v in _load().items()
        if not k.startswith("_") and isinstance(v, dict)
    }


def folder(repro_id: str) -> str | None:
    """``seeds/<id>/``, the bundle's folder of the seed's program of ``repro_id``; None without one."""
    return f"seeds/{repro_id}/" if repro_id in programs() else None
