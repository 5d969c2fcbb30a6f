"""What the standalone scripts and the seeds' programs printed beside a run (attached/), set in its report."""

from __future__ import annotations

import dataclasses
import json
import shutil
import tarfile
from pathlib import Path

import pytest
from helpers import ROOT
from typer.testing import CliRunner

from repro.cli.main import app
from repro.evidence import artifact, model, printed
from repro.evidence.model import Artifact
from repro.evidence.printed import HISTORY

# evidence18: the run, and what gpu-final.sh attached to it on the same H200.
RUN = next((ROOT / "artifacts" / "reference" / "h200" / "evidence18" / "all").iterdir())
ATTACHED = RUN / "attached"
IDS = ["5090-linear", "fused-adam-capturable", "graph-memset", "lora-batch-scaling", "solve-512-cliff"]


def _docs(run: Path = RUN) -> list[Artifact]:
    return [d for d in (model.of(artifact.load(p)) for p in artifact.expand([run])) if isinstance(d, Artifact)]


def test_the_seeds_programs_ratios_are_read_from_seeds_raw_log() -> None:
    said = printed.seeds((ATTACHED / "seeds_raw.log").read_text(), IDS)
    # seeds_raw.log: Linear 2.554 / Manu 2.678; bs 1 0.025, bs 2 0.050 s/it; default 511 6.58, 512 6.10 ms,
    # cusolver 511 12.16, 512 54.41 ms; memset=True 35.16, False 36.08 ms; seed.cu 868 us then 590 us.
    assert said == (
        " The seeds' programs again, by seeds_raw.py (`attached/seeds_raw.log`; one process each, no CI; a "
        "program that times one call moves between processes more than one that times many): "
        "5090-linear 0.95x; fused-adam-capturable (torch's fused AdamW, TE absent) kernels 1.00x, step 1.00x; "
        "lora-batch-scaling no seed program (seeds_raw.py's stand-in for the speed baseline, a LoRA block stack of "
        "its own with this repro's widths but not its model (affine LayerNorms, one fused qkv adapter, another "
        "loss), timed in a plain loop, batch 1 then 2, no batch 4 between, gave 1.00x per sample, ±3.0% "
        "from its 3-decimal times, one process, no CI: not a measure of the claim); solve-512-cliff default 0.93x, "
        "cusolver 4.47x; "
        "graph-memset torch 0.97x, seed.cu 1.47x (nvcc -arch=native: the GPU it ran on)."
    )
    only = printed.seeds((ATTACHED / "seeds_raw.log").read_text(), ["solve-512-cliff"])
    assert "solve-512-cliff default 0.93x" in only and "5090-linear" not in only


@pytest.mark.parametrize(
    "log",
    [
        "",
        "--- 000 5090-linear: 1 s (rc 1)\nTraceback: CUDA error\n",  # a program that failed prints no numbers
        "--- 003 solve-512-cliff: 1 s (rc 0)\ndefault 511 0 ms\ndefault 512 1 ms\n",  # no ratio over zero
        "--- 004-cuda graph-memset (nvcc -arch=native): 1 s (rc 0)\nExecution time: 868us\n",  # one form only
    ],
)
def test_a_seed_program_without_its_numbers_is_not_said(log: str) -> None:
    assert printed.seeds(log, IDS) == ""


def test_nothing_a_program_printed_reaches_the_report_but_numbers() -> None:
    log = (
        "--- 000 5090-linear <img src=x onerror=alert(1)> [x](javascript:y): 1 s (rc 0)\n"
        "Linear Time:2.0 <b>bold</b>\nManu Time:1.0 | --- |\n"
    )
    assert printed.seeds(log, IDS).split("): ", 1)[1] == "5090-linear 2.00x."


