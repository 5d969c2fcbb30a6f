"""What evidence28's cold read asked of the pasted report, on that run's own artifacts: the power a capped run
reached, the order check said briefly, how samples are sized, one wording for cuda-bindings, and how many of a
band's runs ran this repro's code."""

from __future__ import annotations

from pathlib import Path

from repro.env.fingerprint import HARNESS_OPTIONAL
from repro.evidence import artifact, bundle, clocks, model
from repro.evidence.model import Artifact
from repro.evidence.report import report
from repro.run import scripts

ROOT = Path(__file__).resolve().parents[3]
RUN = next((ROOT / "artifacts" / "reference" / "h200" / "evidence28" / "all").iterdir())


def _pasted() -> str:
    docs = [artifact.load(p) for p in artifact.expand([RUN])]
    return report(docs, declared=scripts.declared(docs), attached=bundle.attached_names(RUN))


def _lora() -> Artifact:
    doc = model.of(artifact.load(RUN / "lora-batch-scaling.json"))
    assert isinstance(doc, Artifact)
    return doc


def test_a_power_capped_run_says_the_power_it_reached() -> None:
    lora = _lora()
    capped = ["power cap, median SM clock 1725 MHz", "the arms' order split the rounds"]
    assert clocks.with_power_peak(lora, capped) == [
        "power cap, median SM clock 1725 MHz, power up to 694.8 W of a 700 W limit in NVML's polls",
        "the arms' order split the rounds",
    ]
    assert clocks.with_power_peak(lora, capped[1:]) == capped[1:]  # no power cap: nothing to add
    line = next(ln for ln in _pasted().splitlines() if ln.startswith("**inconclusive** (suspect: power cap"))
    assert "MHz of 1980 MHz max, power up to 694.8 W of a 700 W limit in NVML's polls; " in line


def test_the_order_check_is_said_briefly_with_its_numbers() -> None:
    lora = _lora()
    said = [clocks.restate(r, lora) for r in lora.validity.reasons if "order" in r]
    assert said == [
        "bs2/bs1: the arms' order split the rounds: 0.9209 forward, 0.9559 reversed (3.7% apart, over twice the "
        "CI's ±1.6%, which does not cover it)"
    ]


def test_the_legend_says_how_samples_are_sized_and_that_the_twin_times_itself() -> None:
    pasted = _pasted()
    assert "CUDA events over samples of about 1 ms of calls (or one longer call" in pasted
    assert "; a CUDA twin times its replays in its own program;" in pasted


def test_cuda_bindings_is_described_alike_in_the_install_line_and_the_environment() -> None:
    assert HARNESS_OPTIONAL["cuda-bindings"] == "graph-memset's torch-graph memset variants, skipped without it"
    assert "cuda-bindings (graph-memset's torch-graph memset variants; without it they are skipped)" in _pasted()


def test_the_band_column_says_how_many_runs_ran_this_code() -> None:
    row = next(ln for ln in _pasted().splitlines() if ln.startswith("| graph-memset |"))
    assert " of " in row and " with this repro module file" in row
