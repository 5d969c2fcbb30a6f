"""What evidence52's cold reads (an H100 run, no band for its model) found shown wrongly or not at all, checked on
that run's own artifacts: another model's band beside a row with none, a status that model's runs read otherwise, the
memory a re-run at the seed's sizes needs against this GPU's, a script that sized itself down, the re-runs' stop after
their artifacts, the order check's words as an association; and the later reads' items below."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from evidence_run import pasted, section
from helpers import ROOT

from repro.evidence import artifact, band, model, scope
from repro.evidence.model import Artifact

RUN = next((ROOT / "artifacts" / "reference" / "h100" / "evidence52" / "all").iterdir())


# The H200 band of each repro at these params grows with every committed H200 run: its counts are read from the
# shipped band data (each GPU a point, each run's flag and repro source recorded per run), not written here.
def _h200(rid: str) -> band.Band:
    return max((b for b in band.load() if b.repro == rid and b.gpu == "NVIDIA H200"), key=lambda b: len(b.points))


def _gpus(rid: str) -> int:
    return len(_h200(rid).points)


def _suspect(rid: str) -> str:
    """``, 3 of 90 runs suspect`` (``, all 82 runs suspect``; "" where none is), counted from the band's runs."""
    flags = [f for p in _h200(rid).points for f in p.run_flags if f]
    n = sum(f == "suspect" for f in flags)
    return "" if not n else f", all {n} runs suspect" if n == len(flags) else f", {n} of {len(flags)} runs suspect"


def _module_runs(rid: str) -> str:
    """``3 of 110 runs with this repro module file``, counted here from the band's runs and this run's artifact."""
    src = json.loads((RUN / f"{rid}.json").read_text())["repro"]["source_sha256"][:12]
    got = [s for p in _h200(rid).points for s in p.run_sources if s]
    return f"{sum(s == src for s in got)} of {len(got)} runs with this repro module file"


def _no_h100() -> list[band.Band]:
    """The shipped band data without any H100 band: as this run's report read it before later H100 runs
    (h100/evidence55, h100/evidence56) gave its GPU model a band of its own."""
    return [b for b in band.load() if not b.gpu.startswith("NVIDIA H100")]


@pytest.fixture(scope="module")
def lean() -> str:
    return pasted(RUN, bands=_no_h100())


@pytest.fixture(scope="module")
def full() -> str:
    return pasted(RUN, limit=10**9, max_lines=None, bands=_no_h100())


def test_the_pasted_report_fits_and_keeps_every_section(lean: str) -> None:
    assert len(lean) <= 20_000 and lean.count("\n") + 1 <= 250 and "Report cut" not in lean
    for rid in ("5090-linear", "fused-adam-capturable", "graph-memset", "lora-batch-scaling", "solve-512-cliff"):
        assert section(lean, rid)
    # Not the last bare tier: the seed's lines stay; the Episodes line is kept or named as left out.
    assert "seed.cu 1.13x" in lean and "- The seed's own seed.cu" in lean
    assert "Seed's-experiment-vs-ours and re-run lines" not in lean
    assert "- Episodes:" in lean or "Episodes line" in lean or "lines but its finding" in lean


def test_a_row_without_a_band_for_its_model_names_another_models(lean: str) -> None:
    rows = {ln.split(" | ")[0][2:]: ln for ln in lean.splitlines() if ln.startswith("| ") and " | " in ln}
    memset = f"{_gpus('graph-memset')} GPUs{_suspect('graph-memset')}"
    solve = f"{_gpus('solve-512-cliff')} GPUs{_suspect('solve-512-cliff')}"
    assert rows["graph-memset"].endswith(f"| none on this model; NVIDIA H200: 1.23-1.51x ({memset}) |")
    assert rows["solve-512-cliff"].endswith(f"| none on this model; NVIDIA H200: 9.32-9.59x ({solve}) |")
    # No band of this model in any row: the legend leaves the band cells' notation out.
    assert "Earlier-runs column: committed default runs (`band.json`); no band is a bound" in lean
    assert "-x%/+y% of m" not in lean


def _memset_finding(lean: str) -> str:
    """graph-memset's status line, checked to open with its recorded finding."""
    line = section(lean, "graph-memset").split("\n")[1]
    assert line.startswith("**not_reproduced**: memset/fill (pure CUDA twin) was 1.17x (95% CI 1.16-1.18)")
    return line


