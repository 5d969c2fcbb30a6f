"""An unpacked bundle reads as its run folder: `repro report` and `repro validate` leave out what the bundle added."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest
from helpers import ROOT
from typer.testing import CliRunner

from repro.cli.main import app
from repro.evidence import artifact, bundle_layout
from repro.evidence.bundle_layout import MANIFEST

RUN = ROOT / "artifacts" / "reference" / "h200" / "paired" / "all" / "20261129T233452Z-51a4de"


def _cli() -> CliRunner:
    return CliRunner(env={"COLUMNS": "120", "TERM": "dumb"})


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(a copy of the run folder with a re-run's artifact and other JSON attached, as gpu-final attaches them;
    its bundle from ``repro bundle``, unpacked)."""
    tmp = tmp_path_factory.mktemp("bundle")
    run = tmp / "runs" / RUN.name
    shutil.copytree(RUN, run)
    (run / "attached").mkdir()
    shutil.copy(RUN / "5090-linear.json", run / "attached" / "rerun-5090-linear.json")
    (run / "attached" / "all.json").write_text("[]\n")  # not an artifact: skipped, in both folders alike
    res = _cli().invoke(app, ["bundle", str(run), "--out", str(tmp / "b.tar.gz")])
    assert res.exit_code == 0, res.output
    with tarfile.open(tmp / "b.tar.gz") as tf:
        if hasattr(tarfile, "data_filter"):  # Python 3.10.12 / 3.11.4 on
            tf.extractall(tmp / "unpacked", filter="data")
        else:
            tf.extractall(tmp / "unpacked")
    return run, tmp / "unpacked" / RUN.name


