"""graph-memset: skipped on CPU, the twin's build cache and output parser, its run path, and the verdict."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import stat
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import TESTS, full_text, timing_for

from repro.core.context import SamplingConfig
from repro.core.spec import RunResult, VariantResult, build_params
from repro.core.stats import summarize
from repro.core.verdict import variant_ratio
from repro.evidence import artifact, report, scope
from repro.evidence.model import run_of
from repro.repros import _memset_twin as twin_mod
from repro.repros import _twin
from repro.repros import graph_memset as gm
from repro.repros._memset_twin import parse_twin_output, twin_variants
from repro.repros._twin import build_twin
from repro.repros.graph_memset import GraphMemset, MemsetParams
from repro.run import scripts
from repro.run.context import RunContext
from repro.run.execute import RunRequest, execute
from repro.run.schedule import QUICK_SKIP

RID = "graph-memset"

# What the twin printed for --ops 1000 --replays 4 --warmup 2 --rounds 2 (format of its printf calls).
# Real output of the twin on the H200 (tools: `graph_memset --ops 1000 --replays 4 --warmup 2 --rounds 2`).
CAPTURED = (TESTS / "fixtures" / "graph_memset_twin_h200.json").read_text()


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


# --------------------------------------------------------------------------- the twin's output


def test_parse_captured_output_into_external_variants(run_dir: Path, fast: SamplingConfig) -> None:
    doc = parse_twin_output(CAPTURED)
    assert doc["ops"] == 1000 and doc["device"] == "NVIDIA H200"
    build = _twin.TwinBuild(Path("/cache/graph_memset-sm_90-0"), True, "sm_90", "V13.0.88", "0" * 64)
    variants = twin_variants(doc, build, target_rel_ci=0.01, budget_s=300.0)
    # This output comes from a binary without the seed's program: its seed_* variants are left out.
    printed = [n for n, _ in twin_mod.TWIN_VARIANTS if n not in twin_mod.OPTIONAL_TWIN_VARIANTS]
    assert [v.name for v in variants] == [f"twin_{n}" for n in printed]
    memset = variants[0]
    assert memset.status == "ok" and memset.timing is not None
    assert memset.timing.method == "external" and memset.timing.stop_reason == "external"
    assert memset.timing.calls_per_sample == 1000 and memset.timing.warmup_calls == 2000
    assert memset.timing.samples[0] == pytest.approx(9.045439959e-07)
    assert memset.timing.elapsed_s == pytest.approx(sum(doc["variants"]["memset"]) * 1000)
    assert memset.median == pytest.approx(summarize(doc["variants"]["memset"]).median)
    assert memset.extra["gpu"] == "NVIDIA H200" and memset.extra["binary_cached"] is True
    # Work per op: 4 bytes for a memset, one FMA per element and iteration in the work kernel.
    assert memset.work is not None and memset.work.bytes == 4.0 and memset.work.ceiling == "copy"
    work_only = variants[2]
    assert work_only.work is not None and work_only.work.flops == 2.0 * 1048576 * 128
    ceilings = {"copy": {"value": 4000.0, "unit": "GB/s"}, "fp32": {"value": 50.0, "unit": "TFLOP/s"}}
    with_ceilings = twin_variants(doc, build, target_rel_ci=0.01, budget_s=300.0, ceilings=ceilings)
    assert all(v.achieved is not None and v.achieved.pct_of_ceiling is not None for v in with_ceilings)
    # This output predates the twin's "per_round" key: its variants carry no rounds and pair with nothing.
    assert all(v.timing is not None and v.timing.rounds is None and v.timing.group is None for v in variants)
    # The variants fit the artifact schema: put them into a real (CPU, skipped) artifact.
    skipped, _ = execute(RunRequest(RID, sampling=fast), run_dir)
    skipped["variants"] = artifact.to_jsonable(variants)
    assert artifact.validation_errors(skipped) == []


def with_per_round(text: str) -> str:
    """The captured output as the current twin prints it: --replays 4 --rounds 2 gives per_round
    = ceil(4 / 2) = 2 (graph_memset.cu), so replays 0-1 are round 0 and 2-3 round 1."""
    doc = json.loads(text)
    assert (doc["replays"], doc["rounds"]) == (4, 2)
    return json.dumps({**doc, "per_round": 2})


def test_twin_rounds_become_paired_timings(run_dir: Path, fast: SamplingConfig) -> None:
    doc = parse_twin_output(with_per_round(CAPTURED))
    build = _twin.TwinBuild(Path("/cache/graph_memset-sm_90-0"), True, "sm_90", "V13.0.88", "0" * 64)
    variants = {v.name: v for v in twin_variants(doc, build, target_rel_ci=0.01, budget_s=300.0)}
    memset = variants["twin_memset"].timing
    assert memset is not None and memset.group == "twin" and memset.samples == tuple(doc["variants"]["memset"])
    xs = doc["variants"]["memset"]
    assert memset.rounds == pytest.approx(((xs[0] + xs[1]) / 2, (xs[2] + xs[3]) / 2))  # median of each round
    assert {len(v.timing.rounds or ()) for v in variants.values() if v.timing is not None} == {2}
    skipped, _ = execute(RunRequest(RID, sampling=fast), run_dir)
    skipped["variants"] = artifact.to_jsonable(list(variants.values()))
    assert artifact.validation_errors(skipped) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "not one JSON object"),
        ("graph_memset: cudaSetDevice failed\n", "not one JSON object"),
        ('{"ops": 10}', "lacks a 'variants' object"),
        ('{"ops": 0, "variants": {}}', "'ops' must be a positive integer"),
        ('{"ops": 10, "variants": {"memset": [1e-6]}}', "no samples for variant 'fill'"),
        (CAPTURED.replace("9.045439959e-07", "-1"), "variant 'memset' has a sample that is not a positive number"),
    ],
)
def test_parse_rejects_malformed_output(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_twin_output(text)


def _fake_binary(tmp_path: Path, body: str) -> _twin.TwinBuild:
    script = tmp_path / "fake_twin"
    script.write_text(f"#!{sys.executable}\nimport sys\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return _twin.TwinBuild(script, True, "sm_90", "Cuda compilation tools\nV13.0.88", "0" * 64)


def test_twin_run_turns_its_output_into_variants(
    tmp_path: Path, fast: SamplingConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv_file = tmp_path / "argv.json"
    out = with_per_round(CAPTURED)
    body = f"import json; json.dump(sys.argv[1:], open({str(argv_file)!r}, 'w')); sys.stdout.write({out!r})"
    monkeypatch.setattr(gm, "build_twin", lambda *_, **__: _fake_binary(tmp_path, body))
    p = build_params(RID, MemsetParams, {"ops": "1000", "twin_replays": "4", "twin_rounds": "2", "twin_warmup": "2"})
    variants, info = GraphMemset()._twin(p, RunContext(device="cpu", smoke=False, sampling=fast), 3)
    assert [v.status for v in variants] == ["ok"] * 5
    assert json.loads(argv_file.read_text()) == [
        "--device", "3", "--ops", "1000", "--replays", "4", "--rounds", "2", "--warmup", "2", "--work-iters", "128",
        "--episodes", "10", "--gap-ms", "0",  # no idle gaps off CUDA
        "--work-replays", "100",
    ]  # fmt: skip
    assert info["variants"] == [n for n, _ in twin_mod.TWIN_VARIANTS]  # a full run asks for every variant
    assert info["status"] == "ok" and info["gpu"] == "NVIDIA H200" and info["nvcc"] == "V13.0.88"
    assert all(v.timing is not None and v.timing.group == "twin" and len(v.timing.rounds or ()) == 2 for v in variants)
    assert info["source_sha256"] == hashlib.sha256(twin_mod.TWIN_SOURCE.read_bytes()).hexdigest()


def test_twin_failure_is_an_error_variant_with_its_stderr(
    tmp_path: Path, fast: SamplingConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = "sys.stderr.write('graph_memset: cudaSetDevice(o.device) failed: cudaErrorNoDevice\\n'); sys.exit(1)"
    monkeypatch.setattr(gm, "build_twin", lambda *_, **__: _fake_binary(tmp_path, body))
    variants, info = GraphMemset()._twin(MemsetParams(), RunContext(device="cpu", smoke=False, sampling=fast), 0)
    assert [v.status for v in variants] == ["error"] * len(twin_mod.TWIN_VARIANTS)
    reason = variants[0].reason
    assert reason is not None
    assert "exited 1: graph_memset: cudaSetDevice(o.device) failed: cudaErrorNoDevice" in reason
    assert info["status"] == "error"


def test_twin_timeout_is_an_error_variant(
    tmp_path: Path, fast: SamplingConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gm, "build_twin", lambda *_, **__: _fake_binary(tmp_path, "import time; time.sleep(30)"))
    p = build_params(RID, MemsetParams, {"twin_timeout_s": "1"})
    variants, _ = GraphMemset()._twin(p, RunContext(device="cpu", smoke=False, sampling=fast), 0)
    reason = variants[0].reason
    assert {v.status for v in variants} == {"error"} and reason is not None and "past its 1 s limit" in reason


def test_twin_is_skipped_without_nvcc(fast: SamplingConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_twin, "find_nvcc", lambda: None)
    variants, info = GraphMemset()._twin(MemsetParams(), RunContext(device="cpu", smoke=False, sampling=fast), 0)
    assert [v.status for v in variants] == ["skipped"] * len(twin_mod.TWIN_VARIANTS)
    assert all(
        v.reason is not None and "nvcc not found on PATH or at /usr/local/cuda/bin/nvcc" in v.reason for v in variants
    )
    assert info["status"] == "skipped"


# --------------------------------------------------------------------------- verdict on synthetic samples

# The paired groups run() times: the torch graphs in two families, the twin in its own rounds.
GROUPS = {
    "memset": "torch", "fill": "torch",
    "memset_mm": "torch_mm", "fill_mm": "torch_mm", "mm_only": "torch_mm",
    "twin_memset": "twin", "twin_fill": "twin", "twin_work_only": "twin", "twin_memset_work": "twin",
    "twin_fill_work": "twin",
}  # fmt: skip
# A slow drift of the GPU over the rounds (+-22.5%, median 1), the same for every variant in a round.
DRIFT = [1 + 0.05 * (((i * 7) % 10) - 4.5) for i in range(30)]


def _timed(name: str, median: float, spread: float = 0.002, paired: bool = True) -> VariantResult:
    """A graph-replay variant: paired rounds in its group (as run() times it), or plain samples."""
    salt = sorted(GROUPS).index(name) if name in GROUPS else 0
    if paired and name in GROUPS:
        rounds = [median * d * (1 + spread * (((i + salt) % 3) - 1)) for i, d in enumerate(DRIFT)]
        t = timing_for(rounds, method="graph_replay", calls_per_sample=1000, budget_s=5.0)
        timing = dataclasses.replace(t, group=GROUPS[name], rounds=tuple(rounds))
    else:
        samples = [median * (1 + spread * ((i % 7) - 3) / 3) for i in range(30)]
        timing = timing_for(samples, method="graph_replay", calls_per_sample=1000, budget_s=5.0)
    return VariantResult(name=name, label=name, config={}, status="ok", device="cuda", timing=timing)


def _result(times: dict[str, float], skipped: dict[str, str] | None = None, paired: bool = True) -> RunResult:
    variants = [_timed(n, t, paired=paired) for n, t in times.items()]
    variants += [
        VariantResult(name=n, label=n, config={}, status="skipped", reason=r) for n, r in (skipped or {}).items()
    ]
    return RunResult(variants=tuple(variants))


FULL: dict[str, Any] = {
    "memset": 2.9e-6,
    "fill": 2.0e-6,
    "memset_mm": 27.9e-6,
    "fill_mm": 27.0e-6,
    "mm_only": 26.0e-6,
    "twin_memset": 2.88e-6,
    "twin_fill": 2.0e-6,
    "twin_work_only": 6.1e-6,
    "twin_memset_work": 8.96e-6,
    "twin_fill_work": 8.0e-6,
}


def test_comparisons_twin_first_then_torch() -> None:
    comps = GraphMemset().comparisons(MemsetParams())
    assert [(c.name, c.num, c.den, c.headline) for c in comps] == [
        (gm._TWIN_PLAIN, "twin_memset", "twin_fill", True),
        (gm._TORCH_PLAIN, "memset", "fill", True),
        (gm._TORCH_MM, "memset_mm", "fill_mm", False),
        (gm._TWIN_WORK, "twin_memset_work", "twin_fill_work", False),
        (gm._SEED, "twin_seed_memset", "twin_seed_fill", False),
    ]
    assert [c.qualifiers["source"] for c in comps] == [
        "pure CUDA twin", "torch graph", "torch graph, with matmul", "pure CUDA twin, with work kernel",
        "the seed's program",
    ]  # fmt: skip
    assert all(c.threshold == 1.2 for c in comps) and GraphMemset.headline_rule == "first"
    no_twin = GraphMemset().comparisons(build_params(RID, MemsetParams, {"twin": "false"}))
    assert [c.name for c in no_twin] == [gm._TORCH_PLAIN, gm._TORCH_MM]


def test_verdict_reproduced_reports_both_twins_and_the_matmul_ratio() -> None:
    v = GraphMemset().verdict(MemsetParams(), _result(FULL))
    assert v.status == "reproduced" and v.headline == gm._TWIN_PLAIN and v.paired is True
    assert v.value == pytest.approx(1.44, rel=1e-2)
    assert v.ci_low is not None and v.ci_low >= 1.2  # the twin speaks when it ran
    rows = {r["comparison"]: r for r in v.breakdown}
    assert list(rows) == [gm._TWIN_PLAIN, gm._TORCH_PLAIN, gm._TORCH_MM, gm._TWIN_WORK]
    assert [r["headline"] for r in rows.values()] == [True, False, False, False]
    assert all(r["paired"] is True and r["n"] == len(DRIFT) for r in rows.values())
    assert (
        rows[gm._TWIN_PLAIN]["source"] == "pure CUDA twin"
        and rows[gm._TORCH_MM]["source"] == "torch graph, with matmul"
    )
    assert rows[gm._TORCH_PLAIN]["ratio"] == pytest.approx(1.45, rel=1e-2)
    assert rows[gm._TORCH_MM]["ratio"] == pytest.approx(27.9 / 27.0, rel=1e-2)
    # With a matmul or work kernel in each op the ratio is diluted: those rows are not judged.
    assert rows[gm._TORCH_MM]["status"] == "informational" and rows[gm._TWIN_WORK]["status"] == "informational"
    assert v.finding.startswith(
        f"Reproduced: {gm._TWIN_PLAIN} was {v.value:.2f}x (95% CI {v.ci_low:.2f}-{v.ci_high:.2f}), "
        "the whole CI is above the 1.2 threshold; a 4-byte cudaMemsetAsync node against a one-element fill kernel"
    )
    assert "(pure CUDA twin, 1000 ops per graph); after a " in v.finding
    torch_plain, mm = (rows[gm._TORCH_PLAIN], rows[gm._TORCH_MM])
    # The torch graph's ratio is in the finding itself, after the twin's: a torch user's graph may not show it.
    assert v.finding.endswith(
        f"; in a torch CUDA graph against tensor.zero_() it was {torch_plain['ratio']:.2f}x "
        f"(95% CI {torch_plain['ci_low']:.2f}-{torch_plain['ci_high']:.2f})."
    )
    assert "Per op: in the torch graph memset 2.90 us, zero_() 2.00 us; in the twin memset 2.88 us, fill kernel " in (
        full_text(v)
    )
    assert "With a 512x1024x1024 fp32 matmul between ops, (memset+mm)/(fill+mm) was 1.03x" in full_text(v)
    assert f"was {mm['ratio']:.2f}x (95% CI {mm['ci_low']:.2f}-{mm['ci_high']:.2f})" in full_text(v)
    assert "(per-op increment over the matmul alone: memset +1.900 us, fill +1.000 us)" in full_text(v)
    # The memset's and fill's cost over the work kernel alone is in the finding itself, not only the details.
    assert "; after a 6.10 us work kernel, a memset node added +2.86 us per op and a fill kernel node +1.90 us" in (
        v.finding
    )
    assert "(twin; the ratio of whole ops, 1.118x (95% CI " in v.finding
    assert "is diluted by the work and informational);" in v.finding


def test_a_work_row_under_the_threshold_is_informational_not_a_miss(run_dir: Path, fast: SamplingConfig) -> None:
    """The twin's H200 shape (memset +1.9 us, fill +16 ns over a 10.3 us work kernel): a diluted
    ratio of 1.18x under 1.2 is informational; the headline's status and threshold stand."""
    times = dict(FULL, twin_work_only=10.309e-6, twin_memset_work=12.226e-6, twin_fill_work=10.326e-6)
    res = _result(times)
    v = GraphMemset().verdict(MemsetParams(), res)
    rows = {r["comparison"]: r for r in v.breakdown}
    work = rows[gm._TWIN_WORK]
    assert work["ratio"] == pytest.approx(12.226 / 10.326, rel=5e-3) and work["ci_high"] < 1.2
    assert work["status"] == "informational" and work["headline"] is False
    assert v.status == "reproduced" and v.threshold == 1.2 and v.headline == gm._TWIN_PLAIN
    assert "a memset node added +1.92 us per op and a fill kernel node +17 ns (twin; " in v.finding
    # Informational rows are neither "holds" nor "does not hold" in the report's scope lines.
    doc, _ = execute(RunRequest(RID, sampling=fast), run_dir)  # a CPU artifact, its verdict replaced
    doc["variants"], doc["verdict"] = artifact.to_jsonable(list(res.variants)), artifact.to_jsonable(v)
    assert artifact.validation_errors(doc) == []
    found = scope.conditions(run_of(doc))
    assert found is not None and found[0] == "pure CUDA twin"
    assert found[1] == ["torch graph: 1.45x"] and found[2] == [], found
    # The threshold's reason is recorded in the verdict and shown in the report's details.
    assert doc["verdict"]["threshold_why"] == gm.THRESHOLD_WHY
    rendered = report.report([doc], declared=scripts.declared([doc]))
    assert f"Threshold 1.2 (the repro's): {gm.THRESHOLD_WHY}." in rendered


