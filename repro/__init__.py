"""gpu-repro: reproduce known GPU performance cliffs and leave evidence a maintainer can act on."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

__version__ = "0.1.0"

# Module names of the first plugin API. Third-party repros written against it still import them;
# each resolves to the one adapter module, repro.run.legacy, with a DeprecationWarning.
LEGACY_MODULES = frozenset({"repro.spec", "repro.catalog", "repro.measure", "repro.verdict"})


class _LegacyLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(
            f"{spec.name} is the first plugin API; import from repro.api instead", DeprecationWarning, stacklevel=2
        )
        return importlib.import_module("repro.run.legacy")

    def exec_module(self, module: ModuleType) -> None:
        """The adapter module is already executed."""


class _LegacyFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in LEGACY_MODULES:
            return None
        return importlib.util.spec_from_loader(fullname, _LegacyLoader())


if not any(isinstance(f, _LegacyFinder) for f in sys.meta_path):
    sys.meta_path.append(_LegacyFinder())
