"""What a number holds for and what was not tested: qualifiers, impact and scope, from an artifact's fields.

Everything here reads structured fields (the verdict's breakdown rows and their qualifiers,
variant statuses and reasons, the repro's declared impact and seed GPUs, the fingerprint),
never the finding's prose, so a summary row can say "cusolver backend, batch 128" and
"default backend: at most 0.97x" without parsing sentences. What an artifact does not record
comes from the caller as ``Declared`` data; nothing here reads the plugin registry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from repro.env.fingerprint import essentials
from repro.evidence.declared import Declarations, Declared, of
from repro.evidence.markdown import fmt_time

__all__ = ["conditions", "impact", "not_tested", "only", "qualifier_text", "seed_gpus"]

# Breakdown-row keys that are the harness's own; every other key is a qualifier.
_ROW_KEYS = frozenset(
    ("comparison", "label", "num", "den", "ratio", "ci_low", "ci_high", "threshold", "ci_level", "status", "where")
    + ("paired", "n", "scale", "basis", "headline")
)
MAX_CONTRASTS = 3
# How the harness opens the finding of a repro that did not run (repro.core.verdict.unavailable).
_NOT_MEASURED = "Not measured: "


def _qualifiers(row: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in _ROW_KEYS}


def _one(key: str, value: Any) -> str | None:
    if key == "memory_cap_gib":
        return "no memory cap" if value in (None, 0) else f"{value:g} GiB memory cap"
    if value is None:
        return None
    if isinstance(value, bool):
        return f"{key} {'on' if value else 'off'}"
    if isinstance(value, int | float):
        return f"{key} {value:g}"
    s = str(value)
    return f"{s} {key}" if key in ("backend",) and " " not in s else s


def qualifier_text(quals: Mapping[str, Any]) -> str:
    """``{"backend": "cusolver", "batch": 128}`` -> ``cusolver backend, batch 128``."""
    return ", ".join(p for k, v in quals.items() if (p := _one(k, v)))


def _head_row(doc: Mapping[str, Any]) -> Mapping[str, Any] | None:
    rows = (doc.get("verdict") or {}).get("breakdown") or []
    return next((r for r in rows if r.get("headline")), None)


def conditions(doc: Mapping[str, Any]) -> tuple[str, list[str], list[str]] | None:
    """(the headline's settings, where the effect holds, where it does not), each from its row's own status.

    ``("cusolver backend, batch 128", ["cusolver backend, batch 64: 5.35x"], ["default backend: at
    most 0.98x"])``. The other rows are grouped by their first qualifier that differs from the
    headline's, and by status, so one group never mixes rows that held with rows that did not.
    """
    head = _head_row(doc)
    if head is None:
        return None
    quals = _qualifiers(head)
    out = qualifier_text(quals) or str(head.get("label") or "-")
    groups: dict[tuple[str, bool], list[Mapping[str, Any]]] = {}
    for row in (doc.get("verdict") or {}).get("breakdown") or []:
        if row is head or not isinstance(row.get("ratio"), int | float):
            continue
        other = _qualifiers(row)
        key = next((k for k in quals if other.get(k) != quals.get(k)), None)
        if key is None:
            continue
        name = _one(key, other.get(key)) or f"{key} -"
        first = next(iter(quals))
        if key != first and (lead := _one(first, quals[first])):
            name = f"{lead}, {name}"  # "cusolver backend, batch 16", not a bare "batch 16"
        groups.setdefault((name, row.get("status") == "reproduced"), []).append(row)
    holds: list[str] = []
    fails: list[str] = []
    for (name, held), rows in groups.items():
        ratios = sorted(float(r["ratio"]) for r in rows)
        if len(rows) == 1:
            said = f"{ratios[0]:.2f}x"
        else:
            said = f"at least {ratios[0]:.2f}x" if held else f"at most {ratios[-1]:.2f}x"
        (holds if held else fails).append(f"{name}: {said}")
    return out, _capped(holds), _capped(fails)


def only(doc: Mapping[str, Any]) -> str | None:
    """``cusolver backend`` when every comparison that reproduced shares the headline's first setting and
    some comparison with another value of it did not: the summary row's status then says "only"."""
    head = _head_row(doc)
    quals = _qualifiers(head) if head is not None else {}
    if head is None or head.get("status") != "reproduced" or not quals:
        return None
    key = next(iter(quals))
    rows = [r for r in (doc.get("verdict") or {}).get("breakdown") or [] if isinstance(r, Mapping)]
    held = [r for r in rows if r.get("status") == "reproduced"]
    others = [r for r in rows if r.get(key) != quals[key]]
    if all(r.get(key) == quals[key] for r in held) and others and all(r.get("status") != "reproduced" for r in others):
        return _one(key, quals[key])
    return None


def _capped(parts: list[str]) -> list[str]:
    if len(parts) <= MAX_CONTRASTS:
        return parts
    return parts[:MAX_CONTRASTS] + [f"{len(parts) - MAX_CONTRASTS} more in the breakdown"]


def _declared(doc: Mapping[str, Any], field: str, declared: Declared | None) -> Any:
    """A field the repro declares: from the artifact (schema 1.2), else from what the caller looked up."""
    repro = doc.get("repro") or {}
    if field in repro:
        return repro[field]
    value = getattr(declared, field, None)
    return list(value) if isinstance(value, tuple) else value


def impact(doc: Mapping[str, Any], declared: Declared | None = None) -> str | None:
    """The repro's impact sentence, scoped to what this run measured: the comparisons it did not hold
    for (each row's own status) and a suspect run said first, then the headline pair's cost per call."""
    sentence = _declared(doc, "impact", declared)
    if not sentence:
        return None
    v = doc.get("verdict") or {}
    found = conditions(doc) if v.get("status") == "reproduced" else None
    # The rows it did not hold for are listed just above ("Does not hold for"): named by that line.
    scope = 'only where it held here (not the "Does not hold for" rows): ' if found and found[2] else ""
    if (doc.get("validity") or {}).get("flag") == "suspect":
        scope = f"from a suspect run, {scope}" if scope else "from a suspect run: "
    pair = v.get("variants") or []
    have = {x["name"]: x for x in doc.get("variants") or []}
    cost = ""
    if len(pair) == 2 and all((have.get(n) or {}).get("timing") for n in pair):
        ta, tb = (have[n]["timing"]["stats"]["median"] for n in pair)
        delta = ta - tb
        sign = "+" if delta >= 0 else "-"
        # The two medians are in the variant table; the difference per call is what a user pays.
        cost = f" Here: {sign}{fmt_time(abs(delta))} per call ({fmt_time(ta)} against {fmt_time(tb)})."
    return f"{scope}{sentence}{cost}"


def seed_gpus(doc: Mapping[str, Any], declared: Declared | None = None) -> list[str]:
    """The GPUs the seed reported the cliff on."""
    value = _declared(doc, "seed_gpus", declared)
    return [str(g) for g in value] if isinstance(value, list) else []


def _covered(seed_gpu: str, run_gpus: Sequence[str]) -> bool:
    want = seed_gpu.lower().replace("nvidia", "").strip()
    return any(want in g.lower() for g in run_gpus)


def not_tested(docs: Sequence[Mapping[str, Any]], declared: Declarations | None = None) -> list[str]:
    """Lines of the report's scope section: what this run skipped, could not measure, or never had."""
    lines: list[str] = []
    for doc in docs:
        rid = doc["repro"]["id"]
        v = doc.get("verdict") or {}
        if v.get("status") in ("skipped", "error"):
            # Nothing ran, so nothing was a smoke run either: one line, the status's own.
            finding = str(v.get("finding") or "no finding recorded")
            finding = finding[len(_NOT_MEASURED) :] if finding.startswith(_NOT_MEASURED) else finding
            lines.append(f"{rid}: not measured ({v.get('status')}): {finding}")
            continue
        if (doc.get("run") or {}).get("smoke"):
            device = (doc.get("run") or {}).get("device") or "CPU"
            lines.append(f"{rid}: a smoke run on {device} (shrunken sizes): it proves the pipeline, not the cliff.")
        by_reason: dict[str, list[str]] = {}
        for var in doc.get("variants") or []:
            if var.get("status") != "ok":
                why = f"{var.get('status')}: {var.get('reason') or 'no reason recorded'}"
                by_reason.setdefault(why, []).append(str(var.get("label") or var.get("name")))
        for why, labels in by_reason.items():
            # Labels hold commas ("TE FusedAdam, capturable=True, eager"): semicolons keep them apart.
            shown = labels[:3]
            lead = shown[0].split(", ", 1)[0] + ", "
            if len(shown) > 1 and all(x.startswith(lead) for x in shown):
                # "TE FusedAdam, a; TE FusedAdam, b" -> "TE FusedAdam (a; b)": the shared name once.
                said = f"{lead[:-2]} ({'; '.join(x[len(lead) :] for x in shown)})"
            else:
                said = "; ".join(shown)
            said += f"; and {len(labels) - 3} more" if len(labels) > 3 else ""
            lines.append(f"{rid}: {said} ({why})")
    run_gpus = sorted({str(essentials(d["fingerprint"])["gpu"]) for d in docs})
    missing: dict[str, list[str]] = {}
    for doc in docs:
        for g in seed_gpus(doc, of(doc, declared)):
            if not _covered(g, run_gpus):
                missing.setdefault(g, []).append(doc["repro"]["id"])
    if missing:
        named = "; ".join(f"{g} ({', '.join(ids)})" for g, ids in missing.items())
        lines.append(
            f"GPUs the seeds reported on that this run did not have: {named}. This run had {', '.join(run_gpus)}."
        )
    stacks = sorted(
        {
            f"torch {e['torch'] or '-'}, CUDA {e['cuda'] or '-'}, {e['lane']}"
            for e in (essentials(d["fingerprint"]) for d in docs)
        }
    )
    if len(stacks) == 1:
        lines.append(
            f"One software stack only ({stacks[0]}): other torch, CUDA and library versions and the Docker lanes "
            "(make matrix) were not run here."
        )
    return lines