def test_a_work_row_never_heads_and_a_quick_straddle_there_decides_nothing() -> None:
    from repro.core.results import Verdict
    from repro.core.verdict import as_quick, headline_candidates

    comps = GraphMemset().comparisons(MemsetParams())
    assert gm._TWIN_WORK not in [c.name for c in headline_candidates(comps)]
    times = dict(FULL, twin_work_only=10.0e-6, twin_memset_work=12.0e-6, twin_fill_work=10.0e-6)
    v = GraphMemset().verdict(MemsetParams(), _result(times))
    rows = tuple(dict(r, where="straddles") if r["status"] == "informational" else r for r in v.breakdown)
    fields = {f.name: getattr(v, f.name) for f in dataclasses.fields(v)}
    straddling = Verdict(**{**fields, "breakdown": rows})
    assert as_quick(straddling, "repro run graph-memset").status == v.status == "reproduced"


def test_the_finding_gives_the_twins_episode_spread() -> None:
    """Rounds in episodes of 5: the memset's episode medians move 10%, the fill's not at all."""
    v = GraphMemset().verdict(MemsetParams(), _result(FULL))
    assert not any("Twin episode medians" in d for d in v.details)  # no episodes recorded
    res = _result(FULL)
    variants = []
    for x in res.variants:
        t = x.timing
        if t is not None and x.name in ("twin_memset", "twin_fill"):
            step = [1.0 + 0.1 * (i // 5 % 2) if x.name == "twin_memset" else 1.0 for i in range(30)]
            rounds = tuple(FULL[x.name] * f for f in step)
            t = dataclasses.replace(t, rounds=rounds, episode_rounds=5)
        variants.append(dataclasses.replace(x, timing=t))
    v = GraphMemset().verdict(MemsetParams(), RunResult(variants=tuple(variants)))
    said = next(d for d in v.details if "Twin episode medians" in d)
    assert said.startswith("Twin episode medians (6 episodes): memset 2880.0-3168.0 ns (10.00% apart), ")
    assert "fill 2000.0-2000.0 ns (0.00% apart); the memset node's time varies between episodes" in said


def test_paired_rounds_cancel_drift_that_would_sink_a_two_sample_ci() -> None:
    times = dict(FULL, twin_memset=2.6e-6)  # 1.3x per op in the twin
    v = GraphMemset().verdict(MemsetParams(), _result(times))
    assert v.status == "reproduced" and v.paired is True and v.ci_low is not None and v.ci_low >= 1.2
    # The same drift in plain samples (no rounds): the two-sample CI cannot clear the threshold.
    drifting = RunResult(
        variants=tuple(
            dataclasses.replace(x, timing=dataclasses.replace(x.timing, group=None, rounds=None))
            for x in _result(times).variants
            if x.timing is not None
        )
    )
    u = GraphMemset().verdict(MemsetParams(), drifting)
    assert u.paired is False and u.ci_low is not None and u.ci_high is not None
    assert u.ci_low < 1.2 <= u.ci_high and u.status == "not_reproduced"
    assert u.finding.startswith(f"Not reproduced (inconclusive): {gm._TWIN_PLAIN} was ")
    assert all(r["paired"] is False for r in u.breakdown)


def test_unpaired_variants_still_give_a_verdict() -> None:
    # Variants without rounds (twin output with no per_round, artifacts without them): plain samples, the two-sample CI.
    v = GraphMemset().verdict(MemsetParams(), _result(FULL, paired=False))
    assert v.status == "reproduced" and v.paired is False and v.value == pytest.approx(1.44, rel=1e-3)
    assert all(r["paired"] is False and r["n"] == 30 for r in v.breakdown)


def test_verdict_not_reproduced_when_memset_costs_what_a_kernel_costs() -> None:
    times = dict(FULL, memset=2.02e-6, twin_memset=2.01e-6)
    v = GraphMemset().verdict(MemsetParams(), _result(times))
    twin_fill = FULL["twin_fill"]
    assert v.status == "not_reproduced" and v.value == pytest.approx(2.01e-6 / twin_fill, rel=1e-2)
    assert v.finding.startswith(f"Not reproduced: {gm._TWIN_PLAIN} was ")
    assert "the whole CI is below the 1.2 threshold" in v.finding


def test_verdict_falls_back_to_the_twin_without_cuda_bindings() -> None:
    times = {k: t for k, t in FULL.items() if not k.startswith("memset")}
    reason = "cuda-bindings is not importable (ModuleNotFoundError: No module named 'cuda')"
    v = GraphMemset().verdict(MemsetParams(), _result(times, {"memset": reason, "memset_mm": reason}))
    assert v.status == "reproduced" and v.value == pytest.approx(1.44, rel=1e-2)
    assert "(pure CUDA twin, 1000 ops per graph)" in v.finding
    assert f"The torch-graph memset variant was skipped: {reason}." in v.details
    assert [r["comparison"] for r in v.breakdown] == [gm._TWIN_PLAIN, gm._TWIN_WORK]


def test_without_the_twin_the_torch_graph_speaks() -> None:
    twin_reason = "the pure CUDA twin was not built: nvcc not found on PATH or at /usr/local/cuda/bin/nvcc"
    times = {k: t for k, t in FULL.items() if not k.startswith("twin_")}
    v = GraphMemset().verdict(MemsetParams(), _result(times, {n: twin_reason for n in GROUPS if n.startswith("twin_")}))
    assert v.status == "reproduced" and v.headline == gm._TORCH_PLAIN and v.value == pytest.approx(1.45, rel=1e-2)
    assert v.finding.startswith(f"Reproduced: {gm._TORCH_PLAIN} was ")
    assert v.finding.endswith("(torch graph, 1000 ops per graph).")
    assert "The pure CUDA twin gave no ratio (its variants say why)." in v.details
    assert [r["comparison"] for r in v.breakdown] == [gm._TORCH_PLAIN, gm._TORCH_MM]


def test_verdict_without_memset_anywhere_is_inconclusive_with_the_reason() -> None:
    reason = "cuda-bindings is not importable (ModuleNotFoundError: No module named 'cuda')"
    twin_reason = "the pure CUDA twin was not built: nvcc not found on PATH or at /usr/local/cuda/bin/nvcc"
    res = _result(
        {"fill": 2e-6, "fill_mm": 27e-6, "mm_only": 26e-6},
        {"memset": reason, "memset_mm": reason, "twin_memset": twin_reason, "twin_fill": twin_reason},
    )
    v = GraphMemset().verdict(MemsetParams(), res)
    assert v.status == "inconclusive" and v.value is None and v.breakdown == ()
    assert v.claim is not None and v.claim["tested"] is False
    assert v.finding.startswith("Inconclusive, the seed's claim was not tested (")
    assert f"variant twin_memset was skipped: {twin_reason}" in v.finding


def test_twin_episodes_widen_its_paired_ci(fast: SamplingConfig) -> None:
    """Synthetic twin output (not a GPU run): 60 rounds of one replay each, in 12 episodes of 5.
    The memset/fill ratio holds a different value in each episode (a power state that lasts
    an episode), and the CI must cover the episodes' spread, not only the rounds' noise."""
    rng = random.Random(3)
    level = [1.25 + 0.04 * (e % 4) for e in range(12)]
    fill = [1e-6 * (1 + rng.gauss(0, 0.002)) for _ in range(60)]
    memset = [f * level[i // 5] * (1 + rng.gauss(0, 0.001)) for i, f in enumerate(fill)]
    doc = {
        "ops": 1000,
        "replays": 60,
        "rounds": 60,
        "per_round": 1,
        "episodes": 12,
        "episode_rounds": 5,
        "variants": {n: (memset if n.startswith("memset") else fill) for n, _ in twin_mod.TWIN_VARIANTS},
    }
    build = _twin.TwinBuild(Path("/cache/graph_memset-sm_90-0"), True, "sm_90", "V13.0.88", "0" * 64)
    have = {v.name: v for v in twin_variants(parse_twin_output(json.dumps(doc)), build, 0.01, 300.0)}
    timing = have["twin_memset"].timing
    assert timing is not None and timing.episode_rounds == 5
    # The variant's own CI is over its rounds (n = 60 rounds, not replays), widened over the episodes.
    eps = sorted(statistics.median(timing.rounds[i : i + 5]) for i in range(0, 60, 5)) if timing.rounds else []
    assert timing.stats.n == 60 and timing.stats.ci_low <= eps[2] and timing.stats.ci_high >= eps[9]
    value, lo, hi, paired, _, _ = variant_ratio(have["twin_memset"], have["twin_fill"])
    assert paired and lo <= 1.26 and hi >= 1.36, (value, lo, hi)
    # The same rounds without their episodes: the CI of the rounds alone misses the spread.
    flat = {
        k: dataclasses.replace(v, timing=dataclasses.replace(v.timing, episode_rounds=None))
        for k, v in have.items()
        if v.timing is not None
    }
    _, lo1, hi1, _, _, _ = variant_ratio(flat["twin_memset"], flat["twin_fill"])
    assert hi1 - lo1 < (hi - lo) / 2


def test_a_quick_twin_runs_only_the_headline_pair_and_skips_the_rest(
    tmp_path: Path, fast: SamplingConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv_file = tmp_path / "argv.json"
    doc = json.loads(with_per_round(CAPTURED))
    printed = {**doc, "variants": {n: doc["variants"][n] for n in ("memset", "fill")}}
    out = json.dumps(printed)
    body = f"import json; json.dump(sys.argv[1:], open({str(argv_file)!r}, 'w')); sys.stdout.write({out!r})"
    monkeypatch.setattr(gm, "build_twin", lambda *_, **__: _fake_binary(tmp_path, body))
    p = build_params(RID, MemsetParams, {"ops": "1000", "twin_replays": "4", "twin_rounds": "2"})
    ctx = RunContext(device="cpu", smoke=False, sampling=fast, quick=True)
    ctx.comparisons = tuple(c for c in GraphMemset().comparisons(p) if c.headline)
    variants, info = GraphMemset()._twin(p, ctx, 0)
    argv = json.loads(argv_file.read_text())
    assert argv[argv.index("--variants") + 1] == "memset,fill" and info["variants"] == ["memset", "fill"]
    status = {v.name: v.status for v in variants}
    assert status == {f"twin_{n}": "ok" if n in ("memset", "fill") else "skipped" for n, _ in twin_mod.TWIN_VARIANTS}
    assert {v.reason for v in variants if v.status == "skipped"} == {QUICK_SKIP}
    assert info["status"] == "ok"


def test_parse_needs_samples_only_for_the_variants_asked_for() -> None:
    doc = json.loads(CAPTURED)
    two = json.dumps({**doc, "variants": {n: doc["variants"][n] for n in ("memset", "fill")}})
    assert set(parse_twin_output(two, ["memset", "fill"])["variants"]) == {"memset", "fill"}
    with pytest.raises(ValueError, match="no samples for variant 'work_only'"):
        parse_twin_output(two)  # a full run asked for every variant
    with pytest.raises(ValueError, match="no samples for variant 'fill'"):
        parse_twin_output(json.dumps({**doc, "variants": {"memset": doc["variants"]["memset"]}}), ["memset", "fill"])


def test_work_variants_record_their_own_warm_up_replays() -> None:
    doc = parse_twin_output(with_per_round(CAPTURED))
    build = _twin.TwinBuild(Path("/cache/graph_memset-sm_90-0"), True, "sm_90", "V13.0.88", "0" * 64)
    ops = int(doc["ops"])

    def warm(d: dict[str, Any]) -> dict[str, int]:
        return {v.name: v.timing.warmup_calls // ops for v in twin_variants(d, build, 0.01, 300.0) if v.timing}

    old = warm(doc)  # a binary that prints no work_warmup warmed every variant alike
    assert set(old.values()) == {int(doc["warmup"])}
    new = warm({**doc, "work_warmup": 4})
    assert {n: w for n, w in new.items() if "work" in n} == {
        "twin_work_only": 4,
        "twin_memset_work": 4,
        "twin_fill_work": 4,
    }
    assert {w for n, w in new.items() if "work" not in n} == {int(doc["warmup"])}


def test_work_variants_pair_their_rounds_by_work_per_round() -> None:
    """--work-replays 2 --rounds 2 gives work_per_round 1: each work replay is a round, paired with the
    other work variant's replay of the same round, while the other variants keep rounds of 2."""
    doc = json.loads(with_per_round(CAPTURED))
    short = {n: (xs[:2] if "work" in n else xs) for n, xs in doc["variants"].items()}
    doc = parse_twin_output(json.dumps({**doc, "variants": short, "work_replays": 2, "work_per_round": 1}))
    build = _twin.TwinBuild(Path("/cache/graph_memset-sm_90-0"), True, "sm_90", "V13.0.88", "0" * 64)
    variants = {v.name: v for v in twin_variants(doc, build, target_rel_ci=0.01, budget_s=300.0)}
    for name in ("twin_work_only", "twin_memset_work", "twin_fill_work"):
        t = variants[name].timing
        assert t is not None and t.rounds == tuple(short[name.removeprefix("twin_")]) and t.stats.n == 2
    memset = variants["twin_memset"].timing
    # A variant's median is over its rounds (2 rounds of 2 replays each), the samples all kept.
    assert memset is not None and len(memset.rounds or ()) == 2 and memset.stats.n == 2 and len(memset.samples) == 4
    assert twin_mod.twin_per_round(doc, "memset_work") == 1 and twin_mod.twin_per_round(doc, "fill") == 2
    assert twin_mod.twin_per_round({"per_round": 5}, "fill_work") == 5  # an older twin: one per_round for all


class _FakeMonitor:
    """What RunContext._monitor returns with NVML: a context manager with before and summary()."""

    def __init__(self) -> None:
        self.before: dict[str, Any] = {"compute_pids": [111]}
        self.entered = False

    def __enter__(self) -> _FakeMonitor:
        self.entered = True
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def summary(self) -> dict[str, Any]:
        assert self.entered
        return {"sm_clock_min_mhz": 1500, "throttled": ["sw_power_cap"], "other_pids": [111, 222]}


def test_the_twin_variants_carry_the_gpu_monitor_around_its_process(
    tmp_path: Path, fast: SamplingConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = f"sys.stdout.write({with_per_round(CAPTURED)!r})"
    monkeypatch.setattr(gm, "build_twin", lambda *_, **__: _fake_binary(tmp_path, body))
    monitor = _FakeMonitor()
    ctx = RunContext(device="cpu", smoke=False, sampling=fast)
    monkeypatch.setattr(ctx, "_monitor", lambda *_, **__: monitor)
    p = build_params(RID, MemsetParams, {"ops": "1000", "twin_replays": "4", "twin_rounds": "2", "twin_warmup": "2"})
    variants, _ = GraphMemset()._twin(p, ctx, 0)
    assert [v.status for v in variants] == ["ok"] * 5 and monitor.entered
    for v in variants:
        # 222 appeared only while the twin ran (the twin itself); 111 was on the GPU before it.
        assert v.gpu_monitor == {"sm_clock_min_mhz": 1500, "throttled": ["sw_power_cap"], "other_pids": [111]}
    # Without NVML there is no monitor and nothing is made up.
    plain, _ = GraphMemset()._twin(p, RunContext(device="cpu", smoke=False, sampling=fast), 0)
    assert all(v.gpu_monitor is None for v in plain)


def test_the_seeds_torch_program_is_said_beside_the_rounds() -> None:
    from repro.repros._memset_seed import SEED_HOW, seed_torch_clause

    got = {"ops": 1000, "how": SEED_HOW, "ms": {"memset": 35.16, "zero_": 35.9}, "ratio": 35.16 / 35.9}
    said = seed_torch_clause(got)
    assert said == (
        f"The seed's torch program ({SEED_HOW}) gave 0.98x here (memset 35.16 ms, zero_ 35.90 ms; "
        "one replay each, no CI)."
    )
    res = dataclasses.replace(_result(FULL), extra={"seed_torch_program": got})
    assert said in GraphMemset().verdict(MemsetParams(), res).details
    # A program that did not run (no cuda-bindings, a failed capture) says nothing of a number.
    assert seed_torch_clause({"error": "cuda-bindings could not issue the memset", "ms": {}}) == ""
    bare = dataclasses.replace(_result(FULL), extra={"seed_torch_program": {"error": "x"}})
    assert not any("seed's torch program" in d for d in GraphMemset().verdict(MemsetParams(), bare).details)
