"""The committed H200 evidence run, rendered again: each answer a cold reader asked for is in the report."""

from __future__ import annotations

import re
from typing import Any

import pytest
from evidence_run import by_id, section
from helpers import ROOT

from repro.core.verdict import fmt_ratio
from repro.evidence import artifact, band, markdown, plots
from repro.evidence.report import PASTE_LIMIT, PASTE_LINES, report


def visible(text: str, rid: str) -> str:
    """A repro's section without its details block."""
    return section(text, rid).split("<details>", 1)[0]


def test_the_evidence_report_still_fits_one_screen(rendered: str) -> None:
    assert len(rendered) <= PASTE_LIMIT
    assert rendered.count("\n") + 1 <= PASTE_LINES


def test_one_ratio_format_shows_the_ci_width_everywhere(rendered: str, docs: list[dict[str, Any]]) -> None:
    adam = visible(rendered, "fused-adam-capturable")
    # The finding recorded "1.00x (95% CI 1.00-1.00)"; the tables say 1.002 (1.002-1.003).
    assert "1.00x (95% CI 1.00-1.00)" not in rendered
    assert "1.002x (95% CI 1.002-1.003)" in adam.split("\n", 2)[1]
    row = next(ln for ln in rendered.splitlines() if ln.startswith("| fused-adam-capturable"))
    assert "1.002x (95% CI 1.002-1.003)" in row
    # The finding's format and the report's are one: as many decimals as the CI's ends need.
    v = by_id(docs, "fused-adam-capturable")["verdict"]
    said = fmt_ratio(v["value"], v["ci_low"], v["ci_high"])
    assert said == "1.002x (95% CI 1.002-1.003)"
    assert markdown.ratio_with_ci(v["value"], v["ci_low"], v["ci_high"]) == said
    assert fmt_ratio(1.5, 1.4, 1.6) == "1.50x (95% CI 1.40-1.60)"
    assert fmt_ratio(1.0, 1.0, 1.0) == "1.0000x (95% CI 1.0000-1.0000)"


def test_holds_and_does_not_hold_follow_each_rows_own_status(roomy: str, docs: list[dict[str, Any]]) -> None:
    memset = visible(roomy, "graph-memset")
    holds = next(ln for ln in memset.splitlines() if ln.startswith("- Holds for: "))
    fails = next(ln for ln in memset.splitlines() if ln.startswith("- Does not hold for: "))
    assert "torch graph, with matmul" not in holds and "torch graph, with matmul: 0.99x" in fails
    assert "pure CUDA twin (headline)" in holds and "torch graph: 1.30x" in holds
    # Flip one row's status and it changes sides.
    doc = by_id(docs, "graph-memset")
    row = next(r for r in doc["verdict"]["breakdown"] if r.get("source") == "torch graph")
    row["status"] = "not_reproduced"
    flipped = visible(report([doc]), "graph-memset")
    assert "torch graph: 1.30x" in next(ln for ln in flipped.splitlines() if ln.startswith("- Does not hold"))


def test_plot_captions_say_which_ratio_they_show(docs: list[dict[str, Any]]) -> None:
    caption = next(f.alt for f in plots.describe(docs) if f.repro_id == "solve-512-cliff")
    # 9.37x is a ratio of two medians; the table's 9.33x is a paired, work-scaled ratio: both named.
    assert "9.37x" in caption
    assert "(a ratio of two medians, unscaled; the tables: paired ratios) is 9.37x" in caption


def test_the_kernel_diff_ranks_by_change_in_time_per_call(rendered: str) -> None:
    lora = visible(rendered, "lora-batch-scaling")
    head = next(ln for ln in lora.splitlines() if ln.startswith("- Kernels, "))
    assert (
        "(kernel time per call 23.3 ms -> 45.2 ms; timed 25.4 ms -> 48.6 ms; not shown: 7 appear, 5 disappear, "
        "19 change):" in head
    )
    bullets = lora.split(head, 1)[1].splitlines()[1:4]
    # The GEMMs present at both batches doubled; the small new kernels (~0.29 ms) are not the story.
    assert all(b.startswith("  - `") and " -> " in b and "appears" not in b for b in bullets)
    assert "5357.8 -> 10465.7 us/call" in bullets[0]
    solve = visible(rendered, "solve-512-cliff")
    assert "`getrf_panel` disappears" in solve and "`getrf_pivot<getrf_params_>` appears" in solve


