"""Markdown for GitHub: the run report with variants, kernel diff, findings and details blocks."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tabulate import tabulate

from repro.fingerprint import essentials
from repro.verdict import fmt_ratio

# GitHub rejects issue and comment bodies over 65,536 characters; stay well under.
REPORT_LIMIT = 60_000
KERNELS_PER_VARIANT = 6
# Above this many variants only the verdict's pair (and variants that did not run) are tabled.
MAX_VARIANTS_SHOWN = 12
# A smoke run proves the pipeline, not a cliff: its report stays short (the artifact has the rest).
MAX_VARIANTS_SHOWN_SMOKE = 4
KERNELS_PER_VARIANT_SMOKE = 3
# Kernel diffs beyond the verdict's own pair: the same contrast at other settings, at most this many.
MAX_RELATED_DIFFS = 2
_KERNEL_NAME_CHARS = 90
_COLLECT_ENV = "python -m torch.utils.collect_env"
# Details shorter than this help nobody: below it, the least useful kind is dropped instead.
_MIN_DETAIL = 2500
# A kernel whose per-call time moved by more than this between variants is "changed".
_CHANGED = 0.10


def md_cell(text: Any) -> str:
    """Make already-safe markdown safe inside a GFM table cell: no pipe splits it, no newline ends the row."""
    s = "" if text is None else str(text)
    return s.replace("|", "\\|").replace("\r", " ").replace("\n", " ")


# Inline markdown that could turn text into structure: emphasis, links/images, code spans, strikethrough,
# escapes. (<, > and & become entities first.)
_INLINE = re.compile(r"([\\`*\[\]~])")
# An underscore between two letters or digits can neither open nor close emphasis (GFM), so
# snake_case names stay readable; any other underscore is escaped.
_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
# What may open a block when it starts a line (a heading, a quote, a list, a rule, a setext underline).
_BLOCK_START = re.compile(r"^([#>+=-]|\d{1,9}(?=[.)](?:\s|$)))")


def text(value: Any, *, cell: bool = False) -> str:
    """Untrusted text (anything from an artifact) as inert inline markdown on one line.

    HTML is escaped (&, <, >), markdown punctuation is backslash-escaped, newlines become
    spaces and a leading block marker is escaped, so the text renders literally wherever
    inline content goes: a paragraph, a list item, a quote, a heading, a table cell. Pipes
    are escaped here unless ``cell`` (then ``md_cell``, which every table cell passes, does it).
    """
    s = "" if value is None else str(value)
    s = " ".join(s.replace("\r", "\n").split("\n")).strip()
    s = html.escape(s, quote=False)
    s = _INLINE.sub(r"\\\1", s)
    s = _UNDERSCORE.sub(r"\\_", s)
    if not cell:
        s = s.replace("|", "\\|")
    if m := _BLOCK_START.match(s):
        end = m.end()
        s = (s[:end] + "\\" + s[end:]) if s[:end].isdigit() else "\\" + s
    return s


def html_text(value: Any) -> str:
    """Untrusted text inside an HTML element (a details summary): entities only, one line."""
    s = "" if value is None else str(value)
    return html.escape(" ".join(s.replace("\r", "\n").split("\n")), quote=True)


def fence(body: str, lang: str = "") -> str:
    """A fenced code block that nothing in ``body`` can close: the fence outruns every backtick run."""
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{body}\n{ticks}"


def code(value: Any, limit: int = _KERNEL_NAME_CHARS) -> str:
    """An inline code span (safe in a table cell too); backticks inside become quotes."""
    s = " ".join(str(value).replace("\r", "\n").split("\n"))
    s = s if len(s) <= limit else s[: limit - 3] + "..."
    s = s.replace("`", "'").strip() or "-"
    return f"`{md_cell(s)}`"


def fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def _cell(value: Any) -> Any:
    """Floats at four significant digits; everything else as it is."""
    return f"{value:.4g}" if isinstance(value, float) else value


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    """A GFM table; cells and headers must be safe markdown already (``text(..., cell=True)`` for raw strings).

    disable_numparse: cells are shown as given; tabulate would otherwise read "13.0" (a CUDA
    version) as a number and print it as 13.
    """
    return str(
        tabulate(
            [[md_cell(c) for c in r] for r in rows],
            headers=[md_cell(h) for h in headers],
            tablefmt="github",
            disable_numparse=True,
        )
    )


def details(summary: str, body: str, lang: str = "") -> str:
    """A collapsed block: ``summary`` is plain text (escaped here), ``body`` goes verbatim into a code fence."""
    # The blank line after </summary> is what makes GitHub render the body as markdown.
    return f"<details><summary>{html_text(summary)}</summary>\n\n{fence(body, lang)}\n\n</details>\n"


# --------------------------------------------------------------------------- pieces


def verdict_cell(doc: Mapping[str, Any]) -> str:
    v = doc["verdict"]
    return fmt_ratio(v.get("value"), v.get("ci_low"), v.get("ci_high"))


def stack(doc: Mapping[str, Any]) -> str:
    e = essentials(doc["fingerprint"])
    return text(f"torch {e['torch'] or '-'}, CUDA {e['cuda'] or '-'}, {e['lane']}", cell=True)


def summary_table(docs: Sequence[Mapping[str, Any]]) -> str:
    rows = [
        [
            text(d["repro"]["id"], cell=True),
            f"**{text(d['verdict']['status'], cell=True)}**",
            verdict_cell(d),
            f"{d['verdict']['threshold']:g}",
            text(d["validity"]["flag"], cell=True),
            text(essentials(d["fingerprint"])["gpu"], cell=True),
            stack(d),
        ]
        for d in docs
    ]
    return table(rows, ["repro", "status", "ratio (95% CI)", "threshold", "validity", "GPU", "stack"])


def _rate(v: Mapping[str, Any]) -> tuple[str, str]:
    a = v.get("achieved") or {}
    if a.get("tflops") is not None and (a.get("ceiling_unit") in (None, "TFLOP/s")):
        rate = f"{a['tflops']:.3g} TFLOP/s"
    elif a.get("gbps") is not None:
        rate = f"{a['gbps']:.4g} GB/s"
    else:
        rate = "-"
    pct = "-"
    if a.get("pct_of_ceiling") is not None:
        pct = f"{a['pct_of_ceiling']:.0f}% of {text(a['ceiling'], cell=True)}"
    return rate, pct


def shown_variants(doc: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], int]:
    """The variants a report shows in full, and how many it leaves to the artifact.

    A grid repro (solve-512-cliff has ~80 points) would bury its story in rows;
    then the verdict's own pair and any variant that did not run are shown, and
    the verdict's breakdown table summarises the rest.
    """
    variants = list(doc["variants"])
    cap = MAX_VARIANTS_SHOWN_SMOKE if is_smoke(doc) else MAX_VARIANTS_SHOWN
    if len(variants) <= cap:
        return variants, 0
    named = set(doc["verdict"].get("variants") or ())
    # The verdict's pair always; then variants that did not run, as room allows; in catalog order.
    room = max(cap - len(named), 0)
    extra = {id(v) for v in [v for v in variants if v["name"] not in named and v["status"] != "ok"][:room]}
    keep = [v for v in variants if v["name"] in named or id(v) in extra]
    if not any(v["name"] in named for v in keep):
        keep = [v for v in variants if v["status"] == "ok"][:2] + keep
    return keep, len(variants) - len(keep)


def is_smoke(doc: Mapping[str, Any]) -> bool:
    """True for a smoke run (shrunken sizes, often on CPU): it proves the pipeline, never a cliff."""
    return bool((doc.get("run") or {}).get("smoke"))


def variants_table(doc: Mapping[str, Any]) -> str:
    rows = []
    shown, hidden = shown_variants(doc)
    for v in shown:
        t = v.get("timing")
        if v["status"] != "ok" or not t:
            reason = text(v.get("reason") or "", cell=True)
            rows.append([text(v["label"], cell=True), text(v["status"], cell=True), reason, "", "", "", "", ""])
            continue
        s = t["stats"]
        rate, pct = _rate(v)
        rows.append(
            [
                text(v["label"], cell=True),
                fmt_time(s["median"]),
                f"{fmt_time(s['ci_low'])} - {fmt_time(s['ci_high'])}",
                fmt_time(s["iqr"]),
                f"{s['n']} ({text(t['stop_reason'].replace('_', ' '), cell=True)})",
                text(t["method"].replace("_", " "), cell=True),
                rate,
                pct,
            ]
        )
    out = table(rows, ["variant", "median", "95% CI", "IQR", "n (stopped by)", "timed by", "achieved", "ceiling"])
    if hidden:
        out += (
            f"\n\n_{hidden} more variants are in the artifact; the table above holds the pair the verdict "
            "compares (and any variant that did not run), the breakdown below summarises the rest._"
        )
    return out


def per_call_us(k: Mapping[str, Any]) -> float:
    return float(k["total_us"]) / max(float(k["count"]), 1.0) * float(k["per_call"])


def kernel_matrix(variants: Sequence[Mapping[str, Any]], per_variant: int = KERNELS_PER_VARIANT) -> str:
    """Kernels x variants, us per call; an empty cell means the kernel did not run there."""
    measured = [v for v in variants if v.get("kernels")]
    if not measured:
        return "_No kernels were captured._\n"
    names: list[str] = []
    for v in measured:
        for k in v["kernels"][:per_variant]:
            if k["name"] not in names:
                names.append(k["name"])
    cells = {v["name"]: {k["name"]: per_call_us(k) for k in v["kernels"]} for v in measured}
    rows = [
        [code(n)] + [f"{cells[v['name']][n]:.1f}" if n in cells[v["name"]] else "" for v in measured] for n in names
    ]
    unit = "CPU ops (self time)" if measured[0].get("kernel_source") == "cpu" else "kernels"
    head = f"{unit}, us per call ({per_variant} largest per variant)"
    return table(rows, [head] + [text(v["name"], cell=True) for v in measured]) + "\n"


def kernel_diff(base: Mapping[str, Any], other: Mapping[str, Any]) -> list[str]:
    """Lines saying which kernels appear, disappear or change time from ``base`` to ``other``."""
    a = {k["name"]: per_call_us(k) for k in base.get("kernels", [])}
    b = {k["name"]: per_call_us(k) for k in other.get("kernels", [])}
    out = []
    for name in sorted(set(b) - set(a), key=lambda n: -b[n])[:3]:
        out.append(f"+ {code(name, 70)} appears ({b[name]:.1f} us/call)")
    for name in sorted(set(a) - set(b), key=lambda n: -a[n])[:3]:
        out.append(f"- {code(name, 70)} disappears (was {a[name]:.1f} us/call)")
    for name in sorted(set(a) & set(b), key=lambda n: -abs(b[n] - a[n]))[:3]:
        if a[name] > 0 and abs(b[name] - a[name]) / a[name] > _CHANGED:
            out.append(f"~ {code(name, 70)} {a[name]:.1f} -> {b[name]:.1f} us/call")
    return out


def _contrast(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The config keys whose values differ from variant ``a`` to ``b``, with both values."""
    ca, cb = a.get("config") or {}, b.get("config") or {}
    return {k: (ca.get(k), cb.get(k)) for k in sorted(set(ca) | set(cb)) if ca.get(k) != cb.get(k)}


