"""Where the software and the machine came from: torch's install record, the container's markers,
NVML's virtualization and compute modes, the CPU's hypervisor flag, and how the report says them."""

from __future__ import annotations

import re
import time
from importlib.metadata import distribution
from pathlib import Path
from typing import Any

from repro.env import fingerprint, nvml, placement
from repro.evidence.machines import container_words, host_words, install_words
from repro.evidence.model_machine import facts


def test_the_install_record_reads_a_distributions_metadata() -> None:
    got = fingerprint.install_record("pytest")
    assert got is not None
    assert got["installer"] == (distribution("pytest").read_text("INSTALLER") or "").strip()
    assert Path(got["location"]).is_dir() and isinstance(got["wheel_tags"], list)
    assert fingerprint.install_record("no-such-distribution-here") is None


def test_cgroup_hints_name_the_runtimes_once() -> None:
    text = "0::/system.slice/docker-abc.scope\n1:cpu:/kubepods/besteffort/pod1/docker-abc\n"
    assert placement.cgroup_hints(text) == ["docker", "kubepods"]
    assert placement.cgroup_hints("0::/\n") == []


class FakeNvml:
    """The NVML calls static_info makes, answering as a passthrough H200 in the default compute mode."""

    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2

    def __getattr__(self, name: str) -> Any:
        def missing(*_: Any) -> Any:
            raise RuntimeError(f"{name}: not supported")

        return missing

    def nvmlDeviceGetVirtualizationMode(self, h: Any) -> int:  # noqa: N802 (NVML's name)
        return 1

    def nvmlDeviceGetComputeMode(self, h: Any) -> int:  # noqa: N802
        return 0

    def nvmlDeviceGetMigMode(self, h: Any) -> tuple[int, int]:  # noqa: N802
        return (0, 0)


def test_static_info_records_virtualization_and_compute_mode_cheaply() -> None:
    start = time.perf_counter()
    info = nvml.static_info(FakeNvml(), object())
    assert time.perf_counter() - start < 0.1
    assert info["virtualization_mode"] == 1 and info["compute_mode"] == 0 and info["mig_mode"] is False
    assert info["name"] is None  # an unsupported call is null, never an error


def _fp(**over: Any) -> dict[str, Any]:
    fp: dict[str, Any] = {
        "gpu": {"name": "NVIDIA H200", "nvml": {"virtualization_mode": 1, "compute_mode": 0}},
        "software": {
            "torch": {
                "version": "2.11.0+cu130",
                "install": {
                    "installer": "pip",
                    "direct_url": None,
                    "wheel_tags": ["cp312-cp312-manylinux_2_28_x86_64"],
                    "location": "/opt/torch/.venv/lib/python3.12/site-packages",
                },
            }
        },
        "container": {"dockerenv": True, "containerenv": False, "env": {}, "cgroup_hints": ["docker"]},
        "host": {"os": "Linux", "python": "3.12.3", "hypervisor": True},
        "collect_env": {"output": "Hypervisor vendor:                    KVM\n", "error": None},
    }
    fp.update(over)
    return fp


def test_the_report_says_the_host_the_gpu_virtualization_and_the_compute_mode() -> None:
    assert host_words(facts(_fp())) == [
        "KVM guest (collect_env's hypervisor vendor)",
        "GPU passthrough",
        "compute mode default",
    ]
    bare = _fp(collect_env={"output": "", "error": None}, host={"os": "Linux", "python": "3", "hypervisor": False})
    bare["gpu"]["nvml"] = {}
    assert host_words(facts(bare)) == ["no CPU hypervisor flag (bare metal)", "GPU virtualization: not recorded"]


def test_the_container_line_says_the_image_is_not_visible_unless_recorded() -> None:
    assert container_words(facts(_fp())) == (
        "Container: yes (cgroup names docker); image: not visible from inside the container"
    )
    lane = _fp(
        container={"dockerenv": True, "env": {"GPU_REPRO_IMAGE": "gpu-repro:t", "GPU_REPRO_IMAGE_DIGEST": "sha256:ab"}}
    )
    assert str(container_words(facts(lane))).endswith("image gpu-repro:t@sha256:ab")
    assert container_words(facts(_fp(container={"dockerenv": False, "env": {}}))) is None


def test_the_install_line_says_how_torch_got_there() -> None:
    said = str(install_words(facts(_fp())))
    assert said == (
        "torch installed by pip, a wheel tagged cp312-cp312-manylinux_2_28_x86_64, from a package index the "
        "installer did not record (no direct_url.json), in /opt/torch/.venv/lib/python3.12/site-packages"
    )
    old = _fp()
    del old["software"]["torch"]["install"]
    assert install_words(facts(old)) is None


def test_the_harness_records_its_own_libraries_and_the_report_names_them() -> None:
    from repro.env.fingerprint import HARNESS_LIBRARIES, _harness_libraries
    from repro.evidence.machines import harness_words
    from repro.evidence.model_machine import Harness, MachineFacts

    got = _harness_libraries()
    assert set(got) == set(HARNESS_LIBRARIES) and got["typer"] and got["jsonschema"]  # the test env has both
    facts = MachineFacts(harness=Harness(libraries={"typer": "0.29.2", "cuda-bindings": None, "psutil": None}))
    assert harness_words(facts) == (
        "The harness's own libraries, requirements: typer 0.29.2; optional: cuda-bindings not installed "
        "(graph-memset's torch-graph memset variants, skipped without it); also recorded: psutil not installed"
    )
    assert harness_words(MachineFacts()) is None


