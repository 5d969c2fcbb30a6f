"""``repro matrix``: plan, run (local, Slurm, Kubernetes), collect; argument parsing only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from repro.cli.common import echo_text, handles_errors, new_typer
from repro.core.errors import ReproError

matrix_app = new_typer(
    "matrix", "Run lanes x repros x GPUs as numbered cells on this host, a Slurm cluster or Kubernetes; collect them."
)

SpecArg = Annotated[
    Path, typer.Argument(metavar="SPEC", help="Matrix spec (JSON, schemas/matrix.schema.json).", show_default=False)
]
DirArg = Annotated[
    Path, typer.Argument(metavar="DIR", help="A matrix folder (the --out of `repro matrix run`).", show_default=False)
]


def _log(line: str) -> None:
    echo_text(line, err=True)


@matrix_app.command("plan")
@handles_errors
def plan_cmd(
    spec: SpecArg,
    as_json: Annotated[bool, typer.Option("--json", help="The plan file's JSON on stdout.")] = False,
) -> None:
    """Check a spec and print its numbered cells (lane x repro x GPU selector)."""
    from repro.evidence.markdown import table
    from repro.lanes.matrix import plan

    p = plan.load(spec)
    if as_json:
        typer.echo(json.dumps(plan.to_doc(p), indent=2))
        return
    echo_text(table(plan.rows(p), plan.ROW_HEADERS))
    _log(f"{len(p.cells)} cells; spec digest {p.digest}")


@matrix_app.command("run")
@handles_errors
def run_cmd(
    spec: SpecArg,
    backend: Annotated[
        str, typer.Option("--backend", metavar="local|slurm|k8s", help="Where the cells run.")
    ] = "local",
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            metavar="DIR",
            help="Matrix folder (default artifacts/matrix/<name>); rerun with the same one to resume. "
            "Slurm: on a file system the nodes share.",
            show_default=False,
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Print what would run (commands, sbatch script, k8s YAML); submit nothing."),
    ] = False,
    launcher: Annotated[
        str | None,
        typer.Option(
            "--launcher",
            metavar="auto|pyxis|docker|podman|native",
            help="How image lanes start (default: the spec's slurm.launcher, else auto); "
            "auto: pyxis where srun has it, else docker, else podman.",
            show_default=False,
        ),
    ] = None,
    max_parallel: Annotated[
        int | None,
        typer.Option(
            "--max-parallel",
            metavar="K",
            help="Cells at once (Slurm: --array=...%K; local: default one per GPU, 1 without GPUs).",
            show_default=False,
        ),
    ] = None,
    devices: Annotated[
        str | None,
        typer.Option(
            "--devices",
            metavar="IDS",
            help=(
                "local: GPU indices to use, e.g. 0,1 (default: every GPU), one cell per GPU at a time. "
                "To compare headlines across runs, give each run the same single GPU (--devices 0): "
                "on two H200s, cells on neighbouring GPUs moved one headline by about 2%."
            ),
            show_default=False,
        ),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            metavar="SECONDS",
            help="slurm, k8s: wait at most this long for the whole matrix, then cancel (scancel / delete "
            "the Jobs). Each cell also has the spec's timeout_s.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run every cell not yet done in --out; then collect (exit 1 when a cell is missing or failed)."""
    from repro.lanes.matrix import local, plan
    from repro.lanes.matrix import run as run_mod

    p = plan.load(spec)
    root = out if out is not None else Path("artifacts") / "matrix" / p.name
    opts = run_mod.Options(
        backend=backend,
        launcher=launcher,
        max_parallel=max_parallel,
        timeout_s=timeout,
        devices=local.parse_devices(devices),
        dry_run=dry_run,
    )
    _, text = run_mod.run(p, root, opts, log=_log)
    if dry_run:
        echo_text(text or "", nl=False)
        return
    _collect(root)


def _collect(root: Path) -> None:
    from repro.lanes.matrix import collect as c

    plan, rows = c.collect(root)
    folder = c.write(root, plan, rows)
    bad = [r for r in rows if not r.done]
    for r in rows:
        _log(f"{r.cell.index:>3} {r.cell.id}: {r.status} - {r.note[:120]}")
    _log(f"collected {len(rows)} cells: {len(rows) - len(bad)} done, {len(bad)} missing or failed")
    _log(f"report: {folder / 'report.md'}\ncells:  {folder / 'cells.json'}")
    if bad:
        raise typer.Exit(1)


@matrix_app.command("collect")
@handles_errors
def collect_cmd(root: DirArg) -> None:
    """Validate every cell's newest artifact, flag missing or failed ones, write the table and an issue-ready report."""
    _collect(root)


@matrix_app.command("cell", hidden=True)
@handles_errors
def cell_cmd(
    plan_file: Annotated[Path, typer.Option("--plan", metavar="FILE", help="The plan file (DIR/plan.json).")],
    root: Annotated[Path, typer.Option("--root", metavar="DIR", help="The matrix folder as this node sees it.")],
    cell: Annotated[
        int | None, typer.Option("--cell", metavar="N", help="The cell's number.", show_default=False)
    ] = None,
    cells: Annotated[
        str | None,
        typer.Option("--cells", metavar="LIST", help="Cell numbers, picked by --index-env.", show_default=False),
    ] = None,
    index_env: Annotated[
        str | None,
        typer.Option(
            "--index-env",
            metavar="VAR",
            help="Variable holding the index into --cells (k8s: JOB_COMPLETION_INDEX).",
            show_default=False,
        ),
    ] = None,
    repro_path: Annotated[
        list[Path] | None,
        typer.Option("--repro-path", metavar="DIR", help="Plugin folders as mounted here (default: the plan's)."),
    ] = None,
    attempt: Annotated[
        str | None,
        typer.Option("--attempt", metavar="NAME", help="The run folder the runner made for this launch."),
    ] = None,
) -> None:
    """Run one cell (what each Slurm task, pod or local slot runs); a crash leaves an error artifact."""
    from repro.lanes.matrix import cell as cell_mod

    p = cell_mod.read_plan(plan_file)
    c = p.cell(cell_mod.index_from(cell, cells, index_env))
    result = cell_mod.run(p, c, root, repro_path or None, attempt)
    _log(f"cell {c.index} {c.id}: {result.status} - {result.message}")
    if result.artifact is None:
        raise ReproError(f"cell {c.index} {c.id}: no artifact could be written ({result.message})")
