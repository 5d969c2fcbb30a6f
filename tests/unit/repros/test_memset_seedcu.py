"""graph-memset's run of the seed's own seed.cu: where its source comes from, how its runs are read."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from helpers import ROOT

from repro.api import seed_programs
from repro.evidence import artifact, model
from repro.repros import _memset_seedcu as sc
from repro.repros._twin import TwinBuild, TwinBuildError


def _fake(tmp_path: Path, body: str) -> TwinBuild:
    exe = tmp_path / "seed"
    exe.write_text(f"#!/bin/sh\n{body}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return TwinBuild(exe, False, "sm_90", "nvcc: x\nBuild cuda_13.0", "0" * 64, "/usr/bin/nvcc")


def test_the_source_is_the_packaged_seed_cu_written_once_by_digest(tmp_path: Path) -> None:
    body = seed_programs()["graph-memset"]["seed.cu"]
    path = sc.seed_cu_source(tmp_path)
    assert path.read_text() == body and path.parent == tmp_path and path.suffix == ".cu"
    assert sc.seed_cu_source(tmp_path) == path  # the same text, the same file
    assert "zero_out<<<1, 1" in body and "cudaMemsetAsync(d_z, 0, sizeof *d_z" in body


def test_runs_alternate_memset_first_and_the_ratio_is_of_medians(tmp_path: Path) -> None:
    log = tmp_path / "order"
    build = _fake(
        tmp_path,
        f'echo "$1" >> {log}\nif [ "$1" = memset ]; then echo "Execution time: 900us"; '
        'else echo "Execution time: 600us"; fi',
    )
    got = sc.run_seed_cu(build, 0, runs=2)
    assert log.read_text().split() == ["memset", "kernel", "memset", "kernel"]
    assert got["us"] == {"memset": [900, 900], "kernel": [600, 600]} and got["ratio"] == pytest.approx(1.5)
    assert got["nvcc_flags"] == "-O3 -arch=sm_90" and got["nvcc"] == "Build cuda_13.0"
    said = sc.seed_cu_clause(got)
    assert said is not None and "memset 900, 900 us; kernel 600, 600 us" in said and "1.50x (no CI)" in said


@pytest.mark.parametrize("body", ['echo "Execution time: 0us"', "echo nothing", 'echo "Execution time: 5us"; exit 3'])
def test_a_run_that_prints_no_real_time_is_an_error(tmp_path: Path, body: str) -> None:
    with pytest.raises(RuntimeError, match="without a time"):
        sc.run_seed_cu(_fake(tmp_path, body), 0, runs=1)


def test_a_failed_build_is_recorded_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(archs: object) -> TwinBuild:
        raise TwinBuildError("nvcc not found on PATH")

    monkeypatch.setattr(sc, "build_seed_cu", broken)

    class Ctx:
        def log(self, msg: str) -> None:
            pass

    got = sc.seed_cu_run(Ctx(), 0)  # type: ignore[arg-type]
    assert got == {"error": "TwinBuildError: nvcc not found on PATH"}
    assert sc.seed_cu_clause(got) == "The seed's own seed.cu did not run here: TwinBuildError: nvcc not found on PATH"


def test_the_program_runs_on_the_repros_gpu() -> None:
    assert sc.visible_as_first(0, {"CUDA_VISIBLE_DEVICES": "3,5"})["CUDA_VISIBLE_DEVICES"] == "3,5"
    assert sc.visible_as_first(1, {"CUDA_VISIBLE_DEVICES": "3,5"})["CUDA_VISIBLE_DEVICES"] == "5"
    assert sc.visible_as_first(2, {})["CUDA_VISIBLE_DEVICES"] == "2"


def test_the_reimplementation_says_which_node_differs_from_the_twins() -> None:
    # evidence22: the re-implementation read 1.41x against the twin's 1.45x; per op its memset node took 873 ns
    # against the twin's 898 ns while the kernel nodes matched (619 against 618 ns): the memset node is the difference.
    run = next((ROOT / "artifacts" / "reference" / "h200" / "evidence22" / "all").iterdir())
    doc = model.of(artifact.load(run / "graph-memset.json"))
    assert isinstance(doc, model.Artifact)
    have = {v.name: v for v in doc.variants}
    said = sc.reimplementation_vs_twin(have, agree=False)
    assert said.startswith(
        "; it differs from the twin's headline, per op: memset node 873 ns against the twin's 898 ns (-2.8%); "
        "kernel node 619 ns against the twin's 618 ns (+0.2%); the larger difference is the memset node's. "
    )
    assert said.endswith("this run does not tell which of these moves the memset node.")
    assert (
        sc.reimplementation_vs_twin(have, agree=True)
        == "; its CI overlaps the twin's, so the two timing methods agree here."
    )
    gone = {k: v for k, v in have.items() if k != "twin_seed_fill"}
    assert "cannot say which" in sc.reimplementation_vs_twin(gone, agree=False)


def test_the_report_line_on_the_reimplementation_says_which_node_differs() -> None:
    # The run records the per-node words in extra (seed_vs_twin_nodes); the report's line on the re-implemented
    # seed's program, which a pasted report keeps, says them where the two differ beyond both CIs.
    from repro.evidence.seedlines import seed_vs_ours

    run = next((ROOT / "artifacts" / "reference" / "h200" / "evidence22" / "all").iterdir())
    raw = artifact.load(run / "graph-memset.json")
    doc = model.of(raw)
    assert isinstance(doc, model.Artifact)
    nodes = sc.node_differences({v.name: v for v in doc.variants})
    assert nodes is not None and nodes.startswith("per op: memset node 873 ns against the twin's 898 ns (-2.8%)")
    with_nodes = model.of({**raw, "extra": {**raw["extra"], "seed_vs_twin_nodes": nodes}})
    assert isinstance(with_nodes, model.Artifact)
    line = next(ln for ln in seed_vs_ours(with_nodes) if ln.startswith("The seed's program, re-implemented here"))
    assert "the two differ by -2.9%, beyond both CIs, per op: memset node 873 ns against the twin's 898 ns" in line
    old = next(ln for ln in seed_vs_ours(doc) if ln.startswith("The seed's program, re-implemented here"))
    assert "the seed's experiment vs ours above says how they differ" in old  # a run that recorded none
