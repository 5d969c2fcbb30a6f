"""The run report for GitHub: summary, scope, a section per repro with its standalone script, the machines, the JSON.

Everything comes from the artifacts and from what the caller passes in (``Declared`` data
and figures); nothing here reads the plugin registry. The report fits ``limit`` characters:
what does not fit is cut between blocks or left out, and a note names the bundle that has it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from repro.core import jsonfit
from repro.env.fingerprint import essentials
from repro.evidence import artifact, cliff_report, scope
from repro.evidence.declared import Declarations, Declared, of
from repro.evidence.machines import essentials_line, machine_summary, machines, state_table
from repro.evidence.markdown import (
    REPORT_LIMIT,
    code,
    details,
    fence,
    html_text,
    md_table,
    text,
    verdict_cell,
)
from repro.evidence.plots import INSTALL_HINT, NOT_DRAWN_HERE, Figure, describe
from repro.evidence.standalone import harness_lines
from repro.evidence.variants import (
    KERNELS_PER_VARIANT,
    KERNELS_PER_VARIANT_SMOKE,
    breakdown_table,
    diff_section,
    is_smoke,
    kernel_matrix,
    raw_samples_line,
    shown_variants,
    variants_table,
)

__all__ = ["CUT_NOTE", "REPORT_LIMIT", "cut_at_blocks", "report", "repro_section", "summary_table"]

_COLLECT_ENV = "python -m torch.utils.collect_env"
# Below this many characters a details block would be a stub: it is left out and the note says so.
_MIN_BLOCK = 1500


def stack(doc: Mapping[str, Any]) -> str:
    """torch, CUDA and the lane, as a table cell."""
    e = essentials(doc["fingerprint"])
    return text(f"torch {e['torch'] or '-'}, CUDA {e['cuda'] or '-'}, {e['lane']}", cell=True)


def summary_table(docs: Sequence[Mapping[str, Any]]) -> str:
    """One row per repro: status, ratio, what it holds for, threshold, validity, GPU and stack."""
    rows = [
        [
            text(d["repro"]["id"], cell=True),
            f"**{text(d['verdict']['status'], cell=True)}**",
            verdict_cell(d),
            text(scope.conditions(d), cell=True),
            f"{d['verdict']['threshold']:g}",
            text(d["validity"]["flag"], cell=True),
            text(essentials(d["fingerprint"])["gpu"], cell=True),
            stack(d),
        ]
        for d in docs
    ]
    headers = [
        "repro",
        "status",
        "ratio (95% CI)",
        "holds for; other settings",
        "threshold",
        "validity",
        "GPU",
        "stack",
    ]
    return md_table(rows, headers)


def _core(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The artifact's provenance and verdict, without the variants (tabled above, in full in the bundle)."""
    out = {k: doc.get(k) for k in ("schema_version", "kind", "repro", "run", "verdict", "validity", "error")}
    out["repro"] = {k: v for k, v in (doc.get("repro") or {}).items() if k not in ("script", "seed_claim", "impact")}
    return out


def _script_block(doc: Mapping[str, Any], declared: Declared) -> str | None:
    """The standalone script the caller regenerated for the headline comparison, with the lines that
    rebuild our exact harness; None without one (the artifact's own ``repro.script`` is never shown)."""
    script = declared.script
    if not script:
        return None
    harness = (doc["fingerprint"].get("harness")) or {}
    rid = doc["repro"]["id"]
    shell = "\n".join(harness_lines(harness.get("git_commit"), harness.get("version"), doc["run"].get("rerun")))
    summary = html_text(f"{rid}: standalone script (plain torch, no gpu-repro needed) and the exact harness")
    caveat = f"The script below was {text(declared.script_note)}. " if declared.script_note else ""
    return (
        f"<details><summary>{summary}</summary>\n\n"
        f"{caveat}Run it with `python repro_{rid.replace('-', '_')}.py`; it prints both times and their ratio. "
        "To rebuild the harness that made this artifact and rerun it:\n\n"
        f"{fence(shell, 'bash')}\n\n{fence(script.rstrip(), 'python')}\n\n</details>\n"
    )


