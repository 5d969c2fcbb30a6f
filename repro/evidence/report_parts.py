"""The report's head (the identity line, the summary table and its legend, what the bundle holds,
what was not tested) and its environment part (one ``<details>`` per machine).

Everything here reads the artifacts only; ``repro.evidence.report`` puts the parts together.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from repro.core.claim import JOIN
from repro.core.validity import CLOCK_FLOOR, POWER_CAP_FLOOR
from repro.env.fingerprint import essentials
from repro.evidence import band, scope, seeds
from repro.evidence.agreement import elsewhere, module_runs, not_run_bands, other_models, suspect_words
from repro.evidence.artifact import format_run_busy
from repro.evidence.clocks import FOUND
from repro.evidence.declared import Declarations
from repro.evidence.lines import MEASURED, band_agreement, missing_module, module_state, slack_words
from repro.evidence.machines import guest_words, machine_summary, machines, state_line
from repro.evidence.markdown import code, fence, finite, fmt_pct, html_text, md_table, text, verdict_cell, verdict_label
from repro.evidence.model import Artifact
from repro.evidence.printed import HISTORY, SCRIPT_OUT, commit_of
from repro.evidence.standalone import harness_of
from repro.evidence.variants import with_whole_steps

__all__ = [
    "attached_words",
    "bundle_names",
    "claim_cell",
    "method_line",
    "run_order",
    "environment",
    "identity_lines",
    "kernel_method",
    "legend",
    "not_tested",
    "summary_table",
    "traces_words",
]

_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_LIBRARIES = "Versions of relevant libraries"
_STACK = re.compile(r"^\[[a-z0-9]+\] (?:(?:torch|triton|numpy)==|cuda-|transformer[-_]engine)")
_NVIDIA = re.compile(r"^\[[a-z0-9]+\] nvidia-")


# --------------------------------------------------------------------------- head
def _date(doc: Artifact) -> str | None:
    created = doc.run.created_utc[:10]
    return created if _DATE.fullmatch(created) else None


def identity_lines(docs: Sequence[Artifact], printed: Mapping[str, str] | None = None) -> list[str]:
    """One line per distinct machine and stack: GPU, driver, torch and CUDA, the harness, the date(s), and the
    share of its repros' seconds the GPU spent on their timed work (``artifact.format_run_busy``).

    ``printed``: the attached files the report reads (``repro.evidence.printed``); a harness history among them
    names the commit of a digest recorded without one.
    """
    seen: dict[str, list[str]] = {}
    group: dict[str, list[Artifact]] = {}
    for d in docs:
        h = harness_of(d)
        e = essentials(d.fingerprint)
        cuda = f"CUDA {e['cuda']}" if e["cuda"] else "no CUDA build"
        guest = f" in a {text(g)}" if (g := guest_words(d.machine)) else ""
        words = ", ".join(
            [
                text(e["gpu"]),
                f"driver {text(e['driver'])}" if e["driver"] else "no GPU driver read",
                f"torch {text(e['torch'])} ({text(cuda)}, {text(e['lane'])}{guest})" if e["torch"] else "no torch",
                text(h.words(None if h.commit else commit_of(h.digest, printed or {}))),
            ]
        )
        seen.setdefault(words, []).extend(x for x in [_date(d)] if x)
        group.setdefault(words, []).append(d)
    out = []
    for words, dates in seen.items():
        span = sorted(set(dates))
        when = "" if not span else f", {span[0]}" + (f" to {span[-1]}" if len(span) > 1 else "")
        busy = format_run_busy([d.raw for d in group[words]])
        out.append(words + when + (f"; {busy}" if busy else ""))
    return out


def spread(below: float, above: float) -> str:
    """``-x%/+y%``: the band's side below and above the median of all; ``±x%`` where the two read the same."""
    lo, hi = fmt_pct(below * 100), fmt_pct(above * 100)
    return f"±{hi}" if lo == hi else f"-{lo}/+{hi}"


