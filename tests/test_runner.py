"""`repro all`: subprocess isolation, timeouts, crashes and skips never take the batch down."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from repro.cli import app

PLUGINS = Path(__file__).parent / "plugins"


def test_batch_survives_segfault_hang_and_exception(tmp_path: Path) -> None:
    cli = CliRunner(env={"COLUMNS": "120"})
    # The timeout is generous for the three that end by themselves (a loaded CI box takes seconds to import
    # torch); the hang is checked against a short one in its own batch below.
    args = ["all", "--repro-path", str(PLUGINS), "--out", str(tmp_path), "--timeout", "120", "--budget", "0.2"]
    args += ["--no-collect-env"]
    for rid in ("test-segfault", "test-raises", "test-fine"):
        args += ["--only", rid]
    r = cli.invoke(app, args)
    assert r.exit_code == 0, r.output
    hang_args = ["all", "--repro-path", str(PLUGINS), "--out", str(tmp_path / "hang"), "--timeout", "8"]
    r = cli.invoke(app, [*hang_args, "--only", "test-hang", "--no-collect-env"])
    assert r.exit_code == 0, r.output
    (run_dir,) = (p for p in tmp_path.iterdir() if p.name != "hang")
    docs = {p.stem: json.loads(p.read_text()) for p in run_dir.glob("*.json")}
    (hang_art,) = (tmp_path / "hang").glob("*/test-hang.json")
    docs["test-hang"] = json.loads(hang_art.read_text())
    assert set(docs) == {"test-segfault", "test-hang", "test-raises", "test-fine"}

    seg = docs["test-segfault"]
    assert seg["verdict"]["status"] == "error"
    assert seg["error"]["kind"] == "crash" and seg["error"]["signal"] == "SIGSEGV"
    assert seg["error"]["exit_code"] is None

    hang = docs["test-hang"]
    assert hang["error"]["kind"] == "timeout" and "8 s timeout" in hang["error"]["message"]
    assert "test-hang: running" in hang["error"]["stderr_tail"]

    raised = docs["test-raises"]
    assert raised["error"]["kind"] == "exception"
    assert "boom from inside the repro" in raised["error"]["message"]
    assert "RuntimeError" in raised["error"]["traceback"]

    fine = docs["test-fine"]
    assert fine["verdict"]["status"] in ("reproduced", "not_reproduced")
    assert fine["verdict"]["value"] is not None and fine["verdict"]["ci_low"] <= fine["verdict"]["value"]
    assert [v["name"] for v in fine["variants"]] == ["a", "b"]

    report = (run_dir / "report.md").read_text()
    for rid in ("test-segfault", "test-raises", "test-fine"):
        assert rid in report
    assert "test-hang" in (hang_art.parent / "report.md").read_text()
    assert cli.invoke(app, ["validate", str(run_dir), str(hang_art)]).exit_code == 0


def test_all_on_cpu_yields_skipped_artifacts_and_exit_zero(tmp_path: Path) -> None:
    cli = CliRunner(env={"COLUMNS": "120"})
    r = cli.invoke(app, ["all", "--out", str(tmp_path), "--only", "5090-linear"])
    assert r.exit_code == 0, r.output
    (art,) = tmp_path.glob("*/5090-linear.json")
    doc = json.loads(art.read_text())
    assert doc["verdict"]["status"] == "skipped" and doc["error"] is None
    assert doc["validity"]["flag"] == "not_applicable"


def test_fail_on_reproduced_exits_3(tmp_path: Path) -> None:
    # test-gap compares a 2 ms sleep with a no-op: a ratio in the thousands, far over the 1.5 threshold on any
    # machine, however loaded (a sleep only gets longer), so the outcome does not hang on timing noise.
    cli = CliRunner(env={"COLUMNS": "120"})
    args = ["run", "test-gap", "--repro-path", str(PLUGINS), "--out", str(tmp_path), "--fail-on", "reproduced"]
    r = cli.invoke(app, [*args, "--budget", "0.5", "--target-ci", "0.05", "--no-collect-env"])
    (art,) = tmp_path.glob("*/test-gap.json")
    assert json.loads(art.read_text())["verdict"]["status"] == "reproduced"
    assert r.exit_code == 3, r.output