def test_a_status_another_models_runs_read_otherwise_says_so(lean: str) -> None:
    memset = _memset_finding(lean)
    # The arms' times there are the band runs' medians (they move with the band); here, this run's own.
    assert re.search(
        re.escape(
            " On NVIDIA H200 every GPU's median at these params lies above the 1.2 threshold (the table's span; "
            f"{_module_runs('graph-memset')}), unlike this run; arms there/here: twin_memset "
        )
        + r"9\d\d ns/912 ns, twin_fill 6\d\d ns/782 ns; NVML saw no other process around them here\.",
        memset,
    )
    for rid in ("5090-linear", "solve-512-cliff"):  # on the same side of the threshold on both models
        assert "unlike this run" not in section(lean, rid)
    # Another model's band of suspect runs says so where it is quoted.
    row = next(ln for ln in lean.splitlines() if ln.startswith("| lora-batch-scaling |"))
    lora = f"{_gpus('lora-batch-scaling')} GPUs{_suspect('lora-batch-scaling')}"
    assert ", all " in lora and row.endswith(f"| none on this model; NVIDIA H200: 0.924-0.969x ({lora}) |")


def test_the_memory_a_test_of_the_claim_needs_is_set_against_this_gpus(lean: str) -> None:
    adam = section(lean, "fused-adam-capturable")
    # This run's artifact records the standalone script's figure only (6 fp32 sets), and says whose it is.
    assert (
        "about 94.2 GiB of GPU memory at these sizes for its standalone script (the seed's program, one form at a "
        "time: about 62.8 GiB), more than this GPU's 79.2 GiB: `--set n_tensors=...` or a larger GPU)."
    ) in adam


def test_a_script_that_sized_itself_down_says_at_what_size(full: str) -> None:
    assert (
        "fused-adam-capturable torch_fused 1.002 of whole steps at 150 of 201 tensors, sized to fit (no headline"
    ) in full


def test_a_time_limit_after_every_rerun_wrote_its_artifact_says_so(lean: str, full: str) -> None:
    for text in (lean, full):
        assert "The note's time limit stopped them after the last, solve-512-cliff, wrote its artifact." in text
    assert "solve-512-cliff 10.61x (99.2% CI 10.58-10.69, worst of 6): CI overlaps ours" in lean
    # The lean form leaves out how torch was found, but not that the venv saw the machine's packages.
    assert "Re-run here from this run's first bundle, in a fresh venv that saw this machine's packages (" in lean
    assert "in a fresh venv (from a local wheelhouse; torch and cuda-bindings already in" in full


def test_the_order_split_is_said_as_an_association(lean: str) -> None:
    lora = section(lean, "lora-batch-scaling").split("\n")[1]
    assert "its rounds split by the arms' order: medians 0.8296-0.9756 over 6 orders of 4+ rounds" in lora
    assert "order moved it" not in lora and "order alone moves" not in lora
    assert (
        "Split by the arms' order, its rounds' medians lie past this CI, as the suspect note at this line's start "
        "gives them."
    ) in lora


def test_the_identity_line_ends_with_the_runs_gpu_busy_share(lean: str) -> None:
    assert lean.split("\n")[2].endswith("2026-12-05; GPU busy 29.7 s of the repros' 83.2 s (36%)")


def test_this_runs_own_report_was_rendered_by_its_harness() -> None:
    own = (RUN / "report.md").read_text()
    assert "source d693000b3900" in own and len(own) <= 20_000
    assert Path(RUN / "attached" / "NOTE.txt").read_text().count("stopped by this script's own time limit") == 1


def test_another_models_band_flips_only_a_status_the_threshold_decided() -> None:
    import copy

    from repro.evidence import artifact, band, model
    from repro.evidence.agreement import model_flip

    raw = artifact.load(RUN / "graph-memset.json")
    known = _no_h100()
    assert model_flip(model.run_of(raw), known).startswith("On NVIDIA H200 every GPU's median")
    # A CI that straddles the threshold (not_reproduced by the CI, its value above it) against a band all below it:
    # both models read not_reproduced, so nothing flips.
    straddle = copy.deepcopy(raw)
    straddle["verdict"].update(value=1.21, ci_low=1.19, ci_high=1.23)
    below = [
        band.Band(b.repro, b.gpu, b.params, tuple(band.Point(p.uuid, 1.0, p.runs) for p in b.points), b.headline)
        for b in known
    ]
    assert model_flip(model.run_of(straddle), below) == ""
    # A status the claim's scope set (inconclusive) is not the threshold's call.
    scoped = copy.deepcopy(raw)
    scoped["verdict"]["status"] = "inconclusive"
    assert model_flip(model.run_of(scoped), known) == ""


