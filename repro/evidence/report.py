"""The run report a user pastes into a GitHub issue: one screen to read, the rest one click away.

Layout: a title and one line of identity; a summary table (each headline with its own CI level,
and how far it moved on other GPUs of the model); what was not tested; a short section per repro
(finding, seed claim and source, scope, kernel diff, impact when it reproduced, the re-run); a
``<details>`` per repro with the variants, comparisons, warnings and time; the environment in one
``<details>``. Raw samples, the whole collect_env, the artifacts' JSON and the standalone scripts
are in the bundle (``repro bundle RUN_DIR``).

Everything comes from the artifacts and from what the caller passes in (``Declared`` data and
figures); nothing here reads the plugin registry.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from repro.core.kernelnames import recut
from repro.evidence import artifact, band, cliff_report, model, scope
from repro.evidence.agreement import model_flip
from repro.evidence.bundle import FULL_REPORT, script_member
from repro.evidence.clocks import (
    checked,
    is_order,
    order_about,
    order_rounds,
    restate,
    whose,
    with_power_peak,
    without_held_clause,
)
from repro.evidence.declared import Declarations, Declared, of
from repro.evidence.fitting import (
    BARE_LEVEL_WORDS,
    CUT_NOTE,
    LEAN_NAMED,
    NTH,
    SPARE_BULLETS,
    cut_at_blocks,
    lean_section,
    size,
    stack_level,
)
from repro.evidence.lines import (
    band_line,
    band_notes,
    diff_lines,
    install_block,
    kernels_alone,
    lean_parts,
    rerun_block,
    restated,
    scope_lines,
    stack_line,
)
from repro.evidence.machines import machines
from repro.evidence.markdown import (
    PASTE_LIMIT,
    PASTE_LINES,
    REPORT_LIMIT,
    code,
    current_ratios,
    fence,
    html_text,
    listed,
    text,
)
from repro.evidence.model import Artifact, Cliff, Doc
from repro.evidence.plots import INSTALL_HINT, NOT_DRAWN_HERE, Figure, describe
from repro.evidence.printed import HISTORY, HISTORY_MARK, NOTE, RERUN_LOG, lean_cuts, note
from repro.evidence.printed import words as printed_words
from repro.evidence.report_parts import (
    STACK_LINES,
    attach_words,
    bundle_names,
    environment,
    identity_lines,
    kernel_method,
    legend,
    method_line,
    not_tested,
    run_order,
    stack_note,
    summary_table,
)
from repro.evidence.reruns import lean_gone, offline, otherwise
from repro.evidence.reruns import words as reruns_words
from repro.evidence.seedlines import seed_source, seed_vs_ours
from repro.evidence.standalone import rendered_by
from repro.evidence.variants import (
    comparisons_table,
    is_smoke,
    variants_table,
    with_whole_steps,
)

__all__ = [
    "CUT_NOTE",
    "PASTE_LIMIT",
    "PASTE_LINES",
    "REPORT_LIMIT",
    "cut_at_blocks",
    "identity_lines",
    "legend",
    "report",
    "repro_section",
    "summary_table",
]

# Warnings listed in a repro's details block.
WARNINGS_SHOWN = 5
# A skip reason longer than this is said in full once, then by its first clause.
_LONG_REASON = 60
_CLOCKS_WARNING = ": clocks-event reasons while measuring: "


# --------------------------------------------------------------------------- a repro's section


def _figure_lines(figs: Sequence[Figure]) -> list[str]:
    out = []
    for f in figs:
        if f.drawn:
            out += [f"![{text(f.alt)}]({f.file})", ""]
        elif f.why_not == NOT_DRAWN_HERE:
            out += [f"_Plot `{f.file}`: {text(f.alt)}._", ""]
        else:
            why = f"{f.why_not or 'not drawn'}; {INSTALL_HINT}"
            out += [f"_Plot `{f.file}` not drawn ({text(why)}). It would show: {text(f.alt)}._", ""]
    return out


# A clocks reason as clocks.clock_words says it: "bs1: power cap, SM clock 1545-1980 MHz (median 1620) of 1980 MHz max".
_CLOCK_REASON = re.compile(
    r"^(?P<who>[\w.-]+): (?P<kind>[^,:]+), SM clock \S+ MHz \(median (?P<med>[\d.]+)\)(?P<top> of \S+ MHz max)?$"
)


def _by_median(reasons: Sequence[str]) -> list[str]:
    """The clocks reasons by their medians only, one per kind, where the first of its kind stood (``power cap,
    median SM clock bs1 1620, bs2 1605 MHz of 1980 MHz max``), each other reason as it is; the ranges stay in
    the artifact and the details."""
    order: list[str | tuple[str, str]] = []
    clocks: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for reason in reasons:
        m = _CLOCK_REASON.match(reason)
        if m is None:
            order.append(reason)
            continue
        key = (m["kind"], m["top"] or "")
        if key not in clocks:
            order.append(key)
        clocks.setdefault(key, []).append((m["who"], m["med"]))
    return [x if isinstance(x, str) else _medians(*x, clocks[x]) for x in order]


def _medians(kind: str, top: str, medians: Sequence[tuple[str, str]]) -> str:
    """``power cap, median SM clock 1620 MHz of 1980 MHz max (bs1, bs2)`` where the variants' medians agree,
    else each variant's (``bs1 1620, bs2 1605 MHz``); ``medians``: (variant, median MHz) each."""
    if len({med for _, med in medians}) == 1:
        return f"{kind}, median SM clock {medians[0][1]} MHz{top} ({', '.join(who for who, _ in medians)})"
    return f"{kind}, median SM clock {', '.join(f'{who} {med}' for who, med in medians)} MHz{top}"