def _band_cell(doc: Artifact, bands: Sequence[band.Band]) -> str:
    if doc.verdict.status not in MEASURED or doc.verdict.value is None:
        return text(not_run_bands(doc, bands)) or "-"
    b = band.lookup(doc, bands)
    if b is None:
        seen = other_models(doc, bands)
        return f"none on this model; {text(elsewhere(seen[0]))}" if seen else "no cross-GPU data"
    suspect = suspect_words(b)
    few = b.outliers
    rest = f"; without the farthest {few[0]}: {spread(*b.sides(few[0]))}" if few else ""
    code_of = f", {said}" if (said := module_runs(doc, b)) else ""
    # Where this run lies against the median of all GPUs, when it is beyond the band (without its farthest GPUs,
    # where a few of them widen it).
    off = doc.verdict.value / b.center - 1
    sign = "+" if off > 0 else "-"
    below, above = b.sides(few[0] if few else 0)
    far = off > above if off > 0 else -off > below  # beyond the band on this run's side
    whole_lo, whole_hi = b.sides()
    beyond_all = off > whole_hi if off > 0 else -off > whole_lo  # beyond it with its farthest GPUs too
    which = " without them" if few and not beyond_all else ""
    # The section's Re-run-elsewhere line's own test: the whole band widened by one run's slack.
    reach = f", consistent with it widened by {slack_words(doc, b)}" if band_agreement(doc, b) == "consistent" else ""
    lies = f"; this run {sign}{fmt_pct(abs(off) * 100)}, outside the band{which}{reach}" if far else ""
    cell = f"{spread(whole_lo, whole_hi)} of {b.center:.3g}x ({len(b.points)} GPUs{suspect}{code_of}{rest}{lies})"
    if same := b.same_gpu:
        cell += f"; ±{fmt_pct(same[0] * 100)} ({same[2]} runs on {same[1]})"
    return cell


def _status(doc: Artifact) -> str:
    status = f"**{text(doc.verdict.status, cell=True)}**"
    if setting := scope.only(doc):
        status += f" ({text(setting, cell=True)} only)"
    elif missed := scope.not_held(doc):
        status += f" (not: {text('; '.join(missed), cell=True)})"
    elif scope.held_side(doc):  # not_reproduced, though the claim's direction held
        status += f" (above 1.0, under the repro's {doc.verdict.threshold:g})"
    status += " (quick run)" if doc.run.quick else ""
    if doc.validity.flag != "suspect":
        return status
    # Suspect only by the report's own check on an older run's rounds: said, as the run's artifact says valid.
    mine = doc.validity.reasons and all(x.startswith(FOUND) for x in doc.validity.reasons)
    return status + (" (suspect by this report's check)" if mine else " (suspect)")


def _short_reason(reason: str) -> str:
    """A claim's not-tested reason by its telling clause: the first that says what was not there, for
    each of its reasons (``repro.core.claim.JOIN`` joins them)."""
    return "; ".join(_told(part) for part in reason.split(JOIN))


def _told(reason: str) -> str:
    parts = [p.strip() for p in reason.split(": ") if p.strip()]
    told = next((p for p in parts if " not " in f" {p} "), None) or next((p for p in parts if "skipped" in p), None)
    return told or (parts[0] if parts else "no reason recorded")


def claim_cell(doc: Artifact) -> str:
    """Whether the headline measured the seed's claim on the seed's setup (the verdict's ``claim``),
    and, when a comparison ran the seed's own program beside another headline, that program's ratio."""
    claim = doc.verdict.claim
    if doc.verdict.status not in MEASURED or claim is None:
        return "-"
    if not claim.tested:
        return text(f"not tested: {_short_reason(claim.reason or '')}", cell=True)
    seed = [
        r
        for r in doc.verdict.breakdown
        if not r.headline and r.ratio is not None and any("seed" in str(q) for q in r.qualifiers.values())
    ]
    said = "tested"
    if seed:
        head = band.headline_row(doc)
        source = next(iter(head.qualifiers.values()), None) if head is not None and head.qualifiers else None
        said += f" (headline: {source}" if source else " (headline: the harness's"
        posted = finite(doc.extra.get("seed_as_posted_ratio"))  # the seed document's program, run unchanged, no CI
        # graph-memset's seed also posted a torch program: re-coded in the repro, run in its process after the rounds
        other = doc.extra.get("seed_torch_program")
        torch_ratio = finite(other.get("ratio")) if isinstance(other, Mapping) else None
        if posted is not None and torch_ratio is not None:
            said += (
                f"; seed.cu {posted:.2f}x, the seed's torch program re-coded {torch_ratio:.2f}x, no CI; "
                f"seed.cu re-implemented {seed[0].ratio:.2f}x)"
            )
        elif posted is not None:
            said += f"; the seed's program: unchanged {posted:.2f}x, no CI; re-implemented {seed[0].ratio:.2f}x)"
        elif torch_ratio is not None:  # seed.cu did not run: the seed's torch program still did
            said += (
                f"; the seed's torch program re-coded {torch_ratio:.2f}x, no CI; seed.cu re-implemented "
                f"{seed[0].ratio:.2f}x)"
            )
        else:
            said += f"; the seed's program, re-implemented: {seed[0].ratio:.2f}x)"
    return text(said, cell=True)