def test_the_second_reads_answers(lean: str, full: str) -> None:
    """evidence52's second read: how marginal an overlap is, the rounds behind an order split, what the rows that
    ran the other way cost, and no catalog line naming this run's GPU model as untested."""
    assert (
        "graph-memset 1.16x (95% CI 1.15-1.16): CI overlaps ours (1.16-1.18) by 0.000037 only "
        "(1.1486-1.1624 against 1.1624-1.1838)"
    ) in lean
    assert "solve-512-cliff 10.61x (99.2% CI 10.58-10.69, worst of 6): CI overlaps ours (10.54-10.68)" in lean
    # lora's lowest order is set by three of its five rounds: each round of both extreme orders is listed.
    assert (
        "rounds (number from 1: ratio) run bs4, bs2, bs1: 2: 0.8296, 8: 0.5077, 14: 0.7489, 20: 0.958, 26: 0.9549; "
        "run bs1, bs4, bs2: 4: 1.004, 10: 0.9813, 16: 0.9756, 22: 0.9628, 28: 0.9742; the lowest's, each arm against "
        "its median: bs2 +5%, +0%, +2%, +1%, +0%; bs1 +20%, +88%, +29%, +0%, -0%"
    ) in full
    assert (
        "Here: +111 ms per call (123 ms against 11.5 ms); where it ran the other way, per call: -89.4 us (default "
        "backend, batch 16: 5.12 ms against 5.21 ms), -309 us (default backend, batch 64: 6.29 ms against 6.6 ms), "
        "-78.3 us (default backend, batch 128: 8.12 ms against 8.19 ms)."
    ) in full
    # A not-covered line's list of untested models leaves out the run's own, whatever the line's words.
    assert "GPUs (Ada, Blackwell, A100); MPS, MIG" in full and "Blackwell, H100" not in full
    from repro.evidence.scope import _without_own_model as without

    line = "other GPUs (H100, A100, Blackwell); ROCm"
    assert without(line, "NVIDIA H100 80GB HBM3") == "other GPUs (A100, Blackwell); ROCm"
    assert without(line, "NVIDIA A100-SXM4-80GB") == "other GPUs (H100, Blackwell); ROCm"
    assert without(line, "NVIDIA H200") == line and without("on another H200: x", "NVIDIA H200") == "on another H200: x"


def test_another_rows_episode_across_the_threshold_joins_the_episodes_line(full: str) -> None:
    """A row not judged whose CI lies under the threshold while one of its episodes lies above it is said beside the
    headline's episodes (graph-memset's torch graph: 1.572 in episode 2, its memset node 1575 ns there)."""
    assert (
        "twin_fill +0.0%. 10 of 50 headline rounds, in 5 of 10 episodes, read above the 1.2 threshold (up to 3.38; "
        "mean of all 1.34). Other rows: memset/fill (torch graph), not judged, read 1.572 in 1 of 13 episodes "
        "(farthest: episode 2), above the 1.2 threshold, 0.8986 over all."
    ) in full
    # A row whose CI straddles the threshold says nothing of its episodes (evidence24's seed-program row, 1.196
    # with CI 1.189-1.219, five of its ten episodes above 1.2).
    from evidence_run import pasted as rendered

    old = next((ROOT / "artifacts" / "reference" / "h200" / "evidence24" / "all").iterdir())
    assert "Other rows:" not in rendered(old, limit=10**9, max_lines=None)


def test_a_row_without_a_headline_gives_what_earlier_runs_read_for_a_comparison_it_skipped(
    lean: str, full: str
) -> None:
    """The fourth read: fused-adam's earlier-runs cell read "-" though the band holds torch_fused's runs on H200s
    (an older default, whose params lack controls_without_te and control_kernels, timed the controls without TE)."""
    rows = {ln.split(" | ")[0][2:]: ln for ln in lean.splitlines() if ln.startswith("| ") and " | " in ln}
    assert rows["fused-adam-capturable"].endswith(
        "| torch_fused, kernel time: NVIDIA H200 1.000-1.003x (11 GPUs, other params) |"
    )
    assert (
        "- Re-run elsewhere: this run has no headline; torch_fused (torch AdamW(fused=True): kernel time per step, "
        "capturable/regular), not timed in this run's rounds, read 1.000-1.003x on 11 NVIDIA H200 GPUs in 15 committed "
        "runs, whose "
        "params: lack control_kernels, controls_without_te (all 15 runs); lack kernel_episode_rounds (7 of 15 runs)."
    ) in section(full, "fused-adam-capturable")


# The fifth read (the report rendered again at f250266): a claim whose direction held under the repro's own
# threshold, a batch left out of an Impact item, a suspect re-run said without its flag, a later run valid where this
# one was suspect, and a re-run's own episodes.