def _own_json(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.json") if p.name in bundle_layout.OWN_FILES)


def _note(folder: Path, names: list[str]) -> str:
    return f"{folder}: an unpacked bundle; left out what the bundle added, not artifacts: {', '.join(names)}"


def test_every_member_the_bundle_adds_is_named_in_its_layout(unpacked: tuple[Path, Path]) -> None:
    # A member that is neither the run's own file nor named in bundle_layout would be walked as the run's.
    run, folder = unpacked
    members = [p for p in folder.rglob("*") if p.is_file()]
    added = [p for p in members if not (run / p.relative_to(folder)).is_file()]
    assert {MANIFEST, "band.json", "band-runs.json"} <= {p.name for p in added}  # the files that broke report
    assert any(p.relative_to(folder).parts[0] == bundle_layout.SCRIPTS for p in added)
    assert [p for p in added if bundle_layout.bundle_of(p, folder) != folder] == []
    # The run's own files, attached/ among them, are not the bundle's.
    assert [p for p in members if p not in added and bundle_layout.bundle_of(p, folder) is not None] == []
    assert bundle_layout.bundle_of(folder / "attached" / "rerun-5090-linear.json", folder) is None


def test_report_of_an_unpacked_bundle_is_the_report_of_its_run_folder(unpacked: tuple[Path, Path]) -> None:
    run, folder = unpacked
    mine, theirs = _cli().invoke(app, ["report", str(folder)]), _cli().invoke(app, ["report", str(run)])
    assert mine.exit_code == 0, mine.output
    assert theirs.exit_code == 0, theirs.output
    assert mine.stdout == theirs.stdout and mine.stdout.startswith(f"# gpu-repro report: run {RUN.name}")
    assert mine.stderr.splitlines() == [_note(folder, _own_json(folder))]  # said once
    # The folder the bundle unpacked into (its run's newest, and only, run) reads the same.
    above = _cli().invoke(app, ["report", str(folder.parent)])
    assert above.exit_code == 0 and above.stdout == theirs.stdout


def test_validate_of_an_unpacked_bundle_is_the_validation_of_its_run_folder(unpacked: tuple[Path, Path]) -> None:
    run, folder = unpacked
    mine, theirs = _cli().invoke(app, ["validate", str(folder)]), _cli().invoke(app, ["validate", str(run)])
    assert mine.exit_code == 0, mine.output
    assert theirs.exit_code == 0, theirs.output
    # The same artifacts, the attached re-run among them, and the same skipped files and summary.
    assert mine.stdout.replace(str(folder), "RUN") == theirs.stdout.replace(str(run), "RUN")
    assert "ok: RUN/attached/rerun-5090-linear.json" in theirs.stdout.replace(str(run), "RUN")
    said = mine.stderr.replace(str(folder), "RUN").splitlines()
    note = _note(Path("RUN"), _own_json(folder))
    assert said.count(note) == 1
    assert [ln for ln in said if ln != note] == theirs.stderr.replace(str(run), "RUN").splitlines()
    assert said[-1] == "6 valid, 0 invalid, 1 skipped (not artifacts)"


def test_only_what_the_bundle_added_is_left_out(unpacked: tuple[Path, Path], tmp_path: Path) -> None:
    _, src = unpacked
    folder = tmp_path / src.name
    shutil.copytree(src, folder)
    doc = json.loads((folder / "graph-memset.json").read_text())
    del doc["verdict"]
    (folder / "graph-memset.json").write_text(json.dumps(doc))
    (folder / "attached" / MANIFEST).write_text("{}\n")  # one the run's maker attached: the run's file, no bundle
    # Under a folder only a bundle has, but not in its manifest: read as any other file, so not hidden.
    (folder / bundle_layout.SEEDS / "x.json").write_text("{}\n")
    res = _cli().invoke(app, ["validate", str(folder)])
    # An invalid artifact in a bundle's folder is still invalid.
    assert res.exit_code == 2
    assert f"error: {folder / 'graph-memset.json'}: fails the artifact schema v1 at <root>: 'verdict'" in res.stderr
    assert f"skipped: {folder / 'attached' / MANIFEST} (not an artifact: no 'kind' field)" in res.stderr
    assert f"skipped: {folder / bundle_layout.SEEDS / 'x.json'} (not an artifact: no 'kind' field)" in res.stderr
    assert _note(folder, _own_json(folder)) in res.stderr.splitlines()
    assert "5 valid, 1 invalid, 3 skipped (not artifacts)" in res.stderr
    res = _cli().invoke(app, ["report", str(folder)])
    assert res.exit_code == 2 and f"{folder / 'graph-memset.json'}: fails the artifact schema" in res.stderr

    # A manifest of another run (its run_id not the folder's name) makes no bundle either.
    manifest = json.loads((folder / MANIFEST).read_text())
    (folder / MANIFEST).write_text(json.dumps({**manifest, "run_id": "someone-else"}))
    assert artifact.bundle_members(folder) == []
    # Without its manifest the folder is no bundle: its band files are walked as any other JSON.
    (folder / MANIFEST).unlink()
    assert artifact.bundle_members(folder) == []
    res = _cli().invoke(app, ["validate", str(folder)])
    assert f"skipped: {folder / 'band.json'} (not an artifact: kind 'gpu-repro.rerun-band')" in res.stderr
    assert "an unpacked bundle" not in res.output


def test_a_bundle_file_named_directly_is_no_artifact_and_says_what_to_name(unpacked: tuple[Path, Path]) -> None:
    # A shell's glob (folder/*.json) names the bundle's own files: they are not artifacts, as any named file must be.
    _, folder = unpacked
    res = _cli().invoke(app, ["validate", str(folder / MANIFEST), str(folder / "5090-linear.json")])
    assert res.exit_code == 2
    assert res.stderr.splitlines()[0] == (
        f"error: {folder / MANIFEST}: not a gpu-repro artifact (no 'kind' field); expected an artifact written by "
        f"`repro run` or `repro all`; {folder} is an unpacked bundle: name that folder to validate its run"
    )
    assert "1 valid, 1 invalid" in res.stderr


def test_a_run_folder_without_a_manifest_keeps_every_file(tmp_path: Path) -> None:
    # An artifact may be named like a bundle's file (a repro id "band"); only a bundle's folder leaves those out.
    run = tmp_path / RUN.name
    (run / bundle_layout.SCRIPTS).mkdir(parents=True)
    shutil.copy(RUN / "5090-linear.json", run / "band.json")
    shutil.copy(RUN / "5090-linear.json", run / bundle_layout.SCRIPTS / "x.json")
    assert artifact.expand([run]) == [run / "band.json"]
    files, skipped, bundles = artifact.walk([run])
    assert files == [run / "band.json", run / bundle_layout.SCRIPTS / "x.json"] and skipped == [] and bundles == {}
