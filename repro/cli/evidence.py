"""``repro validate``, ``report`` and ``bundle``: what leaves the machine, rendered from artifacts."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from repro.cli.common import check_new_file, echo_text, err, handles_errors, write_new_file
from repro.core.errors import UsageError
from repro.core.fsio import write_replace


@handles_errors
def validate_cmd(
    paths: Annotated[
        list[Path],
        typer.Argument(metavar="FILE_OR_RUN_DIR", help="Artifact files or run folders.", show_default=False),
    ],
) -> None:
    """Validate artifacts against the JSON Schema; exit 2 if any fails.

    Folders are searched to any depth; JSON files in them that are not artifacts (doctor or
    compare output, say) are listed as skipped; an unpacked bundle is read as its run folder (the files the
    bundle added, MANIFEST.json and its band files, are left out, said once). A file named on the command line
    must be an artifact.
    """
    from repro.evidence import artifact

    files, skipped, bundles = artifact.walk(paths)
    bad = 0
    for path in files:
        why = artifact.not_an_artifact(path) if path.is_file() else None
        if why:
            expected = "an artifact written by `repro run` or `repro all`"
            if path.name in artifact.bundle_members(path.parent):  # a bundle's own file, named by a shell's glob
                expected += f"; {path.parent} is an unpacked bundle: name that folder to validate its run"
            err(f"{path}: not a gpu-repro artifact ({why}); expected {expected}")
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
    for folder, names in bundles.items():
        echo_text(_bundle_note(folder, names), err=True)
    if skipped or len(files) > 1:
        typer.echo(
            f"{len(files) - bad} valid, {bad} invalid, {len(skipped)} skipped (not artifacts)",
            err=True,
        )
    if bad:
        raise typer.Exit(2)


@handles_errors
def report_cmd(
    files: Annotated[
        list[Path],
        typer.Argument(metavar="FILE_OR_RUN_DIR", help="Artifact files or run folders.", show_default=False),
    ],
    out: Annotated[
        Path | None, typer.Option("--out", metavar="FILE", help="Write the markdown here (never overwrites).")
    ] = None,
    full: Annotated[bool, typer.Option("--full", help="No size limit: the whole report, nothing left out.")] = False,
) -> None:
    """Render GitHub-flavored markdown for artifacts (stdout, or --out FILE).

    A folder of run folders (artifacts/) means its newest run; an unpacked bundle, its run (the files
    the bundle added, MANIFEST.json and its band files, are left out). One run folder's attached/ (re-runs,
    later runs, what its scripts printed) is read as `repro bundle` reads it. With --out, the declared plots
    are drawn beside FILE (plots/<id>.<plot>.png) where matplotlib is installed; existing plot files
    are kept, never overwritten.
    """
    from repro.evidence import artifact, bundle, cliff_report
    from repro.evidence.artifact import newest_run

    chosen = []
    for f in files:
        found = newest_run(f)  # a folder of run folders (artifacts/): its newest run
        if found is not None:
            typer.echo(f"{f} holds {found[1]} run folders; reporting the newest, {found[0].name}", err=True)
        chosen.append(found[0] if found is not None else f)
    files = chosen
    for f in files:
        if f.is_dir() and (theirs := artifact.bundle_members(f)):
            echo_text(_bundle_note(f, theirs), err=True)
    docs = [artifact.load(p) for p in artifact.expand(files)]
    if out is not None:
        check_new_file(out, "reports")  # before any plot is drawn beside it
    runs = [f for f in files if f.is_dir()]
    folder = out.parent if out is not None else (runs[0] if len(runs) == 1 else None)
    kw: dict[str, Any] = bundle.attached_inputs(runs[0]) if len(files) == 1 and len(runs) == 1 else {}
    kw.update({"limit": sys.maxsize, "max_lines": None} if full else {})
    if out is None:
        echo_text(_rendered(docs, folder, **kw))
        return
    # Cliff plots are drawn beside the report (where matplotlib exists), so the report links them.
    links: dict[str, str] = {}
    if not out.exists():
        for d in (d for d in docs if artifact.is_cliff(d)):
            name = cliff_report.plot_name(out.stem, d)  # None: the key is no plain file name part
            png = out.with_name(name) if name else None
            if png and not png.exists() and os.access(out.parent, os.W_OK) and cliff_report.write_plot(d, png):
                links[cliff_report.key(d)] = png.name
    write_new_file(out, _rendered(docs, folder, draw=True, plots=links, **kw), "reports")
    typer.echo(f"report: {out}", err=True)


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
    docs: list[dict[str, Any]] = []
    for path in sorted(p for p in run_dir.glob("*.json") if not p.name.startswith(".")) if run_dir.is_dir() else []:
        try:
            doc = artifact.load(path)
        except UsageError:
            continue  # not an artifact, or a damaged one: bundle.build packs or refuses it by itself
        if artifact.is_cliff(doc):
            continue
        docs.append(doc)
        text, note = regenerate(doc)
        member = bundle.script_member(str(doc["repro"]["id"]), text) if text else None
        if member and text:
            scripts[member] = text
            if note:
                notes[member] = note
        else:
            left_out[str(doc["repro"]["id"])] = note or "no script could be regenerated"
    # Files the run's maker added after it (attached/): the report names them, so it is rendered again, packed
    # in the bundle and, once the bundle is written, put in place of the run's report.md, which then matches
    # it. Only by the harness that made the run: another would put its own words and band data in it.
    # Attached artifacts are re-runs from the bundle's harness (rerun-*.json) or later runs of the same repros;
    # the scripts' and the seeds' programs' output is set beside the run's numbers.
    from repro.env.harness import source_sha256

    given = bundle.attached_inputs(run_dir) if docs else {"attached": [], "reruns": {}, "printed": {}}
    attached, reruns, printed = given["attached"], given["reruns"], given["printed"]
    pasted: str | None = None
    if attached and bundle.recorded_digests(docs) == {source_sha256()}:
        pasted = _rendered(docs, run_dir, attached=attached, reruns=reruns, printed=printed)
    elif attached:
        attached, reruns, printed = [], {}, {}
        typer.echo("report.md left as the run wrote it: another harness made the run", err=True)
    # The report whole, beside the pasted one that leaves bulk out to fit a screen; as `repro report
    # RUN_DIR` renders it (the catalog's declarations, the plots already beside the artifacts).
    whole = (
        _rendered(docs, run_dir, limit=sys.maxsize, max_lines=None, attached=attached, reruns=reruns, printed=printed)
        if docs
        else None
    )
    path = bundle.build(
        run_dir, out, scripts=scripts, scripts_left_out=left_out, script_notes=notes, full_report=whole, report=pasted
    )
    if pasted is not None:
        write_replace(run_dir / "report.md", pasted.encode())
        typer.echo(f"report.md rendered again: it names the {len(attached)} file(s) in attached/", err=True)
    typer.echo(f"bundle: {path} ({path.stat().st_size / 1e6:.2f} MB)", err=True)


def _bundle_note(folder: Path, names: list[str]) -> str:
    """The one line that says an unpacked bundle's own files were left out of a folder walk."""
    return f"{folder}: an unpacked bundle; left out what the bundle added, not artifacts: {', '.join(names)}"