def _doc(rid: str) -> Artifact:
    got = model.of(artifact.load(RUN / f"{rid}.json"))
    assert isinstance(got, Artifact)
    return got


def test_a_claim_that_held_in_direction_but_not_in_size_says_so_with_the_thresholds_reason(lean: str) -> None:
    finding = _memset_finding(lean)
    assert (
        " The headline's whole CI lies above 1.0 (+17% at its median), the claim's direction; the 1.2 threshold it "
        "falls short of is the repro's own: 20% per op is far outside a graph-replay ratio's spread between rounds; "
        "no seed number was confirmed to set it against."
    ) in finding
    for rid in ("5090-linear", "lora-batch-scaling", "solve-512-cliff"):  # not tested, or reproduced
        assert "the claim's direction" not in section(lean, rid)
    doc = _doc("graph-memset")
    # A CI that reaches 1.0 says nothing of the direction.
    raw = artifact.load(RUN / "graph-memset.json")
    raw["verdict"]["ci_low"] = 0.99
    reaching = model.of(raw)
    assert isinstance(reaching, Artifact) and scope.short_of_threshold(reaching) == ""
    assert scope.short_of_threshold(doc).startswith("The headline's whole CI lies above 1.0")
    # A CI that reaches the threshold is not short of it (an older run read not_reproduced so).
    raw = artifact.load(RUN / "graph-memset.json")
    raw["verdict"]["ci_high"] = 1.21
    reaching_line = model.of(raw)
    assert isinstance(reaching_line, Artifact) and scope.short_of_threshold(reaching_line) == ""
    raw = artifact.load(RUN / "graph-memset.json")
    del raw["verdict"]["claim"]  # an older artifact: not known to have tested the claim
    older = model.of(raw)
    assert isinstance(older, Artifact) and scope.short_of_threshold(older) == ""


def test_each_impact_item_names_every_setting_in_which_a_listed_row_differs(full: str) -> None:
    impact = next(ln for ln in section(full, "solve-512-cliff").splitlines() if ln.startswith("- Impact:"))
    assert (
        "-89.4 us (default backend, batch 16: 5.12 ms against 5.21 ms), -309 us (default backend, batch 64: 6.29 ms "
        "against 6.6 ms), -78.3 us (default backend, batch 128: 8.12 ms against 8.19 ms)."
    ) in impact


def test_a_suspect_re_run_says_so_in_both_forms(lean: str, full: str) -> None:
    for form in (lean, full):
        paragraph = next(ln for ln in form.splitlines() if ln.startswith("**Re-run**"))
        assert "lora-batch-scaling 0.95x (95% CI 0.93-0.95) (suspect, as here): CI overlaps ours" in paragraph
        assert "graph-memset 1.16x (95% CI 1.15-1.16) (suspect" not in paragraph  # a valid re-run: no word


def test_a_later_run_valid_where_this_one_was_suspect_is_named_with_the_arms_it_did_not_time(full: str) -> None:
    paragraph = next(ln for ln in full.splitlines() if ln.startswith("**Re-run**"))
    assert (
        "4 headline CI(s) overlap this run's (half-widths 0.3-3.0%, this run's 0.6-1.9%); valid there, suspect here: "
        "lora-batch-scaling 0.96x (95% CI 0.95-0.97) without bs4 in its rounds."
    ) in paragraph


def test_a_re_runs_own_episode_lines_join_its_entry_in_the_full_report(full: str) -> None:
    """The re-run's torch-graph memset arm had episodes of 2.8x: said there as this run's section says its own (the
    sixth read: and the headline's rounds across the threshold, 10 of 50 here, 2 of 50 there)."""
    paragraph = next(ln for ln in full.splitlines() if ln.startswith("**Re-run**"))
    assert (
        "; its episodes: 2 of 10 outside its CI; farthest: episode 2, 1.14x (-1.5%): twin_memset -1.5% (892 ns "
        "against 906 ns in the others), twin_fill -0.0%. 2 of 50 headline rounds, in 2 of 10 episodes, read above the "
        "1.2 threshold (up to 2.13; mean of all 1.17). Other rows: memset/fill (torch graph), not judged, read 2.841 "
        "in 2 of 16 episodes (farthest: episode 13), above the 1.2 threshold, 0.9152 over all "
        "(`attached/rerun-graph-memset.json`)"
    ) in paragraph
    assert paragraph.count("; its episodes: ") == 1  # the other re-runs have no episode line


# The sixth read (rendered at d90a8b0): the board's VBIOS and PCI id and the host CPU's family, model and stepping,
# which the fingerprint holds, and the headline's rounds across the threshold.


