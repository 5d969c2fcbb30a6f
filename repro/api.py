"""The one module a repro author imports: declare params, comparisons, sweeps and plots, time arms."""

from __future__ import annotations

from repro.core.errors import UsageError
from repro.core.results import Comparison, Plot
from repro.core.spec import Repro, Sweep, param
from repro.run.catalog import register
from repro.run.measure import Arm, Context

__all__ = ["Arm", "Comparison", "Context", "Plot", "Repro", "Sweep", "UsageError", "param", "register"]
