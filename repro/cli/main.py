"""The ``repro`` command: argument parsing and exit codes only; the work lives in the library."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from repro import __version__
from repro.cli.common import check_new_file, echo_text, err, handles_errors, new_typer, write_new_file
from repro.cli.docker import compare_cmd, images_app
from repro.cli.matrix import matrix_app
from repro.cliff.search import DEFAULT_BUDGET_S, DEFAULT_GRID, DEFAULT_MAX_POINTS, DEFAULT_THRESHOLD
from repro.core.errors import CliffReproduced, ReproError, UsageError

app = new_typer(
    "repro", "Reproduce known GPU performance cliffs; leave a validated artifact and a GitHub-ready report."
)

DEFAULT_OUT = Path(os.environ.get("GPU_REPRO_OUT", "artifacts"))


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


def _argv() -> list[str]:
    """The command as typed (``repro ...`` or ``python -m repro ...``); empty when not run from a shell."""
    prog = os.path.basename(sys.argv[0]) if sys.argv else ""
    if prog == "repro" or prog in ("__main__.py", "cli.py"):
        return ["repro", *sys.argv[1:]]
    return []


def _fail_on(value: str | None) -> str | None:
    if value not in (None, "reproduced"):
        raise UsageError(f"--fail-on {value!r}: expected 'reproduced'")
    return value


def _sampling(budget: float | None, target: float | None) -> Any:
    from repro.core.context import SamplingConfig

    base = SamplingConfig()
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
        help="Seconds of sampling per variant (default 5); paired variants get at least 20 rounds in 6 episodes.",
    ),
]
TargetOpt = Annotated[
    float | None,
    typer.Option(
        "--target-ci",
        metavar="FRACTION",
        help="Stop sampling when the median's 95% CI half-width is under this fraction (default 0.01).",
    ),
]


@app.command("list")
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


@app.command("run")
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
        sampling=_sampling(budget, target_ci),
        command=_argv(),
        collect_env=not no_collect_env,
    )
    _fail_on(fail_on)
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


@app.command("script")
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


@app.command("cliff")
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
        command=_argv(),
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


@app.command("all")
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
    _fail_on(fail_on)
    sampling = _sampling(budget, target_ci)
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
            command=_argv() or ["repro", "all"],
            interrupts=interrupts,
            collect_env=not no_collect_env,
            fork_server=fork_server,
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


@app.command("fingerprint")
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


@app.command("validate")
@handles_errors
def validate_cmd(
    paths: Annotated[
        list[Path],
        typer.Argument(metavar="FILE_OR_RUN_DIR", help="Artifact files or run folders.", show_default=False),
    ],
) -> None:
    """Validate artifacts against the JSON Schema; exit 2 if any fails.

    Folders are searched to any depth; JSON files in them that are not artifacts (doctor or
    compare output, say) are listed as skipped. A file named on the command line must be an artifact.
    """
    from repro.evidence import artifact

    files, skipped = artifact.walk(paths)
    bad = 0
    for path in files:
        why = artifact.not_an_artifact(path) if path.is_file() else None
        if why:
            err(f"{path}: not a gpu-repro artifact ({why}); expected an artifact written by `repro run` or `repro all`")
            bad += 1
            continue
        try:
            artifact.load(path)
        except UsageError as exc:
            err(str(exc))
            bad += 1
            continue
        echo_text(f"ok: {path}")
    for path, why in skipped:
        echo_text(f"skipped: {path} (not an artifact: {why})", err=True)
    if skipped or len(files) > 1:
        typer.echo(
            f"{len(files) - bad} valid, {bad} invalid, {len(skipped)} skipped (not artifacts)",
            err=True,
        )
    if bad:
        raise typer.Exit(2)


@app.command("report")
@handles_errors
def report_cmd(
    files: Annotated[
        list[Path],
        typer.Argument(metavar="FILE_OR_RUN_DIR", help="Artifact files or run folders.", show_default=False),
    ],
    out: Annotated[
        Path | None, typer.Option("--out", metavar="FILE", help="Write the markdown here (never overwrites).")
    ] = None,
) -> None:
    """Render GitHub-flavored markdown for artifacts (stdout, or --out FILE).

    A folder of run folders (artifacts/) means its newest run. With --out, the declared plots are
    drawn beside FILE (plots/<id>.<plot>.png) where matplotlib is installed; existing plot files are
    kept, never overwritten.
    """
    from repro.evidence import artifact, cliff_report, plots
    from repro.evidence.report import newest_run, report
    from repro.run.scripts import declared

    chosen = []
    for f in files:
        found = newest_run(f)  # a folder of run folders (artifacts/): its newest run
        if found is not None:
            typer.echo(f"{f} holds {found[1]} run folders; reporting the newest, {found[0].name}", err=True)
        chosen.append(found[0] if found is not None else f)
    files = chosen
    docs = [artifact.load(p) for p in artifact.expand(files)]
    if out is not None:
        check_new_file(out, "reports")  # before any plot is drawn beside it
    runs = [f for f in files if f.is_dir()]
    folder = out.parent if out is not None else (runs[0] if len(runs) == 1 else None)
    # The report reads no registry: what the catalog declares, the scripts regenerated from its code among it.
    known = declared(docs)
    figures = plots.figures(docs, folder, draw=out is not None, declared=known)
    if out is None:
        echo_text(report(docs, figures=figures, declared=known))
        return
    # Cliff plots are drawn beside the report (where matplotlib exists), so the report links them.
    links: dict[str, str] = {}
    if not out.exists():
        for d in (d for d in docs if artifact.is_cliff(d)):
            name = cliff_report.plot_name(out.stem, d)  # None: the key is no plain file name part
            png = out.with_name(name) if name else None
            if png and not png.exists() and os.access(out.parent, os.W_OK) and cliff_report.write_plot(d, png):
                links[cliff_report.key(d)] = png.name
    write_new_file(out, report(docs, plots=links, figures=figures, declared=known), "reports")
    typer.echo(f"report: {out}", err=True)


@app.command("bundle")
@handles_errors
def bundle_cmd(
    run_dir: Annotated[
        Path, typer.Argument(metavar="RUN_DIR", help="A run folder (artifacts/<run-id>).", show_default=False)
    ],
    out: Annotated[
        Path | None, typer.Option("--out", metavar="FILE", help="Bundle path (default <run-dir>.bundle.tar.gz).")
    ] = None,
) -> None:
    """Pack a run (artifacts, report, logs, Chrome traces, standalone scripts, the harness) into one .tar.gz
    under GitHub's 25 MB limit."""
    from repro.evidence import artifact, bundle
    from repro.run.scripts import regenerate

    # Each artifact's standalone script, regenerated from this catalog (never the artifact's own copy).
    scripts: dict[str, str] = {}
    notes: dict[str, str] = {}
    left_out: dict[str, str] = {}
    for path in sorted(p for p in run_dir.glob("*.json") if not p.name.startswith(".")) if run_dir.is_dir() else []:
        try:
            doc = artifact.load(path)
        except UsageError:
            continue  # not an artifact, or a damaged one: bundle.build packs or refuses it by itself
        if artifact.is_cliff(doc):
            continue
        text, note = regenerate(doc)
        member = bundle.script_member(str(doc["repro"]["id"]), text) if text else None
        if member and text:
            scripts[member] = text
            if note:
                notes[member] = note
        else:
            left_out[str(doc["repro"]["id"])] = note or "no script could be regenerated"
    path = bundle.build(run_dir, out, scripts=scripts, scripts_left_out=left_out, script_notes=notes)
    typer.echo(f"bundle: {path} ({path.stat().st_size / 1e6:.2f} MB)", err=True)


@app.command("doctor")
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


app.add_typer(images_app, name="images")
app.add_typer(matrix_app, name="matrix")
app.command("compare")(compare_cmd)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
