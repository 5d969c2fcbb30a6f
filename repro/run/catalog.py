"""Registry of repros: built-ins, the ``repro.repros`` entry-point group and ``--repro-path`` folders."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
from collections.abc import Iterable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from repro.core.errors import UsageError
from repro.core.spec import Repro

ENTRY_POINT_GROUP = "repro.repros"
_REGISTRY: dict[str, type[Repro[Any]]] = {}
_SOURCES: dict[str, str] = {}  # id -> file the class was defined in (for the source hash)
_loaded = False


def register(cls: type[Repro[Any]]) -> type[Repro[Any]]:
    """Class decorator: add a repro to the catalog; a second class with the same id is refused."""
    rid = getattr(cls, "id", None)
    if not isinstance(rid, str) or not rid:
        raise TypeError(f"{cls.__name__} has no string 'id'")
    if rid in _REGISTRY and _REGISTRY[rid] is not cls:
        other = _REGISTRY[rid]
        raise ValueError(
            f"duplicate repro id {rid!r}: {other.__module__}.{other.__name__} and {cls.__module__}.{cls.__name__}"
        )
    for attr in ("title", "upstream", "seed_claim", "Params", "requires", "metric"):
        if not hasattr(cls, attr):
            raise TypeError(f"repro {rid!r} ({cls.__name__}) lacks {attr!r}")
    names = [s.name for s in getattr(cls, "sweeps", ())]
    if len(set(names)) != len(names):
        raise ValueError(f"repro {rid!r}: sweeps {names} declare a name twice")
    for sweep in getattr(cls, "sweeps", ()):
        try:
            sweep.check_params(cls.Params)
        except ValueError as exc:  # a declaration error surfaces at import, not mid-run
            raise ValueError(f"repro {rid!r}: {exc}") from None
    _REGISTRY[rid] = cls
    module = sys.modules.get(cls.__module__)
    _SOURCES[rid] = getattr(module, "__file__", "") or ""
    return cls


def _load_builtins() -> None:
    # By name: the catalog sits below the repros it loads (they import repro.api, which imports this).
    pkg = importlib.import_module("repro.repros")

    for info in pkgutil.iter_modules(pkg.__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{pkg.__name__}.{info.name}")


def _load_entry_points() -> None:
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        ep.load()  # importing the module runs its @register


def load_path(folder: Path) -> None:
    """Import every ``*.py`` in ``folder`` so its ``@register`` classes join the catalog."""
    if not folder.is_dir():
        raise UsageError(f"--repro-path {folder}: expected a directory of repro modules")
    for file in sorted(folder.glob("*.py")):
        name = f"repro_plugin_{file.stem}"
        if name in sys.modules:
            continue
        spec = importlib.util.spec_from_file_location(name, file)
        if spec is None or spec.loader is None:
            raise UsageError(f"--repro-path {file}: cannot be imported as a module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]  # a later load tries again instead of finding a half-run module
            raise


def load(extra_paths: Iterable[Path] = ()) -> dict[str, type[Repro[Any]]]:
    """The whole catalog, loading built-ins and plugins once (repro modules never import torch)."""
    global _loaded
    if not _loaded:
        _load_builtins()
        _load_entry_points()
        _loaded = True
    for folder in extra_paths:
        load_path(Path(folder))
    return dict(_REGISTRY)


def get(repro_id: str, extra_paths: Iterable[Path] = ()) -> type[Repro[Any]]:
    """One repro by id; an unknown id is a UsageError listing the known ones."""
    catalog = load(extra_paths)
    if repro_id not in catalog:
        raise UsageError(f"unknown repro {repro_id!r}; known: {', '.join(sorted(catalog))}")
    return catalog[repro_id]


def source_file(repro_id: str) -> str:
    return _SOURCES.get(repro_id, "")
