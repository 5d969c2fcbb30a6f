"""`repro cliff` end to end on CPU: bad input, a smoke run's artifact, report and plot, validate, report,
compare, bundle and list on it, a plugin's declared sweep, the committed H200 cliff evidence, and
hostile artifact strings rendered inert.

Every step here is synthetic: a test plugin's sleep, or steps written into the smoke run's artifact.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT
from typer.testing import CliRunner

from repro.cli.main import app
from repro.evidence import artifact, cliff_report

# --------------------------------------------------------------------------- the command


@pytest.fixture
def cli() -> CliRunner:
    return CliRunner(env={"COLUMNS": "120", "TERM": "dumb"})


def files_under(path: Path) -> list[Path]:
    return [p for p in path.rglob("*") if p.is_file()] if path.exists() else []


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["solve-512-cliff", "--param", "m", "--range", "480:560"], "--param 'm' for solve-512-cliff: not sweepable"),
        (["solve-512-cliff", "--param", "n", "--range", "512:512"], "expected LO < HI"),
        (["solve-512-cliff", "--param", "n", "--range", "560:480"], "expected LO < HI"),
        (["solve-512-cliff", "--param", "n", "--range", "480-560"], "expected LO:HI"),
        (["solve-512-cliff", "--param", "n", "--range", "1:40"], "expected values within 2..8192"),
        (["5090-linear", "--param", "features", "--range", "700:20000"], "expected values within 1..16384"),
        (["graph-memset", "--param", "n", "--range", "1:4"], "graph-memset declares no sweepable params"),
        (
            ["solve-512-cliff", "--param", "n", "--range", "480:560", "--set", "backends=cusolver"],
            "--set batches=16,64,128",
        ),
        (["solve-512-cliff", "--param", "n", "--range", "30:34", "--set", "nope=1"], "unknown parameter 'nope'"),
        (["solve-512-cliff", "--param", "n", "--range", "3_0:3_4"], "expected LO:HI"),
        (["solve-512-cliff", "--param", "n", "--range", "\u0663\u0660:\u0663\u0664"], "expected LO:HI"),
        (["5090-linear", "--param", "features", "--range", "700:800", "--set", "features=900"], "--set features=900"),
        (
            ["solve-512-cliff", "--param", "batch", "--range", "1:8", "--set", "batches=2,4"],
            "the sweep of batch sets it",
        ),
        (["solve-512-cliff", "--param", "n", "--range", "30:34", "--set", "n_max=40"], "the sweep of n sets it"),
        (["solve-512-cliff", "--param", "batch", "--range", "1:8", "--set", "n_min=5"], "the sweep of batch sets it"),
        (["5090-linear", "--param", "features", "--range", "700:800", "--budget", "inf"], "--budget inf: expected a"),
        (["5090-linear", "--param", "features", "--range", "700:800", "--budget", "nan"], "--budget nan: expected a"),
        (
            ["5090-linear", "--param", "features", "--range", "700:800", "--grid", "10000"],
            "--grid 10000: expected 2..128",
        ),
        (["5090-linear", "--param", "features", "--range", "700:800", "--max-points", "10000"], "expected 3..128"),
        (["5090-linear", "--param", "features", "--range", "700:800", "--threshold", "10"], "> 0 and < 10"),
        (
            [
                "solve-512-cliff",
                "--param",
                "n",
                "--range",
                "30:34",
                "--smoke",
                "--set",
                "batches=2",
                "--max-points",
                "2",
            ],
            "--max-points 2",
        ),
        (
            [
                "solve-512-cliff",
                "--param",
                "n",
                "--range",
                "30:34",
                "--smoke",
                "--set",
                "batches=2",
                "--metric",
                "flops",
            ],
            "--metric 'flops'",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    cli: CliRunner, tmp_path: Path, args: list[str], expected: str
) -> None:
    out = tmp_path / "out"
    r = cli.invoke(app, ["cliff", *args, "--out", str(out)])
    assert r.exit_code == 2, r.output
    assert expected in r.output and r.output.count("\n") == 1, r.output
    assert files_under(out) == []


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real `repro cliff` on CPU (solve_ex, --smoke): the pipeline end to end."""
    out = tmp_path_factory.mktemp("cliff")
    r = CliRunner(env={"COLUMNS": "120", "TERM": "dumb"}).invoke(
        app,
        [
            "cliff", "solve-512-cliff", "--param", "n", "--range", "30:34", "--set", "batches=2", "--smoke",
            "--grid", "3", "--max-points", "4", "--out", str(out), "--no-collect-env",
        ],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    (run_dir,) = [d for d in out.iterdir() if d.is_dir()]
    return run_dir


def test_smoke_cliff_writes_a_valid_artifact_report_and_plot(smoke_run: Path, cli: CliRunner) -> None:
    path = smoke_run / "solve-512-cliff.cliff-n.json"
    doc = artifact.load(path)  # validated against the cliff schema
    assert doc["kind"] == "gpu-repro.cliff" and doc["schema_version"] == "1.0"
    assert doc["status"] == "smoke" and doc["run"]["device"] == "cpu"
    assert doc["sweep"]["range"] == [30, 34] and doc["search"]["grid"] == [30, 32, 34]
    assert 3 <= doc["search"]["points_measured"] <= 4
    assert all(p["kernels"] for p in doc["points"])  # the profiler's names (aten ops on CPU)
    assert "--set batches=2" in doc["run"]["rerun"]
    report = (smoke_run / "report.md").read_text()
    assert "where the cliff starts in `n` (30..34)" in report and "solve-512-cliff.cliff-n.png" in report
    assert "rises by more than 10% or falls to below 1/1.1 (-9.1%)" in report
    assert doc["sweep"]["grid_points"] == len(doc["search"]["grid"]) == 3
    assert (smoke_run / "solve-512-cliff.cliff-n.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = cli.invoke(app, ["validate", str(smoke_run)])
    assert r.exit_code == 0 and f"ok: {path}" in r.output


def test_validate_rejects_a_broken_cliff_artifact_against_its_own_schema(
    smoke_run: Path, cli: CliRunner, tmp_path: Path
) -> None:
    doc = json.loads((smoke_run / "solve-512-cliff.cliff-n.json").read_text())
    doc["steps"] = [{"lo": 1}]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    r = cli.invoke(app, ["validate", str(bad)])
    assert r.exit_code == 2 and "fails the cliff schema v1 at steps/0" in r.output


def test_report_out_regenerates_the_plot_beside_the_report(smoke_run: Path, cli: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "r.md"
    r = cli.invoke(app, ["report", str(smoke_run / "solve-512-cliff.cliff-n.json"), "--out", str(out)])
    assert r.exit_code == 0, r.output
    png = tmp_path / "r.solve-512-cliff.cliff-n.png"
    assert png.is_file() and f"]({png.name})" in out.read_text()


def _other_machine(doc: dict[str, object], tmp: Path, steps: list[dict[str, object]], gpu: str) -> Path:
    """The smoke artifact relabelled as a run elsewhere, with the given (synthetic) steps."""
    d = json.loads(json.dumps(doc))
    d["steps"], d["status"] = steps, "step" if steps else "no_step"
    run = tmp / gpu.replace(" ", "_")
    run.mkdir()
    path = run / "solve-512-cliff.cliff-n.json"
    path.write_text(json.dumps(d))
    artifact.load(path)
    return run


def test_compare_shows_two_machines_boundaries_and_whether_they_differ(
    smoke_run: Path, cli: CliRunner, tmp_path: Path
) -> None:
    doc = json.loads((smoke_run / "solve-512-cliff.cliff-n.json").read_text())
    step = {
        "lo": 31, "hi": 32, "resolved": True, "ratio": 5.0, "ci_low": 4.8, "ci_high": 5.2, "before_s": 1e-3,
        "after_s": 5e-3, "kernels_before": ["a"], "kernels_after": ["b"], "only_before": ["a"], "only_after": ["b"],
        "tag_before": "", "tag_after": "", "note": "",
    }  # fmt: skip
    a = _other_machine(doc, tmp_path, [step], "GPU one")
    b = _other_machine(doc, tmp_path, [], "GPU two")
    r = cli.invoke(app, ["compare", str(a), str(b), "--json"])
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.output)["cliffs"]
    assert row["sweep"] == "solve-512-cliff.cliff-n" and row["same_boundaries"] is False
    r = cli.invoke(app, ["compare", str(a), str(b)])
    assert "## Cliff boundaries" in r.output and "31 -&gt; 32 5.00x" in r.output and "**differ**" in r.output
    assert "no step (grid spacing" in r.output
    assert cliff_report.boundary(json.loads((a / "solve-512-cliff.cliff-n.json").read_text())).startswith("31 -> 32")


PLUGIN = '''
"""Test-only plugin: a sleep that grows tenfold from a known integer on, declared sweepable."""

from __future__ import annotations

import time
from dataclasses import dataclass

from repro.api import Arm, Context, Metric, Repro, Requirements, Sweep, param, register

STEP_AT = 13


@dataclass(frozen=True)
class SleepParams:
    k: int = param(10, help="the swept knob", min=1, max=100)


@register
class SleepStep(Repro[SleepParams]):
    id = "sleep-step"
    title = "a sleep that grows tenfold from k = 13"
    upstream = ()
    seed_claim = "synthetic"
    requires = Requirements(cuda=False)
    metric = Metric(name="t", description="t", threshold=1.5)
    sweeps = (Sweep("k", "the knob", min=1, max=100, default=13, work=lambda p, k: 1.0),)

    def sweep_arm(self, p: SleepParams, sweep: str, value: int, ctx: Context) -> Arm:
        # Tenfold, not threefold: on a loaded machine a 1 ms sleep oversleeps by a scheduler slice
        # (a few ms), which brought a 1 ms -> 3 ms step within the noise (seen under make test).
        seconds = 0.010 if value >= STEP_AT else 0.001
        return Arm(f"k{value}", lambda: time.sleep(seconds), calls_per_sample=1)
'''


def _sleep_step_cliff(cli: CliRunner, tmp_path: Path, *options: str) -> dict[str, Any]:
    """`repro cliff sleep-step --param k --range 1:30 OPTIONS` with PLUGIN on --repro-path; its artifact."""
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "sleep_step.py").write_text(PLUGIN)
    out = tmp_path / "out"
    args = ["cliff", "sleep-step", "--param", "k", "--range", "1:30", *options, "--no-collect-env"]
    r = cli.invoke(app, [*args, "--repro-path", str(plugins), "--out", str(out)])
    assert r.exit_code == 0, r.output
    (path,) = out.glob("*/sleep-step.cliff-k.json")
    return artifact.load(path)


def test_a_plugin_declares_a_sweep_and_the_command_finds_its_step(cli: CliRunner, tmp_path: Path) -> None:
    doc = _sleep_step_cliff(cli, tmp_path, "--grid", "5")
    # A CPU run proves the pipeline and is never judged, but it still reports what it found.
    assert doc["status"] == "smoke" and doc["run"]["device"] == "cpu"
    assert [(s["lo"], s["hi"], s["resolved"]) for s in doc["steps"]] == [(12, 13, True)], doc["finding"]
    assert doc["search"]["points_measured"] < 30 // 2


def test_max_points_3_refines_and_records_the_grid_it_used(cli: CliRunner, tmp_path: Path) -> None:
    doc = _sleep_step_cliff(cli, tmp_path, "--max-points", "3")
    assert doc["search"]["grid"] == [1, 30] and doc["sweep"]["grid_points"] == 2
    assert doc["search"]["groups"] == 2 and doc["search"]["points_measured"] == 3


COMMITTED = sorted((ROOT / "artifacts" / "reference").rglob("*.cliff-*.json"))


def test_the_h200_cliff_evidence_is_committed() -> None:
    # The acceptance runs of issue 14 (artifacts/reference/h200/cliff/README.md): without them the
    # golden test below would be parametrized over nothing and pass vacuously.
    names = {p.relative_to(ROOT / "artifacts" / "reference" / "h200" / "cliff").parts[0] for p in COMMITTED}
    assert {"solve-cusolver", "solve-default", "linear-features"} <= names, names
    final = artifact.load(next(p for p in COMMITTED if "/cliff/solve-cusolver/" in str(p)))
    assert [(s["lo"], s["hi"]) for s in final["steps"] if s["resolved"]][:1] == [(511, 512)]


@pytest.mark.parametrize("path", COMMITTED, ids=[str(p.relative_to(ROOT)) for p in COMMITTED])
def test_committed_cliff_artifacts_validate_and_hang_together(path: Path) -> None:
    doc = artifact.load(path)
    assert doc["kind"] == "gpu-repro.cliff"
    assert doc["search"]["points_measured"] == len({p["value"] for p in doc["points"]})
    lo, hi = doc["sweep"]["range"]
    assert all(lo <= p["value"] <= hi for p in doc["points"])
    for s in doc["steps"]:
        assert s["resolved"] == (s["hi"] == s["lo"] + 1) and s["ci_low"] <= s["ratio"] <= s["ci_high"]
    assert doc["status"] in ("step", "no_step", "error")
    if doc["status"] != "error":
        assert (doc["status"] == "step") == bool(doc["steps"])
    assert "where the cliff starts" in cliff_report.section(doc)


def test_plot_takes_artifact_strings_literally(smoke_run: Path) -> None:
    doc = json.loads((smoke_run / "solve-512-cliff.cliff-n.json").read_text())
    doc["sweep"]["param"] = "n $\\frac{1}{$"  # broken math: matplotlib raises on it when drawing
    png = cliff_report.plot_png(doc)
    assert png is not None and png[:4] == b"\x89PNG"


def test_list_json_shows_the_declared_sweeps(cli: CliRunner) -> None:
    r = cli.invoke(app, ["list", "--json"])
    rows = {row["id"]: row for row in json.loads(r.output)}
    assert [w["name"] for w in rows["solve-512-cliff"]["sweeps"]] == ["n", "batch"]
    assert [w["name"] for w in rows["5090-linear"]["sweeps"]] == ["features", "tokens"]
    assert rows["graph-memset"]["sweeps"] == []


def test_bundle_packs_the_cliff_artifact_and_its_plot(smoke_run: Path, tmp_path: Path) -> None:
    import tarfile

    from repro.evidence import bundle

    path = bundle.build(smoke_run, tmp_path / "b.tar.gz")
    with tarfile.open(path) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames()}
    assert {"solve-512-cliff.cliff-n.json", "solve-512-cliff.cliff-n.png", "report.md"} <= names