def _rendered(docs: list[dict[str, Any]], folder: Path | None, draw: bool = False, **kw: Any) -> str:
    """The report of ``docs`` as the CLI renders it: it reads no registry, only what the catalog
    declares (the scripts regenerated from its code among it), and the declared plots in ``folder``
    (drawn there first when ``draw``)."""
    from repro.evidence import plots
    from repro.evidence.report import report
    from repro.run.scripts import declared

    known = declared(docs)
    figures = plots.figures(docs, folder, draw=draw, declared=known)
    return report(docs, figures=figures, declared=known, **kw)


@handles_errors
def compare_cmd(
    paths: Annotated[
        list[Path],
        typer.Argument(
            metavar="PATH",
            help="Artifact files, run folders, or lane folders of run folders (the newest run); one environment each.",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path | None, typer.Option("--out", metavar="FILE", help="Write here (never overwrites) instead of stdout.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON instead of markdown.")] = False,
) -> None:
    """Compare repros side by side across environments (lanes, stacks, machines), then their fingerprints."""
    from repro.evidence import compare

    doc = compare.compare(paths)
    text = json.dumps(doc, indent=2) + "\n" if as_json else compare.markdown(doc)
    if out is None:
        echo_text(text, nl=False)
        return
    write_new_file(out, text, "comparisons")
    typer.echo(f"comparison: {out}", err=True)
