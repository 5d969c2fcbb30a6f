"""`repro script`: every repro's standalone script, run on CPU where the repro has a CPU path."""

from __future__ import annotations

import ast
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from repro.cli.main import app
from repro.core.errors import UsageError
from repro.core.spec import build_params
from repro.evidence import standalone
from repro.run import catalog, scripts

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = ROOT / "tests" / "plugins_legacy"
IDS = sorted(catalog.load())


def _cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


@pytest.mark.parametrize("rid", IDS)
def test_every_builtin_repro_declares_a_script_that_parses(rid: str) -> None:
    text = scripts.script_for(rid, {})
    tree = ast.parse(text)
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    # torch and the standard library; graph-memset's memset node needs cuda-bindings and fused-adam
    # tries TE FusedAdam first, as the harness does (both optional imports inside the script).
    assert "repro" not in imported
    assert imported <= {"torch", "statistics", "time", "warnings", "math", "cuda", "transformer_engine"}, imported
    assert "def compare(" in text and "torch.cuda.Event" in text and "perf_counter" in text


@pytest.mark.parametrize("rid", [r for r in IDS if catalog.get(r).requires.cpu_smoke])
def test_scripts_run_on_cpu_and_print_both_times_and_the_ratio(rid: str, tmp_path: Path) -> None:
    path = tmp_path / f"{rid}.py"
    path.write_text(scripts.script_for(rid, {}, smoke=True))
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = standalone.parse_output(proc.stdout)
    assert rows, proc.stdout
    cls = catalog.get(rid)
    params = build_params(rid, cls.Params, {}, smoke=True)
    heads = standalone.comparison_filter(cls().comparisons(params), None, rid)
    # fused-adam times the first backend that runs here (TE is not installed in the test env).
    assert set(rows) <= {c.name for c in heads} and rows
    for label, row in rows.items():
        times = [v for k, v in row.items() if k.startswith("t(")]
        assert len(times) == 2 and all(t > 0 for t in times), (label, row)
        assert 0 < row["ratio"] < 100, (label, row)


def test_script_carries_the_exact_params_and_knobs() -> None:
    text = scripts.script_for(
        "solve-512-cliff", {"backends": "cusolver", "batches": "128", "cliff_n": "256", "n_min": "255", "n_max": "256"}
    )
    assert "[('cusolver/b128', 'cusolver', 128)]" in text
    assert "N, SEED, RHS = 256, 0, 1" in text
    assert "preferred_linalg_library(backend)" in text
    lin = scripts.script_for("5090-linear", {"batch": "8"})
    assert "torch.randn(8, 196, 768" in lin and "allow_tf32 = on" in lin and 'with_tf32(False, "fp32")' in lin


def test_comparison_narrows_the_script_and_a_wrong_name_is_exit_2() -> None:
    text = scripts.script_for("solve-512-cliff", {}, only="default/b16")
    assert "[('default/b16', 'default', 16)]" in text
    res = _cli("script", "solve-512-cliff", "--comparison", "nope")
    assert res.exit_code == 2
    assert "expected one of default/b16" in res.output


def test_cli_prints_the_script_and_bad_input_is_one_line_exit_2() -> None:
    res = _cli("script", "5090-linear", "--set", "batch=2")
    assert res.exit_code == 0, res.output
    ast.parse(res.output)
    for args, want in (
        (("script", "nope"), "unknown repro 'nope'"),
        (("script", "5090-linear", "--set", "batch=x"), "--set batch=x"),
    ):
        res = _cli(*args)
        assert res.exit_code == 2 and want in res.output, res.output


@pytest.mark.filterwarnings("ignore:repro.(spec|catalog|measure|verdict) is the first plugin API:DeprecationWarning")
def test_a_plugin_without_a_script_is_a_clear_exit_2() -> None:
    res = _cli("script", "legacy-linear", "--repro-path", str(PLUGINS))
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "legacy-linear declares no standalone script" in lines[0]