def test_each_script_ratio_is_set_against_its_headline() -> None:
    outputs = {p.name: p.read_text() for p in ATTACHED.glob("script-*.out")}
    said = printed.scripts(_docs(), outputs)
    lora = next(d for d in _docs() if d.repro.id == "lora-batch-scaling").verdict.value
    assert lora is not None and f"{0.9859 / lora - 1:+.1%}" == "+5.2%"  # the script's bs2/bs1 line: 0.9859
    assert said == (
        " Standalone scripts run here (`attached/script-<id>.out`; one process each: within 10% of the headline is "
        "the check, not its CI): 5090-linear 0.922 (-0.8%; t(nn.Linear) 1.23 ms, t(x @ w.t() + b) 1.34 ms; its "
        "script times linear_fp32 and manual_fp32 alone, the run's rounds held other groups' arms too, not tested as "
        "the cause), fused-adam-capturable torch_fused 0.997 of whole steps (no headline to check it against), "
        "graph-memset 1.46 (-2.2%; t(memset node) 899 ns, t(fill kernel &lt;&lt;&lt;1,32&gt;&gt;&gt;) 617 ns), "
        "lora-batch-scaling 0.986 (+5.2%; t(step, batch 2) 49.2 ms, t(step, batch 1) 25 ms; its script times bs2 and "
        "bs1 alone, the run's rounds held bs4 too, not tested as the cause), solve-512-cliff 9.55 (+0.5%; "
        "t(solve_ex n=512) 108 ms, t(solve_ex n=511) 11.3 ms; its script times n512 and n511 alone, the run's rounds "
        "held n510, n513 (arms "
        "cusolver_b128\\_\\*) and other groups' arms too, not tested as the cause); 4 outside the run's CI "
        "(5090-linear, graph-memset, lora-batch-scaling, solve-512-cliff): "
        "no spread here bounds a script (one process each, clocks not recorded)."
    )
    assert printed.scripts(_docs(), {}) == ""
    assert printed.scripts(_docs(), {"script-5090-linear.out": "no ratio printed\n"}) == ""


def test_read_stops_at_its_limit(tmp_path: Path) -> None:
    big = tmp_path / "seeds_raw.log"
    big.write_bytes(b"\xff" + b"x" * (printed.READ_LIMIT + 10))
    got = printed.read(big)
    assert len(got) == printed.READ_LIMIT and got[0] == "\ufffd"


def _bundled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attach: dict[str, str]) -> Path:
    """A copy of RUN with ``attach`` (name -> text) in its attached/, bundled to tmp_path/b.tar.gz, which renders
    its report.md again; the copy's folder."""
    from repro.env import harness

    run = tmp_path / RUN.name
    shutil.copytree(RUN, run)
    made = "cd" * 32  # as the harness that made the run: only then is its report rendered again
    for path in run.glob("*.json"):
        doc = json.loads(path.read_text())
        doc["fingerprint"]["harness"]["source_sha256"] = made
        path.write_text(json.dumps(doc))
    for path in (run / "attached").glob("*.json"):
        path.unlink()  # re-runs of another digest would be said as such; not what these tests are about
    for name, body in attach.items():
        (run / "attached" / name).write_text(body)
    monkeypatch.setattr(harness, "source_sha256", lambda root=None: made)
    res = CliRunner().invoke(app, ["bundle", str(run), "--out", str(tmp_path / "b.tar.gz")])
    assert res.exit_code == 0, res.output
    return run


def test_the_bundled_report_sets_the_printed_numbers_and_the_history_beside_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _bundled(tmp_path, monkeypatch, {HISTORY: "9d303d4 2026-12-02 Report: ...\n"})
    after = (run / "report.md").read_text()
    # seeds_raw.py's numbers restate the sections' own runs of the seeds' programs: a lean report leaves them to the
    # bundle's full report, and says so; the arms a script's run held beside its own too.
    with tarfile.open(tmp_path / "b.tar.gz") as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/report-full.md"))
        whole = tar.extractfile(member).read().decode()  # type: ignore[union-attr]
    assert "Standalone scripts run here (`attached/script-<id>.out`;" in after and "(+5.2%)" in after
    assert "; its script times bs2 and bs1 alone, the run's rounds held bs4 too, not tested as the cause)" in whole
    assert "graph-memset torch 0.97x, seed.cu 1.47x (nvcc -arch=native: the GPU it ran on)" in whole
    assert "graph-memset torch 0.97x" in after or "seeds_raw.py's and each" in after
    # The attach line's details are report-full's; a pasted report short of room names the parts only.
    assert f"`{HISTORY}`: the harness's commits with their digests" in whole
    assert "the harness wheel (built from the source that ran, its digest; not the Makefile or tools/)" in whole
    assert "the harness wheel" in after
    assert "Report cut" not in after and all(f"## `{i}`" in after for i in IDS)


