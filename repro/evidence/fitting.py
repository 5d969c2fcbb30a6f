"""How the pasted report fits its size: the tiers' words, the lean form of a section, and the last-resort cut.

``repro.evidence.report`` decides the order of the tiers; this module holds what each tier takes out of a section
and the cut between whole blocks that nothing else may follow.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from repro.evidence.lines import RERUN_NEEDS, RERUN_NOT_REBUILT
from repro.evidence.seedlines import SEED_METHOD_WHY


def size(parts: Sequence[str]) -> tuple[int, int]:
    """The characters and lines of ``parts`` joined by newlines."""
    joined = "\n".join(parts)
    return len(joined), joined.count("\n") + 1


NTH = {1: "first", 2: "second"}  # the kernel-list tiers' words


def stack_level(stack_gone: int) -> int:
    """``stack_note``'s level at a last tier: none, then the parentheses (2 on), the later not-covered items (4),
    then STACK_LINES (5 on)."""
    return {0: 0, 1: 0, 2: 1, 3: 1}.get(stack_gone, stack_gone - 2)


CUT_NOTE = "_Report cut at the size limit; see the artifacts._\n"
# A section's lines that restate its finding or the summary (where it held, what is at stake, where this run
# falls in the re-run band of the summary's column): what a report leaves out once the details blocks and the
# environment are gone, before its kernel lines (``lean_section``) and the last tiers (``stack_gone``).
LEAN_NAMED = (
    ("- Holds for:", "Holds-for"),
    ("- Does not hold for:", "Does-not-hold-for"),
    ("- Impact:", "Impact"),
    ("- Re-run elsewhere", "Re-run-elsewhere"),
    ("- Method:", "Method"),
    (f"- {SEED_METHOD_WHY}", "Why-the-seed's-method-and-ours-differ"),
)
LEAN_LINES = tuple(prefix for prefix, _ in LEAN_NAMED)
# The section lines a lean report spares, each named in the Left-out note: the Kernels line's timings once its list
# is gone (the finding names the kernels that differ where they matter), before the Not-tested tiers; then, after
# them, the Episodes line of a run with an extreme episode (the CI covers its episodes), the last before a cut.
SPARE_BULLETS = (("- Kernels", "Kernels line with its kernel list"), ("- Episodes:", "Episodes line"))
# Lean too: the Method lines (rounds and episodes; the standalone script each names is in the head's bundle
# line) and the re-run paragraph without the run's command, Python, packages and plots extra (lines.install_block).


# The bullets a bare section keeps (``lean_section``'s ``bare``): the seed's claim, how its experiment differs from
# ours, and the re-run's items (what it needs installed; why no command was rebuilt); the finding above them and
# the run line's block below are not bullets and stay too. At the first bare level every line that opens "The seed's"
# stays as well: the seed's own programs and methods as run here (seed.cu unchanged, its torch program re-coded, its
# program re-implemented, its method re-run), with their numbers.
BARE_KEEPS = ("- Seed claim", "- Seed's experiment vs ours:", f"- {RERUN_NEEDS}", f"- {RERUN_NOT_REBUILT}")
SEED_KEEPS = ("- The seed's ",)
BARE_WORDS = "each section's lines but its finding, Seed claim, Seed's-experiment-vs-ours and re-run lines"
# The Left-out note's words per bare level (1, 2).
BARE_LEVEL_WORDS = (
    "each section's lines but its finding, Seed claim, Seed's-experiment-vs-ours, the seed's-programs-run-here and"
    " re-run lines",
    BARE_WORDS,
)


def lean_section(section: str, kernels: int | None = None, spare: int = 0, bare: Literal[0, 1, 2] = 0) -> str:
    """The section without LEAN_LINES; with ``kernels``, each kernel list (a "- Kernels" line's sub-bullets)
    cut to its first ``kernels`` lines; without the first ``spare`` of SPARE_BULLETS (a line and its sub-bullets);
    ``bare`` 1: without any bullet but BARE_KEEPS and SEED_KEEPS; 2: but BARE_KEEPS (the last tier before a cut:
    every section stays)."""
    keeps = BARE_KEEPS + (SEED_KEEPS if bare == 1 else ())
    kept = []
    listed: int | None = None  # sub-bullets kept of the kernel list being read, None outside one
    spared = tuple(prefix for prefix, _ in SPARE_BULLETS[:spare])
    skipping = False  # inside a spared line's sub-bullets
    for ln in section.split("\n"):
        if ln.startswith(LEAN_LINES):
            continue
        if skipping and ln.startswith("  - "):
            continue
        skipping = (bool(spared) and ln.startswith(spared)) or (
            bool(bare) and ln.startswith("- ") and not ln.startswith(keeps)
        )
        if skipping:
            continue
        if kernels is not None:
            if ln.startswith("  - ") and listed is not None:
                listed += 1
                if listed > kernels:
                    continue
            else:
                listed = 0 if ln.startswith("- Kernels") else None
                if listed is not None and kernels == 0:  # no list follows: the line ends as a sentence
                    ln = ln.removesuffix(":") + "."
        kept.append(ln)
    return "\n".join(kept)


def cut_at_blocks(parts: Sequence[str], limit: int, max_lines: int | None = None) -> str:
    """Whole parts (each complete markdown: a table, a section, a details block) while they fit, then a note.

    Never cuts inside a part, so no fence or <details> is left open and the note renders as text.
    """
    budget = limit - len(CUT_NOTE) - 2
    line_budget = (max_lines - 3) if max_lines is not None else None
    kept: list[str] = []
    used = 0
    lines = 0
    for part in parts:
        n = part.count("\n") + 1
        if used + len(part) + 1 > budget or (line_budget is not None and lines + n > line_budget):
            break
        kept.append(part)
        used += len(part) + 1
        lines += n
    return "\n".join(kept).rstrip("\n") + "\n\n" + CUT_NOTE
