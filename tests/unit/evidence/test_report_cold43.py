"""evidence43's cold read: a run beyond the band on a side its farthest GPUs do not set is outside the band, not only
without them; CIs said to overlap or miss print at the digits that show it, beside this run's; the scripts' note
says what a script's run is (one process), not one schedule for all."""

from __future__ import annotations

import shutil
from pathlib import Path

from evidence_run import pasted, section
from helpers import ROOT

RUN = ROOT / "artifacts" / "reference" / "h200" / "evidence43" / "all" / "20261203T215407Z-bda9ea"


def test_the_later_runs_and_the_band_cell_say_what_the_data_says() -> None:
    said = pasted(RUN)
    assert "Report cut" not in said and len(said) <= 20_000
    memset = next(ln for ln in said.splitlines() if ln.startswith("| graph-memset |"))
    # Above every GPU (with its farthest GPUs too), its CI reaching back into the band.
    assert "this run +2%, outside the band, consistent with it widened by one GPU's re-run spread)" in memset
    # The quick run's CI misses ours by 0.0014: at three decimals, beside this run's.
    assert (
        "Later runs' headline CIs that miss this run's: 5090-linear 0.917x (95% CI 0.915-0.918) against 0.920-0.929 "
        "by `repro all --quick`"
    ) in said
    assert "no spread here bounds a script (one process each, clocks not recorded)" in said


def test_the_left_out_note_names_only_what_the_run_has(tmp_path: Path) -> None:
    # The same run with no seeds_raw.py, scripts or later runs attached: the lean re-run paragraph leaves out
    # its command, Python line and packages, and nothing it never had.
    run = tmp_path / RUN.name
    shutil.copytree(RUN, run)
    for p in (run / "attached").iterdir():
        if p.name.startswith(("script-", "seeds_raw.", "quick-", "rerun-graph-memset")):
            p.unlink()
    said = pasted(run)
    assert (
        "the re-run paragraph's command, Python, packages, and the re-runs' band words, other comparisons and torch "
        "install;" in said
    )
    assert "script's numbers" not in said and "later runs" not in said
    assert (
        "command, Python, packages, the re-runs' band words, other comparisons, episodes and torch install, later "
        "runs, and seeds_raw.py's and each script's numbers" in pasted(RUN)
    )


def test_a_suspect_runs_outlying_episode_is_in_the_comment() -> None:
    lora = section(pasted(RUN), "lora-batch-scaling")
    assert (
        "- Episodes: 2 of 9 outside the CI; farthest: episode 1, 0.99x (+6.7%): bs2 +4.6% (50.3 ms against 48.1 ms "
        "in the others), bs1 -1.9%."
    ) in lora
