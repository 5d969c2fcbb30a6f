"""Fault suite, slow: `repro all` under SIGINT, SIGTERM and SIGKILL at random moments, 30 trials each.

After every trial: no process of the run survives, no visible file is empty or cut short, and
(SIGINT/SIGTERM) every artifact that was written is in a report. The batch uses fast synthetic
plugin repros (one leaves a detached grandchild behind), so a trial takes seconds; trials run
three at a time, each with its own marker, to keep the whole test to a few minutes on 2 cores.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import pytest
from faults import PLUGINS, kill_marked, start, survivors, torn_files, visible_files

TRIALS = int(os.environ.get("GPU_REPRO_SIGNAL_TRIALS", "30"))
ARGS = ["all", "--repro-path", str(PLUGINS), "--budget", "0.1", "--target-ci", "0.3", "--no-collect-env"]
ARGS += ["--only", "test-forks", "--only", "test-gap"]
SIGNALS = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM, "SIGKILL": signal.SIGKILL}


def _trial(out: Path, sig: int, delay: float) -> tuple[list[str], int]:
    """One run killed after ``delay`` seconds; the problems found (empty when all is well) and the
    number of visible files checked."""
    proc, token = start([*ARGS, "--out", str(out)])
    problems: list[str] = []
    try:
        try:
            proc.communicate(timeout=delay)
        except Exception:  # still running at the chosen moment: that is the point
            proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
        alive = survivors(token)
        if alive:
            problems.append(f"{len(alive)} process(es) survived")
        problems += torn_files(out)
        runs = [d for d in out.iterdir() if d.is_dir()] if out.exists() else []
        if sig != signal.SIGKILL and runs:
            (run_dir,) = runs
            # The run folder exists only once SIGINT/SIGTERM are handled: the exit must say so (or the
            # signal came after the batch, when the CLI exits as usual or by the default action).
            if proc.returncode not in (0, 128 + sig, -sig):
                problems.append(f"exit {proc.returncode}: {err.decode()[-300:]}")
            arts = sorted(p.stem for p in run_dir.glob("*.json"))
            report = run_dir / "report.md"
            if arts and not report.is_file():
                problems.append(f"artifacts {arts} but no report")
            elif arts:
                text = report.read_text()
                problems += [f"{a} missing from the report" for a in arts if f"`{a}`" not in text]
        files = len(visible_files(out)) if out.exists() else 0
    finally:
        kill_marked(token)
    return [f"{signal.Signals(sig).name} after {delay:.2f} s: {p}" for p in problems], files


@pytest.mark.slow
def test_repro_all_under_random_signals(tmp_path: Path, progress: Callable[[str], None]) -> None:
    # One undisturbed run tells how long a batch takes here; kill moments spread over all of it.
    t0 = time.monotonic()
    proc, token = start([*ARGS, "--out", str(tmp_path / "calibrate")])
    _, err = proc.communicate(timeout=300)
    span = time.monotonic() - t0
    assert proc.returncode == 0, err.decode()
    assert survivors(token) == []
    progress(f"an undisturbed batch took {span:.1f} s; {len(SIGNALS) * TRIALS} trials follow, 3 at a time")
    rng = random.Random(9)
    plan = [(name, i, rng.uniform(0.0, span * 1.1)) for name in SIGNALS for i in range(TRIALS)]
    problems: list[str] = []
    files = 0
    with ThreadPoolExecutor(max_workers=3) as pool:
        trials = {
            pool.submit(_trial, tmp_path / f"{name}-{i}", SIGNALS[name], delay): (name, delay)
            for name, i, delay in plan
        }
        for done, trial in enumerate(as_completed(trials), 1):
            name, delay = trials[trial]
            found, checked = trial.result()
            problems += found
            files += checked
            verdict = "ok" if not found else f"{len(found)} problem(s)"
            elapsed = time.monotonic() - t0
            progress(f"trial {done}/{len(plan)} ({name} after {delay:.2f} s): {verdict}, {elapsed:.0f} s in")
    per_signal = ", ".join(f"{name} {sum(p[0] == name for p in plan)}" for name in SIGNALS)
    survived = sum("survived" in p for p in problems)
    torn = sum(p.endswith(("0 bytes", "cut short", "report does not end where a report ends")) for p in problems)
    progress(
        f"summary: {len(plan)} trials ({per_signal}): {survived} with surviving processes, {files} files checked, "
        f"{torn} torn or 0-byte, {len(problems) - survived - torn} other problems"
    )
    assert problems == [], "\n".join(problems)
