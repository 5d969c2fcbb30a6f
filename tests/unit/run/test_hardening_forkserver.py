"""Hardening of the fork server: a killed, stopped or impostor server, a killed guard, a killed runner.

Real processes and real signals; each test plays one attack or accident from the adversarial review.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from faults import FAST, MARK, PLUGINS, kill_marked, summary
from helpers import ROOT

from repro.core import procs
from repro.run import forkserver, runner
from repro.run.execute import RunRequest
from repro.run.forkserver import ForkServer, ForkServerError


@pytest.fixture
def server() -> Iterator[ForkServer]:
    s = ForkServer().start()
    try:
        yield s
    finally:
        with contextlib.suppress(ProcessLookupError, KeyError):
            os.kill(s.info["pid"], signal.SIGCONT)
        s.close()


def _req(rid: str) -> RunRequest:
    return RunRequest(repro_id=rid, repro_paths=(PLUGINS,), smoke=True, sampling=FAST, collect_env=False)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[-1].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")


def _wait(predicate: Any, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


# --------------------------------------------------------------------------- F1: a killed server is no OOM


def test_a_server_killed_mid_repro_is_reported_as_such_not_as_oom(
    server: ForkServer, run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    zygote = server.info["pid"]
    fork = server.fork
    forked = threading.Event()

    def fork_and_tell(spec: dict[str, Any]) -> forkserver.ForkedChild:
        child = fork(spec)
        forked.set()  # the runner holds the child: a kill from here on lands mid-repro, not mid-fork
        return child

    monkeypatch.setattr(server, "fork", fork_and_tell)
    out: dict[str, runner.Outcome] = {}
    t = threading.Thread(
        target=lambda: out.setdefault("o", runner.run_one_isolated(_req("test-hang"), run_dir, 60, server=server))
    )
    t.start()
    assert forked.wait(20), "the server forked no child"
    os.kill(zygote, signal.SIGKILL)
    t.join(30)
    o = out["o"]
    doc = json.loads((run_dir / "test-hang.json").read_text())
    assert o.status == "error" and doc["error"]["kind"] == "crash", (o, doc["error"])
    assert "fork server" in o.message and "SIGKILL" in o.message and "out-of-memory" not in o.message, o.message
    assert doc["error"]["signal"] is None


def test_a_server_killed_before_it_answers_a_fork_runs_the_repro_once_in_its_own_worker(
    server: ForkServer, run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    zygote = server.info["pid"]
    recv = server._recv
    calls: list[float] = []

    def kill_then_recv(timeout_s: float) -> dict[str, Any]:
        if calls:
            return recv(timeout_s)
        calls.append(timeout_s)
        os.kill(zygote, signal.SIGKILL)  # the request is sent; the server dies
        assert _wait(lambda: not _alive(zygote), 10)
        # An answer the server wrote before it died is dropped unread, as if the kill had come first: the
        # runner reads the hang-up that follows.
        recv(timeout_s)
        return recv(timeout_s)

    monkeypatch.setattr(server, "_recv", kill_then_recv)
    o = runner.run_one_isolated(_req("test-fine"), run_dir, 60, server=server)
    assert o.status == "smoke", o.message  # the repro ran, in a worker of its own
    assert server.lost and not server.alive and not _alive(zygote)


# --------------------------------------------------------------------------- F2: a stopped server, a finished child


def test_a_child_that_finished_under_a_stopped_server_keeps_its_outcome(
    server: ForkServer, run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    zygote = server.info["pid"]
    fork = server.fork

    def fork_then_stop(spec: dict[str, Any]) -> forkserver.ForkedChild:
        child = fork(spec)
        os.kill(zygote, signal.SIGSTOP)  # the server answers nothing from here on
        return child

    monkeypatch.setattr(server, "fork", fork_then_stop)
    o = runner.run_one_isolated(_req("test-fine"), run_dir, 20, server=server)
    assert o.status == "smoke", o.message  # the artifact's outcome, not a timeout
    assert server.lost and not server.alive
    assert json.loads((run_dir / "test-fine.json").read_text())["verdict"]["status"] == "smoke"


# --------------------------------------------------------------------------- F3: guard killed, then the runner

_RUNNER = """
import json, sys, time
from pathlib import Path
from repro.run import runner
from repro.run.execute import RunRequest
from repro.run.forkserver import ForkServer
from repro.core.context import SamplingConfig

req = RunRequest(repro_id="test-hang", repro_paths=(Path(sys.argv[1]),), smoke=True,
                 sampling=SamplingConfig(budget_s=0.2), collect_env=False)
