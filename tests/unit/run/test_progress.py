"""Quiet progress: the profiler's native chatter is held back, and progress is one line per variant."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

from repro.core.context import SamplingConfig
from repro.run.context import RunContext
from repro.run.kernels import quiet_profiler_stderr
from repro.run.progress import Display, describe


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_plain_display_prints_phase_changes_and_thins_sampling() -> None:
    out, clock = io.StringIO(), Clock()
    d = Display(out, live=False, clock=clock)
    d.progress("warm-up", "a", 0, None)
    d.progress("sampling", "a", 0, None)
    for n in range(20, 60, 2):  # 0.05 s apart, 1 s in all: within the plain interval, so thinned out
        clock.t += 0.05
        d.progress("sampling", "a", n, 0.02)
    clock.t += 5
    d.progress("sampling", "a", 80, 0.009)
    d.log("a log line")
    d.progress("done", "a", 80, 0.009)
    assert out.getvalue().splitlines() == [
        "  a: warm-up",
        "  a: sampling",
        "  a: sampling, 80 samples, CI +-0.90%",
        "a log line",
        "  a: done, 80 samples, CI +-0.90%",
    ]


def test_live_display_rewrites_one_line_and_keeps_logs_above() -> None:
    out = io.StringIO()
    d = Display(out, live=True)
    d.progress("sampling", "a", 20, 0.05)
    d.progress("sampling", "a", 22, 0.04)
    d.log("note")
    d.progress("done", "a", 22, 0.04)
    d.close()
    text = out.getvalue()
    assert "\n" not in text.split("note")[0]  # sampling updates overwrite in place
    assert text.endswith("\r\x1b[2K  a: done, 22 samples, CI +-4.00%\n")
    assert "\r\x1b[2Knote\n  a: sampling, 22 samples, CI +-4.00%" in text  # log above, live line redrawn


def test_describe() -> None:
    assert describe("profiling", "linear_fp32", 120, 0.0084) == "  linear_fp32: profiling, 120 samples, CI +-0.84%"


def test_profiler_usdt_lines_are_held_back_but_other_stderr_is_not(capfd: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    import torch
    from torch.profiler import ProfilerActivity, profile

    with quiet_profiler_stderr():
        with profile(activities=[ProfilerActivity.CPU]):
            torch.ones(4).add_(1)
        os.write(2, b"a real native warning\n")
    err = capfd.readouterr().err
    assert "USDT" not in err and "profiler_start" not in err
    assert "a real native warning" in err
    # Without the guard the same session does print them (so this test can fail).
    with profile(activities=[ProfilerActivity.CPU]):
        torch.ones(4).add_(1)
    assert "profiler_start" in capfd.readouterr().err


def test_measure_reports_progress_through_the_hook(fast: SamplingConfig) -> None:
    pytest.importorskip("torch")
    events: list[tuple[str, str, int, float | None]] = []
    logs: list[str] = []
    ctx = RunContext(device="cpu", smoke=True, sampling=fast, log=logs.append)
    ctx.progress = lambda phase, name, n, ci: events.append((phase, name, n, ci))
    ctx.measure("v", lambda: sum(range(100)))
    phases = [e[0] for e in events]
    assert phases[0] == "warm-up" and phases[-2:] == ["profiling", "done"] and "sampling" in phases
    assert events[-1][2] >= 6 and events[-1][3] is not None
    assert not any("calls per sample" in ln for ln in logs)


def test_repro_run_stderr_is_quiet(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    code = "import sys; from repro.cli.main import main; sys.argv = ['repro', *sys.argv[1:]]; main()"
    r = subprocess.run(
        [sys.executable, "-c", code, "run", "5090-linear", "--smoke", "--budget", "0.2", "--target-ci", "0.05"]
        + ["--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert "USDT" not in r.stderr and "calls per sample" not in r.stderr
    assert "  linear_fp32: done, " in r.stderr and "samples, CI +-" in r.stderr