def _headline_cell(doc: Artifact) -> str:
    """The headline's ratio and CI; for a verdict whose headline comparison did not run, that it did not."""
    v = doc.verdict
    if v.value is None and v.headline and any(x.comparison == v.headline for x in v.not_run):
        module = missing_module(doc)
        return f"not run ({code(module)} {module_state(doc)})" if module else "not run (see its section)"
    return with_whole_steps(doc, verdict_cell(v, None))


def summary_table(docs: Sequence[Artifact], bands: Sequence[band.Band] | None = None) -> str:
    """One row per repro: status, the headline ratio with its own CI level, threshold, the re-run band."""
    known = band.load() if bands is None else bands
    rows = [
        [
            text(d.repro.id, cell=True),
            _status(d),
            claim_cell(d),
            _headline_cell(d),
            f"{d.verdict.threshold:g}" if d.verdict.threshold is not None else "-",
            _band_cell(d, known),
        ]
        for d in docs
    ]
    headers = [
        "repro",
        "status",
        "seed's claim",
        "headline ratio (CI)",
        "threshold",
        "earlier runs landed within (other GPUs; same GPU)",
    ]
    if all(d.verdict.claim is None for d in docs):  # artifacts before schema 1.3 record no claim
        rows, headers = [r[:2] + r[3:] for r in rows], headers[:2] + headers[3:]
    return md_table(rows, headers)


def _gpu_in_bands(docs: Sequence[Artifact], bands: Sequence[band.Band]) -> str:
    """Whether this run's GPU is one of the GPUs behind each row's re-run band, in a few words."""
    held = [(d, b) for d in docs for b in [band.lookup(d, bands)] if b is not None]
    if not held:
        return ""
    among = [text(d.repro.id) for d, b in held if any(p.uuid == d.machine.gpu_uuid for p in b.points)]
    if len(among) == len(held):
        return "; this run's GPU among them in every row"
    if not among:
        return "; this run's GPU is in none of them"
    return f"; this run's GPU is one of them for {', '.join(among)} only"


# The validity rule (repro.core.validity.RULE_WORDS) in the legend's words.
SUSPECT_LEGEND = (
    f"Suspect: NVML's polls after a timed block had the median SM clock under {POWER_CAP_FLOOR:.0%} of max under a "
    f"power cap ({CLOCK_FLOOR:.0%} otherwise) or a hard throttle; or another process or new ECC errors around it; "
    "or the headline's rounds split by the arms' order."
)


def legend(
    docs: Sequence[Artifact], bands: Sequence[band.Band] = (), details: bool = True, kernels: bool = True
) -> str:
    """What the summary and the sections' words mean, in one line: the CI and the re-run band (and
    whether this run's GPU is behind it), a "worst of k" level (the first such headline's own numbers),
    timed against kernel time, n where the ``details`` blocks' tables are shown and us/call where the
    ``kernels`` lists are."""
    worst = next((verdict_label(d.verdict) for d in docs if "worst of" in verdict_label(d.verdict)), None)
    said = ""
    if worst:
        pct, k = worst.split(" CI, worst of ")
        said = (
            f' "{pct} CI, worst of {k}": {k} comparisons decide together, each CI at 1 - 0.05/{k} '
            "(Bonferroni); the headline is the largest ratio."
        )
    if any(d.validity.flag == "suspect" for d in docs):
        said += f" {SUSPECT_LEGEND}"
    twin = (
        "; a CUDA twin times its replays in its own program"
        if any(isinstance(d.extra.get("twin"), Mapping) for d in docs)
        else ""
    )
    # The column's notation, where a row uses it: a band of this run's GPU model (else the cells say it in words).
    column = (
        f" Earlier-runs column (committed default runs, `band.json`{_gpu_in_bands(docs, bands)}): other GPUs "
        "-x%/+y% of m (n): the farthest GPU's median below and above m, the GPUs' medians' median; same GPU ±y% "
        "(k runs on j GPUs): the farthest run from its GPU's median. Neither bounds the next run, nor does the CI."
        if any(band.lookup(d, bands) is not None for d in docs)
        else " Earlier-runs column: committed default runs (`band.json`); no band is a bound for the next run."
    )
    return (
        "_The CI covers this process on this GPU: an order-statistic CI of the median per-round ratio, widened to "
        "the same CI of its episodes' medians (episode: rounds between idle gaps; an extreme episode can lie "
        f"outside).{column}"
        f"{said} Timed: median per call, CUDA events over samples of about 1 ms of calls (or one longer call; "
        f"launch latency, host gaps included){twin}; kernel time: profiled device "
        "time only."
        + (" n: rounds (each a median of samples) or samples." if details else "")
        + (" us/call: a kernel's time over its launches in one call." if kernels or details else "")
        + "_"
    )


