"""What h100/evidence56's cold read found, checked on that run's own artifacts: a script outside the run's CI said
"not tested as the cause" of the arms the run's rounds held beside its two, where the run's own quick run had timed
the two without them (and read otherwise than the script); the section's Read-otherwise line named one later run
twice; a band cell's "one run's spread" read as the same-GPU spread where it was this run's CI."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from evidence_run import attached_of, pasted, section
from helpers import ROOT

from repro.evidence import band, model, printed
from repro.evidence.lines import slack_words
from repro.evidence.model import Artifact

RUN = ROOT / "artifacts" / "reference" / "h100" / "evidence56" / "all" / "20261205T173047Z-976dd1"
QUICK = "`attached/quick-lora-batch-scaling.json`"


@pytest.fixture(scope="module")
def lean() -> str:
    return pasted(RUN)


@pytest.fixture(scope="module")
def full() -> str:
    return pasted(RUN, limit=10**9, max_lines=None)


def _docs() -> list[Artifact]:
    return list(_later().values())


def _run(rid: str) -> Artifact:
    from repro.evidence import artifact

    return model.run_of(artifact.load(RUN / f"{rid}.json"))


def _later() -> dict[str, Artifact]:
    got = {name: model.of(doc) for name, doc in attached_of(RUN)["reruns"].items()}
    return {name: a for name, a in got.items() if isinstance(a, Artifact)}


def test_a_script_outside_the_ci_gives_what_a_later_run_without_the_held_arms_read(lean: str, full: str) -> None:
    # The quick run timed bs1 and bs2 without bs4 (skipped there) on this GPU: 0.963 (0.953-0.969), the script 0.995.
    quick = _later()["quick-lora-batch-scaling.json"]
    assert {v.name for v in quick.variants if v.timing is not None and v.timing.rounds} == {"bs1", "bs2"}
    assert quick.machine.gpu_uuid == _run("lora-batch-scaling").machine.gpu_uuid
    said = (
        "lora-batch-scaling 0.995 (+4.1%; its script times bs2 and bs1 alone, the run's rounds held bs4 too; "
        f"without them, {QUICK} read 0.963x (95% CI 0.953-0.969), the script's 0.995 outside it too)"
    )
    assert said.replace("(+4.1%; ", "(+4.1%; t(step, batch 2) 53.1 ms, t(step, batch 1) 26.7 ms; ") in full
    # The lean report: the farthest script's ratio, what its run held beside its arms left to the full one.
    assert "farthest: lora-batch-scaling 0.995 (+4.1%));" in lean and "not tested as the cause" not in lean
    # solve's quick run timed its held arms too (n510, n513): nothing attached tested them, so it says so.
    assert "n513 (arms cusolver_b128\\_\\*) and other groups' arms too, not tested as the cause)" in full
    assert "not tested as the cause" not in full.split("lora-batch-scaling 0.995", 1)[1].split("solve-512-cliff", 1)[0]


def test_a_later_run_counts_only_on_this_gpu_at_these_params_timing_the_two_arms_alone() -> None:
    lora = _run("lora-batch-scaling")
    quick = _later()["quick-lora-batch-scaling.json"]
    lo, hi = quick.verdict.ci_low, quick.verdict.ci_high
    assert lo is not None and hi is not None
    # The script's ratio inside the later run's CI: "within it", at the decimals that show it inside.
    said = printed._alone(lora, {"quick.json": quick}, (lo + hi) / 2)
    assert said.endswith(
        "; without them, `attached/quick.json` read 0.963x (95% CI 0.953-0.969), the script's 0.961 within it"
    )
    # Just past the CI's top: printed apart from it, not as its end.
    said = printed._alone(lora, {"quick.json": quick}, hi + 0.0004)
    assert f"(95% CI 0.9526-{hi:.4f}), the script's {hi + 0.0004:.4f} outside it too" in said
    # A suspect later run says so; two that qualify are both given.
    flagged = dataclasses.replace(quick, validity=dataclasses.replace(quick.validity, flag="suspect"))
    said = printed._alone(lora, {"a.json": quick, "b.json": flagged}, 0.995)
    assert (
        "`attached/a.json` read 0.963x" in said
        and "; `attached/b.json` read 0.963x (95% CI 0.953-0.969) (suspect there)" in said
    )
    # Not a test of the held arm: another GPU, an error, the held arm timed too, another arm timed beside the two,
    # other params, a smoke run.
    other = dataclasses.replace(quick, machine=dataclasses.replace(quick.machine, gpu_uuid="another"))
    held = next(x for x in lora.variants if x.name == "bs4")
    with_bs4 = dataclasses.replace(quick, variants=(*[x for x in quick.variants if x.name != "bs4"], held))
    extra = dataclasses.replace(held, name="bs8")
    with_bs8 = dataclasses.replace(quick, variants=(*quick.variants, extra))
    narrow = dataclasses.replace(
        quick, repro=dataclasses.replace(quick.repro, params={**quick.repro.params, "hidden": 64})
    )
    smoke = dataclasses.replace(quick, run=dataclasses.replace(quick.run, smoke=True))
    error = model.ErrorInfo(kind="interrupted", message="interrupted by SIGTERM")
    for later in (other, with_bs4, with_bs8, narrow, smoke, dataclasses.replace(quick, error=error)):
        assert printed._alone(lora, {"quick.json": later}, 0.995).endswith(", not tested as the cause")


def test_the_read_otherwise_line_names_each_later_run_once(full: str) -> None:
    memset = section(full, "graph-memset").split("\n")[1]
    assert memset.endswith(
        " Read otherwise later: `repro run graph-memset` on this GPU: CI 1.170-1.215 holds the threshold 1.2, this "
        "run's does not (`attached/rerun-graph-memset.json`); `repro all --quick` on this GPU: undecided (here "
        "not_reproduced), CI 1.178-1.277 holds the threshold 1.2, this run's does not "
        "(`attached/quick-graph-memset.json`)."
    )
    assert memset.count("`repro all --quick` on this GPU") == 1


def test_the_band_cell_names_the_slack_that_made_it_consistent() -> None:
    from repro.evidence.lines import band_agreement

    # The band as this run's bundle read it: without this run's own runs and without any committed after them.
    own = [RUN.name, *(d.run.run_id for d in _docs())]
    after = [r for b in band.load() for p in b.points for r in p.runs if r > max(own)]
    bands = band.without(band.load(), [*own, *after])
    rows = {
        ln.split(" | ")[0][2:]: ln
        for ln in pasted(RUN, limit=10**9, max_lines=None, bands=bands).splitlines()
        if ln.startswith("| ") and " | " in ln
    }
    said = {}
    for rid in ("5090-linear", "graph-memset", "lora-batch-scaling", "solve-512-cliff"):
        doc = _run(rid)
        b = band.lookup(doc, bands)
        assert b is not None and b.same_gpu
        words = slack_words(doc, b)
        v = doc.verdict
        assert v.ci_high is not None and v.ci_low is not None and v.value is not None
        ci = (v.ci_high - v.ci_low) / 2 / v.value
        assert words == ("this run's CI" if ci >= b.same_gpu[0] else "one GPU's re-run spread")
        consistent = f", consistent with it widened by {words})" in rows[rid]
        assert consistent == (band_agreement(doc, b) == "consistent" and ", outside the band" in rows[rid])
        said[rid] = words if consistent else None
    # lora's is the case the reader misread: its run's own CI (±1.8%), not the same-GPU spread (±0.36%).
    assert said["lora-batch-scaling"] == "this run's CI" and said["graph-memset"] is None


def test_a_lora_model_not_at_fluxs_width_does_not_say_so() -> None:
    from repro.repros._lora_finding import FLUX_WIDTH, scope_clause

    res: Any = type("R", (), {"extra": {"parameters": {"total": 456_600_000, "trainable": 3_500_000}}, "variants": ()})
    assert scope_clause(4, FLUX_WIDTH, res) == (
        "the model is 4 transformer blocks at FLUX's width, 457M parameters in all (3.5M trainable), not FLUX"
    )
    assert scope_clause(1, 1024, res).startswith("the model is 1 transformer block of width 1024 (FLUX's is 3072), ")


def test_a_later_ci_on_the_other_side_of_both_references_gives_each_its_own_clause() -> None:
    from repro.evidence.reruns import _reads_otherwise

    first = _run("graph-memset")
    quick = _later()["quick-graph-memset.json"]
    later = dataclasses.replace(quick, verdict=dataclasses.replace(quick.verdict, threshold=1.05))
    # The later CI 1.02-1.06 excludes 1.0 and holds 1.05; this run's 0.99-1.04 holds 1.0 and excludes 1.05.
    said = _reads_otherwise(later, first, (1.04, 1.02, 1.06, 1.01, 0.99, 1.04), "q.json", "`repro all --quick`")
    assert said == [
        "`repro all --quick`: undecided (here not_reproduced), CI 1.020-1.060 excludes 1.0 (this run's holds it) "
        "and holds the threshold 1.05 (this run's does not) (`attached/q.json`)"
    ]
