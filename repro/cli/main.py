"""The ``repro`` command: argument parsing and exit codes only; the work lives in the library."""

from __future__ import annotations

from typing import Annotated

import typer

from repro import __version__
from repro.cli import env, evidence, run
from repro.cli.common import new_typer
from repro.cli.docker import images_app
from repro.cli.matrix import matrix_app

app = new_typer(
    "repro", "Reproduce known GPU performance cliffs; leave a validated artifact and a GitHub-ready report."
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gpu-repro {__version__}")
        raise typer.Exit()


@app.callback()
def main_callback(
    version: Annotated[
        bool, typer.Option("--version", help="Print the version and exit.", callback=_version, is_eager=True)
    ] = False,
) -> None:
    """Reproduce known GPU performance cliffs."""


app.command("list")(env.list_cmd)
app.command("run")(run.run_cmd)
app.command("script")(run.script_cmd)
app.command("cliff")(run.cliff_cmd)
app.command("all")(run.all_cmd)
app.command("fingerprint")(env.fingerprint_cmd)
app.command("validate")(evidence.validate_cmd)
app.command("report")(evidence.report_cmd)
app.command("bundle")(evidence.bundle_cmd)
app.command("doctor")(env.doctor_cmd)
app.add_typer(images_app, name="images")
app.add_typer(matrix_app, name="matrix")
app.command("compare")(evidence.compare_cmd)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
