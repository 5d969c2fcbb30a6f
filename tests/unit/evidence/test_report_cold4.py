"""The newest H200 run read cold (artifacts/reference/h200/evidence3, cold-reader-questions.md): the
pasted report fits one screen with every repro's details, says what each row tested, how each repro
was measured and in what order, which band it cites, what the ceilings and the cuDNN line are, and
its install lines work from the folder they name."""

from __future__ import annotations

import copy
import json
import re
import shlex
import tarfile
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT

from repro.core.context import SamplingConfig
from repro.evidence import artifact, band, bundle
from repro.evidence.lines import install_block
from repro.evidence.model import run_of
from repro.evidence.report import PASTE_LIMIT, PASTE_LINES, report
from repro.evidence.report_parts import claim_cell, cudnn_note, method_line, run_order
from repro.run import scripts
from repro.run.execute import RunRequest, execute

RUN = ROOT / "artifacts" / "reference" / "h200" / "evidence3" / "all" / "20261201T162744Z-bc9a25"
IDS = ("5090-linear", "fused-adam-capturable", "graph-memset", "lora-batch-scaling", "solve-512-cliff")


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return [artifact.load(p) for p in artifact.expand([RUN])]


@pytest.fixture(scope="module")
def rendered(docs: list[dict[str, Any]]) -> str:
    return report(docs, declared=scripts.declared(docs))


@pytest.fixture(scope="module")
def roomy(docs: list[dict[str, Any]]) -> str:
    """The report with room for the environment block, which a pasted one may leave to the bundle."""
    return report(docs, declared=scripts.declared(docs), limit=60_000, max_lines=None)


def _section(text: str, rid: str) -> str:
    return text.split(f"## `{rid}`", 1)[1].split("\n## ", 1)[0]


def test_the_five_repro_run_fits_one_screen_and_names_what_it_leaves_out(
    rendered: str, docs: list[dict[str, Any]]
) -> None:
    assert len(rendered) <= PASTE_LIMIT and rendered.count("\n") + 1 <= PASTE_LINES
    assert "Report cut" not in rendered
    note = next((ln for ln in rendered.splitlines() if ln.startswith("_Left out here")), "")
    whole = report(docs, declared=scripts.declared(docs), limit=10**9, max_lines=None)
    for rid in IDS:
        assert f"## `{rid}`:" in rendered  # every repro keeps its section
        if f"<details><summary>{rid}: tables, warnings, time</summary>" not in rendered:
            # a left-out block is named (or every repro's is), and where it is
            assert (rid in note or "every repro's details" in note) and ("report-full.md" in note or "--full" in note)
        assert "| comparison |" in _section(whole, rid)  # the whole report keeps each comparisons table


def test_the_summary_says_whether_each_headline_tested_the_seeds_claim(docs: list[dict[str, Any]]) -> None:
    cells = {d["repro"]["id"]: claim_cell(run_of(d)) for d in docs}
    assert cells["5090-linear"] == "not tested: not on this architecture"
    assert cells["fused-adam-capturable"] == "not tested: transformer_engine.pytorch is not importable"
    assert cells["graph-memset"] == "tested (headline: pure CUDA twin; the seed's program, re-implemented: 1.51x)"
    assert cells["solve-512-cliff"] == "tested"
    # With the seed's own program run as posted, the cell gives both of the seed's numbers.
    memset = next(d for d in docs if d["repro"]["id"] == "graph-memset")
    posted = {**memset, "extra": {**memset["extra"], "seed_as_posted_ratio": 1.587}}
    assert claim_cell(run_of(posted)) == (
        "tested (headline: pure CUDA twin; the seed's program: unchanged 1.59x, no CI; re-implemented 1.51x)"
    )


