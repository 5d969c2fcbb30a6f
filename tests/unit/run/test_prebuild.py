"""repro all's builds ahead: which builds the repros ask for, how the process reports, that it always ends."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from repro.env import nvml
from repro.run import prebuild


def test_only_repros_that_compile_ask_and_only_for_a_known_architecture(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = {"repro_ids": ["graph-memset", "5090-linear"], "repro_paths": [], "smoke": False}
    assert prebuild.tasks(spec, None) == []
    todo = prebuild.tasks(spec, "sm_90")
    assert len(todo) == 2  # graph-memset's twin and the seed's seed.cu; 5090-linear compiles nothing
    built: list[tuple[str, tuple[str, ...]]] = []
    from repro.repros import graph_memset

    monkeypatch.setattr(graph_memset, "build_twin", lambda source, archs: built.append((Path(source).name, archs)))
    monkeypatch.setattr(graph_memset, "build_seed_cu", lambda archs: built.append(("seed.cu", archs)))
    for t in todo:
        t()
    assert built == [("graph_memset.cu", ("sm_90", "native")), ("seed.cu", ("sm_90", "native"))]
    assert prebuild.tasks({"repro_ids": ["5090-linear"]}, "sm_90") == []


def test_the_process_reports_what_it_built_and_a_failure_costs_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken() -> None:
        raise RuntimeError("nvcc exited 1")

    monkeypatch.setattr(nvml, "compute_arch", lambda: "sm_90")
    monkeypatch.setattr(prebuild, "tasks", lambda spec, arch: [lambda: None, broken])
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps({"repro_ids": ["graph-memset"]})))
    assert prebuild.main() == 0
    assert capsys.readouterr().out.startswith("1 of 2 built for sm_90 in ")


def test_the_builds_process_ends_and_says_nothing_without_a_gpu() -> None:
    builds = prebuild.Builds(["graph-memset", "5090-linear"], [], smoke=True)
    assert builds.wait(timeout_s=60) == ""  # no NVML here: nothing to build ahead for
    assert builds.tree.proc.returncode == 0


def test_a_recorded_interrupt_stops_the_wait_at_once_and_stop_after_wait_is_harmless() -> None:
    import subprocess
    import sys
    import threading
    import time

    from repro.core import procs

    builds = object.__new__(prebuild.Builds)  # a build that would take 30 s: a sleeping child under the guard
    builds.tree = procs.spawn([sys.executable, "-c", "import time; time.sleep(30)"], stdout=subprocess.PIPE, text=True)
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    t0 = time.monotonic()
    assert builds.wait(timeout_s=60, cancel=cancel) == "stopped: interrupted"
    assert time.monotonic() - t0 < 5 and builds.tree.proc.poll() is not None
    builds.stop()  # after wait: nothing left to stop, no error
    slow = object.__new__(prebuild.Builds)
    slow.tree = procs.spawn([sys.executable, "-c", "import time; time.sleep(30)"], stdout=subprocess.PIPE, text=True)
    assert slow.wait(timeout_s=0.5).startswith("stopped after 0.5 s")
