"""The one module a repro author imports: declare params, variants, comparisons, sweeps and plots;
time arms through the ``Context``; explain the ``Outcome``; write a standalone script.

Everything a catalog repro uses is here, so a plugin written against these names keeps working
however the harness below them is arranged.
"""

from __future__ import annotations

from repro.core import stats
from repro.core.context import Arm, Context, SamplingConfig
from repro.core.errors import UsageError
from repro.core.results import (
    Comparison,
    Finding,
    Kernel,
    Metric,
    Plot,
    Ratio,
    RunResult,
    Timing,
    VariantResult,
    Work,
    achieved,
)
from repro.core.spec import Repro, Requirements, Sweep, param
from repro.core.verdict import Outcome, short_kernel, top_kernel
from repro.evidence import standalone
from repro.evidence.seeds import programs as seed_programs
from repro.run.catalog import register
from repro.run.sampling import kernel_episode
from repro.run.schedule import QUICK_UNPROFILED

__all__ = [
    # declaring a repro
    "Comparison",
    "Metric",
    "Plot",
    "Repro",
    "Requirements",
    "Sweep",
    "UsageError",
    "param",
    "register",
    # measuring
    "Arm",
    "Context",
    "SamplingConfig",
    "Work",
    "kernel_episode",
    # results and their explanation
    "Finding",
    "Kernel",
    "Outcome",
    "Ratio",
    "RunResult",
    "VariantResult",
    "short_kernel",
    "top_kernel",
    "QUICK_UNPROFILED",
    # the seeds' own programs as this package holds them (repro id -> file name -> text)
    "seed_programs",
    # a variant timed by a program of its own (graph-memset's CUDA twin)
    "Timing",
    "achieved",
    "stats",
    # the standalone script (``standalone.build``, ``standalone.comparison_filter``)
    "standalone",
]
