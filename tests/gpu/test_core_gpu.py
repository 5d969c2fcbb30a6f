"""On a real GPU: CUDA-event and graph-replay timing, kernel capture, NVML monitoring, fingerprint, 5090-linear."""

from __future__ import annotations

from pathlib import Path

import pytest

from repro.core.context import SamplingConfig
from repro.env import fingerprint
from repro.evidence import artifact
from repro.run.context import RunContext
from repro.run.execute import RunRequest, _nvml_or_none, execute

pytestmark = pytest.mark.gpu

QUICK = SamplingConfig(target_rel_ci=0.02, budget_s=0.5, warmup_s=0.05)


def test_event_and_graph_timing_agree_and_capture_kernels() -> None:
    import torch

    ctx = RunContext(device="cuda", smoke=False, sampling=QUICK, nvml=_nvml_or_none())
    a = torch.randn(2048, 2048, device="cuda")
    eager = ctx.measure("mm_eager", lambda: a @ a)
    graph = ctx.measure("mm_graph", lambda: a @ a, graph=True, calls_per_sample=20)
    assert eager.timing is not None and graph.timing is not None
    assert eager.timing.method == "cuda_events" and graph.timing.method == "graph_replay"
    # The same GEMM: graph replay removes launch gaps, so it is not slower than eager by much.
    assert graph.median < eager.median * 1.2
    assert eager.kernel_source == "cuda" and eager.kernels and "gemm" in eager.kernels[0].name.lower()
    assert eager.kernels[0].per_call == pytest.approx(1.0)
    assert graph.kernels[0].per_call == pytest.approx(1.0)
    assert eager.gpu_monitor is not None and eager.gpu_monitor["before"]["sm_clock_mhz"] is not None


def test_kernel_samples_one_per_call() -> None:
    import torch

    ctx = RunContext(device="cuda", smoke=False, sampling=QUICK)
    a = torch.randn(1024, 1024, device="cuda")
    samples = ctx.kernel_samples(lambda: (a @ a, a + 1), 8, match=lambda n: "gemm" in n.lower())
    assert len(samples) == 8 and all(s > 0 for s in samples)


def test_fingerprint_names_loaded_cuda_libraries() -> None:
    import torch

    (torch.randn(64, 64, device="cuda") @ torch.randn(64, 64, device="cuda")).sum().item()
    fp = fingerprint.collect()
    libs = fp["software"]["libraries"]
    assert libs["cublas"]["loaded"] and libs["cublas"]["version"]
    assert libs["cudart"]["loaded"]
    assert fp["gpu"]["nvml"]["driver_version"]
    assert artifact.validation_errors(fp, "fingerprint.schema.json") == []


def test_5090_linear_small_on_gpu(run_dir: Path) -> None:
    req = RunRequest("5090-linear", overrides={"batch": "16"}, sampling=QUICK)
    doc, _ = execute(req, run_dir)
    assert doc["verdict"]["status"] in ("reproduced", "not_reproduced")
    assert doc["verdict"]["ci_low"] <= doc["verdict"]["value"] <= doc["verdict"]["ci_high"]
    assert [v["name"] for v in doc["variants"]] == ["linear_fp32", "manual_fp32", "linear_tf32", "manual_tf32"]
    for v in doc["variants"]:
        assert v["kernels"] and v["achieved"]["pct_of_ceiling"] is not None
    assert doc["validity"]["flag"] in ("valid", "suspect")
    assert set(doc["fingerprint"]["ceilings"]) == {"copy", "fp32", "tf32", "bf16"}
    assert (run_dir / "traces" / "5090-linear" / "linear_fp32.trace.json.gz").is_file()
