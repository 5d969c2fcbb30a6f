"""A repro section's lines on the seed: where the claim came from (``seed_source``), the seed's experiment beside
ours and, where the seed's own programs ran here, their numbers beside the headline (``seed_vs_ours``), and the
seed's timing method re-run here (``seed_method_lines``). All of it inert text from validated fields."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from repro.core import stats
from repro.evidence.clocks import order_split
from repro.evidence.declared import Declared
from repro.evidence.markdown import finite, ratio_with_ci, text, verdict_label
from repro.evidence.model import Artifact, Row, Verdict
from repro.evidence.seeds import checked

__all__ = ["SEED_METHOD_WHY", "seed_method_lines", "seed_rows", "seed_source", "seed_torch_words", "seed_vs_ours"]

# How a seed claim names its source when it gives no link: "NVIDIA forums thread '...': ..." (a
# prefix before a colon), or "An article on ... found ..." (a phrase before the verb).
_SOURCE_WORDS = r"(?:forums? thread|thread|article|blog post|post|paper|talk|tweet|issue|report|video)"
_SOURCE_PREFIX = re.compile(rf"^(?P<src>[^:]{{0,160}}\b{_SOURCE_WORDS}\b[^:]{{0,160}}):\s*(?P<rest>.+)$", re.S | re.I)
_SOURCE_PHRASE = re.compile(
    rf"\b(?P<src>(?:an?|the)\s+{_SOURCE_WORDS}(?:\s+(?:on|about|by|from)\s+[^,;:]{{1,120}}?)?)"
    r"(?=\s+(?:found|finds|reported|reports|showed|shows|says|said|claims|claimed|measured)\b|[,;:]|$)",
    re.I,
)


def seed_source(doc: Artifact) -> tuple[str, str]:
    """(source, claim): the seed document's links, or the source its claim names, and the claim's words.

    Never blank: a claim that names no source says so.
    """
    claim = doc.repro.seed_claim
    links = list(doc.repro.upstream)
    if links:  # the claim is the seed document's words: the post it links may say otherwise (seeds/README.txt)
        said = checked(doc.repro.id)
        cites = f"it cites {', '.join(text(u) for u in links)}" + (f", unchecked: {text(said)}" if said else "")
        return f"the seed document's; {cites}", text(claim)
    if m := _SOURCE_PREFIX.match(claim):
        return f"{text(m.group('src').strip())}; the seed gives no URL", text(m.group("rest"))
    if _SOURCE_PHRASE.search(claim):
        return "the seed gives no URL", text(claim)  # the claim's own words name its source
    return "the seed names no source and gives no URL", text(claim)


def seed_rows(doc: Artifact) -> list[Row]:
    """Comparison rows that re-run the seed's own program (graph-memset's "the seed's program")."""
    return [
        r
        for r in doc.verdict.breakdown
        if not r.headline
        and "seed's program" in f"{r.comparison or ''} {r.qualifiers.get('source', '')} {r.label or ''}"
    ]


def _agreement(row: Row, v: Verdict, nodes: object = None) -> str:
    """Whether the seed's program and the headline agree, from their numbers: CIs that overlap agree. ``nodes``:
    the repro's words on where the two differ (graph-memset's ``seed_vs_twin_nodes``), said where they differ."""
    raw = [row.ratio, row.ci_low, row.ci_high, v.value, v.ci_low, v.ci_high]
    nums = [float(x) for x in raw if x is not None]
    if len(nums) != len(raw):
        return "one of the two has no CI, so they are not compared"
    r, lo, hi, h, hlo, hhi = nums
    if stats.cis_overlap(lo, hi, hlo, hhi):
        return f"the two agree: their CIs overlap ({r:.4g} against {h:.4g})"
    gap = (r / h - 1) * 100 if h else 0.0
    if isinstance(nodes, str) and nodes:
        return f"the two differ by {gap:+.2g}%, beyond both CIs, {nodes}"
    return f"the two differ by {gap:+.2g}%, beyond both CIs: the seed's experiment vs ours above says how they differ"


def seed_vs_ours(doc: Artifact, declared: Declared | None = None) -> list[str]:
    """The seed's experiment as the artifact's repro described it (the words of the harness that ran),
    then, where the seed's program ran here, its ratio beside the headline and whether the two agree,
    computed from their CIs."""
    out = []
    said = doc.repro.seed_experiment
    if said is not None and said.strip():
        # The repro's words open "Seed: ..." (the label says whose experiment comes first).
        out.append(f"Seed's experiment vs ours: {text(said.removeprefix('Seed: '))}")
    posted = doc.extra.get("seed_as_posted")  # the seed's own program run here, in its repro's words
    if isinstance(posted, str) and posted.strip():
        out.append(f"{text(posted.strip().rstrip('.'))}.")
    if said := seed_torch_words(doc.extra.get("seed_torch_program"), doc):
        out.append(said)
    v = doc.verdict
    for row in seed_rows(doc):
        level = "95% CI" if abs(float(row.ci_level or 0.95) - 0.95) < 1e-9 else verdict_label(v)
        seed = ratio_with_ci(row.ratio, row.ci_low, row.ci_high, level)
        # The headline's own ratio and CI are in the finding just above: only the comparison is said here.
        line = (
            f"The seed's program, re-implemented here: {seed} "
            f"({text(str(row.status or '-').replace('_', ' '))}); against the headline, "
            f"{text(_agreement(row, v, doc.extra.get('seed_vs_twin_nodes')))}"
        )
        own, vs = finite(doc.extra.get("seed_as_posted_ratio")), doc.extra.get("seed_as_posted_vs")
        if own and isinstance(row.ratio, float):
            line += f"; against the seed's own program above ({own:.2f}x), {(row.ratio / own - 1) * 100:+.1f}%"
            line += f", {nodes}" if (nodes := seed_cu_nodes(doc)) else ""
            line += f": {text(vs)}" if isinstance(vs, str) and vs else ""
        out.append(line + ".")
    return out + seed_method_lines(doc)


# seed.cu captures this many nodes in its one graph: its printed microseconds per replay over this are per op.
SEED_CU_OPS = 1000
# The re-implementation's variant per seed.cu form, and the node each times.
_SEED_CU_NODES = (("memset", "twin_seed_memset", "memset node"), ("kernel", "twin_seed_fill", "kernel node"))


def seed_cu_nodes(doc: Artifact) -> str:
    """``ns per op: memset node 888 (seed.cu 903, -1.6%; its processes 894-924), kernel node 621 (seed.cu 592,
    +4.9%; 592-607)``: the re-implementation's per-op medians against seed.cu's (its median microseconds per replay
    over SEED_CU_OPS) and the span of seed.cu's own processes (no CI: one replay each), and the one node outside
    that span where the other lies inside it; "" where either is missing."""
    got = doc.extra.get("seed_cu")
    med = got.get("median_us") if isinstance(got, Mapping) else None
    each = got.get("us") if isinstance(got, Mapping) else None
    if not isinstance(med, Mapping):
        return ""
    said = []
    for form, name, label in _SEED_CU_NODES:
        ours, theirs = doc.variant(name), finite(med.get(form))
        if ours is None or not ours.median or not theirs:
            return ""
        listed = each.get(form) if isinstance(each, Mapping) else None
        runs = [x * 1e3 / SEED_CU_OPS for v in (listed if isinstance(listed, list) else []) if (x := finite(v))]
        said.append((label, ours.median * 1e9, theirs * 1e3 / SEED_CU_OPS, runs))
    per_op = []
    outside = []
    for label, a, b, runs in said:
        spread = f"; its processes {min(runs):.0f}-{max(runs):.0f}" if len(runs) > 1 else ""
        per_op.append(f"{label} {a:.0f} (seed.cu {b:.0f}, {a / b - 1:+.1%}{spread})".replace("-0.0%", "+0.0%"))
        if spread:
            outside.append(not round(min(runs)) <= round(a) <= round(max(runs)))
    # A node is named only where it alone lies outside seed.cu's own processes: their spread is all there is to
    # set a shift against (seed.cu times one replay per process, so it has no CI).
    alone = [label for (label, *_), out in zip(said, outside, strict=False) if out] if len(outside) == 2 else []
    only = f", only the {alone[0]} outside seed.cu's processes" if len(alone) == 1 else ""
    return f"ns per op: {', '.join(per_op)}{only}"


def seed_torch_words(got: object, doc: Artifact | None = None) -> str:
    """graph-memset's second seed program (``extra["seed_torch_program"]``: the seed's torch graph, re-coded in the
    repro and run in its process after the rounds), in one sentence beside the seed.cu line, as inert text; ""
    when it did not run. With ``doc``, the run's own comparison of the same ops that the program names (its
    ``ours``) follows, with the program's ``why``."""
    if not isinstance(got, Mapping):
        return ""
    ms = got.get("ms")
    memset, zero = (finite(ms.get("memset")), finite(ms.get("zero_"))) if isinstance(ms, Mapping) else (None, None)
    if memset is None or zero is None or memset <= 0 or zero <= 0:
        return ""
    how = got.get("how")
    how = how[:300] if isinstance(how, str) else None  # the repro's words; an artifact's, so bounded
    return text(
        f"The seed's torch program, re-coded in the run's process{f' ({how})' if isinstance(how, str) else ''}: "
        f"memset/zero_() {memset / zero:.2f}x (memset {memset:.2f} ms, zero_ {zero:.2f} ms; one replay each, no CI)"
    ) + _ours_beside(got, doc)