def diff_pairs(doc: Mapping[str, Any]) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """The (base, other) variant pairs whose kernels a report diffs.

    First the verdict's own pair (denominator -> numerator). Then the same contrast at other
    settings: pairs that differ in exactly the config values the verdict's pair differs in (n=511
    -> 512 at another batch, say). Without a named pair, only variants that differ in one config
    value are paired. Unrelated variants (another batch *and* another size) are never paired.
    """
    shown, _ = shown_variants(doc)
    measured = [v for v in shown if v.get("kernels")]
    by_name = {v["name"]: v for v in measured}
    named = list(doc["verdict"].get("variants") or ())
    pairs: list[tuple[Mapping[str, Any], Mapping[str, Any]]] = []
    if len(named) == 2 and all(n in by_name for n in named):
        base, other = by_name[named[1]], by_name[named[0]]
        pairs.append((base, other))
        want = _contrast(base, other)
        related = [
            (a, b)
            for a in measured
            for b in measured
            if a is not b and (a, b) != (base, other) and want and _contrast(a, b) == want
        ]
        return pairs + related[:MAX_RELATED_DIFFS]
    if named:  # the verdict's pair is not among the shown, measured variants: pair nothing else
        return []
    singles = [(a, b) for i, a in enumerate(measured) for b in measured[i + 1 :] if len(_contrast(a, b)) == 1]
    return singles[: 1 + MAX_RELATED_DIFFS]