# --------------------------------------------------------------------------- review fixes (#14)


HOSTILE = "<img src=x onerror=alert(1)>\n# H1 [x](javascript:alert(1)) | *b*"


def _outside_code(md: str) -> str:
    """The markdown with its code spans removed (inside one, text is literal)."""
    return re.sub(r"`[^`\n]*`", "", md)


def _hostile_step(resolved: bool) -> dict[str, object]:
    return {
        "lo": 30, "hi": 31 if resolved else 33, "resolved": resolved, "ratio": 3.0, "ci_low": 2.9, "ci_high": 3.1,
        "before_s": 1e-3, "after_s": 3e-3, "kernels_before": [HOSTILE], "kernels_after": ["b"],
        "only_before": [HOSTILE], "only_after": ["b"], "tag_before": HOSTILE, "tag_after": "", "note": HOSTILE,
    }  # fmt: skip


def _assert_inert(md: str) -> None:
    bare = _outside_code(md)
    assert "<img" not in bare
    assert not re.search(r"(?<!\\)\]\(javascript", bare)  # an escaped \](...) is literal text
    assert not [line for line in md.splitlines() if line.lstrip().startswith("# ")], md


def test_section_and_compare_render_hostile_artifact_strings_inert(smoke_run: Path) -> None:
    doc = json.loads((smoke_run / "solve-512-cliff.cliff-n.json").read_text())
    doc["finding"], doc["search"]["notes"], doc["warnings"] = HOSTILE, [HOSTILE], [HOSTILE]
    doc["points"][0]["kernels"], doc["points"][0]["tag"] = [HOSTILE], HOSTILE
    doc["steps"] = [_hostile_step(False)]
    doc["error"] = {"kind": "exception", "message": HOSTILE}
    doc["sweep"]["param"] = HOSTILE  # the schema refuses it; the section must not rely on that
    _assert_inert(cliff_report.section(doc, plot_link=HOSTILE))
    rows = cliff_report.compare_rows([("a", [doc]), ("b", [doc])])
    _assert_inert(cliff_report.compare_markdown(rows, ["a", "b"], ["a", "b"]))


