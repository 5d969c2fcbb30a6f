"""``repro run``, ``all``, ``script`` and ``cliff``: argument parsing, then the run layer does the work."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from repro.cli.common import err, handles_errors
from repro.cli.options import (
    DEFAULT_OUT,
    BudgetOpt,
    FailOnOpt,
    NoCollectEnvOpt,
    OutOpt,
    QuickOpt,
    ReproPaths,
    SetOpt,
    SmokeOpt,
    TargetOpt,
    argv_as_typed,
    check_fail_on,
    sampling_config,
)
from repro.cliff.search import DEFAULT_BUDGET_S, DEFAULT_GRID, DEFAULT_MAX_POINTS, DEFAULT_THRESHOLD
from repro.core.errors import CliffReproduced, ReproError, UsageError


def _new_run_dir(out: Path) -> Path:
    from repro.evidence.artifact import ensure_writable_dir, new_run_id

    root = ensure_writable_dir(out)
    for _ in range(5):
        run_dir = root / new_run_id()
        try:
            run_dir.mkdir()
            return run_dir
        except FileExistsError:
            continue
    raise ReproError(f"could not create a fresh run folder under {root}")


def _write_report(run_dir: Path) -> Path:
    from repro.evidence import artifact, plots
    from repro.evidence.report import report
    from repro.run.scripts import declared

    docs = [artifact.load(p) for p in artifact.expand([run_dir])]
    known = declared(docs)  # what the catalog declares per artifact, the regenerated scripts among it
    figures = plots.figures(docs, run_dir, declared=known)  # plots/<id>.<plot>.png, or why not (no matplotlib)
    return artifact.write_new(run_dir / "report.md", report(docs, figures=figures, declared=known).encode())


@handles_errors
def run_cmd(
    repro_id: Annotated[str, typer.Argument(metavar="ID", help="Repro id (see `repro list`).", show_default=False)],
    set_: SetOpt = None,
    smoke: SmokeOpt = False,
    out: OutOpt = DEFAULT_OUT,
    as_json: Annotated[bool, typer.Option("--json", help="Print the artifact JSON on stdout.")] = False,
    repro_path: ReproPaths = None,
    budget: BudgetOpt = None,
    target_ci: TargetOpt = None,
    fail_on: FailOnOpt = None,
    no_collect_env: NoCollectEnvOpt = False,
    quick: QuickOpt = False,
) -> None:
    """Run one repro in this process; write artifacts/<run-id>/<id>.json and report.md."""
    from repro.core.spec import parse_assignments
    from repro.run.execute import RunRequest, execute, resolve
    from repro.run.progress import Display

    req = RunRequest(
        repro_id=repro_id,
        overrides=parse_assignments(set_ or []),
        smoke=smoke,
        repro_paths=repro_path or [],
        sampling=sampling_config(budget, target_ci, quick),
        command=argv_as_typed(),
        collect_env=not (no_collect_env or quick),
        quick=quick,
    )
    check_fail_on(fail_on)
    resolve(req)  # all input checked before the run folder exists
    run_dir = _new_run_dir(out)
    display = Display()
    try:
        doc, path = execute(req, run_dir, log=display.log, progress=display.progress)
    finally:
        display.close()
    report = _write_report(run_dir)
    v = doc["verdict"]
    typer.echo(f"{repro_id}: {v['status']} - {v['finding']}", err=True)
    typer.echo(f"artifact: {path}\nreport:   {report}", err=True)
    if as_json:
        typer.echo(json.dumps(doc, indent=2))
    if fail_on == "reproduced" and v["status"] == "reproduced":
        raise CliffReproduced(f"--fail-on reproduced: {repro_id} reproduced")


@handles_errors
def script_cmd(
    repro_id: Annotated[str, typer.Argument(metavar="ID", help="Repro id (see `repro list`).", show_default=False)],
    set_: SetOpt = None,
    smoke: SmokeOpt = False,
    comparison: Annotated[
        str | None,
        typer.Option("--comparison", metavar="NAME", help="Only this comparison (default: the headline ones)."),
    ] = None,
    repro_path: ReproPaths = None,
) -> None:
    """Print a standalone torch script of the repro's headline comparison with the exact params."""
    from repro.core.spec import parse_assignments
    from repro.run.scripts import script_for

    text = script_for(
        repro_id, parse_assignments(set_ or []), smoke=smoke, only=comparison, repro_paths=repro_path or []
    )
    typer.echo(text, nl=False)


