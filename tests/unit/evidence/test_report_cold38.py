"""evidence38's cold read: each band side shown, a run outside the band said so, the order split beside the CI it
splits, the scripts' schedule, what moves graph-memset first among its untested items, and the attached README."""

from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path

from evidence_run import typed

from repro.evidence import band
from repro.evidence.clocks import order_split
from repro.evidence.model import Artifact
from repro.evidence.printed import scripts
from repro.evidence.report_parts import NOT_COVERED_KEEP, _band_cell, stack_note
from repro.evidence.seedlines import seed_torch_words
from repro.repros.graph_memset import GraphMemset

ROOT = Path(__file__).resolve().parents[3]
RUN = next((ROOT / "artifacts" / "reference" / "h200" / "evidence38" / "all").iterdir())


def _doc(rid: str) -> Artifact:
    return typed(RUN, rid)


def test_the_cell_shows_both_sides_and_a_run_beyond_one_is_outside() -> None:
    solve = _doc("solve-512-cliff")
    b = band.lookup(solve, band.load())
    assert b is not None
    # This run's GPU as if it were in no band run: the cell is judged against the others only.
    others = dataclasses.replace(b, points=tuple(p for p in b.points if p.uuid != solve.machine.gpu_uuid))
    cell = _band_cell(solve, [others])
    below, above = others.sides()
    assert cell.startswith(f"-{below * 100:.2g}%/+{above * 100:.2g}% of {others.center:.3g}x (")
    off = solve.verdict.value / others.center - 1 if solve.verdict.value else 0.0
    assert off < 0 and -off > below  # evidence38's 9.324 lies under every other GPU
    assert f"this run -{abs(off) * 100:.2g}%, outside the band" in cell
    # The cell calls it consistent exactly where the section's Re-run-elsewhere line does (evidence45's cold read).
    from repro.evidence.lines import band_line

    said = band_line(solve, [others]) or ""
    assert (", consistent with it widened by " in cell) == (": consistent" in said), (cell, said)
    # A lopsided CI whose far end just reaches the band, its value 3% beyond: the section says it differs, and so
    # does the cell (the CI's end alone would have read as reaching back in).
    c = others.center
    value = c * (1 - below - 0.03)
    lopsided = dataclasses.replace(solve.verdict, value=value, ci_low=value * 0.999, ci_high=c * (1 - below + 0.001))
    far = dataclasses.replace(solve, verdict=lopsided)
    assert ": differs beyond the band" in (band_line(far, [others]) or "")
    assert "outside the band)" in _band_cell(far, [others])
    # A run inside the band says nothing of where it lies.
    inside = dataclasses.replace(solve, verdict=dataclasses.replace(solve.verdict, value=others.center))
    assert "this run" not in _band_cell(inside, [others])


def test_a_quoted_ci_carries_the_order_split_that_widens_it() -> None:
    memset = _doc("graph-memset")
    split = order_split(memset, "(memset+mm)/(fill+mm) (torch graph)")
    assert split.startswith("the arms' order split the rounds: 1.029 with memset_mm first, 1.04 with fill_mm first")
    assert order_split(memset, "memset/fill (pure CUDA twin)") == ""  # no warning on the headline
    line = seed_torch_words(memset.extra.get("seed_torch_program"), memset)
    assert (
        "(memset+mm)/(fill+mm) (torch graph) 1.04x (95% CI 1.03-1.04); the arms' order split the rounds: 1.029" in line
    )


def test_scripts_outside_the_ci_say_why_no_spread_bounds_them() -> None:
    docs = [_doc(p.stem) for p in sorted(RUN.glob("*.json"))]
    outputs = {p.name: p.read_text() for p in (RUN / "attached").glob("script-*.out")}
    said = scripts(docs, outputs, lean=True)
    assert (
        "3 outside the run's CI (5090-linear, lora-batch-scaling, solve-512-cliff): no spread here bounds a script "
        "(one process each, clocks "
        "not recorded); farthest: lora-batch-scaling 0.981 (+4.7%))"
    ) in said
    assert (
        "lora-batch-scaling 0.981 (+4.7%; t(step, batch 2) 48.3 ms, t(step, batch 1) 24.7 ms; its script times bs2 "
        "and bs1 alone, the run's rounds held bs4 too, not tested as the cause)"
    ) in scripts(docs, outputs)


def test_graph_memset_lists_what_moves_its_ratios_first_and_keeps_them_when_cut() -> None:
    first = GraphMemset.untested[0]
    assert first.startswith("why the torch graph's row read 1.29-1.35x on one-GPU H200 hosts before f90ac86/7ff9414")
    assert GraphMemset.untested[1].startswith("another process's live CUDA graph")
    assert GraphMemset.untested[2].startswith("a 2-GPU host")
    line = "- graph-memset, not covered: " + "; ".join(GraphMemset.untested) + "."
    cut, _ = stack_note(line, 2)
    assert len(cut) <= NOT_COVERED_KEEP + len("; and more.")
    for kept in ("0.89-1.08x since", "0.69-0.70 then 0.86-1.01 us", "twin 1.30-1.33x", "twin 2.30-2.34x"):
        assert kept in cut, kept


def test_the_attached_readme_names_only_the_runs_it_holds(tmp_path: Path) -> None:
    tool = (ROOT / "tools" / "gpu-final.sh").read_text()
    body = re.search(r"^write_readme\(\) \{\n.*?^\}\n", tool, re.M | re.S)
    assert body is not None
    at = tmp_path / "attached"
    at.mkdir()
    for name in ("rerun-check.txt", "quick.txt"):
        (at / name).write_text("x\n")
    script = f"run={tmp_path}\ngpu_line=GPU\nRERUN_IDS=x\n{body.group(0)}write_readme\n"
    subprocess.run(["bash", "-c", script], check=True, capture_output=True)
    readme = (at / "README.txt").read_text()
    assert "the quick run's (quick-*)" in readme and "quick.txt, quick-report.md" in readme
    assert "loose" not in readme