def _grouped(messages: Sequence[str]) -> list[str]:
    """``a: m``, ``b: m`` -> ``m (a, b)``: one line per message, the variants it is about after it."""
    by: dict[str, list[str]] = {}
    for m in messages:
        who, sep, what = m.partition(": ")
        key, name = (what, who) if sep and " " not in who else (m, "")
        by.setdefault(key, []).extend([name] if name else [])
    return [f"{k} ({', '.join(v)})" if v else k for k, v in by.items()]


def _notes(doc: Artifact) -> list[str]:
    """The warnings, grouped by message, WARNINGS_SHOWN in all (why the run is suspect is in its section)."""
    reasons = list(doc.validity.reasons) if doc.validity.flag == "suspect" else []
    # A suspect reason restates a clocks warning about the same variant: said once, in the section.
    said = {whose(x) for x in reasons}
    warnings = [restate(w, doc) for w in doc.warnings if not (reasons and whose(w) in said)]
    # Clock events while measuring are summarised per repro under Environment (clocks.during).
    warnings = [w for w in warnings if _CLOCKS_WARNING not in w]
    notes = [f"warning: {text(w)}" for w in _grouped(warnings)]
    # An order check's suspect reason, said briefly in the section: here in full, with the orders.
    notes += [f"suspect reason in full: {text(restate(x, doc) + order_rounds(x, doc))}" for x in reasons if is_order(x)]
    if len(notes) > WARNINGS_SHOWN:
        notes = notes[: WARNINGS_SHOWN - 1] + [f"{len(notes) - WARNINGS_SHOWN + 1} more warnings in the artifact"]
    return notes