@handles_errors
def cliff_cmd(
    repro_id: Annotated[str, typer.Argument(metavar="ID", help="Repro id (see `repro list`).", show_default=False)],
    param: Annotated[
        str, typer.Option("--param", metavar="NAME", help="The sweepable integer param to search (e.g. n).")
    ],
    range_: Annotated[
        str, typer.Option("--range", metavar="LO:HI", help="Inclusive integer range to search (e.g. 480:560).")
    ],
    set_: SetOpt = None,
    metric: Annotated[
        str,
        typer.Option("--metric", metavar="per-unit-of-work|time", help="Scale times by the repro's work, or not."),
    ] = "per-unit-of-work",
    threshold: Annotated[
        float,
        typer.Option(
            "--threshold",
            metavar="FRACTION",
            help="Smallest step: a rise over 1+F or a fall below 1/(1+F) (0.1 = 10%).",
        ),
    ] = DEFAULT_THRESHOLD,
    budget: Annotated[
        float, typer.Option("--budget", metavar="SECONDS", help="Time for the whole search; refinement stops after.")
    ] = DEFAULT_BUDGET_S,
    max_points: Annotated[
        int, typer.Option("--max-points", metavar="N", help="Most distinct values timed, grid included (3..128).")
    ] = DEFAULT_MAX_POINTS,
    grid: Annotated[
        int, typer.Option("--grid", metavar="N", help="Points of the coarse grid (2..128, below --max-points).")
    ] = DEFAULT_GRID,
    smoke: SmokeOpt = False,
    out: OutOpt = DEFAULT_OUT,
    as_json: Annotated[bool, typer.Option("--json", help="Print the cliff artifact JSON on stdout.")] = False,
    repro_path: ReproPaths = None,
    no_collect_env: NoCollectEnvOpt = False,
) -> None:
    """Find where a cliff starts: coarse grid over an integer param, then bisection to adjacent values."""
    from repro.cliff import run as cliff_run
    from repro.core.spec import parse_assignments
    from repro.evidence import artifact, cliff_report
    from repro.evidence.report import report as render_report
    from repro.run.progress import Display

    req = cliff_run.CliffRequest(
        repro_id=repro_id,
        param=param,
        range_text=range_,
        overrides=parse_assignments(set_ or []),
        smoke=smoke,
        repro_paths=repro_path or [],
        metric=metric,
        threshold=threshold,
        budget_s=budget,
        max_points=max_points,
        grid=grid,
        command=argv_as_typed(),
        collect_env=not no_collect_env,
    )
    cliff_run.resolve(req)  # all input checked before the run folder exists
    run_dir = _new_run_dir(out)
    display = Display()
    try:
        doc, path = cliff_run.run(req, run_dir, log=display.log, progress=display.progress)
    finally:
        display.close()
    png = cliff_report.write_plot(doc, path.with_suffix(".png"))
    plots = {cliff_report.key(doc): png.name} if png else {}
    report = artifact.write_new(run_dir / "report.md", render_report([doc], plots=plots).encode())
    typer.echo(f"{repro_id} {param}: {doc['status']} - {doc['finding']}", err=True)
    shown = png or "(none: no points timed, or no matplotlib here)"
    typer.echo(f"artifact: {path}\nreport:   {report}\nplot:     {shown}", err=True)
    if as_json:
        typer.echo(json.dumps(doc, indent=2))


@handles_errors
def all_cmd(
    only: Annotated[
        list[str] | None, typer.Option("--only", metavar="ID", help="Run only this id (repeatable).")
    ] = None,
    skip: Annotated[list[str] | None, typer.Option("--skip", metavar="ID", help="Skip this id (repeatable).")] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", metavar="SECONDS", help="Seconds each repro may run before it is killed.")
    ] = 900.0,
    smoke: SmokeOpt = False,
    out: OutOpt = DEFAULT_OUT,
    repro_path: ReproPaths = None,
    budget: BudgetOpt = None,
    target_ci: TargetOpt = None,
    fail_on: FailOnOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the outcomes as JSON on stdout.")] = False,
    no_collect_env: NoCollectEnvOpt = False,
    quick: QuickOpt = False,
    fork_server: Annotated[
        bool,
        typer.Option(
            "--fork-server/--no-fork-server",
            help="Fork each repro's process from one that imported torch once (default), "
            "or start a fresh Python per repro.",
        ),
    ] = True,
) -> None:
    """Run every repro, each in its own subprocess; a crash or hang becomes an error artifact."""
    from repro.core import fsio
    from repro.run import runner

    if not timeout > 0:
        raise UsageError(f"--timeout {timeout:g}: expected seconds > 0")
    check_fail_on(fail_on)
    sampling = sampling_config(budget, target_ci, quick)
    paths = [p.resolve() for p in (repro_path or [])]
    ids = runner.select(only or [], skip or [], paths)
    if not ids:
        raise UsageError("--only/--skip left no repro to run; expected at least one")
    # From here on, SIGINT/SIGTERM stop the repro in flight (and all it started), and the
    # report still gets written for what finished; then we exit 128 + the signal's number.
    with runner.Interrupts() as interrupts:
        run_dir = _new_run_dir(out)
        outcomes = runner.run_all(
            ids,
            run_dir,
            smoke=smoke,
            timeout_s=timeout,
            repro_paths=paths,
            sampling=sampling,
            command=argv_as_typed() or ["repro", "all"],
            interrupts=interrupts,
            collect_env=not (no_collect_env or quick),
            fork_server=fork_server,
            quick=quick,
        )
        report: Path | None = None
        full = [o.message for o in outcomes if o.no_space]
        if any(o.path for o in outcomes):
            try:
                report = _write_report(run_dir)
            except fsio.NoSpace as exc:
                full.append(str(exc))
    typer.echo(f"run folder: {run_dir}\nreport:     {report or '(none written)'}", err=True)
    steps = runner.next_steps(outcomes)
    if steps:
        typer.echo("\n" + "\n".join(steps), err=True)
    if as_json:
        typer.echo(
            json.dumps(
                [
                    {"id": o.repro_id, "status": o.status, "artifact": str(o.path), "seconds": o.seconds}
                    for o in outcomes
                ],
                indent=2,
            )
        )
    if interrupts.signum is not None:
        left = len(ids) - len(outcomes)
        err(f"interrupted by {interrupts.name}: the repro in flight was stopped, {left} not started")
        raise typer.Exit(128 + interrupts.signum)
    if full:
        more = f" (+{len(full) - 1} more)" if len(full) > 1 else ""
        err(f"{full[-1]}{more}")
        raise typer.Exit(1)
    hits = [o.repro_id for o in outcomes if o.status == "reproduced"]
    if fail_on == "reproduced" and hits:
        raise CliffReproduced(f"--fail-on reproduced: {', '.join(hits)} reproduced")
