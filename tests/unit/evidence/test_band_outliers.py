"""Which arm of a headline moved on a band's farthest GPUs, from the shipped band runs, and what the report and the
later-run words say about a headline that lies outside this run's CI."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

from repro.evidence import artifact, band, model, reruns
from repro.evidence.model import Artifact
from repro.evidence.report import report
from repro.run import scripts

ROOT = Path(__file__).resolve().parents[3]
E27 = ROOT / "artifacts" / "reference" / "h200" / "evidence27" / "all"


def _memset_band() -> band.Band:
    return max((b for b in band.load() if b.repro == "graph-memset"), key=lambda b: len(b.points))


def test_the_farthest_gpus_of_a_band_are_named_with_the_arm_that_moved() -> None:
    said = band.outlier_arms(_memset_band())
    assert said.startswith(
        "on its farthest 3 GPUs, the arm that moved most: twin_fill 741 ns (b43f15a9), 716 ns (d4a5a7bb)"
    )
    assert "twin_memset 857 ns (e7c4e3d1)" in said and "medians of twin_memset 918 ns, twin_fill 618 ns" in said
    assert said.endswith("; NVML's polls saw no other process on those GPUs during these arms")


def test_a_band_without_outliers_or_without_its_runs_says_nothing(tmp_path: Path) -> None:
    b = _memset_band()
    assert band.outlier_arms(b, tmp_path / "absent.json") == ""
    even = dataclasses.replace(b, points=tuple(dataclasses.replace(p, value=b.center) for p in b.points))
    assert even.outliers is None and band.outlier_arms(even) == ""
    # Runs whose headline row names no arms: nothing to say about them.
    runs = json.loads(band.RUNS_FILE.read_text())
    for r in runs["runs"]:
        r["verdict"]["breakdown"] = []
    (tmp_path / "runs.json").write_text(json.dumps(runs))
    assert band.outlier_arms(b, tmp_path / "runs.json") == ""


def test_the_report_names_the_moved_arm_under_the_summary() -> None:
    run = next(E27.iterdir())
    docs = [artifact.load(p) for p in artifact.expand([run])]
    text = report(docs, declared=scripts.declared(docs))
    line = next(ln for ln in text.splitlines() if ln.startswith("_graph-memset's band: "))
    assert "twin_fill 741 ns (b43f15a9)" in line and line.endswith("why is not known (`band-runs.json`)._")
    assert "5090-linear's band" not in text  # no outliers there


def test_a_later_headline_outside_this_runs_ci_says_whether_it_sampled_less() -> None:
    run = next(E27.iterdir())
    docs = [d for d in (model.of(artifact.load(p)) for p in artifact.expand([run])) if isinstance(d, Artifact)]
    loose = model.of(artifact.load(run / "attached" / "loose-graph-memset.json"))
    said = reruns.others(docs, {"loose-graph-memset.json": loose}, band.load())
    assert "its headline sampled as this run's (50 rounds per arm): not from less sampling" in said
    assert "-7.1% from this run's" in said and "beyond the same-GPU ±2.3%" in said
    # Fewer rounds of the headline: the shift is not put down to anything.
    raw = copy.deepcopy(artifact.load(run / "attached" / "loose-graph-memset.json"))
    for v in raw["variants"]:
        if v["name"] in ("twin_memset", "twin_fill") and v.get("timing"):
            v["timing"]["rounds"] = v["timing"]["rounds"][:20]
    fewer = reruns.others(docs, {"loose-graph-memset.json": model.of(raw)}, band.load())
    assert "-7.1% from this run's" in fewer and "not from less sampling" not in fewer
