"""graph-memset on a real GPU: memset and fill graphs, the matmul variants and the pure CUDA twin."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from repro.core.context import SamplingConfig
from repro.evidence import artifact
from repro.repros import _memset_twin, _twin
from repro.repros import graph_memset as gm
from repro.run.execute import RunRequest, execute

pytestmark = pytest.mark.gpu

QUICK = SamplingConfig(target_rel_ci=0.02, budget_s=0.5, warmup_s=0.05)
RID = "graph-memset"


def _has_bindings() -> bool:
    try:
        return importlib.util.find_spec("cuda.bindings") is not None
    except (ImportError, ValueError):
        return False


def test_graphs_and_twin_with_100_ops(run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # build the twin afresh, away from ~/.cache
    doc, _ = execute(RunRequest(RID, overrides={"ops": "100", "twin_replays": "50"}, sampling=QUICK), run_dir)
    assert artifact.validation_errors(doc) == [], artifact.validation_errors(doc)
    assert doc["run"]["device"] == "cuda" and doc["error"] is None
    v = {x["name"]: x for x in doc["variants"]}
    assert list(v) == ["memset", "fill", "empty", "memset_mm", "fill_mm", "mm_only"] + [
        f"twin_{n}" for n, _ in _memset_twin.TWIN_VARIANTS
    ]
    assert v["empty"]["status"] == "skipped"
    if not _has_bindings():
        assert v["memset"]["status"] == "skipped" and "cuda-bindings" in v["memset"]["reason"]
    else:
        memset = v["memset"]
        assert memset["status"] == "ok", memset["reason"]
        assert memset["timing"]["method"] == "graph_replay" and memset["timing"]["calls_per_sample"] == 100
        sets = [k for k in memset["kernels"] if "memset" in k["name"].lower()]
        assert sets and sets[0]["per_call"] == pytest.approx(1.0), memset["kernels"]
        assert v["memset_mm"]["status"] == "ok"
        assert any("memset" in k["name"].lower() for k in v["memset_mm"]["kernels"])
    fill = v["fill"]
    assert fill["status"] == "ok" and fill["kernels"]
    assert not any("memset" in k["name"].lower() for k in fill["kernels"])
    assert fill["kernels"][0]["per_call"] == pytest.approx(1.0)
    for name in ("fill_mm", "mm_only"):
        assert v[name]["status"] == "ok" and v[name]["achieved"]["tflops"] > 0
        assert any("gemm" in k["name"].lower() or "xmma" in k["name"].lower() for k in v[name]["kernels"])
    if _twin.find_nvcc() is not None:
        for n, _ in _memset_twin.TWIN_VARIANTS:
            twin = v[f"twin_{n}"]
            assert twin["status"] == "ok", twin["reason"]
            assert twin["timing"]["method"] == "external" and len(twin["timing"]["samples"]) == 50
            assert twin["timing"]["group"] == "twin" and twin["timing"]["rounds"]
            assert twin["timing"]["calls_per_sample"] == 100
        assert doc["extra"]["twin"]["status"] == "ok" and doc["extra"]["twin"]["binary_cached"] is False
    verdict = doc["verdict"]
    assert verdict["status"] in ("reproduced", "not_reproduced")
    assert verdict["ci_low"] <= verdict["value"] <= verdict["ci_high"]
    comparisons = [r["comparison"] for r in verdict["breakdown"]]
    if _has_bindings():
        assert gm._TORCH_PLAIN in comparisons and gm._TORCH_MM in comparisons
    if _twin.find_nvcc() is not None:
        assert gm._TWIN_PLAIN in comparisons and "pure CUDA twin" in verdict["finding"]
        assert verdict["headline"] == gm._TWIN_PLAIN and verdict["paired"] is True
