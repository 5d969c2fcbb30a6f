"""The hypervisor's vendor from the harness's own reading of /sys (no root, no subprocess, no collect_env),
in lscpu's word, recorded in the fingerprint's host section and held to the schema."""

from __future__ import annotations

from pathlib import Path

import pytest

from repro.env import fingerprint, placement
from repro.evidence import artifact

CLOCKSOURCE = "devices/system/clocksource/clocksource0/available_clocksource"
MAKER = "class/dmi/id/sys_vendor"
PRODUCT = "class/dmi/id/product_name"


@pytest.fixture
def sysfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty /sys the probe reads instead of the machine's."""
    monkeypatch.setattr(placement, "_SYSFS", tmp_path)
    return tmp_path


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, content in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(content)


@pytest.mark.parametrize(
    ("files", "said"),
    [
        # A QEMU/KVM guest (the H200 of the report): DMI says QEMU, the kernel's clocksource says KVM.
        (
            {
                CLOCKSOURCE: "kvm-clock tsc hpet acpi_pm \n",
                MAKER: "QEMU\n",
                PRODUCT: "Standard PC (Q35 + ICH9, 2009)\n",
            },
            ("KVM", "the kernel's kvm-clock clocksource"),
        ),
        ({CLOCKSOURCE: "kvm-clock tsc \n"}, ("KVM", "the kernel's kvm-clock clocksource")),  # no DMI (microVMs)
        ({"hypervisor/type": "xen\n", CLOCKSOURCE: "xen tsc\n"}, ("Xen", "/sys/hypervisor/type")),
        (
            {CLOCKSOURCE: "hyperv_clocksource_tsc_page acpi_pm\n"},
            ("Microsoft", "the kernel's hyperv_clocksource_tsc_page clocksource"),
        ),
        (
            {CLOCKSOURCE: "tsc hpet acpi_pm\n", MAKER: "VMware, Inc.\n", PRODUCT: "VMware Virtual Platform\n"},
            ("VMware", "DMI VMware, Inc."),
        ),
        (
            {MAKER: "Microsoft Corporation\n", PRODUCT: "Virtual Machine\n"},
            ("Microsoft", "DMI Microsoft Corporation, Virtual Machine"),
        ),
    ],
)
def test_the_probe_names_the_vendor_in_lscpus_word(sysfs: Path, files: dict[str, str], said: tuple[str, str]) -> None:
    _write(sysfs, files)
    assert placement.hypervisor_vendor() == said


@pytest.mark.parametrize(
    "files",
    [
        {},  # no /sys at all (not Linux) or every path masked
        {CLOCKSOURCE: "tsc hpet acpi_pm\n", MAKER: "Supermicro\n", PRODUCT: "SYS-821GE-TNHR\n"},  # bare metal
        # QEMU without the kernel's word: KVM with kvmclock off, or emulated; lscpu would tell, DMI cannot.
        {CLOCKSOURCE: "tsc acpi_pm\n", MAKER: "QEMU\n", PRODUCT: "Standard PC (i440FX + PIIX, 1996)\n"},
        {MAKER: "Microsoft Corporation\n", PRODUCT: "Surface Laptop 5\n"},  # the maker's own machine
        {MAKER: "Xenon Systems\n", PRODUCT: "NITRO\n"},
        {"hypervisor/type": "\n"},
    ],
)
def test_nothing_that_names_a_vendor_leaves_it_unsaid(sysfs: Path, files: dict[str, str]) -> None:
    _write(sysfs, files)
    assert placement.hypervisor_vendor() is None


def test_the_fingerprint_records_the_vendor_where_sys_names_it(sysfs: Path) -> None:
    _write(sysfs, {CLOCKSOURCE: "kvm-clock tsc hpet acpi_pm\n"})
    fp = fingerprint.collect(with_torch=False)
    assert fp["host"]["hypervisor_vendor"] == "KVM"
    assert fp["host"]["hypervisor_vendor_source"] == "the kernel's kvm-clock clocksource"
    assert "host.hypervisor_vendor" not in fp["errors"]
    assert artifact.validation_errors(fp, "fingerprint.schema.json") == []
    (sysfs / CLOCKSOURCE).unlink()
    host = fingerprint.collect(with_torch=False)["host"]
    assert host["hypervisor_vendor"] is None and host["hypervisor_vendor_source"] is None


def test_a_file_that_cannot_be_read_leaves_null_and_an_error(sysfs: Path) -> None:
    (sysfs / CLOCKSOURCE).mkdir(parents=True)  # read_text raises IsADirectoryError: not "absent"
    fp = fingerprint.collect(with_torch=False)
    assert fp["host"]["hypervisor_vendor"] is None and fp["host"]["hypervisor_vendor_source"] is None
    assert fp["errors"]["host.hypervisor_vendor"].startswith("IsADirectoryError")


def test_an_unreadable_source_does_not_hide_the_next_one(sysfs: Path) -> None:
    (sysfs / "hypervisor" / "type").mkdir(parents=True)  # unreadable, then the clocksource names KVM
    _write(sysfs, {CLOCKSOURCE: "kvm-clock tsc hpet acpi_pm\n"})
    assert placement.hypervisor_vendor() == ("KVM", "the kernel's kvm-clock clocksource")


def test_the_schema_types_the_vendor_and_an_older_fingerprint_without_it_still_validates(sysfs: Path) -> None:
    fp = fingerprint.collect(with_torch=False)
    for name in ("hypervisor_vendor", "hypervisor_vendor_source"):
        fp["host"][name] = 3
        assert artifact.validation_errors(fp, "fingerprint.schema.json") == [
            f"host/{name}: 3 is not of type 'string', 'null'"
        ]
        del fp["host"][name]
    assert artifact.validation_errors(fp, "fingerprint.schema.json") == []
