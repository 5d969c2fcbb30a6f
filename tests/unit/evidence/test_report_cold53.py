"""What a sixth cold reader of evidence49's report, rendered again at c07cce9, asked: lora's standalone script, the
one outside the run's CI, times bs2 and bs1 alone while the run's rounds ran bs4 among them (the arm the order check
implicates); a re-run of a repro that timed nothing read "n/a"; the seed's torch program times each graph's first
replay after capture, which the words on why it differs left out; and the quick run's SIGTERM came from the
driver's own timeout, which only its maker can say (tools/gpu-final.sh now writes it into attached/NOTE.txt)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from evidence_run import pasted
from helpers import ROOT

from repro.repros._memset_seed import SEED_TORCH_WHY

RUN = next((ROOT / "artifacts" / "reference" / "h200" / "evidence49" / "all").iterdir())


def test_a_script_outside_the_runs_ci_says_which_arms_it_leaves_out() -> None:
    said = pasted(RUN, limit=10**9, max_lines=None)
    assert (
        "lora-batch-scaling 0.979 (+4.0%; t(step, batch 2) " in said
        and "its script times bs2 and bs1 alone, the run's rounds held bs4 "
        "too; without them, `attached/quick-lora-batch-scaling.json` read 0.948x (95% CI 0.937-0.965) (suspect "
        "there), the script's 0.979 outside it too)"
        in said
    )
    # The lean report gives the farthest script's ratio; the arms its run held beside it are in the full one.
    assert "farthest: lora-batch-scaling 0.979 (+4.0%));" in pasted(RUN)
    assert "5090-linear 0.915 (-0.8%; its script" not in pasted(RUN, limit=10**9, max_lines=None)  # inside: nothing


def test_a_re_run_that_timed_nothing_says_its_status(tmp_path: Path) -> None:
    run = tmp_path / RUN.name
    shutil.copytree(RUN, run)
    doc = json.loads((run / "fused-adam-capturable.json").read_text())
    doc["run"]["run_id"] = "20261204T210000Z-aaaaaa"
    (run / "attached" / "rerun-fused-adam-capturable.json").write_text(json.dumps(doc))
    said = pasted(run)
    assert "; fused-adam-capturable inconclusive, no headline (as here);" in said and " n/a" not in said


def test_the_seed_torch_programs_first_replay_is_among_the_differences() -> None:
    assert SEED_TORCH_WHY.startswith("the seed's: each graph's first replay after capture, one per form, host clock")
    assert "back-to-back warm replays" in SEED_TORCH_WHY


def test_the_gpu_tool_notes_a_step_its_own_timeout_stopped_and_re_runs_every_repro(tmp_path: Path) -> None:
    import re
    import subprocess

    tool = (ROOT / "tools" / "gpu-final.sh").read_text()
    assert "RERUN_IDS=${RERUN_IDS:-5090-linear fused-adam-capturable graph-memset lora-batch-scaling" in tool
    assert 'timed_out "$rc" "repro all --quick"' in tool and 'timed_out "$rc" "repro all --target-ci' in tool
    body = re.search(r"(?ms)^timed_out\(\) \{.*?^\}", tool)
    assert body is not None
    (tmp_path / "attached").mkdir()
    script = f'run={tmp_path}\n{body.group(0)}\ntimed_out 0 "repro all"\ntimed_out 124 "repro all --quick"\n'
    subprocess.run(["bash", "-c", script], check=True)
    assert (tmp_path / "attached" / "NOTE.txt").read_text() == (
        "'repro all --quick' was stopped by this script's own time limit (timeout, exit 124), not by a fault of the "
        "repro it was running.\n"
    )


def test_a_re_run_with_another_status_and_no_headline_or_an_error_says_so(tmp_path: Path) -> None:
    """A re-run that timed nothing where this run reproduced: its status beside this one's, in the paragraph and in
    the section's Read-otherwise line; a re-run that was stopped: as the later runs' sentence says it."""
    run = tmp_path / RUN.name
    shutil.copytree(RUN, run)
    doc = json.loads((run / "attached" / "rerun-graph-memset.json").read_text())
    doc["verdict"].update(status="inconclusive", value=None, ci_low=None, ci_high=None)
    doc["verdict"]["claim"]["tested"] = False
    (run / "attached" / "rerun-graph-memset.json").write_text(json.dumps(doc))
    said = pasted(run, limit=10**9, max_lines=None)
    assert "; graph-memset inconclusive, no headline (here reproduced)" in said
    assert "Read otherwise later: `repro run graph-memset` on this GPU: inconclusive (here reproduced)" in said
    doc["error"] = {"kind": "interrupted", "message": "interrupted by SIGTERM after 2.0 s", "signal": "SIGTERM"}
    (run / "attached" / "rerun-graph-memset.json").write_text(json.dumps(doc))
    said = pasted(run, limit=10**9, max_lines=None)
    assert "; graph-memset was stopped by a SIGTERM, the batch ending there (`interrupted by SIGTERM after 2.0 s`)" in (
        said
    )


def test_a_headline_order_split_on_one_side_of_the_threshold_says_so_and_the_lora_stand_in_is_named() -> None:
    said = pasted(RUN)
    assert (
        "9.505-9.631 over 8 orders of 3+ rounds (permutation p 0.004), past the CI's ±0.5%, all above the 1.5 threshold"
        in said
    )
    assert "| solve-512-cliff | **reproduced** (cusolver backend only) (suspect by this report's check) |" in said
    assert (
        "past the CI's ±0.5%, all above the 1.5 threshold):" in said
        and "Split by the arms' order, its rounds' medians lie past " in said
    )
    assert "a LoRA block stack of its own with this repro's widths but not its model (affine LayerNorms" in (
        pasted(RUN, limit=10**9, max_lines=None)
    )
    # Inside its CI, a script gets no words on the arms it leaves out.
    assert "solve-512-cliff 9.56 (-0.2%; t(solve_ex n=512) " in pasted(RUN, limit=10**9, max_lines=None)
