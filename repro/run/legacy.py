"""The first plugin API, for third-party repros that import ``repro.spec``, ``repro.catalog``,
``repro.measure`` or ``repro.verdict``: every name those modules offered, looked up in the modules
that hold it. Repros import ``repro.api``.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = (
    "repro.core.spec",
    "repro.core.results",
    "repro.core.verdict",
    "repro.core.context",
    "repro.run.sampling",
    "repro.run.kernels",
    "repro.run.knobs",
    "repro.run.context",
    "repro.run.catalog",
)


def __getattr__(name: str) -> Any:
    for home in _HOMES:
        module = importlib.import_module(home)
        if hasattr(module, name):
            return getattr(module, name)
    raise AttributeError(f"module 'repro.run.legacy' has no attribute {name!r}")