def _details(
    doc: Artifact, figs: Sequence[Figure], declared: Declared, machine: str | None, compact: bool = False
) -> str:
    """The rest of a repro's evidence, collapsed: variants, comparisons, warnings, time, the script.

    ``compact``: without the side measurements, the variants table, the plots and the time, which
    the bundle holds (the artifact's ``verdict.details``, ``variants`` and ``run``, ``plots/``): the
    comparisons, the script and the source digest stay."""
    r, v = doc.repro, doc.verdict
    rid = r.id
    smoke = is_smoke(doc)
    body: list[str] = []
    shown = [d for d in v.details if not restated(doc, d)]
    if shown and not compact:
        body += [" ".join(text(with_whole_steps(doc, current_ratios(d, v))) for d in shown), ""]
    if doc.variants and not compact:
        body += [variants_table(doc), ""]
    table = comparisons_table(doc)
    body += [table, ""] if table else []
    # Compact: what is left out is named once, in the note at the top of the report.
    if not compact:
        body += _figure_lines(figs)
    notes = _notes(doc)
    facts = ["; ".join(notes)[:1].upper() + "; ".join(notes)[1:] + "."] if notes else []
    alone = None if compact else kernels_alone(doc)
    facts += [alone] if alone else []
    if v.threshold_why and isinstance(v.threshold, int | float):
        # Why the pass line sits where it does, as the repro's source gives it (schema 1.6).
        facts.append(f"Threshold {v.threshold:g} (the repro's): {text(v.threshold_why.rstrip('.'))}.")
    # The run's phases; their inner split (warm-up, sampling, profiling) is in the artifact.
    phases = list((doc.run.phases_s or {}).items())
    spent = artifact.format_breakdown(phases, min_s=0.5)
    busy = artifact.format_busy(doc.raw)  # artifact.py's reading of the document, shared with `repro all`
    if spent and not compact:
        facts.append(f"Time: {text(spent)} of {doc.run.duration_s:.1f} s" + (f"; {busy}." if busy else "."))
    if not smoke:
        if declared.script:
            member = script_member(str(rid), declared.script) or f"scripts/{rid}.py"
            facts.append(f"Script: `{text(member)}` in the bundle.")
        else:
            why = declared.script_note or "the report was rendered without the catalog"
            facts.append(f"No standalone script could be regenerated here ({text(why)}).")
    if doc.error and doc.error.stderr_tail:
        body += ["stderr tail:", "", fence(doc.error.stderr_tail[-1500:]), ""]
    if not any(b.strip() for b in body) and not facts:
        return ""  # nothing ran and nothing was said: no block holding only a digest
    if r.source_sha256:
        # Rendered by a harness whose source of the repro is not the run's: said, as a script it regenerates can
        # differ from the bundle's (the bundle's MANIFEST.json has a script note where its harness's differed).
        here = declared.source
        other = f" (this report's harness has another source of it, {code(here[:12])})" if here else ""
        facts.append(f"Repro source sha256 {code(r.source_sha256[:12])}{other if here != r.source_sha256 else ''}.")
    if machine and not smoke:
        facts.append(f"Fingerprint: machine {machine} under Environment.")
    body += [" ".join(facts), ""] if facts else []
    summary = html_text(f"{rid}: tables, warnings, time")
    return f"<details><summary>{summary}</summary>\n\n" + "\n".join(body).rstrip("\n") + "\n\n</details>\n"