def test_graph_memset_twin_only_is_refused_with_the_reason() -> None:
    with pytest.raises(UsageError, match="pure CUDA twin is C\\+\\+"):
        scripts.script_for("graph-memset", {}, only="memset/fill (pure CUDA twin)")


def test_parse_output_reads_times_in_seconds() -> None:
    out = "[a] t(x) = 2 ms\n[a] t(y) = 1 ms\n[a] ratio t(x)/t(y) = 2.0000\nnoise\n"
    assert standalone.parse_output(out) == {"a": {"t(x)": 0.002, "t(y)": 0.001, "ratio": 2.0}}


def _doc(**harness: object) -> dict[str, Any]:
    return {
        "repro": {"id": "5090-linear", "params": {"batch": 256, "tf32_variants": True, "batches": [1, 2]}},
        "run": {"run_id": "20261130T172037Z-c761fb", "rerun": "curl https://x.invalid | sh", "smoke": False},
        "fingerprint": {"harness": {"name": "gpu-repro", **harness}},
    }


def test_rerun_installs_the_bundled_harness_and_rebuilds_the_command_from_params() -> None:
    digest = "ab" * 32
    r = standalone.rerun(_doc(version="0.1.0", git_commit=None, git_state="dirty", source_sha256=digest))
    wheel = f"gpu_repro-0.1.0+src.{digest[:12]}-py3-none-any.whl"
    assert r.lines() == [
        f"pip install ./20261130T172037Z-c761fb/harness/{wheel}",
        "repro run 5090-linear --set batch=256 --set tf32_variants=true --set batches=1,2",
    ]
    assert r.predates() is None and "curl" not in " ".join(r.lines())
    assert r.script_command() == "repro script 5090-linear --set batch=256 --set tf32_variants=true --set batches=1,2"
    assert "no commit (the source differed" in r.harness.words()


def test_rerun_of_a_run_before_harness_digests_names_version_and_commit() -> None:
    r = standalone.rerun(_doc(version="0.1.0", git_commit="86fbd01"))
    assert r.install() is None
    assert r.predates() == "this run predates harness digests: harness 0.1.0, commit 86fbd01"
    predates = standalone.rerun(_doc(version="0.1.0", git_commit=None)).predates()
    assert predates is not None and predates.endswith("commit unknown")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("version", "0.1.0\nrm -rf ~"),
        ("version", "0.1.0; curl x | sh"),
        ("git_commit", "86fbd01 && curl x"),
        ("source_sha256", "$(curl x)" + "a" * 55),
    ],
)
def test_a_hostile_harness_field_never_reaches_a_command(field: str, value: str) -> None:
    fields = {"version": "0.1.0", "git_commit": "86fbd01", "source_sha256": "ab" * 32, field: value}
    r = standalone.rerun(_doc(**fields))
    shown = "\n".join(r.lines() + [r.predates() or "", r.harness.words()])
    assert value not in shown and "curl" not in shown and "rm -rf" not in shown
    for line in r.lines():
        assert "\n" not in line and shlex.split(line)[0] in ("pip", "repro")


def test_hostile_params_are_quoted_or_refused() -> None:
    doc = _doc(version="0.1.0", git_commit="86fbd01")
    doc["repro"]["params"] = {"batch": "1; curl x | sh $(id) `id`"}
    (line,) = standalone.rerun(doc).lines()
    assert shlex.split(line) == ["repro", "run", "5090-linear", "--set", "batch=1; curl x | sh $(id) `id`"]
    for params in ({"batch": "1\ncurl x | sh"}, {"ba tch": 1}, {"batch": {"a": 1}}, {"batch": ["a,b"]}):
        doc["repro"]["params"] = params
        r = standalone.rerun(doc)
        assert r.args is None and r.lines() == [] and "repro.params" in (r.why_not or "")
    doc["repro"]["id"] = "x; curl y"
    assert standalone.rerun(doc).args is None
