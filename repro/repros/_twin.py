"""Pure CUDA twins: find nvcc, build a ``.cu`` once per (source, compiler, arch) into a cache, run it.

A twin is a repro's contrast written against the CUDA runtime alone, so a gap that shows in
both is the driver's, not the framework's. Nothing here imports torch at module load; the
leading underscore keeps the catalog from loading this module as a repro.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

# Where nvcc usually lives when it is not on PATH (CUDA images put it there).
NVCC_FALLBACK = Path("/usr/local/cuda/bin/nvcc")
# nvcc -arch=native on a host without a visible GPU warns with this and builds for its
# default arch instead; such a binary is not what "native" promises, so the next arch in
# the list is used (sm_90: Hopper SASS plus compute_90 PTX, which newer GPUs JIT-compile).
_NO_NATIVE_GPU = "Cannot find valid GPU for '-arch=native'"
# nvcc's flags besides -arch (part of the cache key, and recorded with the twin's results).
NVCC_FLAGS = ("-O3",)
COMPILE_TIMEOUT_S = 300.0


class TwinBuildError(RuntimeError):
    """nvcc is missing or the twin did not compile; the message says which."""


class TwinRunError(RuntimeError):
    """The twin could not start, ran past its limit, or exited non-zero; the message says which."""


@dataclass(frozen=True)
class TwinBuild:
    """A built twin: the binary, whether the cache had it, and what it was built from and for."""

    binary: Path
    cached: bool
    arch: str
    nvcc_version: str
    source_sha256: str
    nvcc: str = ""  # the compiler's path: the one nvcc_version came from

    @property
    def flags(self) -> str:
        """The nvcc flags it was built with."""
        return " ".join([*NVCC_FLAGS, f"-arch={self.arch}"])

    @property
    def mtime_utc(self) -> str | None:
        """The binary's modification time (when a run built it, unless the cache was copied or touched);
        None where it cannot be read."""
        try:
            stamp = datetime.fromtimestamp(self.binary.stat().st_mtime, timezone.utc)
        except OSError:
            return None
        return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class TwinRun:
    """A twin's finished run: what it printed on stdout and how long it took."""

    stdout: str
    wall_s: float


def find_nvcc() -> str | None:
    """nvcc on PATH, else the usual CUDA install location, else None."""
    found = shutil.which("nvcc")
    if found:
        return found
    if NVCC_FALLBACK.is_file() and os.access(NVCC_FALLBACK, os.X_OK):
        return str(NVCC_FALLBACK)
    return None


def cache_dir() -> Path:
    """$XDG_CACHE_HOME/gpu-repro, else ~/.cache/gpu-repro."""
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path.home() / ".cache") / "gpu-repro"


def nvcc_version(nvcc: str) -> str:
    """``nvcc --version``'s output: part of the cache key, so a new compiler is a new binary."""
    proc = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60, check=False)
    if proc.returncode != 0:
        raise TwinBuildError(f"{nvcc} --version exited {proc.returncode}: {tail(proc.stderr)}")
    return proc.stdout.strip()


def _compile(cmd: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """Run one nvcc command (a seam for tests)."""
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S, check=False)


def twin_archs(device_index: int) -> tuple[str, ...]:
    """This GPU's exact architecture first, so a shared cache never hands one GPU a binary
    built for another (the arch is part of the cache key); -arch=native and sm_90 after."""
    try:
        import torch

        major, minor = torch.cuda.get_device_capability(device_index)
    except Exception:  # no CUDA torch to ask: let nvcc find the GPU itself
        return ("native", "sm_90")
    return (f"sm_{major}{minor}", "native")


def build_twin(
    source: Path,
    cache: Path | None = None,
    nvcc: str | None = None,
    archs: Sequence[str] = ("native", "sm_90"),
) -> TwinBuild:
    """Compile ``source`` once per (source, nvcc version, arch) into the cache and reuse it.

    ``archs`` are tried in order; -arch=native that finds no GPU counts as a failure,
    so the sm_90 fallback is what a GPU-less build host gets. The binary is written
    under a per-process temporary name and renamed, so a half-written binary is never
    reused and two processes building at once both end with a whole one. Any failure,
    including an unreadable source or cache folder, is a TwinBuildError.
    """
    try:
        return _build(source, cache, nvcc, archs)
    except (OSError, subprocess.SubprocessError) as exc:
        raise TwinBuildError(str(exc)) from exc


def _build(source: Path, cache: Path | None, nvcc: str | None, archs: Sequence[str]) -> TwinBuild:
    nvcc = nvcc or find_nvcc()
    if nvcc is None:
        raise TwinBuildError(f"nvcc not found on PATH or at {NVCC_FALLBACK}")
    cache = cache or cache_dir()
    src = source.read_bytes()
    src_sha = hashlib.sha256(src).hexdigest()
    version = nvcc_version(nvcc)
    failures: list[str] = []
    for arch in archs:
        parts = [src, version.encode(), arch.encode(), *map(str.encode, NVCC_FLAGS)]
        key = hashlib.sha256(b"\0".join(parts)).hexdigest()[:16]
        binary = cache / f"{source.stem}-{arch}-{key}"
        if binary.is_file() and os.access(binary, os.X_OK):
            return TwinBuild(binary, True, arch, version, src_sha, nvcc)
        cache.mkdir(parents=True, exist_ok=True)
        tmp = binary.with_name(f".{binary.name}.{os.getpid()}.tmp")
        try:
            proc = _compile([nvcc, *NVCC_FLAGS, f"-arch={arch}", "-o", str(tmp), str(source)])
        except subprocess.TimeoutExpired:
            failures.append(f"-arch={arch}: nvcc ran past {COMPILE_TIMEOUT_S:g} s")
            tmp.unlink(missing_ok=True)
            continue
        if proc.returncode != 0 or _NO_NATIVE_GPU in proc.stderr or not tmp.is_file():
            failures.append(f"-arch={arch}: exit {proc.returncode}: {tail(proc.stderr) or 'no output'}")
            tmp.unlink(missing_ok=True)
            continue
        os.replace(tmp, binary)
        return TwinBuild(binary, False, arch, version, src_sha, nvcc)
    raise TwinBuildError("; ".join(failures))


def run_twin(cmd: Sequence[str], timeout_s: float) -> TwinRun:
    """Run a built twin to the end and keep its stdout; a failure is a TwinRunError saying which."""
    t0 = time.monotonic()
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise TwinRunError(f"the twin ran past its {timeout_s:g} s limit") from None
    except OSError as exc:
        raise TwinRunError(f"the twin could not start: {exc}") from None
    elapsed = time.monotonic() - t0
    if proc.returncode != 0:
        raise TwinRunError(f"the twin exited {proc.returncode}: {tail(proc.stderr) or 'no stderr'}")
    return TwinRun(proc.stdout, elapsed)


def tail(text: str, limit: int = 400) -> str:
    """The last ``limit`` characters of a tool's output, stripped, marked with ... when cut."""
    text = (text or "").strip()
    return text if len(text) <= limit else "..." + text[-limit:]
