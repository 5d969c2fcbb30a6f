"""Markdown for GitHub: the run report with variants, kernel diff, findings and details blocks."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tabulate import tabulate

from repro.core import jsonfit
from repro.core.kernelnames import short_names
from repro.core.verdict import fmt_ratio
from repro.env.fingerprint import essentials
from repro.evidence import artifact, scope

if TYPE_CHECKING:
    from repro.evidence.plots import Figure

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


def md_table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    """A GFM table without column padding: the same table to a renderer, a third smaller in a
    report that must fit GitHub's size limit (cells must be safe markdown, as for ``table``)."""
    lines = ["| " + " | ".join(md_cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(md_cell(c) or " " for c in r) + " |" for r in rows]
    return "\n".join(lines)


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
        pct = f"{fmt_pct(a['pct_of_ceiling'])} of {text(a['ceiling'], cell=True)}"
    return rate, pct


def fmt_pct(value: float) -> str:
    """``96%``, ``4.2%``, ``0.21%``: two significant digits below 10%, so a small share never reads 0%."""
    if value == 0:
        return "0%"
    if value >= 10:
        return f"{value:.0f}%"
    return f"{value:.2g}%"


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
    out = md_table(rows, ["variant", "median", "95% CI", "IQR", "n (stopped by)", "timed by", "achieved", "ceiling"])
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
    short = short_names(names, _KERNEL_NAME_CHARS)
    rows = [
        [code(short[n], 2 * _KERNEL_NAME_CHARS)]
        + [f"{cells[v['name']][n]:.1f}" if n in cells[v["name"]] else "" for v in measured]
        for n in names
    ]
    unit = "CPU ops (self time)" if measured[0].get("kernel_source") == "cpu" else "kernels"
    head = f"{unit}, us per call ({per_variant} largest per variant)"
    return md_table(rows, [head] + [text(v["name"], cell=True) for v in measured]) + "\n"


def kernel_diff(base: Mapping[str, Any], other: Mapping[str, Any]) -> list[str]:
    """Lines saying which kernels appear, disappear or change time from ``base`` to ``other``."""
    a = {k["name"]: per_call_us(k) for k in base.get("kernels", [])}
    b = {k["name"]: per_call_us(k) for k in other.get("kernels", [])}
    short = short_names([*a, *b], _KERNEL_NAME_CHARS)

    def c(name: str) -> str:
        return code(short[name], 2 * _KERNEL_NAME_CHARS)

    out = []
    for name in sorted(set(b) - set(a), key=lambda n: -b[n])[:3]:
        out.append(f"+ {c(name)} appears ({b[name]:.1f} us/call)")
    for name in sorted(set(a) - set(b), key=lambda n: -a[n])[:3]:
        out.append(f"- {c(name)} disappears (was {a[name]:.1f} us/call)")
    for name in sorted(set(a) & set(b), key=lambda n: -abs(b[n] - a[n]))[:3]:
        if a[name] > 0 and abs(b[name] - a[name]) / a[name] > _CHANGED:
            out.append(f"~ {c(name)} {a[name]:.1f} -> {b[name]:.1f} us/call")
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
        return _once(pairs + related)[: 1 + MAX_RELATED_DIFFS]
    shown_names = {v["name"]: v for v in shown}
    external = bool(named) and all(n in shown_names and not shown_names[n].get("kernels") for n in named)
    if named and not external:  # the verdict's pair is not among the shown, measured variants: pair nothing else
        return []
    # No pair named, or a pair timed outside the profiler (a pure CUDA twin): variants one config value apart.
    singles = [(a, b) for i, a in enumerate(measured) for b in measured[i + 1 :] if len(_contrast(a, b)) == 1]
    return singles[: 1 + MAX_RELATED_DIFFS]


def _once(
    pairs: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]],
) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """Each unordered pair once: A -> B and B -> A say the same thing mirrored."""
    seen: set[frozenset[str]] = set()
    out = []
    for a, b in pairs:
        key = frozenset((str(a["name"]), str(b["name"])))
        if key not in seen:
            seen.add(key)
            out.append((a, b))
    return out


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