def test_the_method_line_counts_from_the_artifact(docs: list[dict[str, Any]]) -> None:
    for d in docs:
        a = run_of(d)
        (num,) = [v for v in a.variants if v.name == a.verdict.variants[0]]
        assert num.timing is not None and num.timing.rounds and num.timing.episode_rounds
        rounds, per = len(num.timing.rounds), num.timing.episode_rounds
        line = str(method_line(a, kernels_said=True))
        assert line == f"Method: headline pair timed in {rounds} paired rounds in {rounds // per} episodes.", line
        assert "kernel tables from one profiled call per variant, after sampling" in str(method_line(a, False))


def test_the_run_order_and_its_gaps_come_from_the_end_times_and_durations(docs: list[dict[str, Any]]) -> None:
    said = str(run_order([run_of(d) for d in docs]))
    assert ", ".join(IDS) in said and "gaps 0-1 s" in said and "no cool-down" in said
    assert "Every repro: kernel tables from one profiled call per variant, after sampling." in said
    late = [json.loads(json.dumps(d)) for d in docs]
    late[-1]["run"]["created_utc"] = "2026-12-01T16:40:15Z"  # ten minutes after it ended
    assert "no cool-down" not in str(run_order([run_of(d) for d in late]))


def _rerun_sets(text: str, rid: str) -> dict[str, str]:
    line = next(ln for ln in _section(text, rid).splitlines() if ln.startswith(f"repro run {rid}"))
    args = shlex.split(line)[3:]
    sets = dict(a.split("=", 1) for a in args[1::2])
    assert args[0::2] == ["--set"] * len(sets)
    return sets


def _as_set(v: Any) -> str:
    return ",".join(map(str, v)) if isinstance(v, list) else str(v).lower() if isinstance(v, bool) else str(v)


def test_each_rerun_line_carries_exactly_the_params_this_run_set(rendered: str, docs: list[dict[str, Any]]) -> None:
    for d in docs:  # `repro all` with no --set: every param is the bundled harness's default
        assert d["run"]["rerun"] == f"repro run {d['repro']['id']}" and _rerun_sets(rendered, d["repro"]["id"]) == {}
    # A run that set params: exactly those, with the values of repro.params (not the recorded command's).
    doc = copy.deepcopy(next(d for d in docs if d["repro"]["id"] == "solve-512-cliff"))
    doc["run"]["rerun"] = "repro run solve-512-cliff --set batches=99 --set seed=7"
    assert _rerun_sets(report([doc]), "solve-512-cliff") == {
        k: _as_set(doc["repro"]["params"][k]) for k in ("batches", "seed")
    }
    # Without a recorded re-run command (or one that is not `repro run`), every param is given.
    for recorded in (None, "curl x | sh"):
        doc["run"]["rerun"] = recorded
        sets = _rerun_sets(report([doc]), "solve-512-cliff")
        assert sets == {k: _as_set(v) for k, v in doc["repro"]["params"].items()}


def test_the_band_cited_is_the_headlines_and_a_narrow_band_counts_as_the_runs_ci(
    roomy: str, docs: list[dict[str, Any]]
) -> None:
    for d in docs:  # the Re-run-elsewhere lines: in the report beside the bundle (a pasted one may leave them out)
        b = band.lookup(d)
        assert b is not None and b.headline == d["verdict"]["headline"]
        assert f"Re-run elsewhere ({b.headline}" in _section(roomy, d["repro"]["id"]).replace("\\_", "_")
    adam = json.loads(json.dumps(next(d for d in docs if d["repro"]["id"] == "fused-adam-capturable")))
    narrow = band.Band(
        "fused-adam-capturable",
        "NVIDIA H200",
        json.dumps(adam["repro"]["params"], sort_keys=True),
        (band.Point("u1", 1.00217, ("r1",)), band.Point("u2", 1.00241, ("r2",))),
        "torch_fused",
    )
    text = report([adam], bands=[narrow])
    # 1.002 against the band's 1.0023 is 0.23% below: beyond its range (±0.012%) widened by the CI's ±0.056% too,
    # so it still differs, by the rule said.
    assert (
        "outside the band's range (-0.012%/+0.012% of 1.002) widened by this run's CI (±0.056%): differs beyond the "
        "band"
    ) in text


