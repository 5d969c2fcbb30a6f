"""The options and checks that several ``repro`` commands share."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from repro.core.errors import UsageError

DEFAULT_OUT = Path(os.environ.get("GPU_REPRO_OUT", "artifacts"))

ReproPaths = Annotated[
    list[Path] | None,
    typer.Option(
        "--repro-path", metavar="DIR", help="Folder of extra repro modules (*.py using @register); repeatable."
    ),
]
OutOpt = Annotated[
    Path, typer.Option("--out", metavar="DIR", help="Folder for run folders (default $GPU_REPRO_OUT or ./artifacts).")
]
SetOpt = Annotated[
    list[str] | None, typer.Option("--set", metavar="KEY=VALUE", help="Override a param: key=value (repeatable).")
]
SmokeOpt = Annotated[bool, typer.Option("--smoke", help="Shrunken sizes so the pipeline runs anywhere (also on CPU).")]
FailOnOpt = Annotated[
    str | None,
    typer.Option(
        "--fail-on", metavar="reproduced", help="'reproduced': exit 3 when any cliff reproduced (for CI gates)."
    ),
]


def argv_as_typed() -> list[str]:
    """The command as typed (``repro ...`` or ``python -m repro ...``); empty when not run from a shell."""
    prog = os.path.basename(sys.argv[0]) if sys.argv else ""
    if prog == "repro" or prog in ("__main__.py", "cli.py"):
        return ["repro", *sys.argv[1:]]
    return []


def check_fail_on(value: str | None) -> str | None:
    if value not in (None, "reproduced"):
        raise UsageError(f"--fail-on {value!r}: expected 'reproduced'")
    return value


# A quick run's CI target: wide enough that the floors shrink to two rounds per episode, narrow
# enough that a CI clear of a threshold 30-50% away from 1.0 (those of the catalog) is common.
QUICK_TARGET = 0.05
# A quick run's budget per variant: its 5% target needs far fewer rounds than a full run's 1%.
QUICK_BUDGET = 5.0


def sampling_config(budget: float | None, target: float | None, quick: bool = False) -> Any:
    from repro.core.context import SamplingConfig

    base = SamplingConfig(target_rel_ci=QUICK_TARGET, budget_s=QUICK_BUDGET) if quick else SamplingConfig()
    if budget is not None and not budget > 0:
        raise UsageError(f"--budget {budget:g}: expected seconds > 0")
    if target is not None and not 0 < target < 1:
        raise UsageError(f"--target-ci {target:g}: expected a fraction between 0 and 1 (0.01 = 1%)")
    return SamplingConfig(
        target_rel_ci=target if target is not None else base.target_rel_ci,
        budget_s=budget if budget is not None else base.budget_s,
    )


NoCollectEnvOpt = Annotated[
    bool, typer.Option("--no-collect-env", help="Skip torch.utils.collect_env in the fingerprint (saves seconds).")
]
BudgetOpt = Annotated[
    float | None,
    typer.Option(
        "--budget",
        metavar="SECONDS",
        help="Seconds of sampling per variant (default 8; 5 in a quick run): a repro's paired rounds stop once "
        "this times its variants is spent, but not before their floor (see --target-ci): 6 episodes of min(0.3 s, "
        "a sixth of that) each, with a 0.5 s idle gap between episodes.",
    ),
]
TargetOpt = Annotated[
    float | None,
    typer.Option(
        "--target-ci",
        metavar="FRACTION",
        help="Stop sampling when the median's 95% CI half-width is under this fraction (default 0.01; 0.05 with "
        "--quick). Paired rounds never stop before their floor: 6 episodes (8 for a verdict on the worst of six "
        "comparisons, at 99.2%) with a 0.5 s idle gap between them, "
        "each of at least 0.3 s (less under a small --budget) and 4 rounds, fewer under a looser target "
        "(4 x (0.01 / FRACTION)^2, at least 2), the first round not counted toward the 0.3 s.",
    ),
]
QuickOpt = Annotated[
    bool,
    typer.Option(
        "--quick",
        help="Less evidence, same verdicts: headline comparisons only, CI target 0.05 (unless --target-ci), budget 5 s "
        "per variant (unless --budget), "
        "no profiled pass, no collect_env; a CI that straddles the threshold is 'undecided' and names the "
        "full command.",
    ),
]