@pytest.mark.parametrize("param", ["a/b", "x" * 300, "n\x00", "<img src=x>\n# H1", "n.x"])
def test_schema_refuses_a_param_that_is_not_an_identifier_and_report_out_says_so(
    smoke_run: Path, cli: CliRunner, tmp_path: Path, param: str
) -> None:
    doc = json.loads((smoke_run / "solve-512-cliff.cliff-n.json").read_text())
    doc["sweep"]["param"] = param
    assert cliff_report.plot_name("r", doc) is None  # the guard holds without the schema too
    bad = tmp_path / "in" / "bad.json"
    bad.parent.mkdir()
    bad.write_text(json.dumps(doc))
    out = tmp_path / "r.md"
    r = cli.invoke(app, ["report", str(bad), "--out", str(out)])
    assert r.exit_code == 2 and "sweep/param" in r.output and r.output.count("\n") == 1, r.output
    assert list(tmp_path.glob("r*")) == []


def test_plot_name_is_the_key_beside_the_report(smoke_run: Path) -> None:
    doc = json.loads((smoke_run / "solve-512-cliff.cliff-n.json").read_text())
    assert cliff_report.plot_name("r", doc) == "r.solve-512-cliff.cliff-n.png"
    assert cliff_report.plot_name("x" * 240, doc) is None  # past NAME_MAX