def bundle_names(docs: Sequence[Artifact]) -> str:
    """The bundle(s) to attach: ``<run-id>.bundle.tar.gz``, as ``repro bundle RUN_DIR`` names them."""
    return ", ".join(f"`{text(r)}.bundle.tar.gz`" for r in sorted({d.run.run_id for d in docs}))


def seeds_words(docs: Sequence[Artifact]) -> str:
    """``; the seeds' own code (seeds/)`` where the bundle carries a seed's program for one of the repros."""
    return "; the seeds' own code (`seeds/`)" if any(seeds.folder(d.repro.id) for d in docs) else ""


def attached_words(names: Sequence[str]) -> str:
    """``; attached/ ...``: the files a run's maker added to its folder after it (the bundle packs them)."""
    if not names:
        return ""
    history = f"; `{HISTORY}`: the harness's commits with their digests" if HISTORY in names else ""
    if "README.txt" in names:
        return f"; `attached/`: {len(names)} files added after the run (its `README.txt` lists them{history})"
    return f"; `attached/`: files added to the run folder after it ran ({', '.join(code(n) for n in names)})"


def attach_words(docs: Sequence[Artifact], bundle: str, attached: Sequence[str], lean: bool = False) -> str:
    """`` _Attach <bundle> ...: what it holds._``; ``lean``: the same parts without their details (which traces,
    how the wheel was built, which scripts build CUDA programs), for a report short of room."""
    # Run beside the harness only where their output is attached (script-<id>.out).
    unrun = "" if any(SCRIPT_OUT.fullmatch(n) for n in attached) else "; none run with this run"
    if lean:
        n = len(attached)
        files = f"; `attached/`: {n} file{'s' * (n != 1)} added after the run" if attached else ""
        seeds_said = seeds_words(docs).replace("; ", ", ", 1)
        traces = "" if traces_words(docs).startswith("no traces") else " traces,"
        return (
            f" _Attach {bundle} (`repro bundle RUN_DIR`): raw samples,{traces} logs, the harness wheel, standalone "
            f"scripts (`scripts/<id>`{unrun}){seeds_said}{files}._"
        )
    # A twin's script is a .sh that builds its CUDA program with nvcc (graph-memset's).
    cuda_script = "; a `.sh` builds a CUDA program" if any("twin" in d.extra for d in docs) else ""
    return (
        f" _Attach {bundle} (`repro bundle RUN_DIR`): raw samples; {traces_words(docs)}; logs; the harness "
        f"wheel (built from the source that ran, its digest; not the Makefile or tools/); standalone scripts "
        f"(`scripts/<id>`{cuda_script}{unrun}){seeds_words(docs)}{attached_words(attached)}._"
    )


def traces_words(docs: Sequence[Artifact]) -> str:
    """Which repros the bundle has profiler traces of (``traces/<id>/``, written for every profiled
    variant), and which measured variants were never profiled, from the variants' kernel tables."""
    have, none, notes = [], [], []
    for d in docs:
        ran = [v for v in d.variants if v.status == "ok" and v.timing is not None]
        bare = [v for v in ran if not v.kernels and not v.profiled_iterations]
        rid = text(d.repro.id)
        if not ran or len(bare) == len(ran):
            none.append(rid)
            continue
        have.append(rid)
        if not bare:
            continue
        if isinstance(d.extra.get("twin"), Mapping) and all(v.timing and v.timing.method == "external" for v in bare):
            twin = d.extra["twin"]
            why = ", no nsys here" if "nsys" in twin and not twin.get("nsys") else ""
            notes.append(f"not of {rid}'s CUDA twin: CUDA events only{why}")
        else:
            notes.append(f"{rid}'s {len(bare)} variants timed outside the profiler have none")
    if not have:
        said = "no traces"
    elif len(have) == len(docs) > 1:
        said = "traces of every repro"
    else:
        said = f"traces of {', '.join(have)}"
    said += f" ({'; '.join(notes)})" if notes else ""
    return said + (f"; none of {', '.join(none)} (not profiled)" if none else "")


