"""Which arm of a headline moved on a band's farthest GPUs, from the shipped band runs, and what the report and the
later-run words say about a headline that lies outside this run's CI."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from pathlib import Path

from repro.evidence import artifact, band, band_runs, model, reruns
from repro.evidence.model import Artifact
from repro.evidence.report import report
from repro.run import scripts

ROOT = Path(__file__).resolve().parents[3]
E27 = ROOT / "artifacts" / "reference" / "h200" / "evidence27" / "all"


def _memset_band() -> band.Band:
    return max((b for b in band.load() if b.repro == "graph-memset"), key=lambda b: len(b.points))


def test_the_farthest_gpus_of_a_band_are_named_with_the_arm_that_moved() -> None:
    said = band_runs.outlier_arms(_memset_band())
    # The farthest GPUs as the committed runs have them (evidence45's GPU made them 5 from 3): the three slow-fill
    # GPUs first, each with its arm and value.
    assert re.match(
        r"on its farthest \d GPUs, the arm that moved most: twin_fill 741 ns \(b43f15a9\), 716 ns "
        r"\(d4a5a7bb\), 730 ns \(03c1ca1e\)",
        said,
    ), said
    # The other GPUs' medians move a little as runs join the band: a memset node near 0.92 us, a fill near 0.62.
    assert re.search(r"medians of twin_memset 9[12]\d ns, twin_fill 6[12]\d ns", said), said
    assert said.endswith("; NVML listed no other compute process before or after these arms")


def test_a_band_without_outliers_or_without_its_runs_says_nothing(tmp_path: Path) -> None:
    b = _memset_band()
    assert band_runs.outlier_arms(b, tmp_path / "absent.json") == ""
    even = dataclasses.replace(b, points=tuple(dataclasses.replace(p, value=b.center) for p in b.points))
    assert even.outliers is None and band_runs.outlier_arms(even) == ""
    # Runs whose headline row names no arms: nothing to say about them.
    runs = json.loads(band.RUNS_FILE.read_text())
    for r in runs["runs"]:
        r["verdict"]["breakdown"] = []
    (tmp_path / "runs.json").write_text(json.dumps(runs))
    assert band_runs.outlier_arms(b, tmp_path / "runs.json") == ""


def test_the_runs_file_is_parsed_once_and_again_when_it_changes(tmp_path: Path) -> None:
    b = _memset_band()
    runs = json.loads(band.RUNS_FILE.read_text())
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(runs))
    said = band_runs.outlier_arms(b, path)
    before = band_runs._parsed.cache_info()
    assert band_runs.outlier_arms(b, path) == said and said
    assert band_runs._parsed.cache_info().hits == before.hits + 1
    for r in runs["runs"]:
        r["verdict"]["breakdown"] = []
    path.write_text(json.dumps(runs))  # a smaller file: another size, whatever the clock's resolution
    assert band_runs.outlier_arms(b, path) == ""


def test_the_report_names_the_moved_arm_under_the_summary() -> None:
    run = next(E27.iterdir())
    docs = [artifact.load(p) for p in artifact.expand([run])]
    text = report(docs, declared=scripts.declared(docs))
    line = next(ln for ln in text.splitlines() if ln.startswith("_graph-memset's band: "))
    assert "twin_fill 741 ns (b43f15a9)" in line and "why is not known (`band-runs.json`)" in line
    assert "5090-linear's band" not in text  # no outliers there


def test_a_later_headline_outside_this_runs_ci_says_whether_it_sampled_less() -> None:
    run = next(E27.iterdir())
    docs = [d for d in (model.of(artifact.load(p)) for p in artifact.expand([run])) if isinstance(d, Artifact)]
    loose = model.of(artifact.load(run / "attached" / "loose-graph-memset.json"))
    said = reruns.others(docs, {"loose-graph-memset.json": loose}, band.load())
    assert "its headline sampled as this run's (50 rounds per arm): not from less sampling" in said
    assert "-7.1% from this run's" in said and "beyond twice the same-GPU ±2.3%" in said
    # Fewer rounds of the headline: the shift is not put down to anything.
    raw = copy.deepcopy(artifact.load(run / "attached" / "loose-graph-memset.json"))
    for v in raw["variants"]:
        if v["name"] in ("twin_memset", "twin_fill") and v.get("timing"):
            v["timing"]["rounds"] = v["timing"]["rounds"][:20]
    fewer = reruns.others(docs, {"loose-graph-memset.json": model.of(raw)}, band.load())
    assert "-7.1% from this run's" in fewer and "not from less sampling" not in fewer


def test_odd_band_runs_never_crash_and_never_overclaim(tmp_path: Path) -> None:
    b = _memset_band()
    runs = json.loads(band.RUNS_FILE.read_text())
    odd = copy.deepcopy(runs)
    for r in odd["runs"]:
        if r.get("repro") == "graph-memset":
            r["verdict"]["breakdown"] = ["not a row", *r["verdict"]["breakdown"]]
            r["variants"] = ["not a variant", *r["variants"]]
            for v in r["variants"][1:]:
                if v.get("name") == "twin_fill":
                    v["gpu_monitor"] = "not a monitor"
    (tmp_path / "odd.json").write_text(json.dumps(odd))
    assert "twin_fill 741 ns (b43f15a9)" in band_runs.outlier_arms(b, tmp_path / "odd.json")
    bad = copy.deepcopy(runs)
    for r in bad["runs"]:
        for v in r.get("variants") or []:
            if v.get("name") == "twin_fill":
                v["median_s"] = float("inf") if r["run_id"].endswith("e84ba9") else True
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    said = band_runs.outlier_arms(b, tmp_path / "bad.json")
    assert "inf" not in said and "500 ms" not in said  # no non-finite or boolean median is read as a time
    # A farthest GPU whose runs are not in the file: nothing is said rather than two GPUs of three.
    far = next(p for p in b.points if p.uuid.startswith("b43f15a9"))
    gone = {"kind": runs["kind"], "version": 1, "runs": [r for r in runs["runs"] if r["run_id"] not in far.runs]}
    (tmp_path / "gone.json").write_text(json.dumps(gone))
    assert band_runs.outlier_arms(b, tmp_path / "gone.json") == ""


def test_a_band_note_is_said_once_per_band() -> None:
    docs = [
        artifact.load(p)
        for e in ("evidence27", "evidence28")
        for p in artifact.expand([next((E27.parent.parent / e / "all").iterdir())])
    ]
    text = report(docs, declared=scripts.declared(docs), limit=10**9, max_lines=None)
    assert text.count("graph-memset's band: on its farthest") == 1


def test_a_band_cell_without_the_runs_source_digest_says_nothing_of_this_code() -> None:
    run = next(E27.iterdir())
    doc = artifact.load(run / "graph-memset.json")
    row = next(ln for ln in report([doc]).splitlines() if ln.startswith("| graph-memset |"))
    assert " runs with this repro module file" in row
    doc["repro"].pop("source_sha256", None)
    row = next(ln for ln in report([doc]).splitlines() if ln.startswith("| graph-memset |"))
    assert "with this repro module file" not in row


def test_a_later_run_on_another_gpu_or_of_another_headline_is_not_set_against_the_same_gpu_spread() -> None:
    run = next(E27.iterdir())
    docs = [d for d in (model.of(artifact.load(p)) for p in artifact.expand([run])) if isinstance(d, Artifact)]
    raw = artifact.load(run / "attached" / "loose-graph-memset.json")
    other = copy.deepcopy(raw)
    other["fingerprint"]["gpu"]["uuid"] = "GPU-00000000-0000-0000-0000-000000000000"
    said = reruns.others(docs, {"loose-graph-memset.json": model.of(other)}, band.load())
    assert "on another GPU" in said and "-7.1% from this run's" in said and "same-GPU" not in said
    renamed = copy.deepcopy(raw)
    renamed["verdict"]["headline"] = "memset/fill (torch graph)"
    said = reruns.others(docs, {"loose-graph-memset.json": model.of(renamed)}, band.load())
    assert ": another headline comparison (memset/fill (torch graph))" in said and "from this run's" not in said


def test_the_left_out_note_names_only_the_not_tested_lines_it_took_out() -> None:
    from repro.evidence.report_parts import stack_note

    both = "- a\n- Not recordable from inside this run: x\n- One software stack only (y): z"
    assert stack_note(both, 0) == (both, "")
    assert stack_note(both, 1) == (both, "")  # no not-covered line: no details to drop
    assert stack_note(both, 3) == (
        "- a\n- One software stack only (y): z",
        "the Not-tested line on what this run could not record",
    )
    # No Not-run or Not-available line: the not-recordable line goes at level 3, the one-stack line at level 6.
    assert stack_note(both, 5)[1] == "the Not-tested line on what this run could not record"
    assert stack_note(both, 6)[1] == (
        "the Not-tested lines on what this run could not record and on its one software stack"
    )
    # The Not-run and Not-available lines go after the not-recordable one and before the one-stack line.
    three = both.replace("\n- One", "\n- Not run: w\n- Not available to this run: v\n- One")
    assert stack_note(three, 4) == (
        "- a\n- Not available to this run: v\n- One software stack only (y): z",
        "the Not-tested lines on what this run could not record and on what it did not run",
    )
    assert stack_note(three, 6) == (
        "- a",
        "the Not-tested lines on what this run could not record, on what it did not run, on what was not available "
        "to it and on its one software stack",
    )
    bare_metal = "- a\n- One software stack only (y): z"  # nothing it could not record
    assert stack_note(bare_metal, 5) == (bare_metal, "")
    assert stack_note(bare_metal, 6) == ("- a", "the Not-tested line on its one software stack")
    # The repros' not-covered lines lose their parenthesized details first, before either environment line.
    listed = "- r, not covered: p (q (s)); t\n" + both
    assert stack_note(listed, 1) == (
        "- r, not covered: p; t\n- a\n- Not recordable from inside this run: x\n- One software stack only (y): z",
        "the parentheses of the Not-tested not-covered lines",
    )
    assert stack_note(listed, 3)[1] == (
        "the parentheses of the Not-tested not-covered lines; the Not-tested line on what this run could not record"
    )
    # The not-recordable line sheds its details with them, and the note says so while the line stays.
    told = "- Not recordable from inside this run: i (j); k (l)\n- One software stack only (y): z"
    assert stack_note(listed.replace("- Not recordable from inside this run: x\n", "") + "\n" + told, 1) == (
        "- r, not covered: p; t\n- a\n- One software stack only (y): z\n"
        "- Not recordable from inside this run: i; k\n- One software stack only (y): z",
        "the parentheses of the Not-tested not-covered and not-recordable lines",
    )
    assert stack_note(told, 3) == (
        "- One software stack only (y): z",
        "the Not-tested line on what this run could not record",
    )
    # Level 2: a long not-covered line keeps its items within NOT_COVERED_KEEP characters, most telling first.
    from repro.evidence.report_parts import NOT_COVERED_KEEP

    items = [f"item {i} " + "x" * 90 for i in range(12)]
    long = "- r, not covered: " + "; ".join(items) + "."
    cut, said = stack_note(long + "\n" + told, 2)
    first = cut.split("\n")[0]
    assert first.startswith("- r, not covered: item 0 ") and first.endswith("; and more.")
    kept = (NOT_COVERED_KEEP - len("- r, not covered: ")) // (len(items[0]) + 2)  # whole items within the limit
    assert len(first) <= NOT_COVERED_KEEP + len("; and more.")
    assert f"item {kept - 1} " in first and f"item {kept} " not in first
    assert said == ("the parentheses of the Not-tested not-recordable lines; the later not-covered items of r")
    assert "- Not recordable from inside this run: i; k" in cut  # the environment's lines outlast the items
    short = "- r, not covered: p; t"
    assert stack_note(short, 2) == (short, "")  # a line that fits keeps every item
