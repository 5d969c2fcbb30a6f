"""What a ninth cold reader of evidence49's report, rendered again at 4a257c3, asked: "its script times bs2 and bs1
alone, the run's rounds held bs4 too" reads as the cause of the script's +4%, which no run tested (the quick run,
bs4 skipped, reads 0.948); and a later run stopped by a SIGTERM did not say the SIGTERM came from its maker's own
time limit, which the maker's note (attached/NOTE.txt) says."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from evidence_run import pasted
from helpers import ROOT

from repro.evidence.printed import LIMIT_WORDS, stopped_by_limit

RUN = next((ROOT / "artifacts" / "reference" / "h200" / "evidence49" / "all").iterdir())
TE = "Transformer Engine could not be installed here, not by choice."


def test_a_scripts_other_arms_are_said_not_blamed() -> None:
    from repro.evidence import artifact, model
    from repro.evidence.printed import _alone

    # Without a later run that timed bs1 and bs2 alone (this run's quick run did: test_report_cold70), it says so.
    lora = model.run_of(artifact.load(RUN / "lora-batch-scaling.json"))
    said = _alone(lora, {}, 0.979)
    assert said == "; its script times bs2 and bs1 alone, the run's rounds held bs4 too, not tested as the cause"
    full = pasted(RUN, limit=10**9, max_lines=None)
    assert "the run's rounds held bs4 too; without them, `attached/quick-lora-batch-scaling.json` read" in full


def test_the_makers_note_and_the_gpu_tool_use_the_same_words() -> None:
    tool = (ROOT / "tools" / "gpu-final.sh").read_text()
    assert f"'$2' {LIMIT_WORDS} (timeout, exit 124)" in tool
    assert 'timed_out "$rc" "the re-run lines of $RERUN_IDS"' in tool
    note = f"{TE}\n'repro all --quick' {LIMIT_WORDS} (timeout, exit 124), not by a fault of the repro.\n"
    assert stopped_by_limit(note, "repro all --quick")
    assert not stopped_by_limit(note, "repro all --target-ci 0.02 --budget 2")
    assert not stopped_by_limit(None, "repro all --quick")
    reruns = f"'the re-run lines of 5090-linear graph-memset' {LIMIT_WORDS} (timeout, exit 124)."
    assert stopped_by_limit(reruns, "", rerun_of="graph-memset")
    assert not stopped_by_limit(reruns, "", rerun_of="lora-batch-scaling")
    assert not stopped_by_limit(note, "", rerun_of="graph-memset")


def _stopped_there(run: Path, name: str) -> None:
    doc = json.loads((run / "attached" / name).read_text())
    doc["verdict"].update(status="inconclusive", value=None, ci_low=None, ci_high=None)
    doc["verdict"]["claim"]["tested"] = False
    doc["error"] = {"kind": "interrupted", "message": "interrupted by SIGTERM after 2.0 s", "signal": "SIGTERM"}
    (run / "attached" / name).write_text(json.dumps(doc))


def test_a_later_run_its_makers_time_limit_stopped_says_so(tmp_path: Path) -> None:
    run = tmp_path / RUN.name
    shutil.copytree(RUN, run)
    _stopped_there(run, "rerun-graph-memset.json")
    # evidence49's own quick run was stopped there (solve-512-cliff); its note did not say why.
    plain = pasted(run, limit=10**9, max_lines=None)
    assert "solve-512-cliff was stopped by a SIGTERM, the batch ending there" in plain
    assert "; graph-memset was stopped by a SIGTERM, the batch ending there" in plain
    note = (
        f"{TE}\n'repro all --quick' {LIMIT_WORDS} (timeout, exit 124), not by a fault of the repro it was running.\n"
        f"'the re-run lines of 5090-linear graph-memset' {LIMIT_WORDS} (timeout, exit 124), not by a fault of the "
        "repro it was running.\n"
    )
    (run / "attached" / "NOTE.txt").write_text(note)
    said = pasted(run, limit=10**9, max_lines=None)
    limit = "was stopped by a SIGTERM from its maker's time limit (`attached/NOTE.txt`), the batch ending there"
    assert f"solve-512-cliff {limit}" in said
    assert f"; graph-memset {limit}" in said
    # The maker's note names one command: another one stopped by a SIGTERM is not said to be its.
    (run / "attached" / "NOTE.txt").write_text(f"{TE}\n'repro all --target-ci 0.02 --budget 2' {LIMIT_WORDS}.\n")
    other = pasted(run, limit=10**9, max_lines=None)
    assert f"solve-512-cliff {limit}" not in other and f"; graph-memset {limit}" not in other
    # A hand-wrapped note reads the same; a SIGINT is not said to be a time limit's.
    (run / "attached" / "NOTE.txt").write_text(note.replace("' was stopped by", "'\n  was stopped by"))
    assert f"solve-512-cliff {limit}" in pasted(run, limit=10**9, max_lines=None)
    doc = json.loads((run / "attached" / "rerun-graph-memset.json").read_text())
    doc["error"]["signal"] = "SIGINT"
    (run / "attached" / "rerun-graph-memset.json").write_text(json.dumps(doc))
    assert "; graph-memset was stopped by a SIGINT, the batch ending there" in pasted(run, limit=10**9, max_lines=None)


def test_a_tenth_reads_words_that_claim_no_more_than_ran() -> None:
    """A tenth reader: seeds_raw.py's lora stand-in is not this repro's model; graph-memset's torch program is the
    seed's re-coded in the run's process, not run as posted; solve's Impact claims no cost at every batch size (a
    batch of one loops at 511 too)."""
    from repro.repros.solve_cliff import Solve512Cliff

    full = pasted(RUN, limit=10**9, max_lines=None)
    seeds = (ROOT / "tools" / "seeds_raw.py").read_text()
    assert "torch.nn.LayerNorm(d); s.qkv = L(d, 3 * d)" in seeds  # affine, one fused qkv adapter: not the repro's
    assert "a LoRA block stack of its own with this repro's widths but not its model (affine LayerNorms" in full
    assert "this repro's FLUX-shaped" not in full
    assert (
        "The seed's torch program, re-coded in the run's process (1000 ops" in full and "run as posted here" not in full
    )
    assert "seed.cu 1.53x, the seed's torch program re-coded 0.95x, no CI; seed.cu re-implemented" in pasted(RUN)
    impact = Solve512Cliff.impact
    assert "a batch of one loops at 511 too" in impact and "every solve_ex call" not in impact
