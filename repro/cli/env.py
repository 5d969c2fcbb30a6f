"""``repro list``, ``fingerprint`` and ``doctor``: the catalog and this machine."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from repro.cli.common import handles_errors
from repro.cli.options import ReproPaths


@handles_errors
def list_cmd(
    repro_path: ReproPaths = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable list on stdout.")] = False,
) -> None:
    """List the repros: id, title, upstream links, requirements."""
    from repro.core.spec import params_help
    from repro.evidence.markdown import table
    from repro.run import catalog

    repros = catalog.load(repro_path or [])
    rows: list[dict[str, Any]] = []
    for rid in sorted(repros):
        cls = repros[rid]
        rows.append(
            {
                "id": rid,
                "title": cls.title,
                "upstream": list(cls.upstream),
                "requires": cls.requires.describe(),
                "metric": cls.metric.name,
                "threshold": cls.metric.threshold,
                "params": params_help(cls.Params),
                "sweeps": [
                    {"name": w.name, "help": w.help, "min": w.min, "max": w.max, "default": w.default}
                    for w in cls.sweeps
                ],
            }
        )
    if as_json:
        typer.echo(json.dumps(rows, indent=2, default=str))
        return
    typer.echo(
        table(
            [[r["id"], r["title"], " ".join(map(str, r["upstream"])), r["requires"]] for r in rows],
            ["id", "title", "upstream", "requires"],
        )
    )


@handles_errors
def fingerprint_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole fingerprint as JSON.")] = False,
    no_collect_env: Annotated[
        bool, typer.Option("--no-collect-env", help="Skip torch.utils.collect_env (saves seconds).")
    ] = False,
) -> None:
    """Print this machine's environment fingerprint (imports torch when present)."""
    from repro.core.redact import redactor
    from repro.env import fingerprint
    from repro.evidence.machines import fingerprint_text

    # In this process, after torch is imported once (a second interpreter would import it again).
    fp = fingerprint.collect(collect_env=None if no_collect_env else fingerprint.collect_env_in_process())
    fp = redactor()(fp)
    if as_json:
        typer.echo(json.dumps(fp, indent=2, default=str))
        return
    typer.echo("\n".join(fingerprint_text(fp, redactor()(sys.executable))))


@handles_errors
def doctor_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable findings on stdout.")] = False,
) -> None:
    """Check this machine for the usual causes of cliffs and of bad measurements."""
    from repro.env import doctor
    from repro.evidence.markdown import table

    result = doctor.diagnose()
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    typer.echo(result["headline"])
    rows = [[f["level"].upper(), f["check"], f["seen"], f["action"]] for f in result["findings"]]
    typer.echo(table(rows, ["level", "check", "seen", "what to do"]))
