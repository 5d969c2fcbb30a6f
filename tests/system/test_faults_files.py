"""Fault suite, files: writes are atomic under SIGKILL, and a full disk is one line, not a traceback.

The full-disk tests mount a real, tiny tmpfs; that needs root (CI runs as root), so they skip otherwise.
"""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from faults import PLUGINS, kill_marked, start, summary

from repro.core import fsio


def _mount_tmpfs(where: Path, size: str) -> bool:
    if os.geteuid() != 0:
        return False
    where.mkdir(parents=True, exist_ok=True)
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    return res.returncode == 0


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A folder on a real filesystem with no free byte left (a filled 1 MiB tmpfs)."""
    mnt = tmp_path / "full"
    if not _mount_tmpfs(mnt, "1m"):
        pytest.skip("needs root and tmpfs to make a real full filesystem (CI runs as root)")
    try:
        fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError:
            pass
        finally:
            os.close(fd)
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _visible_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and not p.name.startswith(".") and p.name != "filler"]


def _one_error_line(err: bytes) -> str:
    text = err.decode()
    assert "Traceback" not in text, text
    errors = [ln for ln in text.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, text
    return errors[0]


def test_repro_all_on_a_full_disk_says_which_path_and_carries_on(
    full_disk: Path, progress: Callable[[str], None]
) -> None:
    args = ["all", "--repro-path", str(PLUGINS), "--out", str(full_disk), "--budget", "0.1", "--no-collect-env"]
    proc, token = start([*args, "--only", "test-gap", "--only", "test-raises"])
    try:
        _, err = proc.communicate(timeout=300)
    finally:
        kill_marked(token)
    assert proc.returncode == 1, err.decode()
    line = _one_error_line(err)
    assert str(full_disk) in line and "No space left on device" in line
    text = err.decode()
    assert "test-gap: error" in text and "test-raises: error" in text  # the batch went on after the first
    assert summary(progress, "repro all on a full disk", token, full_disk) == (0, 0)
    assert _visible_files(full_disk) == []


def test_repro_run_on_a_full_disk_is_one_line(full_disk: Path) -> None:
    args = ["run", "test-gap", "--repro-path", str(PLUGINS), "--out", str(full_disk), "--budget", "0.1"]
    proc, token = start([*args, "--no-collect-env"])
    _, err = proc.communicate(timeout=300)
    kill_marked(token)
    assert proc.returncode == 1
    line = _one_error_line(err)
    assert "test-gap.json" in line and "No space left on device" in line
    assert _visible_files(full_disk) == []


def test_report_and_bundle_to_a_full_disk_are_one_line(full_disk: Path, tmp_path: Path) -> None:
    # Any finished run will do: the point is writing its report and bundle to a full disk.
    args = ["run", "test-gap", "--repro-path", str(PLUGINS), "--out", str(tmp_path / "ok"), "--budget", "0.1"]
    proc, token = start([*args, "--no-collect-env"])
    proc.communicate(timeout=300)
    kill_marked(token)
    (run_dir,) = (tmp_path / "ok").iterdir()
    for args, name in (
        (["report", str(run_dir), "--out", str(full_disk / "r.md")], "r.md"),
        (["bundle", str(run_dir), "--out", str(full_disk / "b.tar.gz")], "b.tar.gz"),
    ):
        p = subprocess.run([sys.executable, "-m", "repro", *args], capture_output=True, timeout=120)
        assert p.returncode == 1, p.stderr.decode()
        assert name in _one_error_line(p.stderr)
    assert _visible_files(full_disk) == []


def test_writes_on_a_full_disk_leave_nothing(full_disk: Path) -> None:
    with pytest.raises(fsio.NoSpace, match="No space left"):
        fsio.write_new(full_disk / "x.json", b"{}" * 10000)
    log = fsio.StagedFile(full_disk / "logs" / "x.log")
    log.write(b"y" * 100_000)  # fails inside: a log that cannot grow must not stop the run
    assert log.error is not None and log.lost_bytes == 100_000
    assert log.publish() is None
    assert _visible_files(full_disk) == []
    assert not [p for p in full_disk.rglob(".*") if p.is_file()]  # no temp file left either


_WRITER = """
import sys, os
from pathlib import Path
from repro.core import fsio
out = Path(sys.argv[1])
blob = os.urandom(1 << 20)
i = 0
print("ready", flush=True)
while True:
    fsio.write_new_gzip(out / f"t{i}.trace.json.gz", blob)
    fsio.write_new(out / f"a{i}.json", b'{"n": ' + str(i).encode() + b', "pad": "' + b"x" * (1 << 20) + b'"}')
    i += 1
"""


@pytest.mark.parametrize("delay", [0.05, 0.2, 0.5, 1.0])
def test_sigkill_mid_write_leaves_only_whole_files(
    tmp_path: Path, delay: float, progress: Callable[[str], None]
) -> None:
    out = tmp_path / "w"
    out.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(out)], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert summary(progress, f"SIGKILL of a writer after {delay} s", None, out)[1] == 0
    for p in out.glob("*.gz"):
        assert len(gzip.decompress(p.read_bytes())) == 1 << 20


def test_once_per_run_keeps_the_first_writer_and_skips_refused_values(tmp_path: Path) -> None:
    from repro.core.fsio import once_per_run

    path = tmp_path / ".cache" / "x.json"

    def racing() -> dict[str, object]:  # another repro of the run writes first, while this one computes
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('{"by": "them"}')
        return {"by": "us"}

    assert once_per_run(path, racing) == {"by": "them"}
    assert once_per_run(path, lambda: {"by": "later"}) == {"by": "them"}  # read, not computed
    other = tmp_path / "other.json"
    assert once_per_run(other, lambda: {"ok": False}, keep=lambda v: bool(v["ok"])) == {"ok": False}
    assert not other.exists()
