"""A quick run skips collect_env: the report names its hypervisor from the harness's own probe, as a full run's
does from collect_env; an artifact from before the probe reads as it always did."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from helpers import ROOT

from repro.evidence import artifact
from repro.evidence.machines import guest_words, host_words
from repro.evidence.model_machine import facts
from repro.evidence.report import report

# One H200 (a KVM guest, GPU passthrough) whose quick run's report said "a VM guest" and full run's "a KVM guest".
RUNS = ROOT / "artifacts" / "reference" / "h200" / "evidence48"
QUICK = RUNS / "quick" / "20261204T184505Z-4ee945"
PROBED = {"hypervisor_vendor": "KVM", "hypervisor_vendor_source": "the kernel's kvm-clock clocksource"}


def _fp(collect_env: str | None, **host: Any) -> dict[str, Any]:
    return {
        "gpu": {"name": "NVIDIA H200", "nvml": {"virtualization_mode": 1, "compute_mode": 0}},
        "container": {"dockerenv": True, "env": {}},
        "host": {"os": "Linux", "python": "3.12.3", "hypervisor": True, **host},
        "collect_env": {"output": collect_env, "error": None if collect_env else "not collected"},
    }


def test_a_run_without_collect_env_names_the_vendor_the_harness_read() -> None:
    quick = facts(_fp(None, **PROBED))
    assert guest_words(quick) == "KVM guest, GPU passthrough"
    assert host_words(quick)[0] == "KVM guest (the kernel's kvm-clock clocksource)"
    assert host_words(facts(_fp(None, hypervisor_vendor="KVM")))[0] == "KVM guest (the harness's probe)"


def test_collect_env_still_words_a_full_run_and_an_older_artifact_reads_as_before() -> None:
    full = facts(_fp("Hypervisor vendor:                    KVM\n", **PROBED))
    assert guest_words(full) == "KVM guest, GPU passthrough"
    assert (
        host_words(full)[0] == "KVM guest (collect_env's hypervisor vendor, as the kernel's kvm-clock clocksource says)"
    )
    other = facts(_fp("Hypervisor vendor:                    Microsoft\n", **PROBED))
    assert host_words(other)[0] == "Microsoft guest (collect_env's hypervisor vendor)"  # the two disagree: lscpu's
    old = facts(_fp(None))
    assert guest_words(old) == "VM guest, GPU passthrough"
    assert host_words(old)[0] == "a VM guest (CPU hypervisor flag)"
    assert guest_words(facts(_fp(None, hypervisor=False, hypervisor_vendor=None))) is None
    assert host_words(facts(_fp(None, hypervisor=False)))[0] == "no CPU hypervisor flag (bare metal)"


@pytest.fixture(scope="module")
def quick() -> list[dict[str, Any]]:
    return [artifact.load(p) for p in artifact.expand([QUICK])]


def test_the_quick_runs_head_says_kvm_as_the_full_runs_does(quick: list[dict[str, Any]]) -> None:
    head = report(quick).splitlines()[2]
    assert "(CUDA 13.0, container in a VM guest, GPU passthrough)" in head  # as committed: no vendor recorded
    probed = copy.deepcopy(quick)
    for doc in probed:
        doc["fingerprint"]["host"].update(PROBED)
        assert artifact.validation_errors(doc) == []
    assert "(CUDA 13.0, container in a KVM guest, GPU passthrough)" in report(probed).splitlines()[2]


def test_the_artifact_schemas_copy_types_the_vendor(quick: list[dict[str, Any]]) -> None:
    doc = copy.deepcopy(quick[0])
    doc["fingerprint"]["host"]["hypervisor_vendor"] = ["KVM"]
    assert artifact.validation_errors(doc) == [
        "fingerprint/host/hypervisor_vendor: ['KVM'] is not of type 'string', 'null'"
    ]