def diff_section(doc: Mapping[str, Any]) -> str:
    """Kernel diff of the verdict's pair (denominator -> numerator), then of the same contrast elsewhere."""
    pairs = diff_pairs(doc)
    if not pairs:
        return ""
    lines = []
    for base, other in pairs:
        changes = kernel_diff(base, other)
        body = "; ".join(changes) if changes else "same kernels, times within 10%"
        lines.append(f"- **{text(base['name'])} -> {text(other['name'])}**: {body}")
    return "Kernel diff (the verdict's pair first):\n\n" + "\n".join(lines) + "\n"


def essentials_line(fp: Mapping[str, Any]) -> str:
    e = {k: text(v or "-") for k, v in essentials(fp).items()}
    return (
        f"GPU **{e['gpu']}** (cc {e['cc']}), driver {e['driver']}, "
        f"torch {e['torch']} (CUDA {e['cuda']}, cuBLAS {e['cublas']}), stack: {e['lane']}"
    )


def fingerprint_text(fp: Mapping[str, Any], python: str) -> list[str]:
    """The fingerprint's essentials as plain lines for a terminal (no markdown), then what could not be read.

    ``python`` is the interpreter that took the fingerprint: when torch is missing there, that
    is the fact the reader needs, not a probe's traceback.
    """
    e = essentials(fp)
    gpu = fp.get("gpu") or {}
    torch_info = (fp.get("software") or {}).get("torch") or {}
    lines = [
        f"GPU:     {e['gpu']}" + (f" (compute capability {e['cc']}, {gpu.get('sm_count')} SMs)" if e["cc"] else ""),
        f"driver:  {e['driver'] or '-'}",
        f"torch:   {e['torch'] or 'not installed'}"
        + (f" (built with CUDA {e['cuda']})" if e["cuda"] else " (CPU-only build)" if e["torch"] else ""),
        f"stack:   {e['lane']}",
        "libraries loaded by this process:",
    ]
    for k, v in sorted(((fp.get("software") or {}).get("libraries") or {}).items()):
        lines.append(f"  {k}: {v['version'] if v.get('loaded') else 'not loaded'}")
    errors = dict(fp.get("errors") or {})
    torch_error = errors.pop("torch", None)
    if torch_error and torch_error.startswith("ModuleNotFoundError"):
        lines.append(
            f"torch is not installed in {python}, so the torch, GPU and knob fields are empty. "
            "Install the PyTorch build you want to test where this Python sees it, or try `make smoke` "
            "(README, 'Your first run')."
        )
    elif torch_error:
        lines.append(f"torch is installed but failed to import ({torch_error}); the torch and GPU fields are empty.")
    elif torch_info and not torch_info.get("cuda_available"):
        lines.append("torch sees no CUDA GPU: GPU repros will skip here (`repro doctor` says why).")
    for name, error in sorted(errors.items()):
        lines.append(f"could not read {name}: {error}")
    return lines


