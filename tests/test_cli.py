"""The CLI as a user meets it: help, list, run, and every kind of bad input (exit 2, one line, nothing written)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repro.cli import app

FAST = ["--budget", "0.2", "--target-ci", "0.05"]


@pytest.fixture
def cli() -> CliRunner:
    return CliRunner(env={"COLUMNS": "120", "TERM": "dumb"})


def files_under(path: Path) -> list[Path]:
    return [p for p in path.rglob("*") if p.is_file()] if path.exists() else []


def test_version_and_help(cli: CliRunner) -> None:
    r = cli.invoke(app, ["--version"])
    assert r.exit_code == 0 and r.output.startswith("gpu-repro ")
    r = cli.invoke(app, ["--help"])
    assert r.exit_code == 0
    for cmd in ("list", "run", "all", "fingerprint", "validate", "report"):
        assert cmd in r.output


def test_list_shows_catalog(cli: CliRunner) -> None:
    r = cli.invoke(app, ["list", "--json"])
    assert r.exit_code == 0, r.output
    rows = {row["id"]: row for row in json.loads(r.output)}
    assert "5090-linear" in rows
    assert rows["5090-linear"]["upstream"] == ["https://github.com/pytorch/pytorch/issues/150725"]
    assert rows["5090-linear"]["threshold"] == 1.5
    r = cli.invoke(app, ["list"])
    assert "5090-linear" in r.output and "CUDA GPU" in r.output


def test_run_smoke_writes_valid_artifact_and_report(cli: CliRunner, tmp_path: Path) -> None:
    r = cli.invoke(app, ["run", "5090-linear", "--smoke", "--out", str(tmp_path), "--json", *FAST])
    assert r.exit_code == 0, r.output
    (run_dir,) = tmp_path.iterdir()
    doc = json.loads((run_dir / "5090-linear.json").read_text())
    assert doc["verdict"]["status"] in ("reproduced", "not_reproduced")
    assert doc["run"]["smoke"] is True and doc["run"]["device"] == "cpu"
    assert (run_dir / "report.md").read_text().startswith("# gpu-repro report")
    r2 = cli.invoke(app, ["validate", str(run_dir)])
    assert r2.exit_code == 0 and "ok:" in r2.output


def test_run_without_cuda_is_skipped_and_exits_zero(cli: CliRunner, tmp_path: Path) -> None:
    r = cli.invoke(app, ["run", "5090-linear", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    (art,) = tmp_path.glob("*/5090-linear.json")
    doc = json.loads(art.read_text())
    assert doc["verdict"]["status"] == "skipped"
    assert "CUDA" in doc["verdict"]["finding"]
    assert doc["variants"] == []


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["run", "nope"], "unknown repro 'nope'; known: "),
        (["run", "5090-linear", "--set", "colour=red"], "unknown parameter 'colour' for 5090-linear; known: "),
        (["run", "5090-linear", "--set", "batch=lots"], "--set batch=lots for 5090-linear: expected integer"),
        (["run", "5090-linear", "--set", "batch=0"], "--set batch=0 for 5090-linear: expected >= 1"),
        (["run", "5090-linear", "--set", "tf32_variants=maybe"], "expected boolean"),
        (["run", "5090-linear", "--set", "batch"], "--set 'batch': expected key=value"),
        (["run", "5090-linear", "--budget", "0"], "--budget 0: expected seconds > 0"),
        (["run", "5090-linear", "--fail-on", "sometimes"], "--fail-on 'sometimes': expected 'reproduced'"),
        (["all", "--only", "nope"], "unknown repro 'nope'"),
        (["all", "--timeout", "-1"], "--timeout -1: expected seconds > 0"),
    ],
)
def test_bad_input_one_line_exit_2_nothing_written(
    cli: CliRunner, tmp_path: Path, args: list[str], expected: str
) -> None:
    out = tmp_path / "out"
    r = cli.invoke(app, [*args, "--out", str(out)])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1, r.output
    assert lines[0].startswith("error: ") and expected in lines[0]
    assert "Traceback" not in r.output
    assert files_under(out) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere; covered by the file case below")
def test_unwritable_out_dir(cli: CliRunner, tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    r = cli.invoke(app, ["run", "5090-linear", "--out", str(ro)])
    assert r.exit_code == 2 and "expected a writable directory" in r.output


def test_out_that_is_a_file(cli: CliRunner, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = cli.invoke(app, ["run", "5090-linear", "--out", str(blocker / "sub")])
    assert r.exit_code == 2
    (line,) = [ln for ln in r.output.splitlines() if ln.strip()]
    assert line.startswith(f"error: --out {blocker / 'sub'}: cannot create directory")
    assert blocker.read_text() == "x"


def test_validate_and_report_reject_bad_files(cli: CliRunner, tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text("{not json")
    invalid = tmp_path / "invalid.json"
    invalid.write_text(json.dumps({"schema_version": "1.0", "kind": "gpu-repro.artifact"}))
    for cmd in ("validate", "report"):
        for path, expected in (
            (corrupt, "not valid JSON"),
            (invalid, "fails the artifact schema v1"),
            (tmp_path / "missing.json", "no such file"),
        ):
            r = cli.invoke(app, [cmd, str(path)])
            assert r.exit_code == 2, (cmd, r.output)
            (line,) = [ln for ln in r.output.splitlines() if ln.strip()]
            assert line.startswith(f"error: {path}") and expected in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corrupt.json", "invalid.json"]


def test_report_out_never_overwrites(cli: CliRunner, tmp_path: Path) -> None:
    r = cli.invoke(app, ["run", "5090-linear", "--out", str(tmp_path / "a")])
    assert r.exit_code == 0
    (run_dir,) = (tmp_path / "a").iterdir()
    target = tmp_path / "r.md"
    assert cli.invoke(app, ["report", str(run_dir), "--out", str(target)]).exit_code == 0
    before = target.read_text()
    r = cli.invoke(app, ["report", str(run_dir), "--out", str(target)])
    assert r.exit_code == 2 and "never overwritten" in r.output
    assert target.read_text() == before
