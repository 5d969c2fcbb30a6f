"""evidence41's cold read: lora-batch-scaling's claim is untested on every GPU (its model stands in for the
article's pipeline), and the summary's claim cell names each reason (the finding's words are pinned where they are
made: test_repro_lora.py)."""

from __future__ import annotations

import copy

from helpers import ROOT

from repro.core.claim import not_tested_here
from repro.evidence import artifact
from repro.evidence.model import run_of
from repro.evidence.report_parts import claim_cell
from repro.repros.lora_batch import LoraBatchScaling


def test_the_claim_cell_names_every_reason_the_claim_was_not_tested() -> None:
    run = ROOT / "artifacts" / "reference" / "h200" / "evidence41" / "all" / "20261203T201539Z-d60ff8"
    raw = artifact.load(run / "lora-batch-scaling.json")
    assert claim_cell(run_of(raw)) == "not tested: not on this architecture"  # as that run wrote it
    raw = copy.deepcopy(raw)
    reason = (
        "not on this architecture: the claim is about sm_120; NVIDIA H200 is sm_90; and not the seed's subject: "
        f"{LoraBatchScaling.stand_in}"
    )
    raw["verdict"]["claim"]["reason"] = reason
    assert claim_cell(run_of(raw)) == "not tested: not on this architecture; not the seed's subject"


def test_a_repro_without_a_stand_in_or_an_architecture_is_left_as_judged() -> None:
    from repro.core.results import Verdict

    v = Verdict("m", "", 2.0, 1.9, 2.1, 0.95, 1.5, "reproduced", "Reproduced: m was 2.00x.")
    assert not_tested_here(v, (), "9.0") is v
    assert not_tested_here(v, ("9.0",), "9.0", "NVIDIA H200") is v
    stood = not_tested_here(v, ("9.0",), "9.0", "NVIDIA H200", "a stand-in")
    assert stood.status == "inconclusive"
    assert stood.claim == {"tested": False, "reason": "not the seed's subject: a stand-in"}
    assert stood.finding == (
        "Inconclusive, the seed's claim was not tested (not the seed's subject: a stand-in); instead, on this GPU: m "
        "was 2.00x."
    )