def repro_section(
    doc: Artifact | Mapping[str, Any],
    machine: str | None = None,
    figs: Sequence[Figure] = (),
    declared: Declared | None = None,
    bands: Sequence[band.Band] | None = None,
    kernels_said: bool = False,
    later: str = "",
) -> tuple[str, str]:
    """The repro's short section and its ``<details>`` block (kept apart: the details go first when space is short).

    ``kernels_said``: the report's head said where every repro's kernel tables come from. ``later``: markdown
    after the finding, on later runs of this repro that read otherwise (``reruns.otherwise``).

    ``declared``: what the caller looked up in the catalog for this artifact (impact for an
    artifact that lacks it, whether a script could be regenerated). ``doc`` as ``report`` passes it, from
    ``clocks.checked``, carries the order check made here on its rounds; a raw artifact, only what its run recorded.
    """
    doc = model.run_of(doc)
    declared = declared or Declared()
    known = band.load() if bands is None else bands
    r, v = doc.repro, doc.verdict
    names = [k.name for x in doc.variants for k in x.kernels]
    finding = current_ratios(recut(v.finding, names), v)
    validity = doc.validity
    status = f"**{text(v.status)}**"
    if validity.flag == "suspect" and validity.reasons:
        restated = [restate(x, doc, brief=True) for x in validity.reasons]
        status += f" (suspect: {text('; '.join(with_power_peak(doc, _grouped(_by_median(restated)))))})"
        if any(_CLOCK_REASON.match(x) for x in restated):
            finding = without_held_clause(finding)  # the note above gives the clocks' medians
    # The harness opens every finding with the status in words: said once, in bold.
    lead = {"reproduced": "Reproduced: ", "not_reproduced": "Not reproduced: ", "inconclusive": "Inconclusive, "}.get(
        v.status, ""
    )
    finding = with_whole_steps(doc, finding[len(lead) :] if lead and finding.startswith(lead) else finding)
    # The finding's CI is this run's median's: where the arms' order split the headline's rounds, it says so there.
    split = validity.flag == "suspect" and any(order_about(x, v.headline) for x in validity.reasons)
    split_said = (
        " Split by the arms' order, its rounds' medians lie past this CI, as the suspect note at this line's start"
        " gives them."
        if split
        else ""
    )
    flip = f" {text(said)}" if (said := model_flip(doc, known)) else ""  # another GPU model's runs read otherwise
    short = f" {text(x)}" if (x := scope.short_of_threshold(doc)) else ""  # its direction held, its size did not
    lines = [f"## {code(r.id)}: {text(r.title)}", f"{status}: {text(finding)}{short}{split_said}{flip}{later}", ""]
    if doc.error:
        e = doc.error
        lines[-1:] = [f"Error ({text(e.kind)}): {text(e.message)}", ""]
    source, claim = seed_source(doc)
    items = [f"Seed claim ({source}): {claim}"]
    items += seed_vs_ours(doc, declared)
    method = method_line(doc, kernels_said)
    member = script_member(str(r.id), declared.script) if declared.script and not is_smoke(doc) else None
    if method and member and not member.endswith(".py"):
        # A script that is not Python builds a CUDA program: where its source is, said here.
        method = (
            f"{method[:-1]}; standalone: {code(member)} in the bundle (the CUDA source inside; it builds it with nvcc)."
        )
    items += [method] if method else []
    items += scope_lines(doc)
    items += diff_lines(doc)
    items += [x for x in [stack_line(doc, declared)] if x]
    if v.status == "reproduced":
        impact = scope.impact(doc, declared)
        items += [f"Impact: {text(impact)}"] if impact else []
    items += [x for x in [band_line(doc, known), scope.episodes_line(doc, known)] if x]
    more, shell = rerun_block(doc)
    items += more
    # No blank lines around the list: a list may follow a paragraph, and a fence ends a list.
    lines[-1:] = [it if it.startswith("  - ") else f"- {it}" for it in items]
    lines += [shell, ""] if shell else [""]
    return "\n".join(lines), _details(doc, figs, declared, machine)


def compact_details(
    doc: Artifact | Mapping[str, Any],
    machine: str | None = None,
    figs: Sequence[Figure] = (),
    declared: Declared | None = None,
) -> str:
    """A repro's ``<details>`` without its variants table and plots (``_details``'s ``compact``)."""
    return _details(model.run_of(doc), figs, declared or Declared(), machine, compact=True)


# --------------------------------------------------------------------------- the whole report


def skip_reasons(docs: Sequence[Artifact]) -> list[str]:
    """Why variants and comparisons did not run, as the artifacts record it (long ones only)."""
    found = [str(x.reason or "") for d in docs for x in d.variants if x.status != "ok"]
    found += [x.reason for d in docs for x in d.verdict.not_run]
    return [r for r in dict.fromkeys(found) if len(r) > _LONG_REASON and ": " in r]


def said_once(parts: Sequence[str], reasons: Sequence[str]) -> list[str]:
    """A long skip reason in full where it first appears; later, its first clause ("transformer_engine.pytorch
    is not importable") stands for it."""
    out = list(parts)
    for reason in reasons:
        full, short = text(reason), text(reason.split(": ", 1)[0])
        seen = False
        for i, part in enumerate(out):
            if full not in part:
                continue
            head, sep, tail = part.partition(full) if not seen else ("", "", part)
            out[i] = head + sep + tail.replace(full, short)
            seen = True
    return out


