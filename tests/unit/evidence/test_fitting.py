"""The lean form of a section: which lines each tier takes, and that a cut never splits a block."""

from __future__ import annotations

from repro.evidence.fitting import CUT_NOTE, SPARE_BULLETS, cut_at_blocks, lean_section

SECTION = "\n".join(
    [
        "## `x`: a claim",
        "**reproduced**: 1.5x (95% CI 1.4-1.6)",
        "- Seed claim: 2x on a GPU",
        "- Impact: what is at stake",
        "- Kernels, a -> b (kernel time per call 1 us -> 2 us):",
        "  - kernel_one 1 us",
        "  - kernel_two 2 us",
        "- Episodes: 1 of 9 outside the CI; farthest: episode 3",
        "```bash",
        "repro run x",
        "```",
    ]
)


def test_lean_drops_the_restating_lines_and_keeps_the_kernel_list_unless_told() -> None:
    lean = lean_section(SECTION)
    assert "- Impact:" not in lean and "  - kernel_two 2 us" in lean and "- Episodes:" in lean


def test_the_kernel_list_is_cut_to_its_first_lines_and_ends_as_a_sentence_without_them() -> None:
    assert "  - kernel_one" in lean_section(SECTION, 1) and "kernel_two" not in lean_section(SECTION, 1)
    bare = lean_section(SECTION, 0)
    assert "kernel_one" not in bare and "- Kernels, a -> b (kernel time per call 1 us -> 2 us)." in bare


def test_each_spare_tier_takes_its_line_and_the_sub_bullets_under_it_in_order() -> None:
    assert [prefix for prefix, _ in SPARE_BULLETS] == ["- Kernels", "- Episodes:"]
    one = lean_section(SECTION, 1, spare=1)
    assert "- Kernels" not in one and "kernel_one" not in one and "- Episodes:" in one
    two = lean_section(SECTION, 1, spare=2)
    assert "- Episodes:" not in two
    # What the finding, the seed claim and the re-run line say stays at every tier.
    for kept in ("**reproduced**", "- Seed claim", "repro run x", "```"):
        assert kept in two


def test_the_last_resort_cut_keeps_whole_blocks_and_ends_with_its_note() -> None:
    parts = ["# t", "<details>\n" + "a" * 50 + "\n</details>", "b" * 100]
    out = cut_at_blocks(parts, limit=180)
    assert out.endswith(CUT_NOTE) and "</details>" in out and "b" * 100 not in out


def test_a_bare_section_keeps_its_finding_seed_lines_and_run_line_only() -> None:
    """Level 1 keeps the lines with the seed's own programs' numbers too; level 2, the last before a cut, drops
    them."""
    needs = "- To test the seed's claim, the re-run needs `te` installed."
    seeds = "- The seed's own seed.cu, run as posted: 1.13x\n  - its processes 888-1202 us"
    section = SECTION.replace("- Impact:", f"- Seed's experiment vs ours: one replay\n{seeds}\n- Impact:")
    section = section.replace("```bash", f"- Where in the stack: getrf\n{needs}\n```bash")
    bare = lean_section(section, 0, spare=2, bare=2)
    assert bare.splitlines() == [
        "## `x`: a claim",
        "**reproduced**: 1.5x (95% CI 1.4-1.6)",
        "- Seed claim: 2x on a GPU",
        "- Seed's experiment vs ours: one replay",
        needs,
        "```bash",
        "repro run x",
        "```",
    ]
    first = lean_section(section, 0, spare=2, bare=1)
    assert first.splitlines() == bare.splitlines()[:4] + seeds.splitlines() + bare.splitlines()[4:]