def not_tested(docs: Sequence[Artifact], declared: Declarations | None, offline: bool, note: str | None) -> str:
    """The section's lines, then the maker's note (``printed.note``) as theirs, which no measurement checked."""
    said = [f"- Its maker's note (`attached/NOTE.txt`): {text(note)}"] if note else []
    lines = [f"- {text(ln)}" for ln in scope.not_tested(docs, declared, offline)] + said
    if not lines:
        return ""
    return "## Not tested here\n\n" + "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- environment


def _library_section(output: str) -> str | None:
    """collect_env's library section, its entries joined on a few lines (verbatim in the artifact)."""
    if _LIBRARIES not in output:
        return None
    section = output.split(_LIBRARIES, 1)[1].split("\n\n", 1)[0]
    # "[conda] Could not collect" and the like are a tool's answer, not a package: a package is name==version.
    entries = [e for ln in section.splitlines()[1:] if (e := ln.strip()) and ("==" in e or not e.startswith("["))]
    # The GPU stack only (torch, triton, numpy, NVIDIA's and CUDA's packages): the rest of the list
    # is in the artifact and the bundle, and said to be there.
    kept = [e for e in entries if _STACK.search(e) or not e.startswith("[")]
    wheels = sum(1 for e in entries if _NVIDIA.search(e))
    others = len(entries) - len(kept) - wheels
    left = ", ".join(
        x for x in [f"{wheels} nvidia-* wheels" if wheels else "", f"{others} other packages" if others else ""] if x
    )
    entries = kept
    by_tool: dict[str, list[str]] = {}
    for e in entries:
        tool, _, rest = e.partition("] ")
        by_tool.setdefault(tool + "]" if rest else "", []).append(rest or e)
    lines = []
    for tool, items in by_tool.items():
        line = tool
        for item in items:
            if len(line) + len(item) + 2 > 150 and line != tool:
                lines.append(line.rstrip(","))
                line = tool
            line += (" " if line else "") + item + ","
        lines.append(line.rstrip(","))
    return f"{_LIBRARIES}:\n" + "\n".join(lines) + (f"\n(and {left}: in the artifact)" if left else "")


_CUDNN_SYSTEM = re.compile(r"libcudnn\.so\.([0-9]+\.[0-9]+\.[0-9]+)")


def cudnn_note(output: str, loaded: Mapping[str, object] | None) -> str | None:
    """When collect_env's cuDNN (the first libcudnn it finds on the system) is not the one torch
    loaded (the fingerprint's ``software.libraries.cudnn``, read from /proc/self/maps), both."""
    found = _CUDNN_SYSTEM.search(output.split("cuDNN version:", 1)[1][:400]) if "cuDNN version:" in output else None
    raw = loaded.get("version") if loaded else None
    version = int(raw) if isinstance(raw, int) or (isinstance(raw, str) and raw.isdigit()) else None
    if not found or version is None:
        return None
    major, minor, patch = version // 10000, version // 100 % 100, version % 100
    if found.group(1).split(".")[:2] == [str(major), str(minor)]:
        return None
    path = loaded.get("path") if loaded else None
    where = f" (…/{'/'.join(path.split('/')[-4:])})" if isinstance(path, str) else ""
    return (
        f'cuDNN: torch loaded {major}.{minor}.{patch}{where}; collect_env\'s "cuDNN version" line '
        f"({found.group(1)}) is the system's copy, which this process did not load."
    )