def _without_samples(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The artifact with every long list of numbers (raw samples, per-round times) replaced by its
    count, the fingerprint and the script by a pointer: they are shown elsewhere or stay in the file."""

    def squeeze(value: Any) -> Any:
        if isinstance(value, list) and len(value) > 8 and all(isinstance(x, int | float) for x in value):
            return f"<{len(value)} numbers: see the artifact>"
        if isinstance(value, list):
            return [squeeze(x) for x in value]
        if isinstance(value, dict):
            return {k: squeeze(v) for k, v in value.items()}
        return value

    out: dict[str, Any] = squeeze(json.loads(json.dumps(doc)))
    out["fingerprint"] = "<see the machine's fingerprint under Environment>"
    if isinstance(out.get("repro"), dict) and out["repro"].get("script"):
        out["repro"]["script"] = "<the standalone script shown above>"
    return out


def _core(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The artifact's provenance and verdict, without the variants (tabled above, in full in the bundle)."""
    out = {k: doc.get(k) for k in ("schema_version", "kind", "repro", "run", "verdict", "validity", "error")}
    out["repro"] = {k: v for k, v in (doc.get("repro") or {}).items() if k not in ("script", "seed_claim", "impact")}
    return out


# --------------------------------------------------------------------------- machines


def _identity(fp: Mapping[str, Any]) -> str:
    """A fingerprint without what changes from process to process (GPU state, collect_env's text)."""
    gpu = {k: v for k, v in (fp.get("gpu") or {}).items() if k != "state"}
    rest = {k: v for k, v in fp.items() if k not in ("gpu", "collect_env")}
    return json.dumps({**rest, "gpu": gpu}, sort_keys=True, default=str)


@dataclass(frozen=True)
class Machine:
    """One distinct fingerprint of the run and the repros that share it."""

    label: str  # "A", "B", ...
    fingerprint: Mapping[str, Any]
    repros: tuple[str, ...]


def machines(docs: Sequence[Mapping[str, Any]]) -> tuple[list[Machine], dict[int, str]]:
    """The distinct fingerprints (first seen first) and, per doc (by id()), its machine's label."""
    found: dict[str, tuple[Mapping[str, Any], list[str]]] = {}
    of: dict[int, str] = {}
    for d in docs:
        key = _identity(d["fingerprint"])
        fp, ids = found.setdefault(key, (d["fingerprint"], []))
        ids.append(str(d["repro"]["id"]))
        of[id(d)] = chr(ord("A") + list(found).index(key)) if len(found) <= 26 else str(list(found).index(key) + 1)
    out = [
        Machine(chr(ord("A") + i) if len(found) <= 26 else str(i + 1), fp, tuple(ids))
        for i, (fp, ids) in enumerate(found.values())
    ]
    return out, of


def _gib(n: Any) -> str:
    return f"{n / 2**30:.0f} GiB" if isinstance(n, int | float) else "-"


def machine_summary(m: Machine) -> str:
    """The facts a maintainer asks for first, from the fingerprint's fields, as a short list that is
    never cut: GPU SKU, driver, power and clocks; the libraries the process loaded; knobs; harness."""
    fp = m.fingerprint
    gpu, sw = fp.get("gpu") or {}, fp.get("software") or {}
    nv = gpu.get("nvml") or {}
    torch_info = sw.get("torch") or {}
    onoff = {True: "on", False: "off", None: "-"}
    parts = [
        f"**Machine {m.label}** (used by {text(', '.join(m.repros))}):",
        "",
        f"- GPU: {gpu.get('name') or '-'}, board {nv.get('board_part_number') or '-'}, compute capability "
        f"{gpu.get('compute_capability') or '-'}, {gpu.get('sm_count') or '-'} SMs, "
        f"{_gib(gpu.get('memory_total_bytes'))}; "
        f"driver {nv.get('driver_version') or '-'}; power limit {nv.get('power_limit_w') or '-'} W "
        f"(default {nv.get('power_default_limit_w') or '-'} W); max clocks SM {nv.get('sm_clock_max_mhz') or '-'} MHz, "
        f"memory {nv.get('mem_clock_max_mhz') or '-'} MHz; persistence {onoff.get(nv.get('persistence_mode'), '-')}, "
        f"ECC {onoff.get(nv.get('ecc_mode'), '-')}, MIG {onoff.get(nv.get('mig_mode'), '-')}, "
        f"PCIe gen {nv.get('pcie_gen') or '-'} x{nv.get('pcie_width') or '-'}",
    ]
    ceil = fp.get("ceilings") or {}
    if ceil:
        shown = [f"{k} {c['value']:.4g} {c['unit']}" for k, c in ceil.items() if isinstance(c, dict) and c.get("value")]
        parts.append(f"- Measured ceilings: {', '.join(shown) or '-'}")
    libs = sw.get("libraries") or {}
    loaded = [f"{k} {v.get('version')}" for k, v in libs.items() if isinstance(v, dict) and v.get("loaded")]
    parts.append(
        f"- Libraries this process loaded (read from /proc/self/maps, versions from each library): "
        f"{', '.join(loaded) or 'none read'}; torch {torch_info.get('version') or '-'} (git "
        f"{str(torch_info.get('git_version') or '-')[:12]}, built with CUDA {torch_info.get('cuda_built') or '-'}, "
        f"has_magma {torch_info.get('has_magma')}); "
        f"Transformer Engine {sw.get('transformer_engine') or 'not installed'}"
    )
    knobs = {k: v for k, v in (fp.get("knobs") or {}).items() if k != "errors"}
    parts.append("- Knobs at process start: " + (", ".join(f"{k}={v}" for k, v in knobs.items()) or "-"))
    env = fp.get("env") or {}
    parts.append("- Allowlisted env vars set: " + (", ".join(f"{k}={v}" for k, v in env.items()) or "none"))
    host = fp.get("host") or {}
    harness = fp.get("harness") or {}
    parts.append(
        f"- Host: {host.get('os') or '-'}, Python {host.get('python') or '-'}, {host.get('cpu') or '-'} "
        f"({host.get('cpu_count') or '-'} CPUs); harness gpu-repro {harness.get('version') or '-'} at commit "
        f"{harness.get('git_commit') or 'unknown'}"
    )
    # Fingerprint values are untrusted text: every bullet's content is escaped; only the frame is markdown.
    return "\n".join(f"- {text(p[2:])}" if p.startswith("- ") else p for p in parts)


def _state_table(docs: Sequence[Mapping[str, Any]], of: Mapping[int, str]) -> str:
    """What differs between processes on one machine: the GPU's state when each repro started."""
    rows = []
    for d in docs:
        st = ((d["fingerprint"].get("gpu") or {}).get("state")) or {}
        pids = st.get("compute_pids")
        rows.append(
            [
                text(d["repro"]["id"], cell=True),
                of[id(d)],
                _cell(st.get("power_w")) if st.get("power_w") is not None else "-",
                str(st.get("temperature_c")) if st.get("temperature_c") is not None else "-",
                str(len(pids)) if isinstance(pids, list) else "-",
                str(st.get("sm_clock_mhz") or "-"),
                text(", ".join(st.get("clocks_event_reasons") or []) or "none", cell=True),
            ]
        )
    headers = [
        "repro",
        "machine",
        "power (W)",
        "temperature (C)",
        "compute processes",
        "SM clock (MHz)",
        "clock events",
    ]
    return "GPU state when each repro started:\n\n" + md_table(rows, headers)


# --------------------------------------------------------------------------- one repro


def _script_block(doc: Mapping[str, Any]) -> str | None:
    """The standalone script of the headline comparison, with the lines that rebuild our exact harness."""
    from repro.evidence.standalone import from_artifact, harness_lines

    script = from_artifact(doc)
    if not script:
        return None
    harness = (doc["fingerprint"].get("harness")) or {}
    rid = doc["repro"]["id"]
    shell = "\n".join(harness_lines(harness.get("git_commit"), harness.get("version"), doc["run"].get("rerun")))
    summary = html_text(f"{rid}: standalone script (plain torch, no gpu-repro needed) and the exact harness")
    return (
        f"<details><summary>{summary}</summary>\n\n"
        f"Run it with `python repro_{rid.replace('-', '_')}.py`; it prints both times and their ratio. "
        "To rebuild the harness that made this artifact and rerun it:\n\n"
        f"{fence(shell, 'bash')}\n\n{fence(script.rstrip(), 'python')}\n\n</details>\n"
    )


# Breakdown columns shown once below the table when every row has the same value.
_CONSTANT_OK = ("threshold", "ci_level", "where", "paired", "scale", "basis", "status")


def breakdown_table(breakdown: Sequence[Mapping[str, Any]]) -> str:
    """The verdict's breakdown: one row per comparison; columns equal in every row move to one line below."""
    # The label is the headline's words (in the finding above) and "where" is what the CI columns show.
    keys = [k for k in dict.fromkeys(k for b in breakdown for k in b) if k not in ("label", "where")]
    same = {k: breakdown[0].get(k) for k in keys if k in _CONSTANT_OK and len({repr(b.get(k)) for b in breakdown}) == 1}
    if len(breakdown) < 2:
        same = {}
    keys = [k for k in keys if k not in same]
    rows = [[text(_cell(b.get(k)), cell=True) for k in keys] for b in breakdown]
    out = md_table(rows, [text(k, cell=True) for k in keys])
    if same:
        out += "\n\n_Every row: " + ", ".join(f"{text(k)} {text(_cell(v))}" for k, v in same.items()) + "._"
    return out


def _figure_lines(figs: Sequence[Figure]) -> list[str]:
    from repro.evidence.plots import NOT_DRAWN_HERE

    out = []
    for f in figs:
        if f.drawn:
            out += [f"![{text(f.alt)}]({f.file})", "", f"_Plot `{f.file}`: {text(f.alt)}._", ""]
        elif f.why_not == NOT_DRAWN_HERE:
            out += [f"_Plot `{f.file}` (drawn by `repro report RUN_DIR --out FILE`): {text(f.alt)}._", ""]
        else:
            why = f"{f.why_not or 'not drawn'}; {plots_hint()}"
            out += [f"_Plot `{f.file}` not drawn ({text(why)}). It would show: {text(f.alt)}._", ""]
    return out


def plots_hint() -> str:
    from repro.evidence.plots import INSTALL_HINT

    return INSTALL_HINT


def repro_section(
    doc: Mapping[str, Any], machine: str | None = None, figs: Sequence[Figure] = ()
) -> tuple[str, str | None]:
    """The repro's markdown, and its standalone-script block (kept apart: it is the last thing to go)."""
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
    holds = scope.conditions(doc)
    if holds != "-":
        lines += ["", f"Holds for: {text(holds)}"]
    lines += ["", f"> {text(v['finding'])}", ""]
    if v.get("details"):
        lines += [f"- {text(d)}" for d in v["details"]] + [""]
    smoke = is_smoke(doc)
    impact = None if smoke else scope.impact(doc, fmt_time)
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
    return "\n".join(lines), (None if smoke else _script_block(doc))


# Raw per-round times shown for the headline pair; the rest stay in the artifact.
RAW_SHOWN = 12


def raw_samples_line(doc: Mapping[str, Any]) -> str | None:
    """The headline pair's first per-round times (or samples): raw numbers, not only their summary."""
    have = {v["name"]: v for v in doc.get("variants") or []}
    pair = [have.get(n) for n in (doc["verdict"].get("variants") or [])]
    if len(pair) != 2 or not all(v and v.get("timing") for v in pair):
        return None
    parts = []
    for v in pair:
        assert v is not None
        t = v["timing"]
        values = t.get("rounds") or t["samples"]
        kind = "rounds" if t.get("rounds") else "samples"
        unit, scale = next(
            ((u, f) for u, f in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)) if values[0] >= f), ("ns", 1e-9)
        )
        shown = ", ".join(f"{x / scale:.4g}" for x in values[:RAW_SHOWN]) + f" {unit}"
        parts.append(
            f"{v['label']}: {shown}"
            + (f" (first {RAW_SHOWN} of {len(values)} {kind})" if len(values) > RAW_SHOWN else "")
        )
    return "Raw times per call of the headline pair (all in the artifact): " + "; ".join(parts) + "."


