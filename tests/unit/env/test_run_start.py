"""The run's own records taken before its first repro: every GPU's NVML state, the installed
packages; how a repro's fingerprint picks its GPU's state up, and how the report says it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from repro.env import fingerprint, nvml
from repro.evidence.machines import run_start_words, state_line
from repro.evidence.model import of as typed


class Util:
    gpu = 3


class FakeNvml:
    """Two GPUs; the second's UUID and power cannot be read by the first's rules, each answers its own."""

    NVML_CLOCK_SM = 0
    NVML_CLOCK_MEM = 1
    NVML_TEMPERATURE_GPU = 0

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802 (NVML's name)
        return 2

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:  # noqa: N802
        return i

    def nvmlDeviceGetUUID(self, h: int) -> bytes:  # noqa: N802
        return f"GPU-0000000{h}-aaaa".encode()

    def nvmlDeviceGetClockInfo(self, h: int, kind: int) -> int:  # noqa: N802
        return 345 if kind == self.NVML_CLOCK_SM else 3201

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:  # noqa: N802
        return 0x1  # gpu_idle

    def nvmlDeviceGetTemperature(self, h: int, kind: int) -> int:  # noqa: N802
        return 31 + h

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:  # noqa: N802
        return 72_500 + h

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[Any]:  # noqa: N802
        return []

    def nvmlDeviceGetTotalEccErrors(self, h: int, a: int, b: int) -> int:  # noqa: N802
        raise RuntimeError("not supported")

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Util:  # noqa: N802
        return Util()

    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0


def test_run_start_reads_every_gpu_by_uuid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvml, "_pynvml", FakeNvml)
    got = nvml.run_start()
    assert set(got["gpus"]) == {"00000000-aaaa", "00000001-aaaa"}
    one = got["gpus"]["00000001-aaaa"]
    assert one["power_w"] == 72.501 and one["temperature_c"] == 32 and one["sm_clock_mhz"] == 345
    assert one["clocks_event_reasons"] == ["gpu_idle"] and one["compute_pids"] == [] and one["utilization_gpu_pct"] == 3
    assert one["ecc_volatile_uncorrected"] is None  # a query the board refuses reads as null
    assert got["taken_utc"].endswith("+00:00")


def test_run_start_without_nvml_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    def absent() -> Any:
        raise ImportError("No module named 'pynvml'")

    monkeypatch.setattr(nvml, "_pynvml", absent)
    assert nvml.run_start() == {"error": "ImportError: No module named 'pynvml'"}


def test_the_first_record_wins_and_a_repro_reads_its_own_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvml, "_pynvml", FakeNvml)
    fingerprint.record_run_start(tmp_path)
    first = json.loads((tmp_path / fingerprint.RUN_START_FILE).read_text())

    class Hot(FakeNvml):
        def nvmlDeviceGetPowerUsage(self, h: int) -> int:  # noqa: N802
            return 690_000

    monkeypatch.setattr(nvml, "_pynvml", Hot)
    fingerprint.record_run_start(tmp_path)  # a later repro of the same run: the run's start stays
    assert json.loads((tmp_path / fingerprint.RUN_START_FILE).read_text()) == first
    state = fingerprint.run_start_state(tmp_path, "GPU-00000001-aaaa")
    assert state is not None and state["power_w"] == 72.501 and state["taken_utc"] == first["taken_utc"]
    assert fingerprint.run_start_state(tmp_path, "00000001-aaaa") == state  # torch's uuid has no GPU- prefix
    assert fingerprint.run_start_state(tmp_path, "ffffffff") is None
    assert fingerprint.run_start_state(tmp_path / "elsewhere", "00000001-aaaa") is None


def test_a_failed_reading_is_kept_so_no_later_one_passes_for_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> Any:
        raise RuntimeError("NVML_ERROR_DRIVER_NOT_LOADED")

    monkeypatch.setattr(nvml, "_pynvml", broken)
    fingerprint.record_run_start(tmp_path)
    assert json.loads((tmp_path / fingerprint.RUN_START_FILE).read_text()) == {
        "error": "RuntimeError: NVML_ERROR_DRIVER_NOT_LOADED"
    }
    monkeypatch.setattr(nvml, "_pynvml", FakeNvml)
    fingerprint.record_run_start(tmp_path)  # after a repro heated the GPU: not the run's start
    assert fingerprint.run_start_state(tmp_path, "00000001-aaaa") is None
    assert (tmp_path / fingerprint.PACKAGES_FILE).is_file()  # the packages do not need a GPU


def test_nvml_that_does_not_answer_costs_the_reading_not_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    release = threading.Event()
    monkeypatch.setattr(nvml, "run_start", lambda: (release.wait(5), {"gpus": {}})[1])
    try:
        assert fingerprint._run_start_bounded(timeout_s=0.05) == {"error": "NVML did not answer in 0.05 s"}
    finally:
        release.set()


def test_packages_are_a_sorted_freeze_written_once(tmp_path: Path) -> None:
    text = fingerprint.packages_text()
    lines = text.splitlines()
    assert lines[0].startswith("# installed distributions importable by ")
    assert any(ln.startswith("pytest==") for ln in lines) and any(ln.startswith("jsonschema==") for ln in lines)
    assert lines[1].startswith("# sys.path, in import order: ") and lines[2].startswith("# gpu-repro's own source: ")
    names = [ln.split("==")[0].lower() for ln in lines if not ln.startswith("#")]
    assert names == sorted(names) and len(set(names)) == len(names)  # each distribution once, by name
    pytest_line = next(ln for ln in lines if ln.startswith("pytest=="))
    assert pytest_line.split("  # ")[1] == str(Path(pytest.__file__).resolve().parent.parent)  # where it came from
    fingerprint.record_packages(tmp_path)
    digest = fingerprint.packages_digest(tmp_path)
    (tmp_path / fingerprint.PACKAGES_FILE).write_text("kept\n")
    fingerprint.record_packages(tmp_path)  # once per run folder: the first one stays
    assert (tmp_path / fingerprint.PACKAGES_FILE).read_text() == "kept\n"
    assert digest is not None and len(digest) == 64
    assert fingerprint.packages_digest(tmp_path / "none") is None


def _doc(state: dict[str, Any] | None) -> Any:
    gpu = {"name": "NVIDIA H200", "uuid": "00000001-aaaa", "state": {"power_w": 120.0}}
    if state is not None:
        gpu["state_at_run_start"] = state
    return typed(
        {
            "schema_version": "1.8",
            "kind": "gpu-repro.artifact",
            "repro": {"id": "5090-linear", "title": "t", "upstream": [], "seed_claim": "", "params": {}},
            "run": {"run_id": "20261202T000000Z-abcdef", "created_utc": "2026-12-02T00:00:00Z", "command": []},
            "fingerprint": {"gpu": gpu},
            "variants": [],
            "verdict": {"status": "not_reproduced"},
        }
    )


def test_the_report_says_the_gpu_before_the_first_repro() -> None:
    state = {
        "taken_utc": "2026-12-02T00:00:00+00:00",
        "power_w": 72.5,
        "temperature_c": 31,
        "sm_clock_mhz": 345,
        "clocks_event_reasons": ["gpu_idle"],
        "compute_pids": [],
        "utilization_gpu_pct": 0,
    }
    said = run_start_words([_doc(state)])
    assert said == (
        "GPU before the run's first repro (2026-12-02T00:00:00+00:00): power 72.5 W, temperature 31 C, "
        "SM clock 345 MHz, utilization 0%, no compute process, clock events: gpu_idle"
    )
    assert state_line([_doc(state)]).startswith("GPU before the run's first repro (")
    busy = run_start_words([_doc({**state, "compute_pids": [7, 9], "utilization_gpu_pct": None})])
    assert busy is not None and "utilization not read, 2 compute process(es)" in busy
    assert run_start_words([_doc(None)]) is None  # a run from before this record says nothing of it
