"""The lines of a repro's short report section, each computed from the artifact's fields: the seed's
source and its experiment beside ours, what the headline holds for, the kernels that differ, the
re-run band, the re-run block."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from repro.evidence import band, scope
from repro.evidence.markdown import ci_label, fence, fmt_pct, fmt_time, ratio_with_ci, text, verdict_cell
from repro.evidence.standalone import rerun
from repro.evidence.variants import diff_pairs, is_smoke, kernel_diff, kernel_total_us

__all__ = ["band_line", "diff_lines", "rerun_block", "scope_lines", "seed_source", "seed_vs_ours"]

# Kernel-diff bullets in a repro's section; the rest are in the artifact.
DIFF_BULLETS = 3
DECIDED = ("reproduced", "not_reproduced")


# How a seed claim names its source when it gives no link: "NVIDIA forums thread '...': ..." (a
# prefix before a colon), or "An article on ... found ..." (a phrase before the verb).
_SOURCE_WORDS = r"(?:forums? thread|thread|article|blog post|post|paper|talk|tweet|issue|report|video)"
_SOURCE_PREFIX = re.compile(rf"^(?P<src>[^:]{{0,160}}\b{_SOURCE_WORDS}\b[^:]{{0,160}}):\s*(?P<rest>.+)$", re.S | re.I)
_SOURCE_PHRASE = re.compile(
    rf"\b(?P<src>(?:an?|the)\s+{_SOURCE_WORDS}(?:\s+(?:on|about|by|from)\s+[^,;:]{{1,120}}?)?)"
    r"(?=\s+(?:found|finds|reported|reports|showed|shows|says|said|claims|claimed|measured)\b|[,;:]|$)",
    re.I,
)


def seed_source(doc: Mapping[str, Any]) -> tuple[str, str]:
    """(source, claim): the seed's links, or the source its claim names, and the claim's words.

    Never blank: a claim that names no source says so.
    """
    r = doc.get("repro") or {}
    claim = str(r.get("seed_claim") or "")
    links = [str(u) for u in r.get("upstream") or []]
    if links:
        return ", ".join(text(u) for u in links), text(claim)
    if m := _SOURCE_PREFIX.match(claim):
        return f"{text(m.group('src').strip())}; no link recorded", text(m.group("rest"))
    if m := _SOURCE_PHRASE.search(claim):
        return f"{text(m.group('src').strip())}; no link recorded", text(claim)
    return "the seed gives no source; no link recorded", text(claim)


def _seed_rows(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Comparison rows that re-run the seed's own program (graph-memset's "the seed's program")."""
    rows = (doc.get("verdict") or {}).get("breakdown") or []
    return [
        r
        for r in rows
        if isinstance(r, Mapping)
        and not r.get("headline")
        and "seed's program" in f"{r.get('comparison', '')} {r.get('source', '')} {r.get('label', '')}"
    ]


def _agreement(row: Mapping[str, Any], v: Mapping[str, Any]) -> str:
    """Whether the seed's program and the headline agree, from their numbers: CIs that overlap agree."""
    raw = [row.get("ratio"), row.get("ci_low"), row.get("ci_high"), v.get("value"), v.get("ci_low"), v.get("ci_high")]
    nums = [float(x) for x in raw if isinstance(x, int | float)]
    if len(nums) != len(raw):
        return "one of the two has no CI, so they are not compared"
    r, lo, hi, h, hlo, hhi = nums
    if lo <= hhi and hlo <= hi:
        return f"the two agree: their CIs overlap ({r:.4g} against {h:.4g})"
    gap = (r / h - 1) * 100 if h else 0.0
    return f"the two differ by {gap:+.2g}%, beyond both CIs: the seed's experiment vs ours above says how they differ"


def seed_vs_ours(doc: Mapping[str, Any]) -> list[str]:
    """The seed's experiment as the repro describes it, then, where the seed's program ran here, its
    ratio beside the headline and whether the two agree, computed from their CIs."""
    out = []
    said = (doc.get("repro") or {}).get("seed_experiment")
    if isinstance(said, str) and said.strip():
        out.append(f"Seed's experiment vs ours: {text(said)}")
    v = doc["verdict"]
    for row in _seed_rows(doc):
        level = "95% CI" if abs(float(row.get("ci_level") or 0.95) - 0.95) < 1e-9 else ci_label(v)
        seed = ratio_with_ci(row.get("ratio"), row.get("ci_low"), row.get("ci_high"), level)
        out.append(
            f"The seed's program, re-run here: {text(row.get('label') or row.get('comparison'))} {seed} "
            f"({text(str(row.get('status') or '-').replace('_', ' '))}), beside the headline "
            f"{text(v.get('headline') or v.get('metric'))} {verdict_cell(doc, None)}; {text(_agreement(row, v))}."
        )
    return out