def test_the_band_line_says_where_this_run_falls_and_how_to_list_the_band(
    roomy: str, docs: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    line = next(ln for ln in visible(roomy, "solve-512-cliff").splitlines() if ln.startswith("- Re-run elsewhere"))
    # Where the band holds this run's GPU, the others are named apart; where this run sits among them
    # follows from their range (which moves as reference runs are committed; this run's value does not).
    got = re.search(
        r"\d+ (?:other )?NVIDIA H200 GPUs read (9\.\d{3})-(9\.\d{3}), this run 9\.335 \(([a-z ]+)\), within the band's",
        line,
    )
    assert got is not None
    low, high = float(got.group(1)), float(got.group(2))
    assert got.group(3) == ("below all" if low > 9.335 else "above all" if high < 9.335 else "inside their range")
    assert "(committed default runs, `band.json`" in roomy
    doc = by_id(docs, "solve-512-cliff")
    key = band.key_of(doc, joining=False)
    assert key is not None
    points = (band.Point("a", 20.0, ("r1",)), band.Point("b", 21.0, ("r2",)))
    far = [band.Band(*key[:3], points=points, headline=key[3])]
    assert (
        "this run 9.335 (below all), outside the band's range (-2.4%/+2.4% of 20.50) widened by this run's CI "
        in report([doc], bands=far)
    )
    assert band.main(["--show", "solve-512-cliff"]) == 0
    out = capsys.readouterr().out
    uuid = doc["fingerprint"]["gpu"]["uuid"]
    assert f"GPU {uuid[:8]}: 9.335 (runs 20261201T111151Z-438281=9.335; torch 2.11.0+cu130" in out
    assert "rerun_band.json" in out
    assert band.main(["--show", "nope"]) == 2
    assert "no re-run band for nope; bands exist for: " in capsys.readouterr().err


def test_the_identity_line_says_container_when_a_marker_is_set(rendered: str, docs: list[dict[str, Any]]) -> None:
    assert "torch 2.11.0+cu130 (CUDA 13.0, container in a KVM guest)" in rendered.splitlines()[2]
    doc = by_id(docs, "5090-linear")
    doc["fingerprint"]["container"].update(dockerenv=False, containerenv=False)
    assert "(CUDA 13.0, host in a KVM guest)" in report([doc]).splitlines()[2]
    doc["fingerprint"]["container"]["containerenv"] = True
    assert "(CUDA 13.0, container in a KVM guest)" in report([doc]).splitlines()[2]


def test_the_gpu_tool_writes_the_bundle_name_the_report_tells_users_to_attach(rendered: str) -> None:
    tool = (ROOT / "tools" / "gpu-final.sh").read_text()
    out = re.search(r'repro bundle "\$run" --out "([^"]+)"', tool)
    assert out is not None
    name = re.search(r"^bundle=(.+)$", tool, re.M)
    assert out.group(1) == "$bundle" and name is not None
    assert name.group(1) == '"$out/$(basename "$run").bundle.tar.gz"'
    assert "Attach `20261201T111151Z-438281.bundle.tar.gz`" in rendered
    assert 'bundle.tar.gz" ' not in tool and '"$out/bundle.tar.gz"' not in tool


def test_the_seed_vs_ours_line_is_computed_from_the_numbers(rendered: str, docs: list[dict[str, Any]]) -> None:
    line = next(ln for ln in visible(rendered, "graph-memset").splitlines() if "re-implemented here" in ln)
    assert "the two agree: their CIs overlap (1.351 against 1.35)" in line
    doc = by_id(docs, "graph-memset")
    row = next(r for r in doc["verdict"]["breakdown"] if r.get("source") == "the seed's program")
    row.update(ratio=1.5, ci_low=1.48, ci_high=1.52)
    moved = next(ln for ln in visible(report([doc]), "graph-memset").splitlines() if "re-implemented here" in ln)
    assert "the two differ by +11%, beyond both CIs" in moved and "agree" not in moved


def test_an_off_architecture_artifact_validates_and_reports_inconclusive(docs: list[dict[str, Any]]) -> None:
    from repro.core.claim import not_tested_here
    from repro.core.results import Verdict

    doc = by_id(docs, "5090-linear")
    doc["schema_version"] = "1.4"
    doc["repro"]["claim_arch"] = ["12.0"]
    fields = {
        **doc["verdict"],
        "breakdown": tuple(doc["verdict"]["breakdown"]),
        "variants": ("linear_fp32", "manual_fp32"),
    }
    fields["details"] = tuple(fields["details"])
    v = not_tested_here(Verdict(**fields), ["12.0"], doc["fingerprint"]["gpu"]["compute_capability"], "NVIDIA H200")
    doc["verdict"] = artifact.to_jsonable(v)
    assert artifact.validation_errors(doc) == []
    text = report([doc])
    row = next(ln for ln in text.splitlines() if ln.startswith("| 5090-linear"))
    assert "| **inconclusive** | not tested: not on this architecture | 0.92x (95% CI 0.91-0.92) |" in row
    assert "instead, on this GPU: t(nn.Linear)/t(x @ w.t() + b), fp32 was 0.92x" in visible(text, "5090-linear")
    doc["repro"]["claim_arch"] = ["sm_120"]
    assert artifact.validation_errors(doc)  # a compute capability, as the fingerprint writes it


def test_clock_wording_comes_from_the_monitor_numbers(rendered: str, docs: list[dict[str, Any]]) -> None:
    from repro.evidence.clocks import clock_words

    lora = visible(rendered, "lora-batch-scaling")
    # The JSON: min 1365, max 1785, median of polls 1710; the record said "held the SM clock at 1710".
    assert "held the SM clock" not in rendered
    assert "(suspect: power cap, median SM clock 1710 MHz of 1980 MHz max (bs1, bs2, bs4))" in lora
    mon = by_id(docs, "5090-linear")["variants"][2]["gpu_monitor"]
    assert clock_words(mon) == "SM clock 1620-1980 MHz (median 1845)"
    assert clock_words({"sm_clock_min_mhz": 1980, "sm_clock_max_mhz": 1980, "sm_clock_during_mhz": 1980}) == (
        "SM clock 1980 MHz"
    )
    assert clock_words({}) == "SM clock not recorded"
    assert "(SM clock 1845 MHz)" not in rendered


def test_the_environment_says_at_start_and_what_clocks_did_while_measuring(docs: list[dict[str, Any]]) -> None:
    from repro.run import scripts

    # The environment's words, with room for them (the pasted report may leave the block to the bundle).
    rendered = report(docs, declared=scripts.declared(docs), limit=60_000, max_lines=None)
    state = next(ln for ln in rendered.splitlines() if ln.startswith("GPU state just before each block of timed"))
    # The monitor's reading before each block of timed rounds, then the fingerprint's, after the measurement.
    assert "; when each repro's fingerprint was taken, after its measurement: power " in state
    assert "clock events then" in state
    assert (
        "While measuring, clock events: 5090-linear (linear_tf32, manual_tf32: sw_power_cap, SM clock 1620-1980"
        in state
    )
    assert "lora-batch-scaling (bs1, bs2, bs4: sw_power_cap, SM clock 1365-1785 MHz (median 1710))" in state


def test_a_reproduced_status_names_the_only_setting_it_holds_for(roomy: str, docs: list[dict[str, Any]]) -> None:
    row = next(ln for ln in roomy.splitlines() if ln.startswith("| solve-512-cliff"))
    assert "| **reproduced** (cusolver backend only) |" in row
    memset = next(ln for ln in roomy.splitlines() if ln.startswith("| graph-memset"))
    assert "| **reproduced** |" in memset  # it held in three sources, not one
    fails = next(ln for ln in visible(roomy, "solve-512-cliff").splitlines() if ln.startswith("- Does not hold"))
    assert "default backend (MAGMA here): at most 0.98x" in fails
    doc = by_id(docs, "solve-512-cliff")
    for r in doc["verdict"]["breakdown"]:
        r["status"] = "reproduced"
    assert "| **reproduced** |" in report([doc])


def test_clock_reasons_of_one_kind_are_said_once_with_each_variants_median() -> None:
    from repro.evidence.report import _by_median

    got = _by_median(
        [
            "bs1: power cap, SM clock 1620-1980 MHz (median 1710) of 1980 MHz max",
            "the rounds split by order",
            "bs2: power cap, SM clock 1515-1980 MHz (median 1695) of 1980 MHz max",
            "bs4: thermal, SM clock 1500-1900 MHz (median 1700)",
        ]
    )
    assert got == [
        "power cap, median SM clock bs1 1710, bs2 1695 MHz of 1980 MHz max",
        "the rounds split by order",
        "thermal, median SM clock 1700 MHz (bs4)",
    ]
