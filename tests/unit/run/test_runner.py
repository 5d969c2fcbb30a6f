"""`repro all`: subprocess isolation, timeouts, crashes and skips never take the batch down."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import TESTS
from typer.testing import CliRunner

from repro.cli.main import app
from repro.run import runner

PLUGINS = TESTS / "plugins"


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
    assert fine["verdict"]["status"] == "smoke"  # a CPU run proves the pipeline, never the cliff
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
    # The batch says why each repro skipped, not just "skipped (0.4 s)" ...
    line = next(ln for ln in r.output.splitlines() if ln.startswith("5090-linear: skipped"))
    assert doc["verdict"]["finding"] in line and "CUDA" in line
    # ... and, since nothing could run, what to do next, naming the cause.
    tail = r.output.split("Nothing could run here", 1)[1]
    assert "torch sees no CUDA GPU here" in tail
    for step in ("make smoke", "make repro-all", "docker-repro-all", "repro doctor", "--index-url"):
        assert step in tail, step


def _outcome(tmp_path: Path, name: str, status: str, torch_info: dict[str, Any] | None) -> runner.Outcome:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"fingerprint": {"software": {"torch": torch_info}}}))
    return runner.Outcome(name, status, path, 0.1, "why")


def test_next_steps_name_the_cause_and_stay_quiet_when_something_ran(tmp_path: Path) -> None:
    no_torch = [_outcome(tmp_path, "a", "skipped", None), _outcome(tmp_path, "b", "skipped", None)]
    steps = runner.next_steps(no_torch)
    assert steps[0].startswith("Nothing could run here: every repro was skipped (torch is not installed")
    cpu = {"version": "2.13.0+cpu", "cuda_available": False}
    assert "torch sees no CUDA GPU" in runner.next_steps([_outcome(tmp_path, "c", "skipped", cpu)])[0]
    ran = [_outcome(tmp_path, "d", "skipped", cpu), _outcome(tmp_path, "e", "not_reproduced", cpu)]
    assert runner.next_steps(ran) == []
    assert runner.next_steps([]) == []


def test_outcome_line_carries_the_finding() -> None:
    o = runner.Outcome("x", "skipped", None, 0.42, "Not measured: torch is not installed in this environment")
    assert runner.outcome_line(o) == "x: skipped (0.4 s) - Not measured: torch is not installed in this environment"


def _fail_on_run(tmp_path: Path) -> tuple[int, str, str]:
    # test-gap compares a 2 ms sleep with a no-op: a ratio in the thousands, far over the 1.5 threshold on any
    # machine, however loaded (a sleep only gets longer), so the outcome does not hang on timing noise.
    cli = CliRunner(env={"COLUMNS": "120"})
    args = ["run", "test-gap", "--repro-path", str(PLUGINS), "--out", str(tmp_path), "--fail-on", "reproduced"]
    r = cli.invoke(app, [*args, "--budget", "0.5", "--target-ci", "0.05", "--no-collect-env"])
    (art,) = tmp_path.glob("*/test-gap.json")
    return r.exit_code, json.loads(art.read_text())["verdict"]["status"], r.output


def test_fail_on_reproduced_ignores_a_cpu_run(tmp_path: Path) -> None:
    code, status, output = _fail_on_run(tmp_path)
    assert status == "smoke" and code == 0, output


def test_fail_on_reproduced_exits_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The gate itself: with the smoke relabelling switched off (as on a GPU), a reproduced
    # verdict makes `run --fail-on reproduced` exit 3.
    monkeypatch.setattr("repro.run.execute.as_smoke", lambda verdict, device: verdict)
    code, status, output = _fail_on_run(tmp_path)
    assert status == "reproduced" and code == 3, output
