"""evidence37's cold read: the band's one-sided spread, an episode far from the headline, the seed line's sources."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from evidence_run import typed

from repro.evidence import band, scope
from repro.evidence.model import Artifact
from repro.evidence.report_parts import spread
from repro.repros.linear_5090 import THRESHOLD_WHY, Linear5090

ROOT = Path(__file__).resolve().parents[3]
RUN = next((ROOT / "artifacts" / "reference" / "h200" / "evidence37" / "all").iterdir())


def _doc(rid: str) -> Artifact:
    return typed(RUN, rid)


def test_a_one_sided_band_says_each_side() -> None:
    assert spread(0.17, 0.016) == "-17%/+1.6%"
    assert spread(0.02, 0.015) == "-2%/+1.5%"  # each side, however near (evidence38's cold read)
    assert spread(0.0202, 0.0198) == "±2%"  # one number only where both sides read the same
    assert spread(0.0, 0.01) == "-0%/+1%"
    memset = next(b for b in band.load() if b.repro == "graph-memset" and b.gpu == "NVIDIA H200" and len(b.points) > 20)
    below, above = memset.sides()
    assert max(below, above) == memset.half_width and below > 2 * above  # the slow-fill GPUs lie below
    few = memset.outliers
    assert few is not None and max(memset.sides(few[0])) == few[1]  # the half-width without the farthest few
    # Without any GPU dropped, a band of two points has a side each.
    two = dataclasses.replace(memset, points=memset.points[:2])
    assert sum(x > 0 for x in two.sides()) >= 1


def test_an_episode_far_from_the_headline_is_named_with_the_arm_that_moved() -> None:
    said = scope.episode_line(_doc("graph-memset"), band.load())
    assert said == (
        "Episodes: 2 of 10 outside the CI; farthest: episode 5, 1.31x (-11.5%): twin_memset -11.5% (811 ns against "
        "917 ns in the others), twin_fill +0.0%."
    )
    # Within a re-run's same-GPU spread: nothing.
    assert scope.episode_line(_doc("solve-512-cliff"), band.load()) == ""
    # A suspect run too (evidence43's cold read): its status names the clocks, not the episode that moved.
    assert scope.episode_line(_doc("lora-batch-scaling"), band.load()) == (
        "Episodes: 4 of 12 outside the CI; farthest: episode 9, 0.85x (-8.6%): bs1 +11.3% (29.3 ms against "
        "26.3 ms in the others), bs2 +1.2%."
    )


def test_the_seed_line_gives_the_synchronized_timing_to_the_later_comment() -> None:
    assert "2.3x (a later comment, synchronized: 3.1x; seeds/README.txt)" in Linear5090.seed_claim
    assert "3.1x synchronized, by a later comment" in THRESHOLD_WHY
    assert "the post's own program" in Linear5090.seed_experiment


def test_review_a_long_line_is_cut_between_items_never_inside_an_entity() -> None:
    from repro.evidence.report_parts import NOT_COVERED_KEEP, _first_items

    lead = "- r, not covered: "
    filler = "x" * (NOT_COVERED_KEEP - len(lead) - 12)
    line = f"{lead}{filler}; A &amp; B also, more words past the limit; z"
    cut = _first_items(line)
    assert cut == f"{lead}{filler}; and more." and "&amp; and" not in cut
    # An item ending exactly at the limit keeps its place.
    exact = f"{lead}{'y' * (NOT_COVERED_KEEP - len(lead))}; next item"
    assert _first_items(exact) == exact[:NOT_COVERED_KEEP] + "; and more."


def test_review_offline_means_nothing_came_from_a_url() -> None:
    from repro.evidence.reruns import offline

    links = "Looking in links: /w\nProcessing /w/x.whl\n"
    assert offline(links)
    assert not offline(links + "  Downloading https://files.pythonhosted.org/x.whl (1 MB)\n")
    assert not offline("Looking in indexes: https://pypi.org/simple\n" + links)
