"""Fault suite, processes: real signals against the real CLI; nothing it started may outlive it.

Every CLI here runs with a unique marker in its environment, which all its descendants
inherit; a survivor is any process still carrying the marker.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import pytest
from faults import PLUGINS, end, log_says, running, stacks, start, summary, survivors, torn_files, wait_for

from repro.core import procs
from repro.evidence import artifact

BASE = ["all", "--repro-path", str(PLUGINS), "--budget", "0.2", "--target-ci", "0.2"]

Start = Callable[..., tuple[subprocess.Popen[bytes], str]]


@pytest.fixture
def cli() -> Iterator[Start]:
    """``faults.start`` for one test: each CLI it started is ended afterwards (``faults.end``: all it
    started killed, the CLI reaped, its pipes closed), whether the test passed, failed or timed out."""
    made: list[tuple[subprocess.Popen[bytes], str]] = []

    def run(args: Sequence[str], env: Mapping[str, str] | None = None) -> tuple[subprocess.Popen[bytes], str]:
        made.append(start(args, env=env))
        return made[-1]

    yield run
    for proc, token in made:
        end(proc, token)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupt_stops_the_tree_and_writes_what_finished(
    tmp_path: Path, cli: Start, sig: int, progress: Callable[[str], None]
) -> None:
    ids = ["--only", "test-fine", "--only", "test-forks-hang", "--only", "test-gap"]
    # PYTHONFAULTHANDLER: a CLI that does not exit is asked for its stacks (SIGABRT) before it is killed.
    proc, token = cli([*BASE, "--out", str(tmp_path), "--no-collect-env", *ids], env={"PYTHONFAULTHANDLER": "1"})
    # test-fine runs first (ids in order), then test-forks-hang detaches a grandchild and hangs.
    assert wait_for(lambda: log_says(tmp_path, "test-forks-hang: forked"), 120), "the hanging repro never started"
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"repro all still ran 60 s after {signal.Signals(sig).name}; its stacks:\n{stacks(proc)}")
    assert proc.returncode == 128 + sig, err.decode()
    assert summary(progress, f"{signal.Signals(sig).name} of repro all", token, tmp_path) == (0, 0)
    (run_dir,) = tmp_path.iterdir()
    done = artifact.load(run_dir / "test-fine.json")
    stopped = artifact.load(run_dir / "test-forks-hang.json")
    assert done["verdict"]["status"] == "smoke"  # a CPU run
    assert stopped["error"]["kind"] == "interrupted" and stopped["error"]["signal"] == signal.Signals(sig).name
    assert not (run_dir / "test-gap.json").exists()  # not started after the interrupt
    report = (run_dir / "report.md").read_text()
    assert "test-fine" in report and "test-forks-hang" in report
    assert (run_dir / "logs" / "test-forks-hang.log").is_file()
    assert torn_files(tmp_path) == []
    assert err.decode().strip().splitlines()[-1].startswith("error: interrupted by")


# A SIGINT at each line that Interrupts.wait runs, in turn: the handler then runs right there, with
# whatever the main thread holds at that line (a trace function sends the signal, and Python runs the
# handler before the traced line). Each wait must see its signal and end, never wait on itself.
_SIGNAL_AT_EVERY_LINE = """
import faulthandler, os, signal, sys
from repro.run.runner import Interrupts

faulthandler.dump_traceback_later(30, exit=True)  # a wait that hangs shows where, and ends the run
for k in range(1, 1000):
    lines = 0

    def tracer(frame, event, arg):
        global lines
        if event == "line":
            lines += 1
            if lines == k:
                os.kill(os.getpid(), signal.SIGINT)
        return tracer

    with Interrupts() as ints:
        sys.settrace(tracer)
        try:
            seen = ints.wait(0.2)
        finally:
            sys.settrace(None)
    if lines < k:  # every line has had its signal
        print(k - 1)
        break
    assert seen and ints.signum == signal.SIGINT, f"the signal at line {k} of the wait was missed"
"""


def test_a_signal_at_any_line_of_the_interrupt_wait_is_seen_at_once() -> None:
    # The batch sleeps in this wait between its polls of the repro in flight.
    done = subprocess.run([sys.executable, "-c", _SIGNAL_AT_EVERY_LINE], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    assert int(done.stdout) >= 3  # the wait's lines were all tried (a check that the tracing took)


def test_sigkill_of_the_cli_leaves_no_process_behind(
    tmp_path: Path, cli: Start, progress: Callable[[str], None]
) -> None:
    # collect_env on: its guard and pip list must die too.
    proc, token = cli([*BASE, "--out", str(tmp_path), "--only", "test-forks-hang"])
    assert wait_for(lambda: log_says(tmp_path, "test-forks-hang: forked"), 120)
    assert len(survivors(token, 0)) >= 4  # guard, worker, detached grandchild, its double-forked child
    proc.kill()
    proc.communicate()
    assert summary(progress, "SIGKILL of repro all", token, tmp_path) == (0, 0)
    assert not list(tmp_path.glob("*/*.json"))  # nothing wrote into the run folder after the CLI died


def test_sigkill_during_collect_env_kills_collect_env_and_pip(
    tmp_path: Path, cli: Start, progress: Callable[[str], None]
) -> None:
    # collect_env runs in-process after the measurement; each of its probes (pip list first) runs
    # under a guard, so killing the CLI then must take them down too.
    proc, token = cli(["run", "test-gap", "--repro-path", str(PLUGINS), "--out", str(tmp_path), "--budget", "0.2"])
    assert wait_for(lambda: running(token, "pip"), 120), "collect_env's pip list never started"
    proc.kill()
    proc.communicate()
    assert summary(progress, "SIGKILL of repro run during collect_env", token, tmp_path) == (0, 0)


def test_timeout_kills_a_hang_and_its_grandchildren(tmp_path: Path, cli: Start) -> None:
    proc, token = cli(
        [*BASE, "--out", str(tmp_path), "--no-collect-env", "--timeout", "15", "--only", "test-forks-hang"]
    )
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    (doc_path,) = tmp_path.glob("*/test-forks-hang.json")
    assert json.loads(doc_path.read_text())["error"]["kind"] == "timeout"
    assert survivors(token) == []


def test_grandchildren_of_a_finished_repro_die_with_it(tmp_path: Path, cli: Start) -> None:
    proc, token = cli([*BASE, "--out", str(tmp_path), "--no-collect-env", "--only", "test-forks"])
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    assert survivors(token, 2) == []


def test_guard_mirrors_the_exit_of_its_command() -> None:
    tree = procs.spawn([sys.executable, "-c", "import sys; sys.exit(7)"])
    assert tree.proc.wait(30) == 7
    tree.finish()
    tree = procs.spawn([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"])
    assert tree.proc.wait(30) == -signal.SIGSEGV
    tree.finish()
    # SIGKILL (the OOM killer's signal) has no disposition to reset: the guard still dies of it,
    # so an OOM-killed worker is reported as such, not as "exited with code 1".
    tree = procs.spawn([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"], stderr=-1)
    assert tree.proc.wait(30) == -signal.SIGKILL
    assert tree.proc.stderr is not None
    with tree.proc.stderr:
        assert b"Traceback" not in tree.proc.stderr.read()
    tree.finish()