def test_the_makers_note_is_one_inert_line_of_theirs_under_not_tested(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert printed.wanted(printed.NOTE) and printed.note({}) is None and printed.note({printed.NOTE: " \n "}) is None
    said = "TE is absent:\nno network <img src=x onerror=alert(1)> [x](javascript:y) | --- |\n\nsecond paragraph"
    assert printed.note({printed.NOTE: said}) == (
        "TE is absent: no network <img src=x onerror=alert(1)> [x](javascript:y) | --- |"
    )
    assert printed.note({printed.NOTE: "first\r\n \t\r\nsecond"}) == "first"
    long = printed.note({printed.NOTE: "word " * 200})
    assert long is not None and len(long) == printed.NOTE_LIMIT and long.endswith("word…")
    run = _bundled(tmp_path, monkeypatch, {printed.NOTE: said})
    after = (run / "report.md").read_text()
    section = after.split("## Not tested here", 1)[1].split("\n## ", 1)[0]
    line = next(ln for ln in section.splitlines() if "attached/NOTE.txt" in ln)
    assert line.startswith("- Its maker's note (`attached/NOTE.txt`): TE is absent: no network ")
    assert "<img" not in line and "[x](javascript" not in line and " | --- |" not in line and "&lt;img" in line
    assert "second paragraph" not in after


def test_a_suspect_note_with_the_clocks_medians_says_them_once() -> None:
    from repro.evidence.report import repro_section

    lora = next(d for d in _docs() if d.repro.id == "lora-batch-scaling")
    held = "; sw_power_cap held the SM clock down during bs1 and bs2 and bs4's rounds (median MHz: bs1 1635, bs2 1650"
    assert held in lora.verdict.finding and lora.validity.flag == "suspect"
    status = repro_section(lora)[0].split("\n")[1]
    assert (
        "(suspect: power cap, median SM clock bs1 1635, bs2 1650, bs4 1650 MHz of 1980 MHz max, power up to" in status
    )
    assert "held the SM clock" not in status and status.endswith(
        "5.1 GiB peak at batch 2, not FLUX; the profiled "
        "kernels alone gave 0.97x per sample (23.7 -&gt; 45.8 ms a step). Split by the arms' order, its rounds' "
        "medians lie past this CI, as the suspect note at this line's start gives them."  # the run recorded the split
    )
    assert "the arms' order split the rounds" in status


def test_the_rerun_elsewhere_line_counts_the_band_runs_of_this_runs_repro_source() -> None:
    from repro.evidence import band
    from repro.evidence.lines import band_line

    solve = next(d for d in _docs() if d.repro.id == "solve-512-cliff")
    bands = band.load()
    b = band.lookup(solve, bands)
    assert b is not None and solve.repro.source_sha256
    same, known = b.same_source(solve.repro.source_sha256)
    said = band_line(solve, bands) or ""
    words = f"; {same} of {known} runs with this run's repro module file, its helpers and the sampler not compared)"
    assert words in said and same < known
    # Every run of this source: nothing to say.
    mine = str(solve.repro.source_sha256)[:12]
    points = tuple(dataclasses.replace(p, run_sources=tuple(mine for _ in p.run_sources)) for p in b.points)
    assert "repro module file" not in (band_line(solve, [dataclasses.replace(b, points=points)]) or "")