def _ours_beside(got: Mapping[str, Any], doc: Artifact | None) -> str:
    """``; ours, the same ops: NAME R (CI): WHY.`` from the run's breakdown row the seed program names; "." alone
    where it names none or the row has no ratio."""
    ours, why = got.get("ours"), got.get("why")
    row = next((r for r in doc.verdict.breakdown if r.comparison == ours), None) if doc and ours else None
    if row is None or not isinstance(row.ratio, float):
        return "."
    level = f"{float(row.ci_level or 0.95):.0%} CI"
    said = f"; ours, the same ops paired: {text(str(ours))} {ratio_with_ci(row.ratio, row.ci_low, row.ci_high, level)}"
    if doc is not None and (split := order_split(doc, str(ours))):
        said += f"; {text(split)}"
    return said + (f"; they differ in method: {text(why[:500])}." if isinstance(why, str) and why else ".")


def seed_method_lines(doc: Artifact) -> list[str]:
    """The seed's own timing method, re-run here on each backend that ran, as the repro recorded it in
    ``extra["seed_method"]`` (entries: comparison, label, subject, ratio, or error) beside our ratio of
    the same comparison, then the repro's sentence on why the two differ (``seed_method_note``)."""
    entries = doc.extra.get("seed_method")
    if not isinstance(entries, list) or not entries:
        return []
    rows = {str(r.comparison): r for r in doc.verdict.breakdown}
    said: dict[bool, list[str]] = {True: [], False: []}
    for e in entries:
        if not isinstance(e, Mapping):
            continue
        label = text(str(e.get("label") or e.get("comparison") or "?"))
        ratio = finite(e.get("ratio"))
        if ratio is None:
            why = e.get("error")
            said[e.get("subject") is True].append(f"{label} not measured ({text(str(why or 'no ratio'))})")
            continue
        row = rows.get(str(e.get("comparison")))
        ours = finite(row.ratio) if row is not None else None
        words = f"{label} {ratio:.3f}x" + (f" (ours {ours:.3f}x)" if ours is not None else "")
        said[e.get("subject") is True].append(words)
    how = doc.extra.get("seed_method_how")
    head = "The seed's method, re-run here" + (f" ({text(str(how))})" if isinstance(how, str) and how else "")
    parts = []
    if said[True]:
        parts.append(f"on the seed's subject: {'; '.join(said[True])}")
    if said[False]:
        parts.append(f"applied to what is not the seed's subject: {'; '.join(said[False])}")
    if not parts:
        return []
    note = doc.extra.get("seed_method_note")
    why = [f"{SEED_METHOD_WHY} {text(str(note))}"] if isinstance(note, str) and note else []
    return [f"{head}: {'. '.join(parts)}.", *why]


# The bullet on why the seed's method and ours differ (``seed_method_note``): a lean report leaves it to the bundle.
SEED_METHOD_WHY = "Why the seed's method and ours differ:"