# --------------------------------------------------------------------------- the report


def bundle_names(docs: Sequence[Mapping[str, Any]]) -> str:
    """The bundle(s) to attach: ``<run-id>.bundle.tar.gz``, as ``repro bundle RUN_DIR`` names them."""
    return ", ".join(f"`{text(r)}.bundle.tar.gz`" for r in sorted({d["run"]["run_id"] for d in docs}))


def _not_tested(docs: Sequence[Mapping[str, Any]]) -> str:
    lines = scope.not_tested(docs)
    if not lines:
        return ""
    return "## Not tested here\n\n" + "\n".join(f"- {text(ln)}" for ln in lines) + "\n"


# Below this many characters a details block would be a stub: it is left out and the note says so.
_MIN_BLOCK = 1500


def report(
    docs: Sequence[Mapping[str, Any]],
    limit: int = REPORT_LIMIT,
    title: str | None = None,
    figures: Sequence[Figure] | None = None,
    plots: Mapping[str, str] | None = None,
) -> str:
    """The whole report, at most ``limit`` characters, evidence intact.

    The body (summary, scope, every repro with its standalone script) comes first; the
    environment follows: each distinct fingerprint once, collect_env once per distinct output
    (its library section always kept), then each artifact's JSON. What does not fit is cut at
    JSON element boundaries (what is shown still parses) or left out, and the note names the
    bundle that holds everything. ``figures``: the repros' plots (``repro.evidence.plots``).

    ``repro cliff`` artifacts get their own section (``repro.evidence.cliff_report``); ``plots`` maps
    their key to the link of a plot drawn beside the report.
    """
    if not docs:
        raise ValueError("no artifacts to report")
    from repro.evidence import cliff_report

    run_ids = sorted({d["run"]["run_id"] for d in docs})
    cliffs = [d for d in docs if d.get("kind") == "gpu-repro.cliff"]
    docs = [d for d in docs if d.get("kind") != "gpu-repro.cliff"]
    if figures is None:
        from repro.evidence.plots import describe

        figures = describe(docs)
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
    scope_md = _not_tested(docs)  # a CPU or smoke run says so here too
    full = [d for d in docs if not is_smoke(d)]
    mach, of = machines(full)
    sections = [repro_section(d, of.get(id(d)), [f for f in figures if f.repro_id == d["repro"]["id"]]) for d in docs]
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
    env += [_state_table(full, of), ""]
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
            outputs.setdefault(out, []).append(f"machine {of[id(d)]}")
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
