"""Runs its maker attached to a run (``attached/*.json``): re-runs from the run's own bundle (``rerun-*.json``:
the bundled harness installed somewhere fresh, a section's ``repro run`` line run), and later runs of the same
repros (a loose or quick ``repro all``). The report says which lines were re-run, with what, and how each result
sits against the run's own headline; of the later runs, whose CI misses this run's."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from repro.core import stats
from repro.core.order import group_arms
from repro.core.results import Row
from repro.core.verdict import MAX_PLACES, ratio_places
from repro.evidence import band
from repro.evidence.agreement import agree
from repro.evidence.markdown import code, fmt_pct, listed, ratio_with_ci, side_places, text, verdict_label
from repro.evidence.model import Artifact, ErrorInfo, Verdict, same_gpu
from repro.evidence.printed import NOTE, stopped_by_limit
from repro.evidence.scope import episodes_line
from repro.evidence.standalone import harness_of


def _torch_words(doc: Artifact) -> str:
    """Where the re-run's torch came from: a package folder outside its own venv is the machine's."""
    where = str(doc.machine.torch_install.get("location") or "")
    prefix = str(doc.machine.host.python_env.get("prefix") or "")
    if where and prefix and not where.startswith(prefix.rstrip("/") + "/"):
        return f"torch: the machine's ({code(where)}), so the torch line was not run"
    return f"torch from {code(where)}" if where else "torch's location not recorded"


# Requirements the install block names before the bundled wheel (install_block): whether the re-run's pip found
# each already met, and where, is read from its log.
_NAMED = ("torch", "cuda-bindings")
_MET = r"^Requirement already satisfied: {}==[0-9][\w.+]* in (/[\w./+-]{{1,200}})(?: \(|$)"


def offline(log: str | None) -> bool:
    """Whether the re-run's pip log (``log``) shows it installed from local links (a wheelhouse) only: links
    looked in, no index named and nothing downloaded from a URL (pip names no index when it is PyPI's default, so
    this says where the wheels came from, not that PyPI was never asked); then its install lines were not tried
    against PyPI (the Not-tested section says so)."""
    if not log:
        return False
    links = re.search(r"^Looking in links: ", log, re.M) is not None
    return links and not re.search(r"^Looking in indexes: |^\s*Downloading https?://", log, re.M)


# A requirement of the bundled wheel itself that pip found met, and where.
_OWN = re.compile(
    r"^Requirement already satisfied: ([A-Za-z0-9_.-]{1,80})[^ ]* in (/[\w./+-]{1,200}) \(from gpu[-_]repro", re.M
)
_SITE = re.compile(r"/lib/python[0-9.]+/site-packages$")  # said as the environment's prefix


def install_words(log: str | None, prefix: str) -> str:
    """What the re-run's pip log (``log``) says of its installs: whether pip looked at a package index or only in
    local links (a wheelhouse), and which of the install block's named requirements were already met outside the
    re-run's venv (``prefix``), so that their install lines installed nothing, and which of the bundled wheel's own
    requirements were (pip resolved none of them); "" without a log."""
    if not log:
        return ""
    local = offline(log)
    said = ["from a local wheelhouse"] if local else []

    def outside(where: str) -> bool:  # a path not under the re-run's venv
        return not (prefix and where.startswith(prefix.rstrip("/") + "/"))

    met: dict[str, list[str]] = {}
    for name in _NAMED:
        m = re.search(_MET.format(re.escape(name)), log, re.M)
        if m and outside(m[1]):
            met.setdefault(m[1], []).append(name)
    said += [
        f"{' and '.join(names)} already in {code(_SITE.sub('', where))}, outside the venv"
        for where, names in met.items()
    ]
    own = [m[1] for m in _OWN.finditer(log) if outside(m[2]) and m[1] not in _NAMED]
    if own:
        said.append(f"the harness's own requirements ({text(', '.join(dict.fromkeys(own)))}) already outside it too")
    if said and not local:
        said.append("so the install lines were not tried against PyPI")
    return "; ".join(said)


def _rows(docs: Sequence[Artifact], attached: Mapping[str, Any], reran: bool) -> list[tuple[str, Artifact, Artifact]]:
    """(attached name, its artifact, this run's artifact of the same repro), by name: the bundle's re-runs
    (``rerun-*.json``) when ``reran``, else every other attached artifact of another run of these repros."""
    ran = {d.repro.id: d for d in docs}
    return [
        (name, doc, ran[doc.repro.id])
        for name, doc in sorted(attached.items())
        if isinstance(doc, Artifact)
        and name.startswith("rerun-") == reran
        and doc.repro.id in ran
        and doc.run.run_id != ran[doc.repro.id].run.run_id
    ]


def _flags(doc: Artifact) -> str:
    """The run's command without where it wrote (``--out DIR``) and ``--json``."""
    argv, out = list(doc.run.command), []
    while argv:
        word = argv.pop(0)
        if word == "--out" and argv:
            argv.pop(0)
        elif word != "--json" and not word.startswith("--out="):
            out.append(word)
    return shlex.join(out) if out else "its command not recorded"


def _headline_rounds(doc: Artifact) -> tuple[int, int] | None:
    """How many rounds each arm of the headline comparison took (numerator, denominator); None if unknown."""
    row = band.headline_row(doc)
    arms = {v.name: v for v in doc.variants}
    got = [arms.get(name or "") for name in (row.num, row.den)] if row is not None else []
    counts = [len(v.timing.rounds or ()) for v in got if v is not None and v.timing is not None]
    return (counts[0], counts[1]) if len(counts) == 2 and all(counts) else None


def _shift(again: Artifact, first: Artifact, bands: Sequence[band.Band]) -> str:
    """``: -7.1% from this run's, its headline sampled as this run's ...``: how far a later headline lies from this
    run's (only where both name the same headline comparison), whether it took as many rounds per arm (then less
    sampling did not make the difference) and, on the same GPU, whether two runs of that GPU's spread in the band
    (``Band.same_gpu``: the spread is each run's distance from its GPU's median) cover the gap."""
    v, w = again.verdict.value, first.verdict.value
    if not isinstance(v, float) or not isinstance(w, float) or w <= 0:
        return ""
    if again.verdict.headline != first.verdict.headline:
        return f": another headline comparison ({text(again.verdict.headline or 'none recorded')})"
    said = f"{v / w - 1:+.1%} from this run's"
    rounds = _headline_rounds(again)
    if rounds is not None and rounds == _headline_rounds(first):
        per_arm = f"{rounds[0]}" if rounds[0] == rounds[1] else f"{rounds[0]} and {rounds[1]}"
        said += f", its headline sampled as this run's ({per_arm} rounds per arm): not from less sampling"
    spread = _same_gpu_spread(first, again, bands)
    if spread is not None and abs(v / w - 1) > 2 * spread:
        said += f"; beyond twice the same-GPU ±{spread:.1%} of the re-run column"
    return f": {said}"


def _same_gpu_spread(first: Artifact, again: Artifact, bands: Sequence[band.Band]) -> float | None:
    """One GPU's re-run spread (``Band.same_gpu``) where ``again`` ran on this run's GPU (a recorded uuid) and the
    band has that spread; None otherwise."""
    b = band.lookup(first, bands)
    if b is None or b.same_gpu is None or not same_gpu(again, first):
        return None
    return b.same_gpu[0]


def _headline_cis(again: Artifact, first: Artifact) -> tuple[float, float, float, float, float, float] | None:
    """(later value, low, high, this run's value, low, high) of the two headlines; None when either has no CI."""
    v, w = again.verdict, first.verdict
    if v.value is None or v.ci_low is None or v.ci_high is None:
        return None
    if w.value is None or w.ci_low is None or w.ci_high is None:
        return None
    return v.value, v.ci_low, v.ci_high, w.value, w.ci_low, w.ci_high


def _apart(again: Artifact, first: Artifact) -> bool:
    """Whether a later run's headline CI misses this run's (False when either has none to set)."""
    got = _headline_cis(again, first)
    return got is not None and not stats.cis_overlap(got[1], got[2], got[4], got[5])


def others(
    docs: Sequence[Artifact], attached: Mapping[str, Any], bands: Sequence[band.Band] = (), note_text: str | None = None
) -> str:
    """`` Later runs attached: ...``: the attached artifacts that are not re-runs from the bundle (a looser or
    quick run its maker made after this one), by command and GPU: how many headline CIs overlap this run's, the
    half-widths on both sides (a wider CI overlaps more easily, so an overlap rules out only a larger shift), in
    full each headline whose CI does not (the same GPU can read outside one run's CI), each overlapping one that
    reads otherwise (``_reads_otherwise``) and each repro that ended in an error there (``note_text``: the maker's
    note, which may say its own time limit stopped the command); "" without any."""
    groups: dict[tuple[str, str], list[tuple[str, Artifact, Artifact]]] = {}
    batch: dict[str, tuple[str, str]] = {}  # run id -> its group, for a repro that failed before naming its GPU
    rows = _rows(docs, attached, reran=False)
    for row in sorted(rows, key=lambda r: not r[1].machine.gpu_uuid):
        again, first = row[1], row[2]
        key = (_flags(again), "this GPU" if same_gpu(again, first) else "another GPU or none recorded")
        if not again.machine.gpu_uuid and again.error is not None:
            key = batch.get(again.run.run_id, key)
        batch.setdefault(again.run.run_id, key)
        groups.setdefault(key, []).append(row)
    said = []
    for (flags, where), rows in sorted(groups.items()):
        near, apart, theirs, ours, failed, differs, cleaner = 0, [], [], [], [], [], []
        for name, again, first in rows:
            if (err := again.error) is not None:  # an interrupt stopped the batch there: no fault of the repro's
                limit = stopped_by_limit(note_text, flags)
                failed.append(f"{text(again.repro.id)} {_stopped(err, limit)} ({code(err.message, 100)})")
                continue
            if (cis := _headline_cis(again, first)) is None:
                continue  # no headline CI in one of the runs: nothing to set against the other
            theirs.append(stats.rel_halfwidth(*cis[:3]))
            ours.append(stats.rel_halfwidth(*cis[3:]))
            cleaner.extend(_valid_there(again, first, cis))
            if not _apart(again, first):
                near += 1
                differs.extend(_reads_otherwise(again, first, cis, name))
                continue
            got = ratio_with_ci(*cis[:3], verdict_label(again.verdict))
            apart.append(f"{text(again.repro.id)}'s {got}{_shift(again, first, bands)} ({code('attached/' + name)})")
        if not (near or apart or failed):
            continue
        over = [f"{near} headline CI(s) overlap this run's"] if near or apart else []
        if theirs:
            flagged = sorted(
                text(a.repro.id) for _, a, _ in rows if a.validity.flag == "suspect" and a.verdict.ci_low is not None
            )
            suspect = f"; suspect there: {', '.join(flagged)}" if flagged else ""
            over[-1] += f" (half-widths {_span(theirs)}, this run's {_span(ours)}{suspect})"
        over += [f"not {', '.join(apart)}"] if apart else []
        over += [f"read otherwise there: {', '.join(differs)}"] if differs else []
        over += [f"valid there, suspect here: {'; '.join(cleaner)}"] if cleaner else []
        over += [f"no headline there, as {', '.join(failed)}"] if failed else []
        said.append(f"{code(flags)} on {where}{_gloss(flags)}: {'; '.join(over)}")
    return f" Later runs attached: {'. '.join(said)}." if said else ""


def _valid_there(again: Artifact, first: Artifact, cis: tuple[float, float, float, float, float, float]) -> list[str]:
    """``lora-batch-scaling 0.96x (95% CI 0.95-0.97) without bs4 in its rounds``: a later run's headline where this
    run's was suspect and that run's was not, on the same GPU and comparison, with the arms of this run's headline
    group it did not time (a quick run times the headline's own arms only); [] otherwise."""
    if first.validity.flag != "suspect" or again.validity.flag != "valid":
        return []
    if again.verdict.headline != first.verdict.headline or not same_gpu(again, first):
        return []
    head = band.headline_row(first)
    arms = group_arms(first.variants, head.num, head.den) if head is not None and head.num and head.den else None
    timed = again.timed_arms()
    gone = [text(a) for a in arms or () if a not in timed]
    without = f" without {listed(gone)} in its rounds" if gone else ""
    return [f"{text(again.repro.id)} {ratio_with_ci(*cis[:3], verdict_label(again.verdict))}{without}"]


def _episodes_there(again: Artifact, bands: Sequence[band.Band]) -> str:
    """``; its episodes: 2 of 10 outside its CI; farthest: ... Other rows: memset/fill (torch graph), not judged,
    read 2.841 in 2 of 16 episodes ...``: a re-run's own Episodes line (``scope.episodes_line``), as this run's
    section gives its own; "" without one."""
    got = episodes_line(again, bands, "its").removeprefix("Episodes:").strip().removesuffix(".")
    return f"; its episodes: {text(got)}" if got else ""


def _gpu_of(again: Artifact, first: Artifact) -> str | None:
    """Where a re-run ran against this run: "" on this run's GPU (both fingerprints name the same uuid), ``NVIDIA
    H200 7e5317ee`` on another one, None where either recorded no uuid (then neither is said)."""
    theirs, ours = again.machine.gpu_uuid, first.machine.gpu_uuid
    if not theirs or not ours:
        return None
    return "" if theirs == ours else f"{again.machine.gpu_name or 'GPU'} {theirs.removeprefix('GPU-')[:8]}"


def _not_rerun(left: Sequence[str], note_text: str | None, cut_only: bool = False) -> str:
    """`` Not re-run: a; b (no artifact: the re-runs were stopped by their maker's time limit, `attached/NOTE.txt`).``:
    this run's repros with no re-run attached, those the maker's note says its time limit stopped (the re-runs,
    that repro's among them) said apart; with ``cut_only``, only those ("" where none is left)."""
    cut = [x for x in left if stopped_by_limit(note_text, rerun_of=x)]
    said = [] if cut_only else [", ".join(text(x) for x in left if x not in cut)]
    why = f" (no artifact: the re-runs were stopped by their maker's time limit, {code('attached/' + NOTE)})"
    said = [x for x in said if x] + ([f"{', '.join(map(text, cut))}{why}"] if cut else [])
    return f" Not re-run: {'; '.join(said)}." if said else ""


def _stopped(err: ErrorInfo, limit: bool = False) -> str:
    """``was stopped by a SIGTERM, the batch ending there`` (an interrupt: no fault of the repro's) or ``failed``;
    ``limit``: where the maker's note says its own time limit sent it."""
    sent = f" by a {text(err.signal)}" if err.signal else ""
    # GNU timeout sends SIGTERM: another signal is not said to be the time limit's, whatever the note says.
    limit = limit and err.signal in (None, "SIGTERM")
    sent += f" from its maker's time limit ({code('attached/' + NOTE)})" if limit else ""
    return f"was stopped{sent}, the batch ending there" if err.kind == "interrupted" else "failed"


def _reads_otherwise(
    again: Artifact, first: Artifact, cis: tuple[float, ...], name: str, whose: str | None = None
) -> list[str]:
    """Where a later headline of the same comparison (``attached/name``) reads otherwise than this run's: another
    status, or a CI on the other side than this run's of 1.0 (no difference between the two forms) or of the
    threshold, printed with the decimals that show it on its side; one item naming the later run once (``whose``,
    its repro id by default), [] where it reads as this run does."""
    v, w = again.verdict, first.verdict
    if v.headline != w.headline:
        return []
    status = f"{text(v.status)} (here {text(w.status)})" if v.status != w.status else ""
    sides = []
    lo, hi, our_lo, our_hi = cis[1], cis[2], cis[4], cis[5]
    t = v.threshold
    refs = [(1.0, "1.0")] + ([(float(t), f"the threshold {t:g}")] if isinstance(t, (int, float)) and t != 1 else [])
    for ref, what in refs:
        holds = lo <= ref <= hi
        if holds != (our_lo <= ref <= our_hi):
            sides.append((side_places(ref, lo, hi, most=MAX_PLACES), holds, what))
    if not status and not sides:
        return []
    rid = text(again.repro.id)
    d = max((d for d, _, _ in sides), default=3)
    each = [
        (f"holds {what}", "this run's does not") if holds else (f"excludes {what}", "this run's holds it")
        for _, holds, what in sides
    ]
    # One side: "holds X, this run's does not"; two: each with its own clause for this run, in parentheses.
    said_sides = ", ".join(each[0]) if len(each) == 1 else " and ".join(f"{e} ({o})" for e, o in each)
    ci = f"CI {lo:.{d}f}-{hi:.{d}f} {said_sides}" if sides else ""
    if whose is not None:
        said = f"{whose}: {status}{', ' if status and ci else ''}{ci}"
    else:
        said = f"{rid} {status}, its {ci}" if status and ci else f"{rid} {status}" if status else f"{rid}'s {ci}"
    return [f"{said} ({code('attached/' + name)})"]


def otherwise(first: Artifact, attached: Mapping[str, Any]) -> str:
    """`` Read otherwise later: ...``, for this run's section, where a re-run or later run of this repro reads
    otherwise (``_reads_otherwise``): the finding's words are this run's, so they never stand alone against a
    later reading of the same comparison; "" where none does."""
    said = []
    for reran in (True, False):
        for name, again, ran in _rows([first], attached, reran):
            if again.error is not None:
                continue
            same = same_gpu(again, ran)
            whose = f"{code(_flags(again))} on {'this GPU' if same else 'another GPU or none recorded'}"
            if (cis := _headline_cis(again, ran)) is not None:
                said += _reads_otherwise(again, ran, cis, name, whose)
            elif again.verdict.status != ran.verdict.status:  # no CI to set beside this one's: the status alone
                v, w = again.verdict, ran.verdict
                said.append(f"{whose}: {text(v.status)} (here {text(w.status)}) ({code('attached/' + name)})")
    return f" Read otherwise later: {'; '.join(said)}." if said else ""


def _barely(lo: float, hi: float, lo2: float, hi2: float) -> str:
    """`` by 0.000037 only (1.1486-1.1624 against 1.1624-1.1838)``: where two CIs share under a tenth of the narrower
    one's width, the overlap and both CIs to four decimals (rounded, they can read as touching); `` at 2.0000 only
    (...)`` where they only touch; "" otherwise."""
    shared = min(hi, hi2) - max(lo, lo2)
    if not shared < 0.1 * min(hi - lo, hi2 - lo2):
        return ""
    by = f"by {shared:.6f}".rstrip("0").rstrip(".") if shared >= 5e-7 else f"at {max(lo, lo2):.4f}"
    return f" {by} only ({lo:.4f}-{hi:.4f} against {lo2:.4f}-{hi2:.4f})"


def _places(again: Artifact, first: Artifact) -> int | None:
    """Decimals that show both headline CIs' widths (each run's own need, the larger) and, where both have a CI,
    print them overlapping or apart as they are: two CIs that miss by 0.001 never read as one printed range."""
    v, w = again.verdict, first.verdict
    need = [ratio_places(x.value, x.ci_low, x.ci_high) for x in (w, v) if x.value and x.ci_low and x.ci_high]
    places = max(need) if need else None
    if (cis := _headline_cis(again, first)) is None or places is None:
        return places
    _, v_lo, v_hi, _, w_lo, w_hi = cis
    apart = not stats.cis_overlap(v_lo, v_hi, w_lo, w_hi)
    for d in range(places, MAX_PLACES):
        if (round(v_lo, d) > round(w_hi, d) or round(w_lo, d) > round(v_hi, d)) == apart:
            return d
    return MAX_PLACES


def _ci_at(w: Verdict, places: int | None) -> str:
    """This run's headline CI as ``lo-hi`` at ``places`` decimals; "" without a CI or places."""
    return f"{w.ci_low:.{places}f}-{w.ci_high:.{places}f}" if places is not None and w.ci_low and w.ci_high else ""


def _misses(docs: Sequence[Artifact], attached: Mapping[str, Any]) -> str:
    """``others`` in one short sentence: only the later headlines whose CI misses this run's, with their command
    (the whole account stays in the report the bundle holds in full); "" when every one overlaps."""
    apart = []
    for name, again, first in _rows(docs, attached, reran=False):
        if _apart(again, first):
            v, w, d = again.verdict, first.verdict, _places(again, first)
            got = ratio_with_ci(v.value, v.ci_low, v.ci_high, verdict_label(v), places=d)
            ours = f" against {ci}" if (ci := _ci_at(w, d)) else ""
            apart.append(f"{text(again.repro.id)} {got}{ours} by {code(_flags(again))} ({code('attached/' + name)})")
    return f" Later runs' headline CIs that miss this run's: {'; '.join(apart)}." if apart else ""


def _others_agree(again: Artifact, first: Artifact) -> str:
    """``; its other comparisons: k of n CIs overlap this run's (not: ...)``: the rows beside the headline that both
    runs measured, each CI against this run's (only the headline is set against the band); "" without any."""
    mine = {_row_key(r): r for r in first.verdict.breakdown if _row_key(r) and not r.headline}
    their_rows = {_row_key(r) for r in again.verdict.breakdown if _row_key(r) and not r.headline}
    near, apart = 0, []
    for r in again.verdict.breakdown:
        w = mine.get(_row_key(r))
        if w is None or r.headline or r.ratio is None or w.ratio is None:
            continue
        if r.ci_low is None or r.ci_high is None or w.ci_low is None or w.ci_high is None:
            continue
        if stats.cis_overlap(r.ci_low, r.ci_high, w.ci_low, w.ci_high):
            near += 1
        else:  # ratio_with_ci without a label: ``1.43x (1.42-1.45)``, both at places that show the gap
            places = apart_places((r.ratio, r.ci_low, r.ci_high), (w.ratio, w.ci_low, w.ci_high))
            theirs, ours = (
                ratio_with_ci(r.ratio, r.ci_low, r.ci_high, "", places),
                ratio_with_ci(w.ratio, w.ci_low, w.ci_high, "", places),
            )
            apart.append(f"{text(r.comparison or '')} {theirs} against {ours}")
    alone = len(set(mine) ^ their_rows)  # rows one run has and the other not (another harness's rows)
    single = f"; {alone} other row{'s' if alone > 1 else ''} in one of the two runs only" if alone else ""
    if not near and not apart:
        return single
    if not apart:
        return f"; {'its other CI overlaps' if near == 1 else f'all {near} other CIs overlap'} too{single}"
    return f"; {near} of {near + len(apart)} other CIs overlap this run's (not: {'; '.join(apart)}){single}"


def _row_key(r: Row) -> tuple[str, ...]:
    """What a breakdown row compares, so that a row keeps its identity across harnesses that label it differently:
    its two variants and basis where recorded, else its comparison's name; () for neither."""
    if r.num and r.den:
        return (r.num, r.den, r.basis or "")
    return (r.comparison,) if r.comparison else ()


def apart_places(a: tuple[float, float, float], b: tuple[float, float, float], most: int = 6) -> int:
    """Decimals for two (ratio, low, high) whose CIs do not overlap: the same for both, and enough that the
    printed intervals do not seem to overlap either (a gap of 0.0002 needs four)."""
    places = max(ratio_places(*a), ratio_places(*b))
    (lo, hi), (lo2, hi2) = sorted([(a[1], a[2]), (b[1], b[2])])
    while places < most and round(hi, places) >= round(lo2, places):
        places += 1
    return places


def _span(fractions: Sequence[float]) -> str:
    lo, hi = f"{min(fractions):.1%}", f"{max(fractions):.1%}"
    return lo if lo == hi else f"{lo[:-1]}-{hi}"


# What a later run's knobs change, in the words of ``repro all --help``.
_KNOBS = (
    ("--quick", "headline comparisons only"),
    ("--target-ci", "a looser CI target"),
    ("--budget", "less sampling"),
)


def _gloss(flags: str) -> str:
    said = [words for flag, words in _KNOBS if flag in flags.split()]
    return f" ({', '.join(said)})" if said else ""


def _against_band(first: Artifact, again: Artifact, bands: Sequence[band.Band], floor: float) -> str:
    """How far a re-run lies from this run against the band: on this run's GPU, against twice one GPU's re-run
    spread (``Band.same_gpu``, as the later runs' words judge it) where the band has one, since the spread between
    GPUs says little about one GPU; elsewhere against the band between GPUs (``agreement.agree``)."""
    v, w = again.verdict.value, first.verdict.value
    assert isinstance(v, float) and isinstance(w, float)
    if (spread := _same_gpu_spread(first, again, bands)) is not None:
        within = abs(v / w - 1) <= 2 * spread
        return f", {'within' if within else 'beyond'} twice one GPU's re-run spread (±{fmt_pct(spread * 100)})"
    # "consistent", "differs beyond the band" or "no cross-GPU data".
    agreed = agree(w, v, band.lookup(first, bands), floor)
    return ", consistent with the band" if agreed == "consistent" else f"; {agreed}"


def _band_words(first: Artifact, again: Artifact, bands: Sequence[band.Band]) -> str:
    """``_against_band`` for a re-run whose headline and this run's (with its CI) both have a value, else ""."""
    v, w = again.verdict, first.verdict
    if not (isinstance(v.value, float) and isinstance(w.value, float) and w.ci_low is not None and w.ci_high):
        return ""
    return _against_band(first, again, bands, stats.rel_halfwidth(w.value, w.ci_low, w.ci_high) if w.value else 0.0)


def _torch_install(again: Artifact, log_text: str | None) -> str:
    """How the re-run found torch: what its installs printed (``install_words``), else its fingerprint's words."""
    return install_words(log_text, str(again.machine.host.python_env.get("prefix") or "")) or _torch_words(again)


def lean_gone(
    docs: Sequence[Artifact], reruns: Mapping[str, Any], bands: Sequence[band.Band], log_text: str | None = None
) -> list[str]:
    """What ``words``' lean form leaves out of the full one, in the Left-out note's words, each only where the full
    form says it: the re-runs' band words, their other comparisons' CIs, their episodes, how their torch was
    installed, and the later runs (the lean form keeps those whose headline CI misses this run's)."""
    rows = _rows(docs, reruns, reran=True)
    theirs = ["band words"] if any(_band_words(f, a, bands) for _, a, f in rows) else []
    theirs += ["other comparisons"] if any(_others_agree(a, f) for _, a, f in rows) else []
    theirs += ["episodes"] if any(_episodes_there(a, bands) for _, a, _ in rows) else []
    theirs += ["torch install"] if any(_torch_install(a, log_text) for _, a, _ in rows) else []
    # Without a serial comma: the Left-out note lists this item among others with one.
    gone = [f"the re-runs' {', '.join(theirs[:-1])}{' and ' if len(theirs) > 1 else ''}{theirs[-1]}"] if theirs else []
    return gone + (["later runs"] if others(docs, reruns, bands) else [])


def words(
    docs: Sequence[Artifact],
    reruns: Mapping[str, Any],
    bands: Sequence[band.Band],
    log: str | None = None,
    later: bool = True,
    log_text: str | None = None,
    note_text: str | None = None,
) -> str:
    """`` Run here from this run's bundle: ...``, then ``others``; "" when no attached artifact ran one of
    ``docs``' repros. ``reruns``: attached file name -> its artifact (``model.of``'s), only artifacts of this
    run's repros count; ``rerun-*.json`` are re-runs from the bundle (its harness wheel: the same digest says it
    was this run's source; the bundle that carries them was made again after they ran). ``log``: the attached
    file with what the re-run's installs printed, if any, and ``log_text`` its text (``install_words``);
    ``later``: with ``others``' sentence; without it, the lean form: each re-run's headline against this run's CI
    only (no band, no other comparisons, one file pattern), how the harness was installed but not torch, and
    ``_misses`` for the later runs. ``note_text``: the maker's note (``others``)."""
    ran = {d.repro.id: d for d in docs}
    rows = _rows(docs, reruns, reran=True)
    after = others(docs, reruns, bands, note_text) if later else _misses(docs, reruns)
    if not rows:  # none re-ran: said only where the maker's note says its time limit stopped the re-runs
        return _not_rerun(sorted(ran), note_text, cut_only=True) + after
    said, digests, installs, torches = [], set(), set(), set()
    lean = not later
    # Each re-run's GPU against this run's: the opening says "here" or names the other GPU only where every re-run
    # shares it; otherwise each re-run's entry says where it ran (or that its GPU is not known).
    gpus = [_gpu_of(again, first) for _, again, first in rows]
    one = gpus[0] if len(set(gpus)) == 1 else None
    for (name, again, first), gpu in zip(rows, gpus, strict=True):
        v, w = again.verdict, first.verdict
        places = _places(again, first)
        got = ratio_with_ci(v.value, v.ci_low, v.ci_high, verdict_label(v), places=places)
        if again.error is not None:  # stopped or failed there: said as the later runs' sentence says it
            limit = stopped_by_limit(note_text, rerun_of=again.repro.id)
            got = f"{_stopped(again.error, limit)} ({code(again.error.message, 100)})"
        elif v.value is None:  # nothing timed there (a library absent, a GPU too small): its status beside this one's
            alike = w.value is None and v.status == w.status
            got = f"{text(v.status)}, no headline ({'as here' if alike else f'here {text(w.status)}'})"
        if again.error is None and again.validity.flag == "suspect":  # its clocks or order: as the run's own flag
            got += " (suspect, as here)" if first.validity.flag == "suspect" else " (suspect)"
        this = f" ({ci})" if (ci := _ci_at(w, places)) else ""
        agreement = ""
        if isinstance(v.value, float) and isinstance(w.value, float) and w.ci_low is not None and w.ci_high:
            # Both: a re-run's CI can miss this run's (another process on the same GPU) and still land in the band.
            if v.ci_low is None or v.ci_high is None:
                ci = "has no CI"
            elif stats.cis_overlap(v.ci_low, v.ci_high, w.ci_low, w.ci_high):
                ci = f"CI overlaps ours{this}" + _barely(v.ci_low, v.ci_high, w.ci_low, w.ci_high)
            else:
                ci = f"CI misses ours{this}"
            agreement = f": {ci}" + ("" if lean else _band_words(first, again, bands))
        where = "" if lean else f" ({code('attached/' + name)})"
        more = "" if lean else _others_agree(again, first) + _episodes_there(again, bands)
        on = "" if one is not None else " (GPU not recorded)" if gpu is None else f" (on {text(gpu or 'this GPU')})"
        said.append(f"{text(again.repro.id)}{on} {got}{agreement}{more}{where}")
        theirs, ours = again.machine.harness.source_sha256, first.machine.harness.source_sha256
        digests.add(bool(theirs) and theirs == ours)
        install = str(again.machine.host.python_env.get("harness_install") or "harness install not recorded")
        if (bundled := harness_of(first).wheel()) and install == f"installed from {bundled}":
            install = "the bundled wheel"  # the install block below names it
        installs.add(text(install))
        torches.add(_torch_install(again, log_text))
    same = "this run's harness digest" if digests == {True} else "not all with this run's harness digest"
    how = "; ".join(sorted(installs if lean else installs | torches))  # each already inert text
    left = sorted(set(ran) - {a.repro.id for _, a, _ in rows})
    rest = _not_rerun(left, note_text)
    printed = f"; its installs' output: {code('attached/' + log)}" if log else ""
    # The lean form leaves out how torch was found: where the installs met it outside the venv, said in a word.
    outside = any("already in" in t or "the machine's" in t for t in torches)  # install_words' or _torch_words'
    seen = f" that saw {'this' if one == '' else 'its'} machine's packages" if lean and outside else ""
    where_run = " here" if one == "" else f" on another GPU ({text(one)})" if one else ""
    stop = ""
    if (
        not left
        and all(a.error is None for _, a, _ in rows)
        and any(stopped_by_limit(note_text, rerun_of=a.repro.id) for _, a, _ in rows)
    ):  # the note's stop came after the last re-run had written its whole artifact (plots, printing)
        last = max(rows, key=lambda r: r[1].run.created_utc)[1].repro.id
        stop = f" The note's time limit stopped them after the last, {text(last)}, wrote its artifact."
    files = ""
    if lean:  # one pattern where the names follow it, else each file
        named = all(name == f"rerun-{again.repro.id}.json" for name, again, _ in rows)
        files = code("attached/rerun-<id>.json") if named else ", ".join(code("attached/" + n) for n, _, _ in rows)
        files = f" ({files})"
    return (
        f" Re-run{where_run} from this run's first bundle, in a fresh venv{seen} ({how}; {same}{printed}):"
        f" {'; '.join(said)}{files}.{rest}{stop}" + after
    )
