"""What the report says of re-runs made from a run's own bundle (attached artifacts), from a committed H200 run
whose bundled harness re-ran 5090-linear (artifacts/reference/h200/evidence12)."""

from __future__ import annotations

import copy
from typing import Any

from helpers import ROOT

from repro.evidence import artifact, band, model, reruns
from repro.evidence.model import Artifact

RUN = next((ROOT / "artifacts" / "reference" / "h200" / "evidence12" / "all").iterdir())


def _docs() -> tuple[list[Artifact], dict[str, Any]]:
    docs = [model.of(artifact.load(p)) for p in artifact.expand([RUN])]
    again = artifact.load(RUN / "attached" / "rerun-5090-linear.json")
    return [d for d in docs if isinstance(d, Artifact)], again


def test_a_rerun_from_the_bundle_is_named_with_its_result_and_what_it_ran_on() -> None:
    docs, again = _docs()
    said = reruns.words(docs, {"rerun-5090-linear.json": model.of(again)}, band.load())
    assert said.startswith(" Run here from this bundle, in a fresh venv (installed from gpu_repro-0.1.0+src.")
    assert "torch was the machine's (`/opt/torch/.venv/lib/python3.12/site-packages`), not installed" in said
    assert "the same harness digest as this run" in said
    assert "5090-linear 0.920x (95% CI 0.915-0.925), consistent (`attached/rerun-5090-linear.json`)" in said
    # The sections whose lines were not run from the bundle are named.
    assert said.endswith(
        "Not run from the bundle: the lines of fused-adam-capturable, graph-memset, "
        "lora-batch-scaling, solve-512-cliff."
    )


def test_only_reruns_of_this_runs_repros_by_another_run_count_and_a_foreign_digest_is_said() -> None:
    docs, again = _docs()
    assert reruns.words(docs, {}, band.load()) == ""
    first = artifact.load(RUN / "5090-linear.json")
    assert reruns.words(docs, {"x.json": model.of(first)}, band.load()) == ""  # the run itself is no re-run
    other = copy.deepcopy(again)
    other["repro"]["id"] = "not-in-this-run"
    assert reruns.words(docs, {"x.json": model.of(other)}, band.load()) == ""
    foreign = copy.deepcopy(again)
    foreign["fingerprint"]["harness"]["source_sha256"] = "0" * 64
    assert "not all with this run's harness digest" in reruns.words(docs, {"x.json": model.of(foreign)}, [])
