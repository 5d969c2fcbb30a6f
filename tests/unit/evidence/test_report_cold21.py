"""The H200 run read cold in artifacts/reference/h200/evidence21 (cold-reader-questions.md): the report names the
commit its attached harness history gives the run's digest, says what "this run's repro module" covers, which
GPUs set a band, how the timed medians and the kernel times differ, each script's result, the image's variables
once, and what the MAGMA build does not record; and it still fits one screen with every section and the
Not-tested lines."""

from __future__ import annotations

import dataclasses
import tarfile
from pathlib import Path
from typing import Any

import pytest
from evidence_run import attached_of
from helpers import ROOT

from repro.evidence import artifact, band, bundle, printed
from repro.evidence.machines import image_vars
from repro.evidence.model import Artifact, of
from repro.evidence.report import PASTE_LIMIT, PASTE_LINES, report
from repro.evidence.standalone import Harness

RUN = next((ROOT / "artifacts" / "reference" / "h200" / "evidence21" / "all").iterdir())
DIGEST = "78836fa168a35a2a21a7580d5a6dc80fdf70a4c6c3072be48bc104fc9feb084a"


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return [artifact.load(p) for p in artifact.expand([RUN])]


@pytest.fixture(scope="module")
def pasted(docs: list[dict[str, Any]]) -> str:
    return report(docs, **attached_of(RUN))


def test_the_pasted_report_keeps_every_section_and_the_not_tested_lines(pasted: str) -> None:
    assert len(pasted) <= PASTE_LIMIT and pasted.count("\n") + 1 <= PASTE_LINES
    assert "Report cut" not in pasted
    assert "- Not recordable from inside this run:" in pasted and "- One software stack only" in pasted


def test_a_lean_report_leaves_the_later_runs_to_the_full_one(docs: list[dict[str, Any]], pasted: str) -> None:
    whole = report(docs, limit=10**9, max_lines=None, **attached_of(RUN))
    assert "Later runs attached: `repro all --target-ci 0.02 --budget 2` on this GPU" in whole
    assert "Later runs attached" not in pasted and "later runs, and seeds_raw.py's and each script's numbers" in pasted


def test_the_header_names_the_commit_the_attached_history_gives_the_digest(pasted: str) -> None:
    assert (
        "source 78836fa168a3, no commit (not run from a git checkout), "
        "the package of commit cbba033 (attached/harness-history.txt: the newest it lists with this digest), "
        "2026-12-02"
    ) in pasted


def test_a_history_names_a_commit_only_for_one_listed_digest() -> None:
    history = {
        printed.HISTORY: "cbba033 2026-12-02 78836fa168a3 One relative half-width\nd12673a 2026-12-02 d06fb3b6839b x\n"
    }
    assert printed.commit_of(DIGEST, history) == "cbba033"
    assert printed.commit_of("d06fb3b6839b" + "0" * 52, history) == "d12673a"
    assert printed.commit_of("ab" * 32, history) is None  # not listed
    assert printed.commit_of(DIGEST, {}) is None  # no history attached
    # tools/harness-history.py now writes each commit's time in UTC to the minute in place of the date.
    timed = {printed.HISTORY: "cbba033 2026-12-02T14:05Z 78836fa168a3 One relative half-width\n"}
    assert printed.commit_of(DIGEST, timed) == "cbba033"
    # A subject that contains a digest-like word is not a line of its own.
    odd = {printed.HISTORY: "1234567 2026-12-01 aaaaaaaaaaaa says 0000000 2026-12-01 78836fa168a3 x\n"}
    assert printed.commit_of(DIGEST, odd) is None
    # Two commits with one digest (the newer left the package as it was): the newest, listed first, is named.
    twice = {printed.HISTORY: "7f9a388 2026-12-02 78836fa168a3 b\ncbba033 2026-12-02 78836fa168a3 a\n"}
    assert printed.commit_of(DIGEST, twice) == "7f9a388"
    said = Harness("0.1.0", DIGEST, None, "not_a_checkout").words("cbba033")
    assert said.endswith(
        "the package of commit cbba033 (attached/harness-history.txt: the newest it lists with this digest)"
    )
    assert "harness-history" not in Harness("0.1.0", DIGEST, "cbba033" * 5 + "abcde", "clean").words("cbba033")


def test_a_band_set_by_a_few_gpus_says_how_wide_the_rest_is(pasted: str) -> None:
    memset = next(b for b in band.load() if b.repro == "graph-memset" and len(b.points) > 20)
    few = memset.outliers
    assert few is not None and few[0] <= len(memset.points) // 10 and few[1] < memset.half_width / 2
    assert f"without the farthest {few[0]}: " in pasted
    solve = next(b for b in band.load() if b.repro == "solve-512-cliff")
    assert solve.outliers is None  # no GPU twice as far as all the rest
    # A synthetic band: one GPU far out among ten close ones.
    points = [dataclasses.replace(memset.points[0], value=1.0 + i * 0.001) for i in range(10)]
    far = dataclasses.replace(memset.points[0], value=1.3)
    made = dataclasses.replace(memset, points=(*points, far))
    got = made.outliers
    assert got is not None and got[0] == 1 and got[1] < 0.01
    assert dataclasses.replace(memset, points=tuple(points)).outliers is None
    # Two far GPUs among twenty: each more than twice as far as any other, though not twice as far as each other.
    twenty = [dataclasses.replace(memset.points[0], value=1.0 + (i % 3) * 0.003) for i in range(18)]
    both = (*twenty, dataclasses.replace(far, value=1.09), dataclasses.replace(far, value=1.05))
    two = dataclasses.replace(memset, points=both).outliers
    assert two is not None and two[0] == 2 and two[1] < 0.01


