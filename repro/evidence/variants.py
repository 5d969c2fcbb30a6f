"""One repro's variants as a reader sees them: which are shown, times, raw rounds, kernels and their diff, breakdown."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from repro.core.kernelnames import short_names
from repro.evidence.markdown import NAME_CHARS, code, fmt_num, fmt_pct, fmt_time, md_table, text

KERNELS_PER_VARIANT = 6
# Above this many variants only the verdict's pair (and variants that did not run) are tabled.
MAX_VARIANTS_SHOWN = 12
# A smoke run proves the pipeline, not a cliff: its report stays short (the artifact has the rest).
MAX_VARIANTS_SHOWN_SMOKE = 4
KERNELS_PER_VARIANT_SMOKE = 3
# Kernel diffs beyond the verdict's own pair: the same contrast at other settings, at most this many.
MAX_RELATED_DIFFS = 2
# A kernel whose per-call time moved by more than this between variants is "changed".
_CHANGED = 0.10
# Raw per-round times shown for the headline pair; the rest stay in the artifact.
RAW_SHOWN = 12


def is_smoke(doc: Mapping[str, Any]) -> bool:
    """True for a smoke run (shrunken sizes, often on CPU): it proves the pipeline, never a cliff."""
    return bool((doc.get("run") or {}).get("smoke"))


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


def variants_table(doc: Mapping[str, Any]) -> str:
    """The shown variants: median, CI, IQR, samples and why sampling stopped, timer, achieved rate."""
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


def per_call_us(k: Mapping[str, Any]) -> float:
    """A kernel's microseconds per call of the timed op (``per_call``: its launches per call)."""
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
    short = short_names(names, NAME_CHARS)
    rows = [
        [code(short[n], 2 * NAME_CHARS)]
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
    short = short_names([*a, *b], NAME_CHARS)

    def c(name: str) -> str:
        return code(short[name], 2 * NAME_CHARS)

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
    rows = [[text(fmt_num(b.get(k)), cell=True) for k in keys] for b in breakdown]
    out = md_table(rows, [text(k, cell=True) for k in keys])
    if same:
        out += "\n\n_Every row: " + ", ".join(f"{text(k)} {text(fmt_num(v))}" for k, v in same.items()) + "._"
    return out