server = ForkServer().start()
child = server.fork(runner._worker_spec(req, Path(sys.argv[2])))
print(json.dumps({"guard": server._tree.pid, "zygote": server.info["pid"], "child": child.pid}), flush=True)
time.sleep(300)
"""


def _marked_env(token: str, **extra: str) -> dict[str, str]:
    return {**os.environ, MARK: token, "PYTHONPATH": str(ROOT), **extra}


def test_server_and_child_die_with_the_runner_even_when_the_guard_died_first(
    tmp_path: Path, run_dir: Path, progress: Callable[[str], None]
) -> None:
    script = tmp_path / "runner.py"
    script.write_text(_RUNNER)
    token = f"fs-{os.getpid()}-{time.monotonic_ns()}"
    proc = subprocess.Popen(
        [sys.executable, str(script), str(PLUGINS), str(run_dir)],
        stdout=subprocess.PIPE,
        env=_marked_env(token),
    )
    try:
        assert proc.stdout is not None
        pids = json.loads(proc.stdout.readline())
        os.kill(pids["guard"], signal.SIGKILL)
        time.sleep(0.5)
        assert _alive(pids["zygote"]) and _alive(pids["child"])  # the guard's death alone ends nothing
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        assert summary(progress, "SIGKILL of a runner whose guard died first", token, None)[0] == 0, pids
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        kill_marked(token)


# --------------------------------------------------------------------------- F4: nobody else can talk to the runner


def test_no_other_process_can_connect_to_the_runner_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A same-user process watches the temp folder for the runner's socket and, while the server imports
    # torch, connects and sends garbage. With a socketpair there is no socket to find.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    stop = threading.Event()
    hits: list[str] = []

    def attacker() -> None:
        import socket

        while not stop.is_set():
            for sock in tmp_path.glob("gpu-repro-fork-*/sock"):
                with contextlib.suppress(OSError):
                    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                    s.connect(str(sock))
                    s.send(b"\xff not json")
                    hits.append(str(sock))
            time.sleep(0.005)

    t = threading.Thread(target=attacker, daemon=True)
    t.start()
    try:
        server = ForkServer().start()
    finally:
        stop.set()
        t.join(5)
    try:
        assert hits == [] and server.alive and server.info["ready"]
        zygote = server.info["pid"]
        assert os.readlink(f"/proc/{zygote}/fd/0") == "/dev/null"
        inodes = {
            link[len("socket:[") : -1]
            for link in (os.readlink(f"/proc/{zygote}/fd/{fd}") for fd in os.listdir(f"/proc/{zygote}/fd"))
            if link.startswith("socket:[")
        }
        bound = [ln for ln in Path("/proc/net/unix").read_text().splitlines()[1:] if ln.split()[6] in inodes]
        assert bound and all(len(ln.split()) == 7 for ln in bound), bound  # no path, no abstract name
    finally:
        server.close()


_IMPOSTOR = """#!{python}
# Plays a fork server that says the wrong things: FAKE_MODE picks what.
import json, os, socket, sys, time
conn = socket.socket(fileno=os.dup(0))
mode, decoy = os.environ["FAKE_MODE"], int(os.environ.get("FAKE_DECOY") or 0)
if mode == "garbage-ready":
    conn.send(b"\\xff not json")
elif mode == "decoy-ready":
    conn.send(json.dumps({{"ready": True, "pid": decoy}}).encode())
else:
    conn.send(json.dumps({{"ready": True, "pid": os.getpid(), "torch": None}}).encode())
    data, _, _, _ = conn.recvmsg(1 << 20, socket.CMSG_SPACE(4))
    request = json.loads(data)
    if mode == "decoy-fork":
        conn.send(json.dumps({{"pid": decoy, "request_id": request["request_id"]}}).encode())
    else:
        conn.send(b"[1, 2, 3]")
time.sleep(60)
"""


@pytest.fixture
def decoy() -> Iterator[int]:
    proc = subprocess.Popen(["sleep", "120"])
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def _impostor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, decoy: int) -> str:
    path = tmp_path / "impostor"
    path.write_text(_IMPOSTOR.format(python=sys.executable))
    path.chmod(0o755)
    monkeypatch.setenv("FAKE_MODE", mode)
    monkeypatch.setenv("FAKE_DECOY", str(decoy))
    return str(path)


@pytest.mark.parametrize("mode", ["garbage-ready", "decoy-ready"])
def test_a_server_that_starts_with_nonsense_is_one_line_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, decoy: int, mode: str
) -> None:
    python = _impostor(tmp_path, monkeypatch, mode, decoy)
    with pytest.raises(ForkServerError) as exc:
        ForkServer(python=python, ready_timeout_s=20).start()
    assert "\n" not in str(exc.value) and "fork server" in str(exc.value)
    assert _alive(decoy)


@pytest.mark.parametrize("mode", ["decoy-fork", "garbage-fork"])
def test_a_bad_fork_answer_kills_nothing_and_the_repro_runs_in_a_fresh_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, decoy: int, run_dir: Path, mode: str, capfd: Any
) -> None:
    python = _impostor(tmp_path, monkeypatch, mode, decoy)
    server = ForkServer(python=python, ready_timeout_s=20).start()
    try:
        o = runner.run_one_isolated(_req("test-fine"), run_dir, 60, server=server)
    finally:
        server.close()
    assert o.status == "smoke", o.message
    assert _alive(decoy)  # the pid the impostor named was never signalled
    err = capfd.readouterr().err
    assert "fork server given up" in err and "Traceback" not in err, err


# --------------------------------------------------------------------------- F5: a runner killed while it starts


@pytest.mark.parametrize("delay_s", [0.3, 1.0, 2.0])
def test_a_runner_killed_before_the_server_is_ready_leaves_nothing_behind(
    tmp_path: Path, delay_s: float, progress: Callable[[str], None]
) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    token = f"fs5-{os.getpid()}-{time.monotonic_ns()}"
    code = "from repro.run.forkserver import ForkServer; ForkServer().start(); import time; time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code], env=_marked_env(token, TMPDIR=str(tmp)))
    try:
        assert _wait(lambda: any(b"repro.run.zygote" in _cmdline(p) for p in procs.descendants(proc.pid)), 20)
        time.sleep(delay_s)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        trial = f"SIGKILL of a runner {delay_s} s after its server started"
        assert summary(progress, trial, token, tmp) == (0, 0)
        assert list(tmp.iterdir()) == []  # no gpu-repro-fork-* folder, no socket, no log
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()
        kill_marked(token)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