def test_the_kernel_lines_set_the_timed_median_beside_the_kernel_time(docs: list[dict[str, Any]], pasted: str) -> None:
    whole = report(docs, limit=10**9, max_lines=None, **attached_of(RUN))  # the pasted form may leave them out
    assert "(kernel time per call 1.3 ms -> 1.2 ms; timed 1.39 ms -> 1.29 ms" in whole
    assert "Timed: median per call, CUDA events over samples of about 1 ms of calls" in pasted


def test_every_script_that_printed_a_ratio_is_listed(docs: list[dict[str, Any]], pasted: str) -> None:
    whole = report(docs, limit=10**9, max_lines=None, **attached_of(RUN))
    assert "fused-adam-capturable torch_fused 0.998 of whole steps (no headline to check it against)" in whole
    assert "5090-linear 0.92 (-0.9%" in whole and "), fused-adam-capturable" in whole
    # A lean report counts the scripts within the check, names the farthest, and lists the unchecked one.
    assert (
        "Standalone scripts run here (`attached/script-<id>.out`; one process each): 4 of 4 within 10% of their "
        "headlines, the check, not a CI (2 outside the run's CI (5090-linear, lora-batch-scaling): no spread here "
        "bounds a script "
        "(one process each, clocks not recorded); farthest: lora-batch-scaling 0.972 (+4.3%)); "
        "fused-adam-capturable torch_fused 0.998 of whole steps (no headline)."
    ) in pasted
    assert "its script times bs2 and bs1 alone, the run's rounds held bs4 too, not tested as the cause)" in whole


def test_the_image_variables_are_one_list_everywhere(docs: list[dict[str, Any]]) -> None:
    whole = report(docs, limit=10**9, max_lines=None, **attached_of(RUN))
    runs = [a for a in map(of, docs) if isinstance(a, Artifact)]
    listed = image_vars(runs[0].machine.container_env)
    assert listed.startswith("CUDA_VERSION=13.0.2, NV_CUDA_CUDART_VERSION=13.0.96-1, NV_LIBCUBLAS_VERSION=")
    assert whole.count(f"its variables: {listed}") == 2  # the Not-tested line and the environment block


def test_a_magma_build_says_its_version_is_not_recorded(pasted: str) -> None:
    assert "MAGMA's version (torch says only that it was built with MAGMA)" in pasted


def test_band_txt_says_which_band_the_report_compares_with(docs: list[dict[str, Any]], tmp_path: Path) -> None:
    keys = {k for k in (band.key_of(d, joining=False) for d in docs) if k is not None}
    plan = bundle._Plan()
    sources = {str(d["repro"]["id"]): str(d["repro"].get("source_sha256") or "") for d in docs}
    bundle._add_band("x", ["graph-memset"], plan, set(), sources, keys)
    txt = next(body for name, body in plan.members if name.endswith("band.txt")).decode()
    assert "graph-memset (memset/fill (pure CUDA twin); this run's band):" in txt
    assert "graph-memset (memset/fill (pure CUDA twin); not this run's band (another GPU, params or headline" in txt
    assert "the sha256 of the repro's own module, not of its helper modules, CUDA source or the sampler" in txt


def test_a_graph_memset_bundle_carries_the_contention_experiment_its_not_tested_line_cites(tmp_path: Path) -> None:
    # evidence22's and evidence23's readers asked for the data behind "another process's replayed CUDA graph":
    # the committed side experiment's table and finding, word for word, travel in the bundle.
    committed = (ROOT / "artifacts" / "reference" / "h200" / "twin-context" / "README.md").read_text()
    said = bundle.twin_context()
    table = committed[committed.index("| call | condition") : committed.index("**Finding.**")].strip()
    finding = committed[committed.index("**Finding.**") : committed.index("**What changed in the harness.**")].strip()
    assert table in said and finding in said and "GPU-7cdca575-6033-dcf6-4cd5-517a78d486c0" in committed
    assert "| call1 | parent_ctx | 0 | 0.9118 | 0.7009 | 1.3009 |" in said
    run = tmp_path / RUN.name
    run.mkdir()
    for p in RUN.glob("*.json"):
        (run / p.name).write_bytes(p.read_bytes())
    with tarfile.open(bundle.build(run, tmp_path / "b.tar.gz")) as tar:
        member = tar.extractfile(f"{RUN.name}/context/graph-memset.md")
        assert member is not None and member.read().decode() == said


def test_a_scripts_printed_label_reaches_the_report_as_inert_text() -> None:
    docs = [a for a in map(of, [artifact.load(p) for p in artifact.expand([RUN])]) if isinstance(a, Artifact)]
    adam = [d for d in docs if d.repro.id == "fused-adam-capturable"]  # no headline value: the label is said
    evil = "[<img src=x onerror=alert(1)> **x** [link](javascript:x)] ratio = 1.5\n"
    said = printed.scripts(adam, {"script-fused-adam-capturable.out": evil})
    assert "<img" not in said and "&lt;img" in said and "\\[link\\](javascript" in said  # escaped: no link, no tag
    assert "1.500 (no headline to check it against)" in said
    for garbled in ("[h] ratio = abc\n", "[h] t = \n"):  # a broken output is left out, never a crash
        assert printed.scripts(adam, {"script-fused-adam-capturable.out": garbled}) == ""


def test_the_scope_says_the_seed_documents_were_not_available(pasted: str) -> None:
    scope = pasted.split("## Not tested here", 1)[1].split("\n\n**Re-run**", 1)[0]
    assert "- Not available to this run: the seed documents' text (seeds/ keeps each claim and program" in scope
