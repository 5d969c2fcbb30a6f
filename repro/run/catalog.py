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
from repro.core.spec import Repro, check_declarations, check_presets

ENTRY_POINT_GROUP = "repro.repros"
_REGISTRY: dict[str, type[Repro[Any]]] = {}
_SOURCES: dict[str, str] = {}  # id -> file the class was defined in (for the source hash)
_UNCHECKED: list[type[Repro[Any]]] = []  # registered; comparisons not yet checked (see load)
_loaded = False


def register(cls: type[Repro[Any]]) -> type[Repro[Any]]:
    """Class decorator: add a repro to the catalog.

    A declaration mistake (``check_declarations``) or a second class with the same id is
    refused here with one UsageError. The comparisons are checked by ``load``, once the
    repro's module has finished loading: they may call helpers defined below the class.
    """
    check_declarations(cls)
    rid = cls.id
    if rid in _REGISTRY and _REGISTRY[rid] is not cls:
        other = _REGISTRY[rid]
        raise UsageError(
            f"duplicate repro id {rid!r}: {other.__module__}.{other.__name__} and {cls.__module__}.{cls.__name__}"
        )
    _REGISTRY[rid] = cls
    _UNCHECKED.append(cls)
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
            _check_unchecked()
        except BaseException:
            # A later load tries again instead of finding a half-run module or half its repros.
            del sys.modules[name]
            for rid in [rid for rid, cls in _REGISTRY.items() if cls.__module__ == name]:
                del _REGISTRY[rid]
                _SOURCES.pop(rid, None)
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
    _check_unchecked()
    return dict(_REGISTRY)


def _check_unchecked() -> None:
    """Check the comparisons of every repro registered since the last load; a repro that fails
    leaves the catalog, and its UsageError is raised before any command uses it."""
    while _UNCHECKED:
        cls = _UNCHECKED.pop(0)
        try:
            check_presets(cls)
        except UsageError:
            if _REGISTRY.get(cls.id) is cls:
                del _REGISTRY[cls.id]
                _SOURCES.pop(cls.id, None)
            _UNCHECKED.clear()  # the rest came from the same failed load
            raise


def get(repro_id: str, extra_paths: Iterable[Path] = ()) -> type[Repro[Any]]:
    """One repro by id; an unknown id is a UsageError listing the known ones."""
    catalog = load(extra_paths)
    if repro_id not in catalog:
        raise UsageError(f"unknown repro {repro_id!r}; known: {', '.join(sorted(catalog))}")
    return catalog[repro_id]


def source_file(repro_id: str) -> str:
    return _SOURCES.get(repro_id, "")