def _figure_lines(figs: Sequence[Figure]) -> list[str]:
    out = []
    for f in figs:
        if f.drawn:
            out += [f"![{text(f.alt)}]({f.file})", "", f"_Plot `{f.file}`: {text(f.alt)}._", ""]
        elif f.why_not == NOT_DRAWN_HERE:
            out += [f"_Plot `{f.file}` (drawn by `repro report RUN_DIR --out FILE`): {text(f.alt)}._", ""]
        else:
            why = f"{f.why_not or 'not drawn'}; {INSTALL_HINT}"
            out += [f"_Plot `{f.file}` not drawn ({text(why)}). It would show: {text(f.alt)}._", ""]
    return out


def repro_section(
    doc: Mapping[str, Any],
    machine: str | None = None,
    figs: Sequence[Figure] = (),
    declared: Declared | None = None,
) -> tuple[str, str | None]:
    """The repro's markdown, and its standalone-script block (kept apart: it is the last thing to go).

    ``declared``: what the caller looked up in the catalog for this artifact (impact for an artifact
    that lacks it, the regenerated script); without it the section says no script was regenerated.
    """
    declared = declared or Declared()
    r, v = doc["repro"], doc["verdict"]
    lines = [f"## {code(r['id'])}: {text(r['title'])}", ""]
    if r["upstream"]:
        lines += ["Upstream: " + ", ".join(text(u) for u in r["upstream"]), ""]
    lines += [f"Seed claim: {text(r['seed_claim'])}", ""]
    lines.append(
        f"**{text(v['status'])}** - {text(v['metric'])} = {text(verdict_cell(doc))}, "
        f"threshold {v['threshold']:g}; validity: {text(doc['validity']['flag'])}"
    )
    holds = scope.conditions(doc)
    if holds != "-":
        lines += ["", f"Holds for: {text(holds)}"]
    lines += ["", f"> {text(v['finding'])}", ""]
    if v.get("details"):
        lines += [f"- {text(d)}" for d in v["details"]] + [""]
    smoke = is_smoke(doc)
    impact = None if smoke else scope.impact(doc, declared)
    if impact:
        lines += [f"Impact: {text(impact)}", ""]
    if doc["validity"]["flag"] == "suspect":
        lines += [f"- suspect: {text(reason)}" for reason in doc["validity"]["reasons"]] + [""]
    if doc.get("error"):
        e = doc["error"]
        lines += [f"Error ({text(e['kind'])}): {text(e['message'])}", ""]
        if e.get("stderr_tail"):
            lines.append(details("stderr tail", e["stderr_tail"][-2000:]))
    if doc["variants"]:
        per_variant = KERNELS_PER_VARIANT_SMOKE if smoke else KERNELS_PER_VARIANT
        lines += [variants_table(doc), ""]
        raw = None if smoke else raw_samples_line(doc)
        lines += [f"_{text(raw)}_", ""] if raw else []
        lines += [kernel_matrix(shown_variants(doc)[0], per_variant), diff_section(doc)]
    if v.get("breakdown"):
        lines += [breakdown_table(v["breakdown"]), ""]
    lines += _figure_lines(figs)
    shown_warnings = doc["warnings"][: 3 if smoke else 10]
    lines += [f"- warning: {text(w)}" for w in shown_warnings]
    if len(doc["warnings"]) > len(shown_warnings):
        lines.append(f"- ... {len(doc['warnings']) - len(shown_warnings)} more warnings in the artifact")
    where = f"; fingerprint: machine {machine} under Environment" if machine and not smoke else ""
    lines += [
        "",
        essentials_line(doc["fingerprint"]) + where,
        "",
        f"Rerun: {code(doc['run'].get('rerun') or ' '.join(doc['run']['command']), 2000)}"
        + (f"; repro source sha256 {code(r['source_sha256'])}" if r.get("source_sha256") else ""),
        "",
    ]
    spent = artifact.format_breakdown(artifact.time_breakdown(doc))
    if spent:
        lines += [f"Time: {text(spent)} of {doc['run']['duration_s']:.1f} s in this repro's process.", ""]
    script = None if smoke else _script_block(doc, declared)
    if not smoke and script is None:
        why = declared.script_note or "the report was rendered without the catalog"
        lines += [f"_No standalone script could be regenerated here ({text(why)})._", ""]
    return "\n".join(lines), script