def test_compare_cannot_tell_when_a_step_was_not_narrowed(smoke_run: Path, cli: CliRunner, tmp_path: Path) -> None:
    doc = json.loads((smoke_run / "solve-512-cliff.cliff-n.json").read_text())
    step = {**_hostile_step(False), "kernels_before": ["a"], "only_before": ["a"], "tag_before": "", "note": ""}
    a = _other_machine(doc, tmp_path, [step], "GPU one")
    b = _other_machine(doc, tmp_path, [], "GPU two")
    r = cli.invoke(app, ["compare", str(a), str(b), "--json"])
    (row,) = json.loads(r.output)["cliffs"]
    assert row["same_boundaries"] is None and row["unresolved"] is True
    r = cli.invoke(app, ["compare", str(a), str(b)])
    assert "cannot tell (a step not narrowed)" in r.output and "| same |" not in r.output


def test_a_schema_failure_at_write_keeps_the_data(smoke_run: Path, tmp_path: Path) -> None:
    from repro.cliff import run as cliff_run
    from repro.core.errors import ReproError

    doc = json.loads((smoke_run / "solve-512-cliff.cliff-n.json").read_text())
    doc["sweep"]["budget_s"] = None
    path = tmp_path / "solve-512-cliff.cliff-n.json"
    with pytest.raises(ReproError, match="fails its schema: sweep/budget_s") as exc:
        cliff_run.write(doc, path)
    kept = tmp_path / "solve-512-cliff.cliff-n.json.invalid"
    assert str(kept) in str(exc.value) and json.loads(kept.read_text())["points"] == doc["points"]
    assert not path.exists()