def test_ceilings_say_what_they_are_and_whose_process_timed_them(roomy: str) -> None:
    rendered = roomy
    line = next(ln for ln in rendered.splitlines() if ln.startswith("- Measured ceilings"))
    assert "timed once in 5090-linear's process" in line and "not datasheet peaks" in line
    assert "fp32 50.84 TFLOP/s (8192^3 fp32 matmul, TF32 off)" in line
    assert "(93% of fp32)" not in rendered or "% of measured ceiling" in rendered


def test_the_cudnn_torch_loaded_is_told_from_the_systems(docs: list[dict[str, Any]], roomy: str) -> None:
    rendered = roomy
    out = docs[0]["fingerprint"]["collect_env"]["output"]
    loaded = docs[0]["fingerprint"]["software"]["libraries"]["cudnn"]
    note = str(cudnn_note(out, loaded))
    assert note.startswith("cuDNN: torch loaded 9.19.0 (…/nvidia/cudnn/lib/libcudnn.so.9)")
    assert "(9.14.0) is the system's copy" in note and note in rendered
    assert cudnn_note(out, {**loaded, "version": "91400"}) is None  # the same minor: nothing to tell apart


def test_a_tools_could_not_collect_is_no_package(docs: list[dict[str, Any]]) -> None:
    whole = report(docs, declared=scripts.declared(docs), limit=10**9, max_lines=None)  # the list may be left out
    assert "(and 13 nvidia-* wheels, 14 other packages: in the artifact)" in whole


def test_not_tested_names_the_driver_the_libraries_and_a_seed_without_a_gpu(rendered: str) -> None:
    scope = rendered.split("## Not tested here", 1)[1].split("**Re-run**", 1)[0]
    assert "driver 580.159.04, cuBLAS 13.1.0, cuSOLVER 12.0.4" in scope
    assert "other torch, CUDA, library and driver versions" in scope
    assert "graph-memset's seed names no GPU" in scope
    assert "ModuleNotFoundError" not in scope  # the exception restates the reason; the artifact keeps it


def test_the_host_line_says_what_the_run_saw_of_the_machine(roomy: str) -> None:
    rendered = roomy
    host = next(ln for ln in rendered.splitlines() if ln.startswith("- Host:"))
    assert "KVM guest (collect\\_env's hypervisor vendor)" in host or "KVM guest (collect_env's" in host
    assert "compute mode default" in host and "GPU virtualization: not recorded" in host
    assert "- Container: yes" in rendered and "image: not visible from inside the container" in rendered


def test_the_install_lines_work_from_the_folder_they_name(run_dir: Path, fast: SamplingConfig, tmp_path: Path) -> None:
    doc, _ = execute(RunRequest("5090-linear", smoke=True, sampling=fast), run_dir)
    (run_dir / "report.md").write_text(report([doc]))
    tar = bundle.build(run_dir, tmp_path / "b.tar.gz")
    where = tmp_path / "unpacked"
    with tarfile.open(tar) as tf:
        tf.extractall(where, filter="data")
        names = {Path(n).name for n in tf.getnames()}
    block = str(install_block([run_of(doc)]))
    folder = re.search(r"from the folder holding the unpacked `([^`]+)/`", block)
    assert folder is not None and (where / folder.group(1)).is_dir()
    pip = next(ln for ln in block.splitlines() if "/harness/" in ln)
    path = shlex.split(pip)[-1].removesuffix("[plots]")
    assert (where / path).is_file(), pip  # run from `where`, the folder that holds the unpacked run
    assert "band.txt" in names
    said = next(where.rglob("band.txt")).read_text().splitlines()
    # Where the band's runs are, and how one GPU's value comes from them.
    assert said[1].startswith("A GPU's value is the median of its runs' headline ratios (each run's beside its id)")
    assert "committed under artifacts/reference/ in the gpu-repro repository; band.json" in said[1]
    assert "band.json" in names  # the bands' data: each run's per-round ratios and its artifact's path
    assert "band-runs.json" in names  # and a compact copy of each of those runs