def report(
    docs: Sequence[Doc | Mapping[str, Any]],
    limit: int = PASTE_LIMIT,
    title: str | None = None,
    figures: Sequence[Figure] | None = None,
    plots: Mapping[str, str] | None = None,
    declared: Declarations | None = None,
    max_lines: int | None = PASTE_LINES,
    bands: Sequence[band.Band] | None = None,
    attached: Sequence[str] = (),
    reruns: Mapping[str, Any] | None = None,
    printed: Mapping[str, str] | None = None,
) -> str:
    """The whole report, at most ``limit`` characters and ``max_lines`` lines.

    What does not fit goes in this order, each named in a note that points at the bundle: the
    repros' ``<details>`` blocks (largest first), then the environment; then the re-run paragraph's
    parts a lean one leaves out (``repro.evidence.reruns.lean_gone``); then the sections' lines that
    restate (``repro.evidence.fitting``: LEAN_LINES), their kernel lists, their Kernels lines, the
    last tiers of the Not-tested section, the Episodes lines, then every bullet but the seed's and the re-run's
    (``fitting.BARE_KEEPS``, ``SEED_KEEPS``), then the seed's programs' bullets; only then is the report cut
    between whole blocks. ``figures``: the repros' plots (``repro.evidence.plots``). ``declared``: what
    the caller looked up in the plugin registry per artifact (``repro.run.scripts.declared``).
    ``bands``: the re-run bands (default: the shipped data, ``repro.evidence.band``). ``attached``:
    the names of the files in the run folder's ``attached/`` that the bundle packs; ``reruns``: those of
    them that are artifacts (name -> document): re-runs made from the bundle (``rerun-*.json``) and later runs
    (``repro.evidence.reruns``); ``printed``: the text of those that programs run beside the run printed
    (``repro.evidence.printed``).

    ``repro cliff`` artifacts get their own section (``repro.evidence.cliff_report``); ``plots`` maps
    their key to the link of a plot drawn beside the report.
    """
    if not docs:
        raise ValueError("no artifacts to report")
    typed = [model.of(d) for d in docs]
    run_ids = sorted({d.run.run_id for d in typed})
    # The shipped band less this run and what is attached to it: a committed run is among the band's runs.
    again = {name: model.of(doc) for name, doc in (reruns or {}).items()}
    ids = [a.run.run_id for a in again.values() if isinstance(a, model.Artifact)]
    known = band.without(band.load(), [*run_ids, *ids]) if bands is None else list(bands)
    cliffs = [d for d in typed if isinstance(d, Cliff)]
    # The order check made here on the rounds of a run whose harness did not make it (clocks.checked).
    runs = [checked(d) for d in typed if isinstance(d, Artifact)]
    if figures is None:
        figures = describe(runs, declared=declared)
    head = [f"# {text(title or 'gpu-repro report')}: run {text(', '.join(run_ids))}", ""]
    kernels_said = False
    # Where the legend is in ``head``: the lean tiers swap in ``legends[kernel lists kept]``, without n.
    at_legend: int | None = None
    at_notes: int | None = None
    at_order: int | None = None
    legends: dict[bool, str] = {}
    ident = identity_lines(runs, printed)
    if len(ident) == 1:
        head += [ident[0], ""]
    elif ident:
        head += [f"- {line}" for line in ident] + [""]
    head += [by, ""] if (by := rendered_by(runs)) else []
    smoke_run = bool(runs) and all(is_smoke(d) for d in runs)
    bundle = bundle_names(runs) if runs else ""
    if runs:
        head += [summary_table(runs, known), ""]
        marked = HISTORY_MARK in (printed or {}).get(HISTORY, "")  # a history that names changed files
        notes = band_notes([d for d in runs if not is_smoke(d)], known, marked)
        at_notes = len(head) if notes else None  # the band note: the first of the last things left out
        head += [notes, ""] if notes else []
        order = run_order([d for d in runs if not is_smoke(d)])
        at_order = len(head) if order else None  # the run-order line: left out before report_parts.STACK_LINES
        head += [order, ""] if order else []
        kernels_said = bool(order) and len({kernel_method(d) for d in runs}) == 1
        if not smoke_run:
            at_legend = len(head)
            head += [legend(runs, known) + attach_words(runs, bundle, attached), ""]
            lean_attach = attach_words(runs, bundle, attached, lean=True)
            legends = {kept: legend(runs, known, False, kept) + lean_attach for kept in (True, False)}
    head += [cliff_report.section(c, (plots or {}).get(cliff_report.key(c))) for c in cliffs]
    if any(is_smoke(d) for d in runs):
        where = f" The harness the re-run lines install is in {bundle} (`repro bundle RUN_DIR`)." if smoke_run else ""
        head += [
            "_Smoke run: shrunken sizes to prove the pipeline (often on CPU); its ratios are not evidence about any "
            f"GPU. The fingerprint and collect_env output are in the artifacts.{where}_",
            "",
        ]
    if any(d.run.quick for d in runs):
        head += [
            "_Quick run (`--quick`): headline comparisons only, at a looser CI target; `undecided` means the CI "
            "straddles the threshold, and the finding names the full command that decides it._",
            "",
        ]
    log_text = (printed or {}).get(RERUN_LOG)
    scope_md = not_tested(runs, declared, offline(log_text), note(printed or {}))
    full = [d for d in runs if not is_smoke(d)]
    mach, machine_of = machines(full)
    # With one machine there is nothing to tell apart: sections name a machine only when there are several.
    which = machine_of if len(mach) > 1 else {}
    figs_of = {id(d): [f for f in figures if f.repro_id == d.repro.id] for d in runs}
    sections = [
        repro_section(d, which.get(id(d)), figs_of[id(d)], of(d, declared), known, kernels_said, otherwise(d, again))
        for d in runs
    ]
    compact = {
        d.repro.id: compact_details(d, which.get(id(d)), figs_of[id(d)], of(d, declared)) if more else ""
        for d, (_, more) in zip(runs, sections, strict=True)
    }
    env = environment(full, machine_of)
    env_compact = environment(full, machine_of, compact=True)
    log = RERUN_LOG if RERUN_LOG in attached else None
    outputs = printed or {}
    note_text = outputs.get(NOTE)
    later, later_lean = (reruns_words(runs, again, known, log, whole, log_text, note_text) for whole in (True, False))
    install = install_block(runs, reran=later + printed_words(runs, outputs, later=again))
    # Lean: without the later runs' CIs and seeds_raw.py's numbers (the sections run the seeds' programs too).
    install_lean = install_block(runs, reran=later_lean + printed_words(runs, outputs, False, again), lean=True)
    # What the lean re-run paragraph leaves out, of what this run has.
    whose = lean_cuts(runs, outputs, again)
    rerun_gone = lean_parts(runs)
    rerun_gone += lean_gone(runs, again, known, log_text)
    rerun_gone += [f"{listed(whose)} numbers"] if whose else []
    dropped: list[str] = []
    shortened: list[str] = []
    env_dropped = False
    env_short = False
    short_rerun = False  # the re-run paragraph's lean form (the sections whole)
    lean = False  # and the sections without their lines that restate the finding (LEAN_LINES)
    kernel_lines: int | None = None  # lean, and each section's kernel list cut to this many lines
    # 1: band note goes; 2: and parentheses; 3: and run order; 4: and later not-covered items; 5-7: STACK_LINES
    stack_gone = 0
    bullets_gone = 0  # the first this many of SPARE_BULLETS gone from every section
    bare: Literal[0, 1, 2] = (
        0  # 1: every section without its bullets but BARE_KEEPS and SEED_KEEPS; 2: but BARE_KEEPS, the last
    )
    # The kinds of restating line (LEAN_NAMED) the sections have: what a lean report names as left out.
    lines_of = [ln for s, _ in sections for ln in s.split("\n")]
    restating = [name for prefix, name in LEAN_NAMED if any(ln.startswith(prefix) for ln in lines_of)]

    def assemble() -> list[str]:
        parts = list(head)
        if lean and at_legend is not None:  # no details: no n to define; without kernel lists no us/call either
            parts[at_legend] = legends[kernel_lines != 0]
        for at in sorted(
            (a for a, n in ((at_notes, 1), (at_order, 3)) if a is not None and stack_gone >= n), reverse=True
        ):
            parts[at : at + 2] = []
        if dropped or env_dropped or shortened or env_short or short_rerun:
            whose = "every repro" if len(shortened) == len(runs) > 1 else ", ".join(shortened)
            every = len(dropped) == len(runs) > 1  # every details block: what was shortened in them went too
            gone = [f"side measurements, variants tables, plots, times ({whose})"] if shortened and not every else []
            gone += ["collect_env's library list"] if env_short and not env_dropped else []
            gone += ["every repro's details" if every else f"the details of {', '.join(dropped)}"] if dropped else []
            gone += ["the environment"] if env_dropped else []
            gone += [f"the {listed(restating)} lines"] if lean and restating else []
            gone += [f"the re-run paragraph's {listed(rerun_gone)}"] if short_rerun and rerun_gone else []
            spared = [words for prefix, words in SPARE_BULLETS[:bullets_gone] if any(prefix in s for s, _ in sections)]
            if kernel_lines is not None and not any(w.startswith("Kernels") for w in spared):
                gone += [
                    f"each section's kernel lines after its {NTH[kernel_lines]}"
                    if kernel_lines
                    else "each section's kernel lines"
                ]
            gone += [f"each section's {' and '.join(spared)}"] if spared and not bare else []
            gone += [BARE_LEVEL_WORDS[bare - 1]] if bare else []
            gone += ["the note under the table on the bands' runs"] if stack_gone and at_notes is not None else []
            gone += ["the run-order line"] if stack_gone >= 3 and at_order is not None else []
            gone += [said] if (said := stack_note(scope_md, stack_level(stack_gone))[1]) else []
            # Rendered by another harness than the run's: the bundle's full report, made when the run was bundled,
            # can differ from this one's, so the note names the command that renders this one's whole.
            where = "`repro report --full`" if by else f"the bundle's `{FULL_REPORT}`"
            parts += [f"_Left out here, in {where}: {'; '.join(gone)}._", ""]
        if scope_md:
            parts.append(stack_note(scope_md, stack_level(stack_gone))[0])
        if install and install_lean:
            parts.append(install_lean if short_rerun else install)
        for d, (section, more) in zip(runs, sections, strict=True):
            parts.append(lean_section(section, kernel_lines, bullets_gone, bare) if lean else section)
            if more and d.repro.id not in dropped:
                parts.append(compact[d.repro.id] if d.repro.id in shortened else more)
        if not env_dropped:
            parts += env_compact if env_short else env
        return said_once(parts, skip_reasons(runs))

    def fits(parts: Sequence[str]) -> bool:
        chars, lines = size(parts)
        return chars <= limit and (max_lines is None or lines <= max_lines)

    parts = assemble()
    # The details blocks' bulk goes first (variants tables and plots, largest saving first), then
    # whole details blocks, largest first: each is one click away in the bundle too.
    saving = {d.repro.id: len(more) - len(compact[d.repro.id]) for d, (_, more) in zip(runs, sections, strict=True)}
    for rid in sorted(saving, key=lambda r: -saving[r]):
        if fits(parts):
            break
        if saving[rid] > 0:
            shortened.append(rid)
            parts = assemble()
    if not fits(parts) and env_compact != env:
        env_short = True
        parts = assemble()
    for d, (_, more) in sorted(zip(runs, sections, strict=True), key=lambda p: -len(p[1][1])):
        if fits(parts) or not more:
            break
        dropped.append(d.repro.id)
        parts = assemble()
    if not fits(parts) and env:
        env_dropped = True
        parts = assemble()
    if not fits(parts):  # the re-run paragraph's lean form first, the sections whole
        short_rerun = True
        if not fits(parts := assemble()):
            lean = True
            parts = assemble()
    for kept in (2, 1, 0) if not fits(parts) else ():
        kernel_lines = kept
        parts = assemble()
        if fits(parts):
            break
    if not fits(parts):  # the Kernels lines' timings, before the Not-tested section loses a word
        bullets_gone = 1
        parts = assemble()
    for stack_gone in range(1, 5 + len(STACK_LINES)) if not fits(parts) else ():  # noqa: B007 (assemble reads it)
        real = {1: at_notes is not None, 3: at_order is not None}.get(
            stack_gone, bool(stack_note(scope_md, stack_level(stack_gone))[1])
        )
        if real and fits(parts := assemble()):
            break
    if not fits(parts):  # the Episodes lines, then the bare levels: the last before a cut
        bullets_gone = 2
        for bare in (1, 2) if not fits(parts := assemble()) else ():  # noqa: B007 (assemble reads it)
            if fits(parts := assemble()):
                break
    parts = assemble()
    if fits(parts):
        return "\n".join(parts)
    return cut_at_blocks(parts, limit, max_lines)