def environment(full: Sequence[Artifact], machine_of: Mapping[int, str], compact: bool = False) -> list[str]:
    """One ``<details>`` per machine: the fingerprint summary, the GPU's state, collect_env's libraries
    (``compact``: without collect_env's library list, which the artifact holds)."""
    mach, _ = machines(full)
    if not mach:
        return []
    out = ["## Environment", ""]
    for m in mach:
        # One machine ran everything: "every repro here" says it without the list of ids.
        mine = [d for d in full if machine_of.get(id(d)) == m.label]
        # A run's first repro measures the ceilings and the rest read them (repro.env.ceilings.for_run).
        first = min(mine, key=lambda d: d.run.created_utc) if len({d.run.run_id for d in mine}) == 1 else None
        every = "every repro here" if len(mach) == 1 else None
        body = [machine_summary(m, every, first.repro.id if first else None), ""]
        body += [state_line(mine), ""]
        outputs = dict.fromkeys(d.machine.collect_env for d in mine)
        libraries = (mine[0].fingerprint.get("software") or {}).get("libraries") if mine else None
        cudnn = libraries.get("cudnn") if isinstance(libraries, Mapping) else None
        for o in outputs:
            note = cudnn_note(o, cudnn if isinstance(cudnn, Mapping) else None)
            body += [note, ""] if note else []
            libs = None if compact else _library_section(o)
            if libs:
                body += [
                    "collect_env's library section (the whole output is in the artifact):",
                    "",
                    fence(libs),
                    "",
                ]
        summary = html_text(f"machine {m.label}: fingerprint, GPU state, libraries")
        out.append(f"<details><summary>{summary}</summary>\n\n" + "\n".join(body).rstrip("\n") + "\n\n</details>\n")
    return out


# --------------------------------------------------------------------------- how the run ran

# Gaps between one repro's end and the next one's start below this many seconds are no cool-down.
_COOL_DOWN_S = 5.0