def bundle_names(docs: Sequence[Mapping[str, Any]]) -> str:
    """The bundle(s) to attach: ``<run-id>.bundle.tar.gz``, as ``repro bundle RUN_DIR`` names them."""
    return ", ".join(f"`{text(r)}.bundle.tar.gz`" for r in sorted({d["run"]["run_id"] for d in docs}))


def _not_tested(docs: Sequence[Mapping[str, Any]], declared: Declarations | None) -> str:
    lines = scope.not_tested(docs, declared)
    if not lines:
        return ""
    return "## Not tested here\n\n" + "\n".join(f"- {text(ln)}" for ln in lines) + "\n"


def report(
    docs: Sequence[Mapping[str, Any]],
    limit: int = REPORT_LIMIT,
    title: str | None = None,
    figures: Sequence[Figure] | None = None,
    plots: Mapping[str, str] | None = None,
    declared: Declarations | None = None,
) -> str:
    """The whole report, at most ``limit`` characters, evidence intact.

    The body (summary, scope, every repro with its standalone script) comes first; the
    environment follows: each distinct fingerprint once, collect_env once per distinct output
    (its library section always kept), then each artifact's JSON. What does not fit is cut at
    JSON element boundaries (what is shown still parses) or left out, and the note names the
    bundle that holds everything. ``figures``: the repros' plots (``repro.evidence.plots``).
    ``declared``: what the caller looked up in the plugin registry per artifact
    (``repro.run.scripts.declared``); the standalone scripts shown come only from there.

    ``repro cliff`` artifacts get their own section (``repro.evidence.cliff_report``); ``plots`` maps
    their key to the link of a plot drawn beside the report.
    """
    if not docs:
        raise ValueError("no artifacts to report")
    run_ids = sorted({d["run"]["run_id"] for d in docs})
    cliffs = [d for d in docs if d.get("kind") == "gpu-repro.cliff"]
    docs = [d for d in docs if d.get("kind") != "gpu-repro.cliff"]
    if figures is None:
        figures = describe(docs, declared=declared)
    bundle = bundle_names(docs)
    head = [f"# {text(title or 'gpu-repro report')}: run {text(', '.join(run_ids))}", ""]
    if docs:
        head += [summary_table(docs), ""]
    head += [cliff_report.section(c, (plots or {}).get(cliff_report.key(c))) for c in cliffs]
    smoke_run = all(is_smoke(d) for d in docs)
    if any(is_smoke(d) for d in docs):
        head += [
            "_Smoke run: shrunken sizes to prove the pipeline (often on CPU); its ratios are not evidence about any "
            "GPU. This report is kept short: the fingerprint, collect_env output and raw JSON are in the artifacts._",
            "",
        ]
    if not smoke_run:
        head += [
            f"_The full artifacts (raw samples, Chrome traces, logs, plots) are in {bundle}: make it with "
            "`repro bundle RUN_DIR` and attach it to the issue._",
            "",
        ]
    scope_md = _not_tested(docs, declared)  # a CPU or smoke run says so here too
    full = [d for d in docs if not is_smoke(d)]
    mach, machine_of = machines(full)
    sections = [
        repro_section(d, machine_of.get(id(d)), [f for f in figures if f.repro_id == d["repro"]["id"]], of(d, declared))
        for d in docs
    ]
    notes: list[str] = []

    def body(with_scripts: bool) -> list[str]:
        parts = list(head)
        if scope_md:
            parts.append(scope_md)
        for section, script in sections:
            parts.append(section)
            if script and with_scripts:
                parts.append(script)
        return parts

    def note() -> list[str]:
        if not notes:
            return []
        said = [n for n in notes if not n.startswith(("left out ", "cut ")) or "artifact JSON" not in n]
        cut = [
            n[len("cut ") :].split("'s artifact JSON")[0]
            for n in notes
            if n.startswith("cut ") and "artifact JSON" in n
        ]
        gone = [
            n[len("left out ") :].split("'s artifact JSON")[0]
            for n in notes
            if n.startswith("left out ") and "artifact JSON" in n
        ]
        if cut:
            said.append(f"cut the artifact JSON of {', '.join(cut)} at element boundaries")
        if gone:
            said.append(f"left out the artifact JSON of {', '.join(gone)}")
        return [f"_To fit GitHub's size limit this report {'; '.join(said)}; the full artifacts are in {bundle}._", ""]

    parts = body(True)
    reserve = 700  # the note (its artifact-JSON entries grouped) and the Environment heading
    if len("\n".join(parts)) + reserve > limit and any(sc for _, sc in sections):
        parts = body(False)
        notes.append("left out the standalone scripts (`repro script ID` prints each)")
    used = len("\n".join(parts)) + reserve
    if used > limit or not full:
        if not full:
            return "\n".join(parts)
        return cut_at_blocks(parts[:4] + note() + parts[4:], limit)

    env: list[str] = ["## Environment", ""]
    env += [machine_summary(m) + "\n" for m in mach]
    env += [state_table(full, machine_of), ""]
    room = limit - used - len("\n".join(env))
    blocks: list[str] = []
    # Fingerprints first: the versions a maintainer asks for. Each distinct one once.
    for m in mach:
        fp = {k: v for k, v in m.fingerprint.items() if k != "collect_env"}
        # Most of what is left (the versions a maintainer asks for), short of leaving collect_env and
        # the artifacts' JSON nothing: the largest elements go first (NVIDIA_REQUIRE_CUDA runs to kilobytes).
        shown, cut = jsonfit.fit_json(fp, max(room * 2 // 5 // max(len(mach), 1) - 200, 0))
        summary = f"machine {m.label}: full fingerprint (used by {', '.join(m.repros)})"
        if not shown:
            notes.append(f"left out the fingerprint of machine {m.label}")
            continue
        if cut:
            notes.append(f"cut the fingerprint of machine {m.label} at JSON element boundaries")
        blocks.append(details(summary, shown, "json"))
        room -= len(blocks[-1]) + 1
    # collect_env once per distinct output, its library section kept.
    outputs: dict[str, list[str]] = {}
    for d in full:
        out = ((d["fingerprint"].get("collect_env") or {}).get("output") or "").rstrip()
        if out:
            outputs.setdefault(out, []).append(f"machine {machine_of[id(d)]}")
    for out, where in outputs.items():
        # At most half of what is left: the artifacts' JSON comes after it and needs room too.
        budget = room // 2 // max(len(outputs), 1) - 200
        if budget < _MIN_BLOCK:
            notes.append(f"left out {_COLLECT_ENV}")
            continue
        shown = jsonfit.shorten_collect_env(out, budget)
        if shown != out:
            notes.append(f"shortened {_COLLECT_ENV} (its library section kept)")
        blocks.append(details(f"{', '.join(dict.fromkeys(where))}: {_COLLECT_ENV}", shown))
        room -= len(blocks[-1]) + 1
    # Each artifact's machine-readable core last (repro, run, verdict with its breakdown, validity),
    # compact, sharing what is left: as many as get a useful share each.
    share = next((room // k - 200 for k in range(len(full), 0, -1) if room // k - 200 >= _MIN_BLOCK), 0)
    # Reproduced cliffs first: their numbers are what an issue quotes.
    for d in sorted(full, key=lambda d: d["verdict"].get("status") != "reproduced"):
        rid = d["repro"]["id"]
        shown, cut = jsonfit.fit_json(_core(d), share, indent=None) if share else ("", True)
        if not shown or len(shown) + 200 > room:
            notes.append(f"left out {rid}'s artifact JSON")
            continue
        if cut:
            notes.append(f"cut {rid}'s artifact JSON at element boundaries")
        blocks.append(
            details(f"{rid}: artifact JSON (repro, run, verdict, validity; variants in the bundle)", shown, "json")
        )
        room -= len(blocks[-1]) + 1
    out_parts = parts[:4] + note() + parts[4:] + env + blocks
    text_out = "\n".join(out_parts)
    if len(text_out) > limit:
        return cut_at_blocks(out_parts, limit)
    return text_out


CUT_NOTE = "_Report cut at the size limit; see the artifacts._\n"


def cut_at_blocks(parts: Sequence[str], limit: int) -> str:
    """Whole parts (each complete markdown: a table, a section, a details block) while they fit, then a note.

    Never cuts inside a part, so no fence or <details> is left open and the note renders as text.
    """
    budget = limit - len(CUT_NOTE) - 2
    kept: list[str] = []
    used = 0
    for part in parts:
        if used + len(part) + 1 > budget:
            break
        kept.append(part)
        used += len(part) + 1
    return "\n".join(kept).rstrip("\n") + "\n\n" + CUT_NOTE