def test_the_environment_names_the_boards_vbios_and_the_cpus_model(full: str) -> None:
    lines = full.splitlines()
    gpu = next(ln for ln in lines if ln.startswith("- GPU: "))
    assert gpu.startswith(
        "- GPU: NVIDIA H100 80GB HBM3, board 695-2G520-0200-000, VBIOS 96.00.DA.00.0C, PCI device 0x233010de, "
    )
    host = next(ln for ln in lines if ln.startswith("- Host: "))
    assert "Intel(R) Xeon(R) Processor (family 6, model 207, stepping 2, L3 300 MiB (1 instance); 16 CPUs)" in host


def test_rounds_across_the_threshold_are_counted_only_where_the_ci_is_on_one_side() -> None:
    doc = _doc("graph-memset")
    assert scope.rounds_across(doc) == (
        "10 of 50 headline rounds, in 5 of 10 episodes, read above the 1.2 threshold (up to 3.38; mean of all 1.34)"
    )
    assert scope.rounds_across(_doc("solve-512-cliff")) == ""  # every round above 1.5, as its CI
    raw = artifact.load(RUN / "graph-memset.json")
    raw["verdict"]["ci_high"] = 1.25  # a CI across the threshold
    wide = model.of(raw)
    assert isinstance(wide, Artifact) and scope.rounds_across(wide) == ""


def test_the_summary_row_of_a_claim_whose_direction_held_says_so_beside_its_status(lean: str) -> None:
    rows = {ln.split(" | ")[0][2:]: ln for ln in lean.splitlines() if ln.startswith("| ") and " | " in ln}
    assert rows["graph-memset"].startswith(
        "| graph-memset | **not_reproduced** (above 1.0, under the repro's 1.2) | tested "
    )
    for rid in ("5090-linear", "fused-adam-capturable", "lora-batch-scaling", "solve-512-cliff"):
        assert "above 1.0, under" not in rows[rid]


# The seventh read (rendered at e224be7, a=4): the script's metric beside the band's, and the skipped controls.


def test_the_scripts_metric_and_the_bands_are_told_apart_and_the_skipped_controls_named_once(lean: str) -> None:
    rows = {ln.split(" | ")[0][2:]: ln for ln in lean.splitlines() if ln.startswith("| ") and " | " in ln}
    assert "| torch_fused, kernel time: NVIDIA H200 1.000-1.003x" in rows["fused-adam-capturable"]
    assert "fused-adam-capturable torch_fused 1.002 of whole steps at 150 of 201 tensors, sized to fit" in lean
    assert (
        "- fused-adam-capturable: torch AdamW(fused=True) and torch AdamW(foreach=True) (each in the 3 forms above) "
        "(skipped: a control of TE's FusedAdam"
    ) in lean


# The eighth read (rendered by `repro report` at c129539, a=4): the band runs' module files beside another model's
# span, and each script's own arm times.


def test_another_models_span_says_how_many_of_its_runs_ran_this_module_file_and_scripts_give_their_times(
    full: str,
) -> None:
    lines = [ln for ln in full.splitlines() if ln.startswith("- Re-run elsewhere: no cross-GPU data")]
    said = [ln.rsplit(" span: ", 1)[1] for ln in lines]
    rids = ("5090-linear", "graph-memset", "lora-batch-scaling", "solve-512-cliff")
    assert said == [f"{_module_runs(rid)}." for rid in rids]
    assert (
        "graph-memset 1.16 (-0.5%; t(memset node) 906 ns, t(fill kernel &lt;&lt;&lt;1,32&gt;&gt;&gt;) 781 ns)" in full
    )


def test_with_the_shipped_bands_the_run_reads_its_own_models_band() -> None:
    """The shipped band data holds later H100 runs (h100/evidence55 and on): this run's rows and Re-run-elsewhere
    lines read its own GPU model's band, and no longer another model's."""
    h100 = {b.repro for b in band.without(band.load(), [RUN.name]) if b.gpu == "NVIDIA H100 80GB HBM3"}
    assert {"5090-linear", "graph-memset", "lora-batch-scaling", "solve-512-cliff"} <= h100
    full = pasted(RUN, limit=10**9, max_lines=None)
    rows = [ln for ln in full.splitlines() if ln.startswith("| ") and "**" in ln]
    assert rows and not [ln for ln in rows if "none on this model" in ln]
    for head in ("fp32", "memset/fill (pure CUDA twin)", "bs2/bs1", "cusolver/b128"):
        assert re.search(rf"- Re-run elsewhere \({re.escape(head)}, .*\): \d+ NVIDIA H100 80GB HBM3 GPUs read ", full)
    assert "Re-run elsewhere: no cross-GPU data" not in full
