"""`repro script`: every repro's standalone script, run on CPU where the repro has a CPU path."""

from __future__ import annotations

import ast
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT
from typer.testing import CliRunner, Result

from repro.cli.main import app
from repro.core.errors import UsageError
from repro.core.spec import build_params
from repro.evidence import standalone
from repro.run import catalog, scripts

PLUGINS = ROOT / "tests" / "plugins_legacy"
IDS = sorted(catalog.load())


def _cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


PY_IDS = [r for r in IDS if standalone.is_python(scripts.script_for(r, {}))]
SHELL_IDS = [r for r in IDS if r not in PY_IDS]
MEMSET_TORCH = "memset/fill (torch graph)"
DEFINITION = re.compile(r"^ratio = median over \d+ rounds of t\(A\)/t\(B\)( x scale)? per round \(paired; ", re.M)


def _on_cpu(**extra: str) -> dict[str, str]:
    """The environment of a script run that sees no GPU, whatever this machine has."""
    env = {k: v for k, v in os.environ.items() if k != standalone.CPU_ENV}
    return {**env, "CUDA_VISIBLE_DEVICES": "", **extra}


def _ruff(paths: list[Path]) -> None:
    """ruff check with the project's config on generated files (they live outside the project)."""
    ruff = Path(sys.executable).with_name("ruff")
    exe = str(ruff) if ruff.is_file() else shutil.which("ruff")
    if exe is None:
        pytest.skip("ruff is not installed next to this python or on PATH")
    cmd = [exe, "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), *map(str, paths)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _heredoc(script: str, delimiter: str) -> str:
    """The text a quoted heredoc with ``delimiter`` writes."""
    match = re.search(rf"<<'{delimiter}'\n(.*?)^{delimiter}$", script, re.S | re.M)
    assert match, f"no heredoc {delimiter}"
    return match.group(1)


def test_python_and_shell_scripts_are_the_expected_ones() -> None:
    assert SHELL_IDS == ["graph-memset"]  # its headline is the pure CUDA twin, a bash script


@pytest.mark.parametrize("rid", PY_IDS)
def test_every_python_script_uses_torch_and_the_stdlib_only(rid: str) -> None:
    text = scripts.script_for(rid, {})
    tree = ast.parse(text)
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    # fused-adam tries TE FusedAdam first, as the harness does (an optional import inside the script).
    assert "repro" not in imported
    stdlib = {"argparse", "os", "statistics", "sys", "time", "warnings", "math"}
    assert imported <= stdlib | {"torch", "transformer_engine"}, imported
    assert "def compare(" in text and "torch.cuda.Event" in text and "perf_counter" in text


def test_generated_python_passes_ruff_with_the_project_config(tmp_path: Path) -> None:
    paths = []
    for rid in PY_IDS:
        for smoke in (False, True):
            paths.append(tmp_path / f"{rid}-{smoke}.py")
            paths[-1].write_text(scripts.script_for(rid, {}, smoke=smoke))
    paths.append(tmp_path / "memset_torch.py")
    paths[-1].write_text(scripts.script_for("graph-memset", {}, only=MEMSET_TORCH))
    paths.append(tmp_path / "twin_ratio.py")  # the stdlib part of graph-memset's bash script
    paths[-1].write_text(_heredoc(scripts.script_for("graph-memset", {}), "TWIN_RATIO_PY"))
    _ruff(paths)


def test_graph_memset_script_is_bash_with_the_twin_verbatim_and_one_nvcc_line(tmp_path: Path) -> None:
    from repro.repros import _memset_twin

    text = scripts.script_for("graph-memset", {})
    path = tmp_path / "gm.sh"
    path.write_text(text)
    proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert text.startswith("#!/usr/bin/env bash\n")
    assert _heredoc(text, "GRAPH_MEMSET_CU") == _memset_twin.TWIN_SOURCE.read_text()
    assert "nvcc -O3 -arch=native -o graph_memset graph_memset.cu" in text
    assert "nvcc -O3 -arch=sm_90 -o graph_memset graph_memset.cu" in text  # the fallback, as _twin does
    assert "./graph_memset --ops 1000 --replays 500 --rounds 50 --warmup 20 --work-iters 128 --episodes 10 " in text
    twin_py = ast.parse(_heredoc(text, "TWIN_RATIO_PY"))
    imported = {a.name for n in ast.walk(twin_py) if isinstance(n, ast.Import) for a in n.names}
    assert imported == {"json", "statistics", "sys"} and not any(
        isinstance(n, ast.ImportFrom) for n in ast.walk(twin_py)
    )
    assert "import torch" not in text and "cuda.bindings" not in text


def test_graph_memset_torch_form_names_cuda_bindings_and_refuses_cpu(tmp_path: Path) -> None:
    text = scripts.script_for("graph-memset", {}, only=MEMSET_TORCH)
    assert "Needs only torch on CUDA and cuda-bindings (pip install cuda-python)" in text
    path = tmp_path / "memset_torch.py"
    path.write_text(text)
    proc = subprocess.run(
        [sys.executable, str(path), "--cpu"], env=_on_cpu(), capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == ["CUDA graph replay exists only on CUDA: nothing to run on CPU"]


# A fake nvcc: --version prints a release line; a build writes a "binary" that records its
# arguments and prints the canned twin JSON (or fails like a GPU-less host, with FAKE_TWIN_EXIT).
# With FAKE_NO_NATIVE=1, -arch=native behaves as on a host without a GPU: a warning, and a
# binary for the default arch.
FAKE_NVCC = """#!/usr/bin/env bash
if [ "$1" = "--version" ]; then echo "Cuda compilation tools, release 99.9, V99.9.1"; exit 0; fi
out=""; prev=""
for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done
echo "$*" >> "$FAKE_DIR/nvcc_calls.txt"
no_gpu="nvcc warning : Cannot find valid GPU for '-arch=native', default arch is used"
case " $* " in *" -arch=native "*) [ "${FAKE_NO_NATIVE:-0}" = 1 ] && echo "$no_gpu" >&2;; esac
cat > "$out" <<'BIN'
#!/bin/sh
echo "$@" > "$FAKE_DIR/args.txt"
[ -n "${FAKE_TWIN_EXIT:-}" ] && { echo "cudaSetDevice failed" >&2; exit "$FAKE_TWIN_EXIT"; }
cat "$FAKE_DIR/twin.json"
BIN
chmod +x "$out"
"""


def _fake_nvcc(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a bash-script run with the fake nvcc first on PATH, its files under tmp_path."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "nvcc").write_text(FAKE_NVCC)
    (bindir / "nvcc").chmod(0o755)
    return _on_cpu(PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}", FAKE_DIR=str(tmp_path), **extra)


def _canned_twin(ops: int, replays: int, per_round: int) -> dict[str, object]:
    """A twin's JSON with reproducible, uneven samples: paired and unpaired ratios differ."""
    rng = random.Random(7)
    names = ("memset", "fill", "work_only", "memset_work", "fill_work", "seed_memset", "seed_fill")
    base = {"memset": 2.0e-6, "seed_memset": 9.0e-6, "seed_fill": 4.0e-6}
    variants = {n: [base.get(n, 1.0e-6) * rng.uniform(0.7, 1.4) for _ in range(replays)] for n in names}
    return {
        "schema": "gpu-repro.graph_memset_twin/1", "device": "Fake GPU 9000", "compute_capability": "9.0",
        "cuda_runtime": 13000, "cuda_driver": 13000, "ops": ops, "replays": replays, "warmup": 5,
        "rounds": replays // per_round, "per_round": per_round, "episodes": 2, "episode_rounds": 5, "gap_ms": 500,
        "work_n": 1 << 20, "work_iters": 128, "unit": "s/op", "variants": variants,
    }  # fmt: skip


@pytest.mark.parametrize("no_native", [False, True])
def test_graph_memset_bash_script_runs_with_a_fake_nvcc_and_prints_the_harness_ratio(
    no_native: bool, tmp_path: Path
) -> None:
    from repro.core.verdict import variant_ratio
    from repro.repros import _memset_twin
    from repro.repros._twin import TwinBuild

    doc = _canned_twin(ops=100, replays=50, per_round=5)
    (tmp_path / "twin.json").write_text(json.dumps(doc))
    script = tmp_path / "gm.sh"
    script.write_text(scripts.script_for("graph-memset", {}, smoke=True))
    env = _fake_nvcc(tmp_path, FAKE_NO_NATIVE=str(int(no_native)))
    proc = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "nvcc: Cuda compilation tools, release 99.9, V99.9.1"
    assert lines[1].startswith("GPU: Fake GPU 9000 (compute capability 9.0)")
    assert (
        DEFINITION.search(proc.stdout) and "median over 10 rounds" in lines[2] and "of its 5 back-to-back" in lines[2]
    )
    calls = (tmp_path / "nvcc_calls.txt").read_text().splitlines()
    native = "-O3 -arch=native -o graph_memset graph_memset.cu"
    assert calls == ([native, "-O3 -arch=sm_90 -o graph_memset graph_memset.cu"] if no_native else [native])
    args = (tmp_path / "args.txt").read_text().strip()
    assert args == (
        "--ops 100 --replays 50 --rounds 10 --warmup 5 --work-iters 128 --episodes 2 --gap-ms 500 --work-replays 20"
    )
    # The printed ratios are the harness's: twin_variants pairs the rounds, variant_ratio takes the ratio.
    build = TwinBuild(tmp_path / "x", True, "sm_90", "nvcc", "0")
    have = {
        v.name: v for v in _memset_twin.twin_variants(_memset_twin.parse_twin_output(json.dumps(doc)), build, 0.01, 1.0)
    }
    rows = standalone.parse_output(proc.stdout)
    assert set(rows) == {"memset/fill (pure CUDA twin)", "memset/kernel (the seed's program, re-implemented)"}
    for label, (num, den) in {
        "memset/fill (pure CUDA twin)": ("twin_memset", "twin_fill"),
        "memset/kernel (the seed's program, re-implemented)": ("twin_seed_memset", "twin_seed_fill"),
    }.items():
        value, _, _, paired, n, _ = variant_ratio(have[num], have[den])
        assert paired and n == 10
        assert rows[label]["ratio"] == pytest.approx(value, abs=5e-5), label
        times = [v for k, v in rows[label].items() if k.startswith("t(")]
        assert times == pytest.approx([have[num].median, have[den].median], rel=1e-5)
        assert abs(value - have[num].median / have[den].median) > 1e-3  # the paired ratio is not the plain one


def test_graph_memset_bash_script_stops_with_exit_1_when_the_twin_fails(tmp_path: Path) -> None:
    script = tmp_path / "gm.sh"
    script.write_text(scripts.script_for("graph-memset", {}, smoke=True))
    env = _fake_nvcc(tmp_path, FAKE_TWIN_EXIT="1")
    proc = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.splitlines()[-2:] == [
        "cudaSetDevice failed",
        "graph_memset failed (its error is above); it needs a CUDA GPU",
    ]
    assert proc.stdout.splitlines() == ["nvcc: Cuda compilation tools, release 99.9, V99.9.1"]


CPU_SMOKE_PY_IDS = [r for r in PY_IDS if catalog.get(r).requires.cpu_smoke]


def test_a_script_run_below_checks_the_cpu_environment_variable() -> None:
    assert "5090-linear" in CPU_SMOKE_PY_IDS, CPU_SMOKE_PY_IDS


@pytest.mark.parametrize("rid", CPU_SMOKE_PY_IDS)
def test_scripts_run_on_cpu_with_cpu_and_print_the_definition_both_medians_and_the_ratio(
    rid: str, tmp_path: Path
) -> None:
    path = tmp_path / f"{rid}.py"
    path.write_text(scripts.script_for(rid, {}, smoke=True))
    # 5090-linear is let onto the CPU by the environment variable, the others by the flag: the same
    # permission either way, so one script run checks the variable.
    by_env = rid == "5090-linear"
    env = _on_cpu(**{standalone.CPU_ENV: "1"}) if by_env else _on_cpu()
    cmd = [sys.executable, str(path), *([] if by_env else ["--cpu"])]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert re.fullmatch(r"torch \S+ \| torch\.version\.cuda \S+ \| GPU: no CUDA GPU", lines[0]), lines[0]
    assert lines[1].startswith("WARNING: running on CPU (--cpu)")
    assert len(DEFINITION.findall(proc.stdout)) == 1, proc.stdout  # one definition, whatever the number of ratios
    rows = standalone.parse_output(proc.stdout)
    assert rows, proc.stdout
    cls = catalog.get(rid)
    params = build_params(rid, cls.Params, {}, smoke=True)
    heads = standalone.comparison_filter(cls().comparisons(params), None, rid)
    names = {c.name for c in heads}
    if rid == "fused-adam-capturable":
        # TE FusedAdam is the headline; where it does not import (the test env) the script times the first
        # torch backend that runs, and says it does not test the claim.
        names = {c.name for c in cls().comparisons(params) if c.basis == "kernel"}
        said = "torch_fused ran instead of TE FusedAdam (control: the same kernels in both forms): it does not test"
        assert said in proc.stdout
        assert "TE FusedAdam's kernel time per step: the device time of every kernel a step launches" in " ".join(
            proc.stdout.split()
        )
    assert set(rows) <= names and rows
    for label, row in rows.items():
        times = [v for k, v in row.items() if k.startswith("t(")]
        assert len(times) == 2 and all(t > 0 for t in times), (label, row)
        assert 0 < row["ratio"] < 100, (label, row)
    if rid == "fused-adam-capturable":  # what it needs, said before it allocates (4 x 4096 at smoke size)
        assert "needs about 0.000366 GiB of GPU memory for torch_fused: 6 fp32 sets of 4 tensors x 4096" in proc.stdout
    ratio_lines = [ln for ln in lines if ln.startswith("[") and "] ratio t(" in ln]
    assert ratio_lines and all(re.search(r" = [\d.]+ \(paired; medians give [\d.]+\)$", ln) for ln in ratio_lines)
    assert all(ln.endswith(" ms (median of per-call times, 21 rounds)") for ln in lines if "] t(" in ln)


REFUSAL = "no CUDA GPU: a CPU run is not evidence about a GPU; pass --cpu (or GPU_REPRO_SCRIPT_CPU=1) to run anyway"


def _stub_torch(root: Path) -> Path:
    """A torch package with no GPU and nothing else: a script that refuses the CPU has to stop before it
    needs any more of torch, so it runs against this stub in a fraction of a real torch import."""
    pkg = root / "stub" / "torch"
    (pkg / "nn").mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "__version__ = '0.0.0+stub'\n"
        "class version:\n    cuda = None\n"
        "class cuda:\n    @staticmethod\n    def is_available():\n        return False\n"
    )
    (pkg / "nn" / "__init__.py").write_text("")
    (pkg / "nn" / "functional.py").write_text("")
    return root / "stub"


def _refused(path: Path, env: dict[str, str]) -> None:
    proc = subprocess.run(
        [sys.executable, str(path)], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [REFUSAL]
    assert proc.stdout.splitlines()[0].startswith("torch ") and len(proc.stdout.splitlines()) == 1


@pytest.mark.parametrize("rid", PY_IDS)
def test_without_cpu_a_python_script_on_cpu_is_one_line_and_exit_2(rid: str, tmp_path: Path) -> None:
    path = tmp_path / f"{rid}.py"
    path.write_text(scripts.script_for(rid, {}, smoke=True))
    _refused(path, {**_on_cpu(), "PYTHONPATH": str(_stub_torch(tmp_path))})


def test_without_cpu_a_script_refuses_with_the_real_torch_too(tmp_path: Path) -> None:
    path = tmp_path / "5090-linear.py"
    path.write_text(scripts.script_for("5090-linear", {}, smoke=True))
    _refused(path, _on_cpu())


def test_fused_adam_states_the_memory_its_params_need_and_how_it_sizes_down() -> None:
    from repro.repros import fused_adam

    text = scripts.script_for("fused-adam-capturable", {})
    # 201 x 320*65536 fp32 elements in 6 sets (params, grads, 2 states x 2 optimizers alive at once).
    assert fused_adam.script_gib(build_params("fused-adam-capturable", fused_adam.AdamParams, {}), "te") == (
        pytest.approx(6 * 4 * 201 * 320 * 65536 / 2**30)
    )
    assert "GPU memory: about 94.2 GiB (6 fp32 sets of 201 x 20971520: params, grads," in text.replace("\n", " ")
    assert "torch.cuda.mem_get_info()" in text and "sizing down to" in text


def test_script_carries_the_exact_params_and_knobs() -> None:
    text = scripts.script_for(
        "solve-512-cliff", {"backends": "cusolver", "batches": "128", "cliff_n": "256", "n_min": "255", "n_max": "256"}
    )
    assert "HEADLINE = [('cusolver/b128', 'cusolver', 128)]" in text
    # The default backend at the same batch runs beside it, labelled as the control.
    assert "CONTROLS = [('default/b128 (control)', 'default', 128)]" in text
    assert "N, SEED, RHS = 256, 0, 1" in text
    assert "preferred_linalg_library(backend)" in text
    lin = scripts.script_for("5090-linear", {"batch": "8"})
    assert "torch.randn(8, 196, 768" in lin and "allow_tf32 = on" in lin and 'with_tf32(False, "fp32")' in lin


def test_comparison_narrows_the_script_and_a_wrong_name_is_exit_2() -> None:
    text = scripts.script_for("solve-512-cliff", {}, only="default/b16")
    assert "HEADLINE = [('default/b16', 'default', 16)]" in text and "CONTROLS = []" in text
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


def test_graph_memset_comparisons_without_a_script_are_refused_with_the_choices() -> None:
    assert scripts.script_for("graph-memset", {}, only="memset/fill (pure CUDA twin)").startswith("#!/usr/bin/env bash")
    with pytest.raises(UsageError, match="no standalone script times it; expected one of 'memset/fill \\(pure CUDA"):
        scripts.script_for("graph-memset", {}, only="(memset+mm)/(fill+mm) (torch graph)")


def test_solve_script_of_a_cusolver_headline_keeps_the_default_backend_as_control() -> None:
    for only in ("cusolver/b64", None):
        text = scripts.script_for("solve-512-cliff", {"backends": "cusolver", "batches": "64"}, only=only)
        assert "CONTROLS = [('default/b64 (control)', 'default', 64)]" in text
        assert "for label, backend, batch in HEADLINE + CONTROLS:" in text
    both = scripts.script_for("solve-512-cliff", {"batches": "64"})  # default already timed: no control
    assert "CONTROLS = []" in both and "('default/b64', 'default', 64)" in both


def test_regenerated_scripts_are_what_repro_script_prints_and_give_the_twin_script() -> None:
    from repro.repros.fused_adam import AdamParams, FusedAdamCapturable
    from repro.repros.solve_cliff import Solve512Cliff, SolveParams

    # The bundle's script is the one `repro script ID` prints, whose output a run's maker attaches.
    solve = {"repro": {"id": "solve-512-cliff", "params": {}}, "verdict": {"headline": "cusolver/b128"}}
    script, note = scripts.regenerate(solve)
    assert script == Solve512Cliff().script(SolveParams()) and note is None
    assert "('default/b128', 'default', 128)" in script and "('cusolver/b128', 'cusolver', 128)" in script
    adam = {"repro": {"id": "fused-adam-capturable", "params": {}}, "verdict": {"headline": "te"}}
    script, _ = scripts.regenerate(adam)
    assert script == FusedAdamCapturable().script(AdamParams()) and "'torch_fused'" in str(script)
    memset = {"repro": {"id": "graph-memset", "params": {}}, "verdict": {"headline": "memset/fill (pure CUDA twin)"}}
    script, note = scripts.regenerate(memset)  # the bundle carries the twin's bash script, .cu inside
    assert script is not None and script.startswith("#!/usr/bin/env bash\n") and note is None
    assert "cat > graph_memset.cu <<'GRAPH_MEMSET_CU'" in script


def test_parse_output_reads_times_in_seconds() -> None:
    out = "[a] t(x) = 2 ms (median)\n[a] t(y) = 1 us\n[a] ratio t(x)/t(y) = 2.0000 (paired: median)\nratio = def\n"
    assert standalone.parse_output(out) == {"a": {"t(x)": 0.002, "t(y)": 1e-6, "ratio": 2.0}}


def test_heredoc_refuses_a_text_that_would_end_it_early() -> None:
    assert standalone.heredoc("a.cu", "x\n", "EOF_A") == "cat > a.cu <<'EOF_A'\nx\nEOF_A\n"
    with pytest.raises(ValueError, match="occurs as a line"):
        standalone.heredoc("a.cu", "x\nEOF_A\ny", "EOF_A")


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
