"""graph-memset: skipped on CPU, its params, and building the pure CUDA twin (nvcc, the build cache).

The twin's output and its run are in test_repro_graph_memset_twin.py, the verdict in
test_repro_graph_memset_verdict.py.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from repro.core.context import SamplingConfig
from repro.core.spec import build_params
from repro.evidence import artifact
from repro.repros import _memset_twin as twin_mod
from repro.repros import _twin
from repro.repros._twin import build_twin
from repro.repros.graph_memset import GraphMemset, MemsetParams
from repro.run.execute import RunRequest, execute

RID = "graph-memset"


@pytest.mark.parametrize("smoke", [False, True])
def test_cpu_run_is_a_valid_skipped_artifact(run_dir: Path, fast: SamplingConfig, smoke: bool) -> None:
    doc, path = execute(RunRequest(RID, smoke=smoke, sampling=fast), run_dir)
    assert path.is_file()
    assert artifact.validation_errors(doc) == []
    assert doc["run"]["device"] is None and doc["variants"] == [] and doc["error"] is None
    assert doc["verdict"]["status"] == "skipped" and doc["verdict"]["value"] is None
    assert "needs a CUDA GPU" in doc["verdict"]["finding"]
    assert "--smoke exercises it on CPU" not in doc["verdict"]["finding"]  # there is no CPU analog
    assert doc["verdict"]["threshold"] == 1.2


def test_params_defaults_and_smoke() -> None:
    p = MemsetParams()
    assert (p.ops, p.matmul_dtype, p.mm_m, p.mm_k, p.mm_n, p.twin) == (1000, "fp32", 512, 1024, 1024, True)
    assert p.twin_replays == 500 and p.twin_rounds == 50
    smoke = build_params(RID, MemsetParams, {}, smoke=True)
    assert (smoke.ops, smoke.twin_replays, smoke.twin_rounds) == (100, 50, 10)
    assert build_params(RID, MemsetParams, {"matmul_dtype": "bf16"}).matmul_dtype == "bf16"
    assert GraphMemset.requires.cuda and not GraphMemset.requires.cpu_smoke
    assert GraphMemset.requires.python_modules == () and GraphMemset.requires.tools == ("nvcc",)


# --------------------------------------------------------------------------- building the twin


# slow: a real nvcc build of the twin (about 12 s of CPU on 2 cores).
@pytest.mark.slow
@pytest.mark.skipif(_twin.find_nvcc() is None, reason="nvcc is not installed here")
def test_twin_compiles_with_nvcc_and_the_cache_reuses_it(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = build_twin(twin_mod.TWIN_SOURCE, cache=cache)
    assert not first.cached and first.arch in ("native", "sm_90")
    assert first.binary.parent == cache and os.access(first.binary, os.X_OK)
    assert first.binary.name.startswith(f"graph_memset-{first.arch}-")
    mtime = first.binary.stat().st_mtime_ns
    second = build_twin(twin_mod.TWIN_SOURCE, cache=cache)
    assert second.cached and second.binary == first.binary and second.binary.stat().st_mtime_ns == mtime
    assert [p.name for p in cache.iterdir()] == [first.binary.name]  # no temp files left behind
    # The binary is real: its argument parser answers before it touches any GPU.
    r = subprocess.run([str(first.binary), "--bogus", "1"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "unknown option --bogus" in r.stderr and "--episodes --gap-ms" in r.stderr
    r = subprocess.run([str(first.binary), "--episodes", "0"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--episodes must be >= 1" in r.stderr


class _FakeNvcc:
    """Stands in for nvcc: records each command and writes an executable where -o points."""

    def __init__(self, fail_archs: tuple[str, ...] = (), native_has_no_gpu: bool = False) -> None:
        self.calls: list[list[str]] = []
        self.fail_archs = fail_archs
        self.native_has_no_gpu = native_has_no_gpu

    def __call__(self, cmd: list[str]) -> subprocess.CompletedProcess[str]:
        self.calls.append(cmd)
        arch = next(a.split("=", 1)[1] for a in cmd if a.startswith("-arch="))
        out = Path(cmd[cmd.index("-o") + 1])
        if arch in self.fail_archs:
            return subprocess.CompletedProcess(cmd, 1, "", f"nvcc fatal   : Unsupported gpu architecture '{arch}'")
        out.write_text("#!/bin/sh\necho built\n")
        out.chmod(out.stat().st_mode | stat.S_IXUSR)
        err = (
            "nvcc warning : Cannot find valid GPU for '-arch=native', default arch is used"
            if (arch == "native" and self.native_has_no_gpu)
            else ""
        )
        return subprocess.CompletedProcess(cmd, 0, "", err)


@pytest.fixture
def fake_nvcc(monkeypatch: pytest.MonkeyPatch) -> _FakeNvcc:
    fake = _FakeNvcc()
    monkeypatch.setattr(_twin, "_compile", fake)
    monkeypatch.setattr(_twin, "nvcc_version", lambda nvcc: "Cuda compilation tools, release 13.0, V13.0.88")
    return fake


def test_cache_key_covers_source_and_compiler(
    tmp_path: Path, fake_nvcc: _FakeNvcc, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "graph_memset.cu"
    src.write_text("int main() { return 0; }\n")
    cache = tmp_path / "cache"
    a = build_twin(src, cache, nvcc="/opt/nvcc", archs=("sm_90",))
    b = build_twin(src, cache, nvcc="/opt/nvcc", archs=("sm_90",))
    assert (a.cached, b.cached, b.binary) == (False, True, a.binary) and len(fake_nvcc.calls) == 1
    assert fake_nvcc.calls[0][:4] == ["/opt/nvcc", "-O3", "-arch=sm_90", "-o"] and fake_nvcc.calls[0][-1] == str(src)
    src.write_text("int main() { return 1; }\n")  # a changed source is a new binary
    c = build_twin(src, cache, nvcc="/opt/nvcc", archs=("sm_90",))
    assert not c.cached and c.binary != a.binary and len(fake_nvcc.calls) == 2
    monkeypatch.setattr(_twin, "nvcc_version", lambda nvcc: "Cuda compilation tools, release 13.1, V13.1.0")
    d = build_twin(src, cache, nvcc="/opt/nvcc", archs=("sm_90",))  # so is a new compiler
    assert not d.cached and d.binary != c.binary


def test_native_without_a_gpu_falls_back_to_sm90(tmp_path: Path, fake_nvcc: _FakeNvcc) -> None:
    fake_nvcc.native_has_no_gpu = True
    built = build_twin(twin_mod.TWIN_SOURCE, tmp_path, nvcc="/opt/nvcc")
    assert built.arch == "sm_90" and not built.cached
    assert [c[2] for c in fake_nvcc.calls] == ["-arch=native", "-arch=sm_90"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [built.binary.name]  # the default-arch build was dropped


def test_compile_failure_names_the_compiler_error(tmp_path: Path, fake_nvcc: _FakeNvcc) -> None:
    fake_nvcc.fail_archs = ("native", "sm_90")
    with pytest.raises(_twin.TwinBuildError, match=r"-arch=sm_90: exit 1: nvcc fatal   : Unsupported gpu architecture"):
        build_twin(twin_mod.TWIN_SOURCE, tmp_path, nvcc="/opt/nvcc")
    assert list(tmp_path.iterdir()) == []


def test_unreadable_source_is_a_build_error(tmp_path: Path, fake_nvcc: _FakeNvcc) -> None:
    """Every build failure is a TwinBuildError, the one exception the repro turns into skipped variants."""
    with pytest.raises(_twin.TwinBuildError, match=r"missing\.cu"):
        build_twin(tmp_path / "missing.cu", tmp_path / "cache", nvcc="/opt/nvcc")
    assert fake_nvcc.calls == []


def test_cache_dir_honours_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert _twin.cache_dir() == tmp_path / "gpu-repro"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert _twin.cache_dir() == tmp_path / "home" / ".cache" / "gpu-repro"


def test_twin_source_is_packaged_next_to_the_module() -> None:
    assert twin_mod.TWIN_SOURCE.is_file() and twin_mod.TWIN_SOURCE.suffix == ".cu"
    text = twin_mod.TWIN_SOURCE.read_text()
    for needle in (
        "cudaStreamBeginCapture",
        "cudaGraphInstantiate",
        "cudaGraphLaunch",
        "cudaMemsetAsync",
        "cudaEventElapsedTime",
    ):
        assert needle in text
    for name, _ in twin_mod.TWIN_VARIANTS:
        assert f'{{"{name}", Op::' in text  # every variant the parser expects is one the twin prints