def test_the_harness_libraries_named_required_are_the_wheels_requirements() -> None:
    from importlib.metadata import requires

    from repro.env.fingerprint import HARNESS_OPTIONAL, HARNESS_REQUIRES

    # The installed distribution's metadata, which pyproject's dependencies and extras write.
    reqs = [r for r in requires("gpu-repro") or [] if "extra ==" not in r]
    names = [re.split(r"[<>=!~ ;\[(]", r, maxsplit=1)[0].lower() for r in reqs]
    assert sorted(names) == sorted(HARNESS_REQUIRES)
    assert not set(HARNESS_OPTIONAL) & set(names)


def test_the_install_line_says_a_wheel_without_a_local_tag_is_pypis_and_names_its_record() -> None:
    fp = _fp()
    fp["software"]["torch"]["install"].update(version="2.11.0", record_sha256="ab" * 32)
    said = str(install_words(facts(fp)))
    assert said.endswith(
        "; its metadata version 2.11.0 has no local tag, as PyPI's wheels have (PyPI takes none); "
        "sha256 of this install's RECORD (its files' hashes) abababababababab…"
    )
    fp["software"]["torch"]["install"]["version"] = "2.11.0+cu130"
    assert "; its metadata version 2.11.0+cu130; sha256" in str(install_words(facts(fp)))


def test_static_info_records_the_application_clock_and_enforced_power_limit_and_the_report_says_them() -> None:
    from repro.evidence.model_machine import Nvml

    class Clocks(FakeNvml):
        def nvmlDeviceGetApplicationsClock(self, h: Any, which: int) -> int:  # noqa: N802 (NVML's name)
            return 1755 if which == self.NVML_CLOCK_SM else 0

        def nvmlDeviceGetDefaultApplicationsClock(self, h: Any, which: int) -> int:  # noqa: N802
            return 1980 if which == self.NVML_CLOCK_SM else 0

        def nvmlDeviceGetEnforcedPowerLimit(self, h: Any) -> int:  # noqa: N802
            return 650_000  # mW

    info = nvml.static_info(Clocks(), object())
    assert info["power_enforced_limit_w"] == 650.0
    from repro.evidence.machines import _enforced

    assert _enforced(Nvml(power_enforced_limit_w=650.0)) == ", enforced 650 W" and _enforced(Nvml()) == ""
    assert info["sm_clock_app_mhz"] == 1755 and info["sm_clock_app_default_mhz"] == 1980
    assert nvml.static_info(FakeNvml(), object())["sm_clock_app_mhz"] is None  # unsupported: null
    from repro.evidence.machines import _app_clock

    assert _app_clock(Nvml(sm_clock_app_mhz=1755, sm_clock_app_default_mhz=1980)) == (
        "; SM application clock 1755 MHz, set away from its default 1980 MHz"
    )
    assert _app_clock(Nvml(sm_clock_app_mhz=1980, sm_clock_app_default_mhz=1980)) == (
        "; SM application clock 1980 MHz (its default)"
    )
    assert _app_clock(Nvml()) == ""


def test_the_ceilings_line_gives_the_clock_each_probe_ended_at() -> None:
    import json

    from repro.evidence.machines import machine_summary, machines
    from repro.evidence.model import run_of

    path = next((Path(__file__).parents[3] / "artifacts/reference/h200/evidence5/all").glob("*/5090-linear.json"))
    raw = json.loads(path.read_text())
    ceilings = raw["fingerprint"]["ceilings"]
    for name, mhz in (("copy", 1980), ("fp32", 1980), ("tf32", 1845), ("bf16", 1755)):
        ceilings[name].update(sm_clock_after_mhz=mhz, clock_events_after=["sw_power_cap"] if name == "bf16" else [])
    (machine, *_), _ = machines([run_of(raw)])
    said = machine_summary(machine)
    assert (
        "; SM clock after each probe's last repeat: copy 1980, fp32 1980, tf32 1845, bf16 1755 MHz (clock events: bf16 "
        in said
    )
    assert "sw_power_cap)" in said
    for c in ceilings.values():
        c.update(sm_clock_after_mhz=1980, clock_events_after=[])
    (machine, *_), _ = machines([run_of(raw)])
    assert "bf16 1980 MHz (no clock events)" in machine_summary(machine)
    for c in ceilings.values():  # NVML could not read the reasons: nothing is said of them
        c.update(clock_events_after=None)
    (machine, *_), _ = machines([run_of(raw)])
    assert "bf16 1980 MHz;" in machine_summary(machine) or machine_summary(machine).count("bf16 1980 MHz") == 1
    assert "no clock events" not in machine_summary(machine).split("Measured ceilings", 1)[1].split("\n", 1)[0]