def _span_of(doc: Artifact) -> tuple[datetime, datetime] | None:
    """(start, end) of a repro's process run: ``created_utc`` is written at the end, to the second."""
    try:
        end = datetime.strptime(doc.run.created_utc, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return None
    return end - timedelta(seconds=doc.run.duration_s), end


def run_order(docs: Sequence[Artifact]) -> str | None:
    """How the repros of one run followed each other, from their artifacts' end times and durations:
    the order, and the gaps between one's end and the next one's start."""
    if len(docs) < 2 or len({d.run.run_id for d in docs}) != 1:
        return None
    spans = [(sp, d) for d in docs if (sp := _span_of(d)) is not None]
    if len(spans) != len(docs):
        return None
    spans.sort(key=lambda x: x[0][0])
    gaps = [max((b[0][0] - a[0][1]).total_seconds(), 0.0) for a, b in zip(spans, spans[1:], strict=False)]
    order = ", ".join(text(d.repro.id) for _, d in spans)
    lo, hi = min(gaps), max(gaps)
    said = f"{lo:.0f} s" if round(lo) == round(hi) else f"{lo:.0f}-{hi:.0f} s"
    rest = ": no cool-down" if hi < _COOL_DOWN_S else ""
    kernels = {kernel_method(d) for d in docs}
    shared = f" Every repro: {kernels.pop()}." if len(kernels) == 1 else ""
    return f"_Run order, one process per repro: {order}; gaps {said} (end times to the second){rest}.{shared}_"


def kernel_method(doc: Artifact) -> str:
    """Where a repro's kernel tables come from: how many profiled calls per variant, and when."""
    profiled = {v.profiled_iterations for v in doc.variants if v.kernels}
    order = list(doc.run.measure_s or {})
    after = ", after sampling" if "profiling" in order and "sampling" in order[: order.index("profiling")] else ""
    if profiled == {1}:
        return f"kernel tables from one profiled call per variant{after}"
    if profiled:
        calls = " or ".join(str(p) for p in sorted(x or 0 for x in profiled))
        return f"kernel tables from {calls} profiled calls per variant{after}"
    return "no kernel tables"


def method_line(doc: Artifact, kernels_said: bool = False) -> str | None:
    """How the headline pair was timed and (unless the report said it once for every repro,
    ``kernels_said``) where the kernel tables come from, from the artifact's variants."""
    named = [v for v in doc.variants if v.name in doc.verdict.variants and v.timing is not None]
    if not named:
        return None
    t = named[0].timing
    assert t is not None
    if t.rounds:
        per = t.episode_rounds or 0
        episodes = f" in {len(t.rounds) // per} episodes" if per and len(t.rounds) % per == 0 else ""
        timed = f"{len(t.rounds)} paired rounds{episodes}"
    else:
        timed = f"{t.stats.n} samples ({t.method.replace('_', ' ')})"
    kernels = "" if kernels_said else f"{kernel_method(doc)}; "
    return f"Method: {kernels}headline pair timed in {timed}."


# "Not tested here" lines about the environment as a whole, which the environment block says too: the last a
# report leaves out before it cuts a section, in this order; each with the words its note uses.
STACK_LINES = (
    ("- Not recordable from inside this run:", "what this run could not record"),
    ("- Not run:", "what it did not run"),
    ("- Not available to this run:", "what was not available to it"),
    ("- One software stack only", "its one software stack"),
)


def stack_note(scope_md: str, n: int) -> tuple[str, str]:
    """The Not-tested section at fitting level ``n``, and the words the Left-out note says for what it actually
    took out ("" when it took nothing out: a section may not have it). From level 1 the repros' not-covered lines
    and the not-recordable line lose their parenthesized details (``bare``); from level 2 a not-covered line keeps
    its items up to NOT_COVERED_KEEP characters (a repro lists them most telling first); from level 3 on, the
    first ``n - 2`` STACK_LINES go too: the environment's lines name what a reader cannot see elsewhere, so they
    outlast a repro's later items."""
    lines = scope_md.split("\n")
    said = []
    dropped = STACK_LINES[: max(n - 2, 0)]
    unrecorded = STACK_LINES[0][0]
    if n >= 1:
        bared = [bare(ln) if NOT_COVERED in ln or ln.startswith(unrecorded) else ln for ln in lines]
        shed = [a for a, b in zip(lines, bared, strict=True) if a != b]
        whose = ["not-covered"] if any(NOT_COVERED in ln for ln in shed) else []
        kept = STACK_LINES[0] not in dropped  # a dropped line's details are not said apart from it
        whose += ["not-recordable"] if kept and any(ln.startswith(unrecorded) for ln in shed) else []
        if whose:
            lines = bared
            said = [f"the parentheses of the Not-tested {' and '.join(whose)} lines"]
    if n >= 2:
        cut = [_first_items(ln) if NOT_COVERED in ln else ln for ln in lines]
        if rids := [a.split(NOT_COVERED, 1)[0].removeprefix("- ") for a, b in zip(lines, cut, strict=True) if a != b]:
            lines = cut
            said += [f"the later not-covered items of {', '.join(rids)}"]
    gone = [words for prefix, words in dropped if any(ln.startswith(prefix) for ln in lines)]
    lines = [ln for ln in lines if not ln.startswith(tuple(prefix for prefix, _ in dropped))]
    listed = f"{', on '.join(gone[:-1])} and on {gone[-1]}" if len(gone) > 1 else "".join(gone)
    said += [f"the Not-tested line{'s' if len(gone) > 1 else ''} on {listed}"] if gone else []
    if not said:
        return scope_md, ""
    return "\n".join(lines), "; ".join(said)


NOT_COVERED_KEEP = 560  # a not-covered line's characters its items fill before the later ones go (stack_note)


def _first_items(line: str) -> str:
    """A not-covered line cut after its last item that ends within NOT_COVERED_KEEP characters, with "; and more"
    where items went; the line as it is when it fits or its first item alone is longer."""
    if len(line) <= NOT_COVERED_KEEP:
        return line
    head = line[: NOT_COVERED_KEEP + 2]  # an item ending at NOT_COVERED_KEEP keeps its place
    # "; " that does not close an HTML entity (text() writes & < > as &amp; &lt; &gt;)
    ends = [m.start() for m in re.finditer(r"(?<!&[a-z]{2})(?<!&[a-z]{3})(?<!&[a-z]{4})(?<!&#\d{2}); ", head)]
    at = ends[-1] if ends else -1
    if at <= line.index(NOT_COVERED) + len(NOT_COVERED):
        return line
    return head[:at] + "; and more."


NOT_COVERED = ", not covered: "  # a repro's own untested items, in the Not-tested section (scope.not_tested)
_PARENS = re.compile(r" ?\([^()]+\)")


def bare(line: str) -> str:
    """``line`` without what it has in parentheses, innermost first, so nested ones go whole; empty ones (a
    call such as ``zero_()``) stay."""
    while (shorter := _PARENS.sub("", line)) != line:
        line = shorter
    return line
