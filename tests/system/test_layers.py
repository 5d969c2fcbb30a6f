"""The import rules `make lint` checks with import-linter: they hold, and breaking one fails."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

LINT = Path(sys.executable).with_name("lint-imports")

pytestmark = pytest.mark.skipif(not LINT.exists(), reason="import-linter is not installed in this environment")


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree)}
    return subprocess.run([str(LINT), "--no-cache"], cwd=tree, env=env, capture_output=True, text=True, timeout=300)


def _copy(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "repro", tree / "repro", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def test_the_rules_hold_and_an_upward_import_breaks_them(tmp_path: Path) -> None:
    tree = _copy(tmp_path)
    ok = _lint(tree)
    assert ok.returncode == 0 and "Contracts: 3 kept, 0 broken." in ok.stdout, ok.stdout + ok.stderr
    stats = tree / "repro" / "core" / "stats.py"
    stats.write_text(stats.read_text() + "\nfrom repro.run import catalog  # noqa: E402,F401\n")
    broken = _lint(tree)
    assert broken.returncode != 0
    assert "repro.core is not allowed to import repro.run" in broken.stdout
    assert "repro.core.stats -> repro.run.catalog" in broken.stdout


def test_a_catalog_repro_importing_past_the_api_breaks_them(tmp_path: Path) -> None:
    tree = _copy(tmp_path)
    linear = tree / "repro" / "repros" / "linear_5090.py"
    linear.write_text(linear.read_text() + "\nfrom repro.core import stats  # noqa: E402,F401\n")
    broken = _lint(tree)
    assert broken.returncode != 0 and "repro.repros is not allowed to import repro.core" in broken.stdout
