"""The Makefile as a newcomer meets it: `make help` reads cleanly and its repro targets match the catalog."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
from helpers import ROOT

from repro.run import catalog

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make not installed")


def make(*args: str) -> str:
    # MAKEFLAGS/MAKELEVEL from an outer `make test` would leak variables into this one.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "OUT", "ARGS")}
    return subprocess.run(["make", "-s", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout


def test_make_help_shows_no_unexpanded_variables() -> None:
    text = make("help")
    assert "$(" not in text and "${" not in text, text
    targets = {ln.split()[0] for ln in text.splitlines() if ln.strip()}
    assert {"smoke", "repro-all", "test", "setup"} <= targets
    assert "OUT=artifacts" in text


def test_makefile_repros_match_the_catalog() -> None:
    m = re.search(r"^REPROS := (.+)$", (ROOT / "Makefile").read_text(), re.M)
    assert m, "REPROS line not found"
    # Built-ins only: other tests load plugins into the same process's registry.
    builtins = [rid for rid, cls in catalog.load([]).items() if cls.__module__.startswith("repro.repros.")]
    assert sorted(m.group(1).split()) == sorted(builtins)


def test_make_smoke_runs_repro_all_smoke_in_the_test_env() -> None:
    recipe = make("-n", "smoke", "OUT=/tmp/x")
    assert ".venv-test/bin/repro all --smoke --out /tmp/x" in recipe
