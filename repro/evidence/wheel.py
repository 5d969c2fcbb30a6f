"""The running harness as a wheel, built from its installed files, so a bundle carries the exact code that ran."""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile
from importlib import metadata

from repro import __version__
from repro.env import harness

DIST = "gpu_repro"
# Fixed member times: the same source gives the same wheel bytes.
_EPOCH = (1980, 1, 1, 0, 0, 0)
_ENTRY_POINTS = "[console_scripts]\nrepro = repro.cli.main:main\n"


def version(digest: str) -> str:
    """The wheel's version: the package version with the source digest as a PEP 440 local label."""
    return f"{__version__}+src.{digest[:12]}"


def file_name(digest: str) -> str:
    return f"{DIST}-{version(digest)}-py3-none-any.whl"


def _requires() -> list[str]:
    try:
        return list(metadata.requires("gpu-repro") or [])
    except metadata.PackageNotFoundError:  # running from a source tree that was never installed
        return []


def _extras() -> list[str]:
    """The installed harness's extras (``Provides-Extra``): pip installs a wheel's ``[plots]`` only when the
    wheel declares it, whatever its ``Requires-Dist`` markers say."""
    try:
        return list(metadata.metadata("gpu-repro").get_all("Provides-Extra") or [])
    except metadata.PackageNotFoundError:
        return []


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build() -> tuple[str, bytes, str]:
    """(file name, wheel bytes, source digest) of the running harness."""
    digest = harness.source_sha256()
    ver = version(digest)
    info = f"{DIST}-{ver}.dist-info"
    members = [(f"repro/{rel}", path.read_bytes()) for rel, path in harness.package_files()]
    meta = [
        "Metadata-Version: 2.1",
        "Name: gpu-repro",
        f"Version: {ver}",
        "Requires-Python: >=3.10",
        *(f"Provides-Extra: {extra}" for extra in _extras()),
        *(f"Requires-Dist: {req}" for req in _requires()),
        f"Summary: gpu-repro harness, source sha256 {digest}",
    ]
    members += [
        (f"{info}/METADATA", ("\n".join(meta) + "\n").encode()),
        (f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: gpu-repro\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
        (f"{info}/entry_points.txt", _ENTRY_POINTS.encode()),
    ]
    record = "\n".join([*(_record_line(n, d) for n, d in members), f"{info}/RECORD,,"]) + "\n"
    members.append((f"{info}/RECORD", record.encode()))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            entry = zipfile.ZipInfo(name, date_time=_EPOCH)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(entry, data)
    return file_name(digest), buf.getvalue(), digest