@dataclass
class _Detail:
    """A collapsible block; ``body`` shrinks or goes when the report is over its limit."""

    summary: str
    body: str
    lang: str
    priority: int = 0  # under the size limit, the highest priority number goes first


def _details_for(doc: Mapping[str, Any]) -> list[_Detail]:
    if is_smoke(doc):
        return []  # a pipeline trial: fingerprint, collect_env and raw JSON stay in the artifact
    fp = doc["fingerprint"]
    rid = doc["repro"]["id"]
    out = [
        _Detail(
            f"{rid}: full fingerprint",
            json.dumps({k: v for k, v in fp.items() if k != "collect_env"}, indent=1),
            "json",
            priority=1,
        )
    ]
    ce = (fp.get("collect_env") or {}).get("output")
    if ce:
        out.append(_Detail(f"{rid}: {_COLLECT_ENV}", ce.rstrip(), ""))
    out.append(
        _Detail(
            f"{rid}: raw artifact JSON (timing samples elided)",
            json.dumps(_without_samples(doc), indent=1),
            "json",
            priority=2,
        )
    )
    return out


def _without_samples(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The artifact with each variant's raw samples replaced by their count (they stay in the file)."""
    out: dict[str, Any] = json.loads(json.dumps(doc))
    for v in out["variants"]:
        t = v.get("timing")
        if t and isinstance(t.get("samples"), list):
            t["samples"] = f"<{len(t['samples'])} samples>"
        for key in [k for k in v.get("extra", {}) if k.endswith("samples_s")]:
            v["extra"][key] = f"<{len(v['extra'][key])} samples>"
    out["fingerprint"] = "<see the full fingerprint above>"
    return out


def repro_section(doc: Mapping[str, Any]) -> tuple[str, list[_Detail]]:
    r, v = doc["repro"], doc["verdict"]
    lines = [f"## {code(r['id'])}: {text(r['title'])}", ""]
    if r["upstream"]:
        lines += ["Upstream: " + ", ".join(text(u) for u in r["upstream"]), ""]
    lines += [f"Seed claim: {text(r['seed_claim'])}", ""]
    ratio = fmt_ratio(v.get("value"), v.get("ci_low"), v.get("ci_high"))
    lines.append(
        f"**{text(v['status'])}** - {text(v['metric'])} = {text(ratio)}, "
        f"threshold {v['threshold']:g}; validity: {text(doc['validity']['flag'])}"
    )
    lines += ["", f"> {text(v['finding'])}", ""]
    if v.get("details"):
        lines += [f"- {text(d)}" for d in v["details"]] + [""]
    if doc["validity"]["flag"] == "suspect":
        lines += [f"- suspect: {text(reason)}" for reason in doc["validity"]["reasons"]] + [""]
    if doc.get("error"):
        e = doc["error"]
        lines += [f"Error ({text(e['kind'])}): {text(e['message'])}", ""]
        if e.get("stderr_tail"):
            lines.append(details("stderr tail", e["stderr_tail"][-2000:]))
    smoke = is_smoke(doc)
    if doc["variants"]:
        per_variant = KERNELS_PER_VARIANT_SMOKE if smoke else KERNELS_PER_VARIANT
        lines += [variants_table(doc), "", kernel_matrix(shown_variants(doc)[0], per_variant), diff_section(doc)]
    if v.get("breakdown"):
        keys = list(v["breakdown"][0].keys())
        rows = [[text(_cell(b.get(k)), cell=True) for k in keys] for b in v["breakdown"]]
        lines += [table(rows, [text(k, cell=True) for k in keys]), ""]
    shown_warnings = doc["warnings"][: 3 if smoke else 10]
    lines += [f"- warning: {text(w)}" for w in shown_warnings]
    if len(doc["warnings"]) > len(shown_warnings):
        lines.append(f"- ... {len(doc['warnings']) - len(shown_warnings)} more warnings in the artifact")
    lines += [
        "",
        essentials_line(doc["fingerprint"]),
        "",
        f"Rerun: {code(doc['run'].get('rerun') or ' '.join(doc['run']['command']), 2000)}",
        "",
    ]
    return "\n".join(lines), _details_for(doc)


def report(
    docs: Sequence[Mapping[str, Any]],
    limit: int = REPORT_LIMIT,
    title: str | None = None,
    plots: Mapping[str, str] | None = None,
) -> str:
    """The whole report, at most ``limit`` characters: the largest details shrink first.

    ``repro cliff`` artifacts get their own section (``repro.cliff_report``); ``plots`` maps
    their key to the link of a plot drawn beside the report.
    """
    if not docs:
        raise ValueError("no artifacts to report")
    from repro import cliff_report

    run_ids = sorted({d["run"]["run_id"] for d in docs})
    cliffs = [d for d in docs if d.get("kind") == "gpu-repro.cliff"]
    docs = [d for d in docs if d.get("kind") != "gpu-repro.cliff"]
    head = [f"# {text(title or 'gpu-repro report')}: run {text(', '.join(run_ids))}", ""]
    if docs:
        head += [summary_table(docs), ""]
    head += [cliff_report.section(c, (plots or {}).get(cliff_report.key(c))) for c in cliffs]
    if any(is_smoke(d) for d in docs):
        head += [
            "_Smoke run: shrunken sizes to prove the pipeline (often on CPU); its ratios are not evidence about any "
            "GPU. This report is kept short: the fingerprint, collect_env output and raw JSON are in the artifacts._",
            "",
        ]
    sections = [repro_section(d) for d in docs]
    blocks = [detail for _, ds in sections for detail in ds]
    notes: list[str] = []

    def compose_parts() -> list[str]:
        parts = list(head)
        if notes:
            parts += [
                f"_To fit GitHub's size limit this report {'; '.join(notes)}; the artifacts hold everything._",
                "",
            ]
        for section, ds in sections:
            parts.append(section)
            parts += [details(d.summary, d.body, d.lang) for d in ds if d in blocks]
        return parts

    def compose() -> str:
        return "\n".join(compose_parts())

    # The same collect_env output from every repro of a run is shown once.
    seen: dict[str, _Detail] = {}
    for d in list(blocks):
        if d.summary.endswith(_COLLECT_ENV) and d.body in seen:
            blocks.remove(d)
            seen[d.body].summary = f"{_COLLECT_ENV} (the same for several repros)"
        elif d.summary.endswith(_COLLECT_ENV):
            seen[d.body] = d
    out = compose()
    full = {id(d): d.body for d in blocks}

    def apply(cap: int) -> str:
        for d in blocks:
            body = full[id(d)]
            d.body = body if len(body) <= cap else body[:cap] + "\n... (shortened)"
        notes[:] = [f"dropped {n}" for n in dropped] + [
            f"shortened '{d.summary}'" for d in blocks if len(full[id(d)]) > cap
        ]
        return compose()

    dropped: list[str] = []
    while len(out) > limit and blocks:
        # Cap every details block at one length, the largest that lets the report fit
        # (binary search), so the biggest blocks shrink first and small ones stay whole.
        lo, hi = 0, max(len(full[id(d)]) for d in blocks)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if len(apply(mid)) <= limit:
                lo = mid
            else:
                hi = mid - 1
        out = apply(lo)
        if lo >= _MIN_DETAIL:
            break
        # Stubs help nobody: drop the least useful kind (raw JSON, then collect_env, ...) and retry.
        worst = max(d.priority for d in blocks)
        gone = [d for d in blocks if d.priority == worst]
        kinds = {d.summary.split(": ", 1)[-1] for d in gone}
        dropped.append(" and ".join(f"'{k}'" for k in sorted(kinds)) + f" ({len(gone)} block(s))")
        blocks[:] = [d for d in blocks if d.priority != worst]
        out = apply(max((len(full[id(d)]) for d in blocks), default=0))
    if len(out) > limit:
        out = cut_at_blocks(compose_parts(), limit)
    return out


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
