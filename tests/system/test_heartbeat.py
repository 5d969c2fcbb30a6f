"""tests/heartbeat.py: a long test says on the terminal that it is still running, alone and under xdist."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import TESTS

SLEEPER_FILE = "test_sleeper.py"
SLEEPER = """
import time


def test_sleeps() -> None:
    print("a captured print")
    time.sleep(1.6)
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_long_test_says_it_is_still_running(tmp_path: Path, workers: list[str]) -> None:
    (tmp_path / SLEEPER_FILE).write_text(SLEEPER)
    # Only the plugin, not this suite's conftest (whose CUDA check imports torch in every process).
    path = os.pathsep.join(p for p in (str(TESTS), os.environ.get("PYTHONPATH")) if p)
    # Not the variables of an xdist worker this test may itself run in (they would name it as one).
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(GPU_REPRO_TEST_PROGRESS_S="0.5", PYTHONPATH=path)
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "heartbeat", "-q", *workers, SLEEPER_FILE],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    # On the terminal's stderr, not in the test's captured output (which a passing test never shows).
    lines = [ln for ln in r.stderr.splitlines() if "still running" in ln]
    worker = r"\[gw\d+\] " if workers else ""
    line = re.compile(worker + r"still running test_sleeper\.py::test_sleeps after \d+ s")
    assert len(lines) >= 2, r.stderr  # the first after 0.5 s, then again every 0.5 s while it runs
    assert all(line.fullmatch(ln) for ln in lines), lines
    assert "a captured print" not in r.stdout + r.stderr
