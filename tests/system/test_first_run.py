"""README "Your first run", CPU path: every command in its marked block runs, as written, in a copy of the repo."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, copy_of_the_repo

BEGIN, END = "<!-- first-run:cpu:begin -->", "<!-- first-run:cpu:end -->"


def cpu_commands(readme: str) -> list[str]:
    """The commands of the fenced block between the markers, one per non-empty line."""
    block = readme.split(BEGIN, 1)[1].split(END, 1)[0]
    body = block.split("```bash\n", 1)[1].split("```", 1)[0]
    return [ln for ln in body.splitlines() if ln.strip()]


def test_the_block_is_there_and_starts_as_a_newcomer_would() -> None:
    cmds = cpu_commands((ROOT / "README.md").read_text())
    assert cmds[0] == "make setup" and "make repro-all" in cmds and "make smoke" in cmds


# slow: `make setup` builds a real .venv (venv + pip install), about a minute on 2 cores.
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None or shutil.which("git") is None, reason="needs make and git")
@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs a git checkout to copy from")
def test_cpu_walkthrough_runs_as_written(tmp_path: Path) -> None:
    clone = copy_of_the_repo(tmp_path / "gpu-repro")
    # `make smoke` reuses this test env instead of building another (minutes, a large download):
    # the same pinned CPU torch. Its stamp must look newer than the copied pyproject.toml.
    venv = Path(sys.prefix)
    os.symlink(venv, clone / ".venv-test")
    for name in ("pyproject.toml", "requirements-test.txt"):
        os.utime(clone / name, (0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "OUT")}
    # Shorter sampling keeps the smoke run to tens of seconds; the commands are run as written.
    env["ARGS"] = "--budget 0.3 --target-ci 0.05"
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(str(venv)))
    outputs: dict[str, str] = {}
    cmds = cpu_commands((clone / "README.md").read_text())
    for cmd in cmds:
        r = subprocess.run(
            ["bash", "-o", "pipefail", "-c", cmd], cwd=clone, env=env, capture_output=True, text=True, timeout=600
        )
        # `| head` may close the pipe early; SIGPIPE (141) on the writer is not a failure of the step.
        assert r.returncode in (0, 141) if "| head" in cmd else r.returncode == 0, (cmd, r.stdout, r.stderr)
        outputs[cmd] = r.stdout + r.stderr

    doctor = outputs[".venv/bin/repro doctor"]
    assert "| FAIL " in doctor or "| WARN " in doctor  # no torch, or no CUDA: ranked by consequence
    everything = outputs["make repro-all"]
    assert "Nothing could run here" in everything and "make smoke" in everything
    assert all(f"{rid}: skipped" in everything for rid in ("5090-linear", "solve-512-cliff"))
    smoke = outputs["make smoke"]
    assert "USDT" not in smoke and "calls per sample" not in smoke
    statuses = dict(re.findall(r"^([a-z0-9-]+): (\w+) \(\d", smoke, re.M))
    assert set(statuses) >= {"5090-linear", "fused-adam-capturable", "lora-batch-scaling", "solve-512-cliff"}
    assert statuses["5090-linear"] != "skipped"  # the CPU trial really measured
    assert "Nothing could run here" not in smoke
    validated = outputs[".venv/bin/repro validate artifacts"]
    assert "0 invalid" in validated
    assert outputs[cmds[-1]].startswith("# gpu-repro report: run ")
