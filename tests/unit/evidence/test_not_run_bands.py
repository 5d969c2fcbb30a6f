"""``agreement.not_run_bands``: what committed runs read for a comparison a run without a headline did not run,
on synthetic bands around evidence52's fused-adam artifact (no TE: no headline, torch_fused not run)."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

import pytest
from helpers import ROOT

from repro.evidence import artifact, model
from repro.evidence.agreement import not_run_bands
from repro.evidence.band import Band, Point
from repro.evidence.model import Artifact

RUN = next((ROOT / "artifacts" / "reference" / "h100" / "evidence52" / "all").iterdir())


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    return artifact.load(RUN / "fused-adam-capturable.json")


def _doc(raw: dict[str, Any], **change: Any) -> Artifact:
    d = copy.deepcopy(raw)
    d["repro"].update(change.pop("repro", {}))
    d["verdict"].update(change.pop("verdict", {}))
    d.update(change)
    got = model.of(d)
    assert isinstance(got, Artifact)
    return got


def _band(gpu: str, params: Mapping[str, Any] | str, uuids: str, values: tuple[float, ...], runs: int = 1) -> Band:
    """A torch_fused band of ``uuids`` (one letter per GPU), each GPU with ``runs`` runs."""
    points = tuple(
        Point(uuid=f"GPU-{u}", value=v, runs=tuple(f"{gpu}-{u}-{i}" for i in range(runs)))
        for u, v in zip(uuids, values, strict=True)
    )
    text = params if isinstance(params, str) else json.dumps(params, sort_keys=True)
    return Band("fused-adam-capturable", gpu, text, points, "torch_fused")


def test_a_band_at_this_runs_params_is_preferred_and_said_so(raw: dict[str, Any]) -> None:
    doc = _doc(raw)
    ours = doc.repro.params or {}
    older = {k: v for k, v in ours.items() if k != "controls_without_te"}
    bands = [_band("H200", ours, "ab", (1.001, 1.002)), _band("H200", older, "cde", (1.1, 1.2, 1.3))]
    assert not_run_bands(doc, bands) == ("torch_fused, kernel time: H200 1.001-1.002x (2 GPUs, these params)")
    assert not_run_bands(doc, bands, brief=False).endswith(
        "read 1.001-1.002x on 2 H200 GPUs in 2 committed runs, at this run's params"
    )


def test_params_lacked_in_some_runs_are_not_said_to_be_set_otherwise(raw: dict[str, Any]) -> None:
    doc = _doc(raw)
    ours = doc.repro.params or {}
    no_te = {k: v for k, v in ours.items() if k not in ("controls_without_te", "control_kernels")}
    older = {k: v for k, v in no_te.items() if k != "kernel_episode_rounds"}
    other_lr = {**no_te, "lr": 0.5}
    bands = [
        _band("H200", no_te, "ab", (1.0, 1.01), runs=2),
        _band("H200", older, "cd", (1.02, 1.02), runs=3),
        _band("H200", other_lr, "ef", (1.03, 1.0)),
    ]
    said = not_run_bands(doc, bands, brief=False)
    assert said.endswith(
        "read 1.000-1.030x on 6 H200 GPUs in 12 committed runs, whose params: lack control_kernels, "
        "controls_without_te (all 12 runs); lack kernel_episode_rounds (6 of 12 runs); set otherwise lr (2 of 12 runs)"
    ), said
    assert not_run_bands(doc, bands).endswith("(6 GPUs, other params)")


def test_the_model_is_this_runs_where_it_has_a_band_else_the_one_with_most_distinct_gpus(raw: dict[str, Any]) -> None:
    doc = _doc(raw)
    ours = doc.repro.params or {}
    # Model A: 3 GPUs in two bands that share them (6 points); model B: 5 distinct GPUs.
    a = [_band("A", ours, "abc", (1.0, 1.0, 1.0)), _band("A", {**ours, "lr": 1}, "abc", (1.1, 1.1, 1.1))]
    b = [_band("B", ours, "defgh", (1.2, 1.2, 1.2, 1.2, 1.2))]
    assert ": B 1.200-1.200x (5 GPUs" in not_run_bands(doc, a + b)
    own = str(doc.machine.gpu_name)
    mine = [_band(own, ours, "xy", (0.9, 0.95))]
    assert f": {own} 0.900-0.950x (2 GPUs" in not_run_bands(doc, a + b + mine)


def test_nothing_is_said_for_a_run_with_a_headline_a_smoke_run_or_bands_without_usable_params(
    raw: dict[str, Any],
) -> None:
    doc = _doc(raw)
    bands = [_band("H200", doc.repro.params or {}, "ab", (1.0, 1.01))]
    assert not_run_bands(doc, bands)
    assert not_run_bands(_doc(raw, verdict={"value": 1.01, "ci_low": 1.0, "ci_high": 1.02}), bands) == ""
    assert not_run_bands(_doc(raw, verdict={"status": "smoke"}), bands) == ""
    for odd in ("null", "[1, 2]", "3", "{not json"):
        assert not_run_bands(doc, [_band("H200", odd, "ab", (1.0, 1.01))]) == ""
    assert not_run_bands(doc, [_band("H200", doc.repro.params or {}, "a", (1.0,))]) == ""  # one GPU: no band


def test_a_run_that_recorded_no_params_says_so_and_odd_param_names_are_not_printed(raw: dict[str, Any]) -> None:
    doc = _doc(raw, repro={"params": {}})
    bands = [_band("H200", {"lr": 1, "x](y) <b>": 2}, "ab", (1.0, 1.01))]
    assert not_run_bands(doc, bands).endswith("(2 GPUs, params unknown here)")
    assert not_run_bands(doc, bands, brief=False).endswith("whose params: unknown: this run recorded none")
    named = _doc(raw)
    said = not_run_bands(named, bands, brief=False)
    assert "set otherwise lr" in said and "x](y)" not in said and "<b>" not in said
