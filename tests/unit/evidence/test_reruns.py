"""What the report says of re-runs made from a run's own bundle (attached artifacts), from a committed H200 run
whose bundled harness re-ran 5090-linear (artifacts/reference/h200/evidence12)."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from helpers import ROOT

from repro.evidence import artifact, band, model, reruns
from repro.evidence.markdown import fmt_pct
from repro.evidence.model import Artifact

RUN = next((ROOT / "artifacts" / "reference" / "h200" / "evidence12" / "all").iterdir())


def _docs() -> tuple[list[Artifact], dict[str, Any]]:
    docs = [model.of(artifact.load(p)) for p in artifact.expand([RUN])]
    again = artifact.load(RUN / "attached" / "rerun-5090-linear.json")
    return [d for d in docs if isinstance(d, Artifact)], again


def test_a_rerun_from_the_bundle_is_named_with_its_result_and_what_it_ran_on() -> None:
    docs, again = _docs()
    said = reruns.words(docs, {"rerun-5090-linear.json": model.of(again)}, band.load())
    assert said.startswith(
        " Re-run here from this run's first bundle, in a fresh venv (the bundled wheel; torch: the machine's"
    )
    assert "its installs' output" not in said
    logged = reruns.words(docs, {"rerun-5090-linear.json": model.of(again)}, band.load(), "rerun.log")
    assert "this run's harness digest; its installs' output: `attached/rerun.log`): 5090" in logged
    assert (
        "torch: the machine's (`/opt/torch/.venv/lib/python3.12/site-packages`), so the torch line was not run" in said
    )
    assert "this run's harness digest" in said
    assert (
        f"5090-linear 0.920x (95% CI 0.915-0.925): CI overlaps ours (0.918-0.923), {_within(docs[0])}; "
        "its other CI overlaps too (`attached/rerun-5090-linear.json`)"
    ) in said
    # On another GPU, the spread between GPUs is the measure.
    elsewhere = model.of(_on_gpu(again, "GPU-other"))
    there = reruns.words(docs, {"rerun-5090-linear.json": elsewhere}, band.load())
    assert "CI overlaps ours (0.918-0.923), consistent with the band; " in there
    # ... and the opening names that GPU instead of saying "here".
    assert there.startswith(" Re-run on another GPU (NVIDIA H200 other) from this run's first bundle, in a fresh venv")
    assert "): 5090-linear 0.920x" in there  # every re-run there: no entry repeats it
    # Where either fingerprint names no GPU, neither "here" nor "another GPU" is said: the entry says it is unknown.
    unknown = copy.deepcopy(again)
    unknown["fingerprint"]["gpu"]["uuid"] = None
    said_unknown = reruns.words(docs, {"rerun-5090-linear.json": model.of(unknown)}, band.load())
    assert said_unknown.startswith(" Re-run from this run's first bundle, in a fresh venv")
    assert "5090-linear (GPU not recorded) 0.920x" in said_unknown and "another GPU" not in said_unknown
    # The sections whose lines were not run from the bundle are named.
    assert said.endswith("Not re-run: fused-adam-capturable, graph-memset, lora-batch-scaling, solve-512-cliff.")


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
    assert "not all with this run's harness digest" in reruns.words(docs, {"rerun-x.json": model.of(foreign)}, [])


def test_a_later_run_attached_beside_the_reruns_is_set_against_this_runs_ci() -> None:
    # evidence16: `repro all --target-ci 0.02 --budget 2` ran after the run on the same H200 (loose-*.json);
    # its graph-memset headline, 1.37x (1.35-1.47), misses this run's 1.49x (1.48-1.50).
    run = next((ROOT / "artifacts" / "reference" / "h200" / "evidence16" / "all").iterdir())
    docs = [d for d in (model.of(artifact.load(p)) for p in artifact.expand([run])) if isinstance(d, Artifact)]
    attached = {p.name: model.of(artifact.load(p)) for p in sorted((run / "attached").glob("*-*.json"))}  # not all.json
    said = reruns.words(docs, attached, band.load())
    assert (
        f"graph-memset 1.51x (95% CI 1.48-1.52): CI overlaps ours (1.48-1.50), {_within(_memset(docs))}; "
        "all 4 other CIs overlap too (`attached/rerun-graph-memset.json`)"
    ) in said
    # What the knobs change, and both runs' half-widths: a wider CI overlaps more easily.
    assert said.endswith(
        " Later runs attached: `repro all --target-ci 0.02 --budget 2` on this GPU (a looser CI target, less "
        "sampling): 3 headline CI(s) overlap this run's (half-widths 0.4-6.6%, this run's 0.3-1.4%); not "
        "graph-memset's 1.37x (95% CI 1.35-1.47): -8.0% from this run's, its headline sampled as this run's (50 "
        "rounds per arm): not from less sampling; beyond twice the same-GPU ±2.3% of the re-run column "
        "(`attached/loose-graph-memset.json`); read otherwise there: lora-batch-scaling's CI 0.897-1.021 holds 1.0, "
        "this run's does not (`attached/loose-lora-batch-scaling.json`); valid there, suspect here: "
        "lora-batch-scaling 0.95x (95% CI 0.90-1.02)."
    )
    loose = [
        (v.ci_high - v.ci_low) / 2 / v.value
        for k, d in attached.items()
        if k.startswith("loose-") and isinstance(d, Artifact)
        if (v := d.verdict).value and v.ci_low is not None and v.ci_high is not None
    ]
    assert (f"{min(loose):.1%}", f"{max(loose):.1%}") == ("0.4%", "6.6%")  # the words' span, from the artifacts
    # Without the re-runs, the later runs are still said; on another GPU, they say so.
    later = {k: v for k, v in attached.items() if k.startswith("loose-")}
    assert reruns.words(docs, later, band.load()).startswith(" Later runs attached: ")
    moved = {k: model.of(_on_gpu(artifact.load(run / "attached" / k), "GPU-other")) for k in later}
    assert "on another GPU or none recorded (a looser CI target, less sampling):" in reruns.words(
        docs, moved, band.load()
    )


def _within(doc: Artifact) -> str:
    """The words for a re-run on this run's GPU inside twice the band's same-GPU spread."""
    b = band.lookup(doc, band.load())
    assert b is not None and b.same_gpu is not None
    return f"within twice one GPU's re-run spread (±{fmt_pct(b.same_gpu[0] * 100)})"


def _memset(docs: list[Artifact]) -> Artifact:
    return next(d for d in docs if d.repro.id == "graph-memset")


def _on_gpu(doc: dict[str, Any], uuid: str) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    out["fingerprint"]["gpu"]["uuid"] = uuid
    return out


def test_a_reruns_other_comparisons_outside_this_runs_cis_are_named() -> None:
    # evidence21: the re-run from the bundle on the same H200 agreed on graph-memset's headline, but its torch-graph
    # ratio and its re-implementation of the seed's program landed outside this run's CIs.
    run = next((ROOT / "artifacts" / "reference" / "h200" / "evidence21" / "all").iterdir())
    docs = [d for d in (model.of(artifact.load(p)) for p in artifact.expand([run])) if isinstance(d, Artifact)]
    attached = {p.name: model.of(artifact.load(p)) for p in sorted((run / "attached").glob("rerun-*.json"))}
    said = reruns.words(docs, attached, band.load())
    assert (
        f"graph-memset 1.48x (95% CI 1.47-1.50): CI overlaps ours (1.36-1.50), {_within(_memset(docs))}; "
        "2 of 4 other CIs overlap "
        "this run's (not: memset/fill (torch graph) 1.01x (1.01-1.03) against 1.06x (1.05-1.08); memset/kernel (the "
        "seed's program) 1.43x (1.42-1.45) against 1.49x (1.48-1.49)) (`attached/rerun-graph-memset.json`)"
    ) in said


def test_a_rerun_whose_ci_misses_this_runs_says_so_beside_the_band() -> None:
    docs, again = _docs()
    moved = model.of(again)
    assert isinstance(moved, Artifact)
    v = moved.verdict
    off = dataclasses.replace(v, value=0.9300, ci_low=0.9290, ci_high=0.9310)  # above this run's 0.915-0.925
    said = reruns.words(docs, {"rerun-5090-linear.json": dataclasses.replace(moved, verdict=off)}, band.load())
    assert "5090-linear 0.930x (95% CI 0.929-0.931): CI misses ours (0.918-0.923), " in said and "re-run spread" in said
    # Within or beyond twice one GPU's spread, whatever this run's own CI: the number said is the one judged by.
    first = docs[0]
    b = band.lookup(first, band.load())
    assert first.verdict.value is not None and b is not None and b.same_gpu is not None
    spread = b.same_gpu[0]
    for times, word in ((1.5, "within"), (2.5, "beyond")):
        value = first.verdict.value * (1 + times * spread)
        wide = dataclasses.replace(v, value=value, ci_low=value * 0.97, ci_high=value * 1.03)
        said = reruns.words(docs, {"rerun-5090-linear.json": dataclasses.replace(moved, verdict=wide)}, band.load())
        assert f"), {word} twice one GPU's re-run spread (±{fmt_pct(spread * 100)})" in said
        assert "CI overlaps ours (" in said


def test_a_rerun_without_a_ci_says_so() -> None:
    docs, again = _docs()
    moved = model.of(again)
    assert isinstance(moved, Artifact)
    bare = dataclasses.replace(moved.verdict, ci_low=None, ci_high=None)
    said = reruns.words(docs, {"rerun-5090-linear.json": dataclasses.replace(moved, verdict=bare)}, band.load())
    assert ": has no CI, " in said and "re-run spread" in said and "CI misses" not in said


def test_cis_that_do_not_overlap_are_printed_so_they_do_not_seem_to() -> None:
    # evidence25's graph-memset re-run: 1.1227 (1.11609-1.12486) against this run's 1.1150 (1.11360-1.11588).
    places = reruns.apart_places((1.12269, 1.11609, 1.12486), (1.11503, 1.11360, 1.11588))
    assert places == 4
    assert f"{1.11588:.{places}f}" < f"{1.11609:.{places}f}"
    assert reruns.apart_places((2.0, 1.9, 2.1), (1.0, 0.9, 1.1)) == 2  # far apart: the usual places


def test_one_rerun_on_another_gpu_is_named_in_its_own_entry_not_for_all() -> None:
    # evidence53: all five sections re-run from the bundle on the run's own H200; one moved to another GPU here.
    run = next((ROOT / "artifacts" / "reference" / "h200" / "evidence53" / "all").iterdir())
    docs = [d for d in (model.of(artifact.load(p)) for p in artifact.expand([run])) if isinstance(d, Artifact)]
    attached: dict[str, Any] = {p.name: artifact.load(p) for p in sorted((run / "attached").glob("rerun-*.json"))}
    attached["rerun-5090-linear.json"] = _on_gpu(attached["rerun-5090-linear.json"], "GPU-deadbeef-0000")
    said = reruns.words(docs, {k: model.of(v) for k, v in attached.items()}, band.load())
    assert said.startswith(" Re-run from this run's first bundle, in a fresh venv")
    assert "5090-linear (on NVIDIA H200 deadbeef) 0.92x" in said
    assert "graph-memset (on this GPU) 1.48x" in said
    # The lean form says whose machine's packages the venv saw only where every re-run shares it.
    lean = reruns.words(docs, {k: model.of(v) for k, v in attached.items()}, band.load(), later=False)
    assert "this machine's packages" not in lean and " Re-run here" not in lean
