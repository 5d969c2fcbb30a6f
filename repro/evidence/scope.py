"""What a number holds for and what was not tested: qualifiers, impact and scope, from an artifact's fields.

Everything here reads structured fields (the verdict's breakdown rows and their qualifiers,
variant statuses and reasons, the repro's declared impact and seed GPUs, the fingerprint),
never the finding's prose, so a summary row can say "cusolver backend, batch 128" and
"default backend: at most 0.97x" without parsing sentences. What an artifact does not record
comes from the caller as ``Declared`` data; nothing here reads the plugin registry.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from repro.core import stats
from repro.core.errors import reason_only
from repro.core.results import VariantResult, rel_halfwidth
from repro.core.verdict import INFORMATIONAL
from repro.env.fingerprint import essentials
from repro.evidence.band import Band, headline_rounds, headline_row, lookup, row_rounds
from repro.evidence.declared import Declarations, Declared, of
from repro.evidence.machines import guest_words, image_vars
from repro.evidence.markdown import fmt_pct, fmt_time, listed
from repro.evidence.model import Artifact, Row

__all__ = [
    "conditions",
    "crossing_episodes",
    "episode_line",
    "episodes_line",
    "held_side",
    "impact",
    "not_tested",
    "only",
    "qualifier_text",
    "rounds_across",
    "seed_gpus",
    "short_of_threshold",
    "untested",
]

MAX_CONTRASTS = 3
# How the harness opens the finding of a repro that did not run (repro.core.verdict.unavailable).
_NOT_MEASURED = "Not measured: "


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


def conditions(doc: Artifact) -> tuple[str, list[str], list[str]] | None:
    """(the headline's settings, where the effect holds, where it does not), each from its row's own status.

    ``("cusolver backend, batch 128", ["cusolver backend, batch 64: 5.35x"], ["default backend: at
    most 0.98x"])``. The other rows are grouped by their first qualifier that differs from the
    headline's, and by status, so one group never mixes rows that held with rows that did not.
    """
    head = headline_row(doc)
    if head is None:
        return None
    quals = head.qualifiers
    out = qualifier_text(quals) or str(head.label or "-")
    groups: dict[tuple[str, bool], list[Row]] = {}
    for row in doc.verdict.breakdown:
        if row is head or row.ratio is None or row.status == INFORMATIONAL:
            continue  # an informational row is not judged, so it neither holds nor fails
        name = _row_name(quals, row)
        if name is None:
            continue
        groups.setdefault((name, row.status == "reproduced"), []).append(row)
    holds: list[str] = []
    fails: list[str] = []
    for (name, held), rows in groups.items():
        ratios = sorted(float(r.ratio or 0.0) for r in rows)
        if len(rows) == 1:
            said = f"{ratios[0]:.2f}x"
        else:
            said = f"at least {ratios[0]:.2f}x" if held else f"at most {ratios[-1]:.2f}x"
        (holds if held else fails).append(f"{name}: {said}")
    return out, _capped(holds), _capped(fails)


def short_of_threshold(doc: Artifact) -> str:
    """``The headline's whole CI lies above 1.0 (+17% at its median), the claim's direction; the 1.2 threshold it
    falls short of is the repro's own: <why>.``: where ``held_side`` holds, so that a reader does not take
    not_reproduced for no effect, nor a small effect for a large one; "" otherwise."""
    v = doc.verdict
    if not held_side(doc):
        return ""
    why = f": {v.threshold_why.rstrip('.')}" if v.threshold_why else ""
    off = (float(v.value or 0) - 1) * 100
    return (
        f"The headline's whole CI lies above 1.0 (+{fmt_pct(off)} at its median), the claim's direction; the "
        f"{v.threshold:g} threshold it falls short of is the repro's own{why}."
    )


def held_side(doc: Artifact) -> bool:
    """Whether a tested claim did not reproduce though its headline's whole CI lies between 1.0 and the threshold
    (a claim holds where the whole CI reaches its threshold, ``repro.core.verdict.decide``, so the threshold lies
    above 1.0): the claim's direction, short of its size. False where the verdict does not record that its
    headline tested the claim."""
    v = doc.verdict
    if v.status != "not_reproduced" or v.threshold is None or v.value is None or v.ci_low is None or v.ci_high is None:
        return False
    if v.claim is None or not v.claim.tested:  # the headline is not the seed's claim (or not known to be)
        return False
    return v.ci_low > 1.0 and v.ci_high < v.threshold


def _row_name(quals: Mapping[str, Any], row: Row, every: bool = False, among: Sequence[Row] = ()) -> str | None:
    """A row named by its first qualifier that differs from the headline's ("torch graph, with matmul"), or
    with ``every`` by each that differs ("default backend, batch 16", where a bare "default backend" would
    not say which of its rows a number is), and by each in which any row of ``among`` differs from the
    headline ("default backend, batch 128" beside "default backend, batch 16")."""
    other = row.qualifiers
    keys = [k for k in quals if other.get(k) != quals.get(k) or any(r.qualifiers.get(k) != quals.get(k) for r in among)]
    keys = keys if every else [k for k in keys if other.get(k) != quals.get(k)][:1]
    if not keys:
        return None
    name = ", ".join(_one(k, other.get(k)) or f"{k} -" for k in keys)
    first = next(iter(quals))
    if first not in keys and (lead := _one(first, quals[first])):
        name = f"{lead}, {name}"  # "cusolver backend, batch 16", not a bare "batch 16"
    return name


def only(doc: Artifact) -> str | None:
    """``cusolver backend`` when every comparison that reproduced shares the headline's first setting and
    some comparison with another value of it did not: the summary row's status then says "only"."""
    head = headline_row(doc)
    quals = head.qualifiers if head is not None else {}
    if head is None or head.status != "reproduced" or not quals:
        return None
    key = next(iter(quals))
    rows = doc.verdict.breakdown
    held = [r for r in rows if r.status == "reproduced"]
    others = [r for r in rows if r.qualifiers.get(key) != quals[key] and r.status != INFORMATIONAL]
    shared = all(r.qualifiers.get(key) == quals[key] for r in held)
    if shared and others and all(r.status != "reproduced" for r in others):
        return _one(key, quals[key])
    return None


def not_held(doc: Artifact) -> list[str]:
    """The comparisons of the headline's quantity (its name before " (") that did not reproduce beside a headline
    that did, where ``only`` names no setting that sets them apart (graph-memset's torch graph beside its CUDA
    twin): the summary row's status names them."""
    head = headline_row(doc)
    if head is None or head.status != "reproduced" or only(doc) is not None or not head.comparison:
        return []
    stem = head.comparison.split(" (", 1)[0]  # the same quantity measured another way: "memset/fill (torch graph)"
    return [
        str(r.comparison)
        for r in doc.verdict.breakdown
        if r.comparison and r.status == "not_reproduced" and r.comparison.split(" (", 1)[0] == stem
    ]


def _capped(parts: list[str]) -> list[str]:
    if len(parts) <= MAX_CONTRASTS:
        return parts
    return parts[:MAX_CONTRASTS] + [f"{len(parts) - MAX_CONTRASTS} more in the breakdown"]


def impact(doc: Artifact, declared: Declared | None = None) -> str | None:
    """The repro's impact sentence (the artifact's since schema 1.2, else the caller's ``Declared``), scoped
    to what this run measured: the comparisons it did not hold for (each row's own status) and a suspect
    run said first, then the headline pair's cost per call and, beside it, the difference in the rows
    that did not hold."""
    # The artifact's words first (the harness that ran wrote them); the catalog's fill in for an
    # artifact from before schema 1.2, which records none.
    sentence = doc.repro.impact or getattr(declared, "impact", None)
    if not sentence:
        return None
    v = doc.verdict
    found = conditions(doc) if v.status == "reproduced" else None
    # The rows it did not hold for are listed just above ("Does not hold for"): named by that line.
    scope = "where it held: " if found and found[2] else ""
    if doc.validity.flag == "suspect":
        scope = f"from a suspect run, {scope}" if scope else "from a suspect run: "
    pair = v.variants
    have = {x.name: x for x in doc.variants}
    cost = ""
    if len(pair) == 2 and all((x := have.get(n)) is not None and x.timing for n in pair):
        ta, tb = (have[n].median for n in pair)
        unit = _unit(have[pair[0]])
        # The two medians are in the variant table; the difference per call is what a user pays.
        cost = f" Here: {_signed(ta - tb)} per {unit} ({fmt_time(ta)} against {fmt_time(tb)})"
        # Where the ratio stayed under the threshold, the difference itself may not have shrunk: said
        # from the medians, so a smaller ratio is not read as a smaller cost.
        if found and found[2]:
            rest = _listed(_differences(doc, have))
            cost += f"; where it did not hold, per {unit}: {rest}" if rest else ""
            # A row that ran the other way costs nothing more: said once, so the reader sees what it saves.
            other = _listed(_differences(doc, have, way=-1.0), medians=True)
            cost += f"; where it ran the other way, per {unit}: {other}" if other else ""
        # The rows not judged (other forms of the same op: after work, in a framework's graph) can cost more
        # per call than the headline's pair: the headline's difference is never the only one said.
        if aside := _listed(_differences(doc, have, judged=False)):
            cost += f"; in the rows not judged, per {unit}: {aside}"
        cost += "."
    return f"{scope}{sentence}{cost}"


def _listed(rows: Sequence[tuple[str, str, str]], medians: bool = False) -> str:
    """``+34.5 us (default backend, batch 16), ...`` (``_differences``'s rows); with ``medians``, or where the
    difference is left out, each row's two medians after its name."""
    return ", ".join(
        f"{d} ({name}: {both})" if d and medians else f"{d} ({name})" if d else f"({name}: {both})"
        for d, name, both in rows
    )


def _signed(seconds: float) -> str:
    return f"{'+' if seconds >= 0 else '-'}{fmt_time(abs(seconds))}"


def _unit(var: VariantResult) -> str:
    """What one timed call is: an op where a sample is a graph of ``ops`` ops (graph-memset), else a call."""
    t = var.timing
    ops = var.config.get("ops")
    return "op" if t is not None and isinstance(ops, int) and ops > 1 and t.calls_per_sample == ops else "call"


def _differences(
    doc: Artifact, have: Mapping[str, VariantResult], judged: bool = True, way: float = 1.0
) -> list[tuple[str, str, str]]:
    """(``+89.4 us`` or "", the row's comparison, ``<numerator's median> against <denominator's>``) for the
    rows that did not hold (with ``judged=False``: the rows not judged, ``INFORMATIONAL``), on time, whose ratio
    moved the same way as the headline's (``way=-1``: the other way). The difference of the medians is given where
    its sign agrees with the row's ratio (the median of per-round ratios, scaled), else the two medians only."""
    picked = []
    head = headline_row(doc)
    # A row that runs the other way (faster, not slower) carries no penalty: "Does not hold for" says so.
    sign = way if head is None or float(head.ratio or 1.0) >= 1.0 else -way
    for r in doc.verdict.breakdown:
        a, b = have.get(str(r.num)), have.get(str(r.den))
        if r.status == "reproduced" or (r.status == INFORMATIONAL) == judged:
            continue
        if r.basis not in (None, "time") or a is None or b is None:
            continue
        if a.timing is None or b.timing is None:
            continue
        d = a.median - b.median
        moved = float(r.ratio) - 1 if isinstance(r.ratio, int | float) else d
        if not moved * sign > 0:
            continue
        picked.append((r, a, b, d, moved))
    out = []
    among = [x[0] for x in picked]  # each row named by every setting in which a listed row differs from the headline
    for r, a, b, d, moved in picked:
        name = (_row_name(head.qualifiers, r, every=True, among=among) if head is not None else None) or str(
            r.comparison or r.label or ""
        )
        out.append((_signed(d) if d * moved > 0 else "", name, f"{fmt_time(a.median)} against {fmt_time(b.median)}"))
    return out


def seed_gpus(doc: Artifact, declared: Declared | None = None) -> list[str]:
    """The GPUs the seed reported the cliff on (the artifact's since schema 1.2, else the caller's ``Declared``)."""
    value = doc.repro.seed_gpus if "seed_gpus" in doc.repro.recorded else getattr(declared, "seed_gpus", None)
    return [str(g) for g in value] if value is not None else []


def untested(doc: Artifact, declared: Declared | None = None) -> list[str]:
    """The conditions the repro says matter that one run cannot cover (the artifact's since schema 1.5,
    else the caller's ``Declared``)."""
    value = doc.repro.untested if "untested" in doc.repro.recorded else getattr(declared, "untested", None)
    return [_without_own_model(str(u), doc.machine.gpu_name) for u in value] if value is not None else []


# A GPU model as a not-covered line lists it among others ("GPUs (Ada, Blackwell, H100, A100)").
_MODEL = re.compile(r"\b([A-Z]{1,3}[0-9]{2,4}[A-Za-z]?)\b")


def _without_own_model(line: str, gpu_name: str | None) -> str:
    """``line`` without this run's own GPU model in a list of models left untested (``(H100, A100, Blackwell)`` on
    an H100 reads ``(A100, Blackwell)``): the catalog names every model, a run covers its own."""
    own = [m for m in _MODEL.findall(gpu_name or "") if not m.endswith("GB")]
    for model in own:
        line = re.sub(rf"\(({model}, )|(, {model})(?=[,)])", lambda m: "(" if m.group(1) else "", line)
    return line


def _covered(seed_gpu: str, run_gpus: Sequence[str]) -> bool:
    want = seed_gpu.lower().replace("nvidia", "").strip()
    return any(want in g.lower() for g in run_gpus)


def _by_design(doc: Artifact, var: VariantResult) -> bool:
    """A skipped variant that no comparison uses and no unrun comparison names (graph-memset's empty
    graph, "mm_only is the no-op baseline"): not a test subject, so not "not tested". An artifact that
    predates ``verdict.not_run`` cannot say which comparisons went unrun: all its skips are listed."""
    if var.status != "skipped" or "not_run" not in (doc.raw.get("verdict") or {}):
        return False
    v = doc.verdict
    used = {n for r in v.breakdown for n in (r.num, r.den)}
    reason = reason_only(var.reason)  # an unrun comparison's reason is said without the exception too
    named = any(var.name in x.reason or (reason and reason in x.reason) for x in v.not_run)
    return var.name not in used and not named


# The seeds' sources: what the project kept of them, and so what a claim's numbers rest on.
SEED_DOCUMENTS = (
    "Not available to this run: the seed documents' text (seeds/ keeps each claim and program; their numbers are "
    "unchecked upstream); the records and harness sources behind band-runs.json and context/ (no public URL)."
)


def _skipped_words(labels: Sequence[str], seen: set[tuple[str, ...]]) -> str:
    """``TE FusedAdam (capturable=False, eager; capturable=True, eager)``, or for names whose forms a line above
    listed, ``torch AdamW(fused=True) and torch AdamW(foreach=True) (each in the 2 forms above)``: variant labels
    ("name, form") by name, each set of forms said once (``seen``: the sets already said); labels without a form,
    the first three and how many more."""
    groups: dict[str, list[str]] = {}
    for x in labels:
        name, _, form = x.partition(", ")
        groups.setdefault(name, []).append(form)
    if len(labels) < 2 or not all(all(forms) for forms in groups.values()):
        # Labels hold commas ("TE FusedAdam, capturable=True, eager"): semicolons keep them apart.
        return "; ".join(labels[:3]) + (f"; and {len(labels) - 3} more" if len(labels) > 3 else "")
    by_forms: dict[tuple[str, ...], list[str]] = {}
    for name, named_forms in groups.items():
        by_forms.setdefault(tuple(named_forms), []).append(name)
    parts = []
    for forms, names in by_forms.items():
        who = listed(names)
        each = "each in " if len(names) > 1 else ""
        if forms in seen and len(forms) > 1:
            parts.append(f"{who} ({each}the {len(forms)} forms above)")
        else:
            parts.append(f"{who} ({each}{'; '.join(forms)})")
        seen.add(forms)
    return "; ".join(parts)


def not_tested(
    docs: Sequence[Artifact], declared: Declarations | None = None, offline_rerun: bool = False
) -> list[str]:
    """Lines of the report's scope section: what this run skipped, could not measure, or never had (the
    GPUs the seeds reported on, the conditions each repro names as mattering, other software stacks);
    ``offline_rerun``: the bundle's re-run installed from a local wheelhouse only, its install lines untried on PyPI."""
    lines: list[str] = []
    for doc in docs:
        rid = doc.repro.id
        v = doc.verdict
        if v.status in ("skipped", "error"):
            # Nothing ran, so nothing was a smoke run either: one line, the status's own.
            finding = str(v.finding or "no finding recorded")
            finding = finding[len(_NOT_MEASURED) :] if finding.startswith(_NOT_MEASURED) else finding
            lines.append(f"{rid}: not measured ({v.status}): {finding}")
            continue
        if doc.smoke:
            device = doc.run.device or "CPU"
            lines.append(f"{rid}: a smoke run on {device} (shrunken sizes): it proves the pipeline, not the cliff.")
        by_reason: dict[str, list[str]] = {}
        for var in doc.variants:
            if var.status != "ok" and not _by_design(doc, var):
                # The exception that says it again ("...: ModuleNotFoundError: No module named 'x'") is in the artifact.
                reason = reason_only(var.reason) or "no reason recorded"
                why = f"{var.status}: {reason}"
                by_reason.setdefault(why, []).append(str(var.label or var.name))
        seen: set[tuple[str, ...]] = set()  # the forms a line of this repro already listed
        for why, labels in by_reason.items():
            lines.append(f"{rid}: {_skipped_words(labels, seen)} ({why})")
        if conditions := untested(doc, of(doc, declared)):
            lines.append(f"{rid}, not covered: {'; '.join(conditions)}.")
    facts = [essentials(d.fingerprint) for d in docs]
    run_gpus = sorted({str(e["gpu"]) for e in facts})
    missing: dict[str, list[str]] = {}
    unnamed: list[str] = []
    for doc in docs:
        gpus = seed_gpus(doc, of(doc, declared))
        seed_said = "seed_gpus" in doc.repro.recorded or getattr(of(doc, declared), "seed_gpus", None) is not None
        if not gpus and seed_said and not doc.smoke:
            unnamed.append(doc.repro.id)
        for g in gpus:
            if not _covered(g, run_gpus):
                missing.setdefault(g, []).append(doc.repro.id)
    whose = ""
    if unnamed:
        whose = f"{unnamed[0]}'s seed names" if len(unnamed) == 1 else f"the seeds of {', '.join(unnamed)} name"
        whose += " no GPU"
    if missing:
        named = "; ".join(f"{g} ({', '.join(ids)})" for g, ids in missing.items())
        named += f"; {whose}" if whose else ""
        lines.append(f"GPUs the seeds reported on, not in this run: {named}.")
    elif whose:
        lines.append(f"{whose}, so the seed's GPU could not be matched.")
    if unseen := _unrecorded(docs):
        lines.append(unseen)
    if any(not d.smoke for d in docs):
        lines.append(SEED_DOCUMENTS)
        host = "; a bare-metal host (this run was a VM guest)" if any(guest_words(d.machine) for d in docs) else ""
        lines.append(
            f"Not run: the GPU with locked clocks or another power limit (measured as found){host}; Windows (WDDM) "
            "or WSL2, where the seeds may have run"
            + ("; pip installs from PyPI (the re-run used a local wheelhouse)." if offline_rerun else ".")
        )
    stacks = sorted({_stack(d, e) for d, e in zip(docs, facts, strict=True)})
    if len(stacks) == 1:
        lines.append(
            f"One software stack only ({stacks[0]}): other torch, CUDA, library and driver versions, and the "
            "Docker lanes (make matrix), were not run here."
        )
    return lines


def _unrecorded(docs: Sequence[Artifact]) -> str | None:
    """What the machine had that no artifact could record: a container's image (invisible from inside
    it; its variables named instead) and the package index torch came from (no installer records it)."""
    gone: list[str] = []
    boxes = [d.machine for d in docs if d.machine.in_container and not d.machine.image]
    if boxes:
        env = boxes[0].container_env
        hints = image_vars(env)
        gone.append(
            "the container image (its name and digest are not visible from inside it"
            + (f"; its variables: {hints})" if hints else ")")
        )
    if any(guest_words(d.machine) for d in docs):
        gone.append("the VM's host (power and clock policy beyond NVML's view, other tenants)")
    if any(d.machine.torch_has_magma for d in docs):
        gone.append("MAGMA's version (torch says only that it was built with MAGMA)")
    installers = sorted({str(d.machine.torch_install.get("installer")) for d in docs if d.machine.torch_install})
    if installers and not any(d.machine.torch_install.get("direct_url") for d in docs):
        gone.append(f"torch's package index ({', '.join(installers)} recorded none)")
    return f"Not recordable from inside this run: {'; '.join(gone)}." if gone else None


def _dotted(version: str) -> str:
    """cudnnGetVersion's integer as a release: major*10000 + minor*100 + patch from cuDNN 9 (91900 -> 9.19.0),
    major*1000 + minor*100 + patch before (8907 -> 8.9.7); any other text as it is."""
    n = int(version) if version.isdigit() else 0
    if n >= 90000:
        return f"{n // 10000}.{n % 10000 // 100}.{n % 100}"
    if n >= 1000:
        return f"{n // 1000}.{n % 1000 // 100}.{n % 100}"
    return version


def _stack(doc: Artifact, e: Mapping[str, Any]) -> str:
    """torch, CUDA, the lane, the driver and the GEMM and solver libraries the process loaded."""
    libs = {lib.name: lib.version for lib in doc.machine.libraries if lib.loaded}
    said = [f"torch {e['torch'] or '-'}", f"CUDA {e['cuda'] or '-'}", str(e["lane"])]
    said += [f"driver {e['driver']}"] if e.get("driver") else []
    named = (("cublas", "cuBLAS"), ("cusolver", "cuSOLVER"), ("cudnn", "cuDNN"))
    said += [f"{name} {_dotted(str(libs[key]))}" for key, name in named if libs.get(key)]
    return ", ".join(said)


def episode_line(doc: Artifact, bands: Sequence[Band] = (), whose: str = "the") -> str:
    """``Episodes: k of n outside the CI; farthest: ...`` (``whose``: "its" for another run's CI): where one of
    the headline's episodes (rounds between idle gaps) lay farther from the headline than twice the CI's
    half-width and than a re-run on one GPU lands (the band's same-GPU spread), how many lay outside the CI and
    which arm moved in the farthest, against the other episodes' medians; "" otherwise (the CI's legend says an
    extreme episode can lie outside it). A suspect run gets it too: its status says what moved the clocks, not
    which episode moved."""
    v = doc.verdict
    row = headline_row(doc)
    ratios = headline_rounds(doc)
    num = doc.variant(str(row.num)) if row is not None else None
    den = doc.variant(str(row.den)) if row is not None else None
    if not ratios or not v.value or v.ci_low is None or v.ci_high is None or num is None or den is None:
        return ""
    b = lookup(doc, bands)
    same = b.same_gpu[0] if b is not None and b.same_gpu else 0.0
    size = num.timing.episode_rounds if num.timing is not None else None
    meds = stats.episode_medians(ratios, size)
    half = rel_halfwidth(v.value, v.ci_low, v.ci_high)
    if not meds or max(abs(m / v.value - 1) for m in meds) <= max(2 * half, same):
        return ""
    value = v.value
    at = max(range(len(meds)), key=lambda i: abs(meds[i] / value - 1))
    arms: list[tuple[float, str, str, float]] = []
    for arm in (num, den):
        rounds = arm.timing.rounds if arm.timing is not None and arm.timing.rounds else ()
        per = stats.episode_medians(rounds, size)
        if len(per) == len(meds) and (others := statistics.median(x for i, x in enumerate(per) if i != at)) > 0:
            move = per[at] / others - 1
            arms.append((abs(move), f"{arm.name} {move:+.1%}", fmt_time(per[at]), others))
    outside = sum(not v.ci_low <= m <= v.ci_high for m in meds)
    said = f"Episodes: {outside} of {len(meds)} outside {whose} CI; farthest: episode {at + 1}, {meds[at]:.2f}x "
    said += f"({meds[at] / v.value - 1:+.1%})"
    if arms:  # the arm that moved most, with its time against the other episodes' median, then the other's move
        moved, *also = sorted(arms, reverse=True)
        said += f": {moved[1]} ({moved[2]} against {fmt_time(moved[3])} in the others)"
        said += "".join(f", {x[1]}" for x in also)
    return said + "."


def rounds_across(doc: Artifact) -> str:
    """``10 of 50 headline rounds read above the 1.2 threshold (up to 3.38; mean of all 1.34)``: where the headline's
    CI lies on one side of the threshold and some of its per-round ratios on the other; "" otherwise."""
    v, line = doc.verdict, doc.verdict.threshold
    if line is None or v.value is None or v.ci_low is None or v.ci_high is None:
        return ""
    side_of_ci = stats.classify(v.value, v.ci_low, v.ci_high, line)
    if side_of_ci == "straddles":  # a CI across the threshold: a round across it says nothing new
        return ""
    ratios = headline_rounds(doc)
    below = side_of_ci == "below"
    across = [x for x in ratios if (x >= line if below else x < line)]
    if not across:
        return ""
    far = f"up to {max(across):.3g}" if below else f"down to {min(across):.3g}"
    side = "above" if below else "below"
    mean = statistics.fmean(ratios)  # a skewed spread: the mean of all rounds lies off their median
    # In how many episodes (rounds between idle gaps): one slow spell, or spells that recur.
    row = headline_row(doc)
    num = doc.variant(str(row.num)) if row is not None else None
    cut = stats.episodes(ratios, num.timing.episode_rounds if num is not None and num.timing is not None else None)
    hit = sum(any((x >= line if below else x < line) for x in ep) for ep in cut)
    where = f", in {hit} of {len(cut)} episodes," if cut else ""
    return (
        f"{len(across)} of {len(ratios)} headline rounds{where} read {side} the {line:g} threshold ({far}; mean of "
        f"all {mean:.3g})"
    )


def episodes_line(doc: Artifact, bands: Sequence[Band] = (), whose: str = "the") -> str:
    """The section's Episodes line: ``episode_line``'s (of ``whose`` CI), then the headline's rounds across the
    threshold (``rounds_across``) and other rows' episodes across it (``crossing_episodes``); "" where none says
    anything."""
    head = episode_line(doc, bands, whose)
    rest = [f"{x}." for x in (rounds_across(doc), crossing_episodes(doc)) if x]
    return " ".join([head or "Episodes:", *rest]) if head or rest else ""


def crossing_episodes(doc: Artifact) -> str:
    """``Other rows: memset/fill (torch graph), not judged, read 1.572 in 1 of 13 episodes (farthest: episode 2),
    above the 1.2 threshold, 0.8986 over all``: each other paired row timed on wall time whose CI lies on one side
    of the threshold (the row's own, else the headline's) while some of its episodes' medians lie outside that CI
    on the other side; "" where none does. The headline's episodes are ``episode_line``'s."""
    said = []
    for r in doc.verdict.breakdown:
        num = doc.variant(str(r.num))
        line = r.threshold if isinstance(r.threshold, int | float) else doc.verdict.threshold
        if r.headline or line is None or num is None or num.timing is None:
            continue
        if r.ratio is None or r.ci_low is None or r.ci_high is None:
            continue
        if stats.classify(r.ratio, r.ci_low, r.ci_high, line) == "straddles":
            continue  # a CI across the threshold: an episode across it says nothing new
        # () unless paired on wall time, with rounds whose median is the row's ratio.
        ratios = row_rounds(doc, r, r.ratio)
        if not ratios:
            continue
        meds = stats.episode_medians(ratios, num.timing.episode_rounds)
        value = r.ratio
        below = value < line
        across = [i for i, m in enumerate(meds) if (m >= line if below else m < line)]
        if across:
            at = max(across, key=lambda i: abs(meds[i] / value - 1))
            judged = ", not judged," if r.status == INFORMATIONAL else ""
            read = f"{meds[at]:.4g}" if float(f"{meds[at]:.4g}") != line else f"{meds[at]:.6g}"  # never the line
            said.append(
                f"{r.comparison}{judged} read {read} in {len(across)} of {len(meds)} episodes (farthest: "
                f"episode {at + 1}), {'above' if below else 'below'} the {line:g} threshold, {value:.4g} over all"
            )
    return f"Other rows: {'; '.join(said)}" if said else ""