def scope_lines(doc: Mapping[str, Any]) -> list[str]:
    """Where the effect holds and where it does not: the headline's settings on the side its own status
    puts them, then every other comparison on the side its row's status puts it."""
    status = doc["verdict"].get("status")
    if status not in DECIDED:
        return []  # a smoke, skipped, inconclusive or error run holds for nothing
    found = scope.conditions(doc)
    if found is None:
        return []
    head, holds, fails = found
    if status == "reproduced":
        holds = [f"{head} (headline)", *holds]
    else:
        fails = [f"{head} (headline)", *fails]
    torch = ((doc.get("fingerprint") or {}).get("software") or {}).get("torch") or {}
    if torch.get("has_magma") is not None:
        # What "default" means for torch.linalg here: MAGMA where torch was built with it.
        said = "default backend (MAGMA here)" if torch["has_magma"] else "default backend (no MAGMA here)"
        holds = [h.replace("default backend", said, 1) for h in holds]
        fails = [f.replace("default backend", said, 1) for f in fails]
    out = [f"Holds for: {text('; '.join(holds))}"] if holds else []
    return out + ([f"Does not hold for: {text('; '.join(fails))}"] if fails else [])


def diff_lines(doc: Mapping[str, Any]) -> list[str]:
    """The verdict's own pair only: which kernels appear, disappear or change, at most DIFF_BULLETS."""
    if is_smoke(doc):
        return []
    pairs = diff_pairs(doc)
    if not pairs or not doc["verdict"].get("variants"):
        return []
    base, other = pairs[0]
    rows = [r for r in doc["verdict"].get("breakdown") or [] if isinstance(r, Mapping)]
    if any(r.get("num") == base["name"] and r.get("den") == other["name"] for r in rows):
        base, other = other, base  # as the comparison reads: from its denominator to its numerator
    changes = kernel_diff(base, other)
    total = f"all kernels {fmt_time(kernel_total_us(base) * 1e-6)} -> {fmt_time(kernel_total_us(other) * 1e-6)}"
    head = f"Kernels, {text(base.get('label') or base['name'])} -> {text(other.get('label') or other['name'])} ({total}"
    if not changes:
        return [f"{head}): the same kernels, times within 10%"]
    head += "):"  # the bullets come largest change in time per call first (kernel_diff)
    # kernel_diff's lines start "+ ", "- " or "~ "; the words after say the same, and a leading "- "
    # would open a list inside the list item.
    return [head] + [f"  - {c[2:]}" for c in changes[:DIFF_BULLETS]]


def band_line(doc: Mapping[str, Any], bands: Sequence[band.Band]) -> str | None:
    """Where this run falls among the GPUs of its model that the band holds, and how to list them."""
    v = doc["verdict"]
    if v.get("status") not in DECIDED:
        return None
    b = band.lookup(doc, bands)
    if b is None:
        return (
            "Re-run elsewhere: no cross-GPU data for this repro, params and GPU model; "
            "the CI alone says nothing about another GPU."
        )
    value = float(v["value"])
    uuid = str(((doc.get("fingerprint") or {}).get("gpu") or {}).get("uuid") or "")
    others = [p.value for p in b.points if p.uuid != uuid] or [p.value for p in b.points]
    if value < min(others):
        where = "below all of them"
    elif value > max(others):
        where = "above all of them"
    else:
        where = "among them"
    agreement = band.agree(b.center, value, b)
    within = "within" if agreement == "consistent" else "outside"
    gpus = f"{len(others)} other" if len(others) < len(b.points) else f"{len(others)}"
    return (
        f"Re-run elsewhere: {gpus} {text(b.gpu)} GPUs read {min(others):.4g}-{max(others):.4g}; this run "
        f"{value:.4g}, {where}, {within} 2x their ±{fmt_pct(b.half_width * 100)} band: {agreement}."
    )


def rerun_block(doc: Mapping[str, Any]) -> tuple[list[str], str | None]:
    """(list items, shell block): installing the harness that ran, then the command, from validated fields only.

    The harness comes from the bundle (``pip install ./<run-id>/harness/<wheel>``); a run made before
    harness digests names its version and commit instead, as a comment.
    """
    r = rerun(doc)
    if r.args is None:
        return [f"Re-run: not rebuilt here ({text(r.why_not)})."], None
    lines = r.lines()
    if r.predates():
        lines.insert(0, f"# {r.predates()}")
    return [], fence("\n".join(lines), "bash")
