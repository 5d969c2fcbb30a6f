"""What programs run beside a run printed, as the run's maker attached it (``attached/``): each repro's standalone
script (``script-<id>.out``, from ``repro script <id>``) and the seeds' own programs (``seeds_raw.log``, from
tools/seeds_raw.py, the speed baseline). The report sets their numbers beside the run's headlines, so a reader
sees every number the run made, not only the ones the harness measured.

Only numbers and fixed words come out of the text: nothing a program printed reaches the report verbatim.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from repro.core.order import group_arms
from repro.evidence.band import headline_row
from repro.evidence.markdown import code, fmt_time, ratio_with_ci, side_places, text, unprefixed, verdict_label
from repro.evidence.model import Artifact, same_gpu
from repro.evidence.standalone import parse_output

SCRIPT_CHECK = 0.10  # a script's printed ratio this close to the headline agrees (a check, not a CI)
# Why neither the run's CI nor a re-run's same-GPU spread bounds a script's ratio.
NOT_THE_RUN = "no spread here bounds a script (one process each, clocks not recorded)"
READ_LIMIT = 1 << 20  # bytes read of one file: the numbers come first, a runaway log is not read whole
SEEDS_LOG = "seeds_raw.log"
SCRIPT_OUT = re.compile(r"script-(?P<id>[a-z0-9][a-z0-9-]*)\.out")
# seeds_raw.py's header of each program's output: ``--- 000 5090-linear: 11.86 s (rc 0)``,
# ``--- 004-cuda graph-memset (seed.cu: ...; nvcc -O3 -arch=native, ...): 2.67 s (rc 0)``.
_SECTION = re.compile(r"^--- (?P<key>\S+) (?P<id>[a-z0-9][a-z0-9-]*)(?P<rest>.*)$", re.M)
_NUM = r"([0-9]+(?:\.[0-9]+)?)"


def _floats(pattern: str, body: str) -> list[float]:
    return [float(x) for x in re.findall(pattern, body)]


def _x(value: float) -> str:
    return f"{value:.2f}x"


def _linear(body: str) -> str | None:
    lin, man = _floats(rf"Linear Time:\s*{_NUM}", body), _floats(rf"Manu Time:\s*{_NUM}", body)
    return _x(lin[0] / man[0]) if lin and man and man[0] > 0 else None


def _adam(body: str) -> str | None:
    m = re.search(rf"Kernel slowdown:\s*{_NUM}x\s+Step slowdown:\s*{_NUM}x", body)
    if m is None:
        return None
    return f"(torch's fused AdamW, TE absent) kernels {float(m[1]):.2f}x, step {float(m[2]):.2f}x"


def _lora(body: str) -> str | None:
    """The seed gives no program: seeds_raw.py's stand-in (a LoRA block stack of the repro's widths, not its model,
    in a plain loop, batch 1 then 2) is the speed baseline's, not a measure of the claim."""
    one, two = _floats(rf"bs 1:\s*{_NUM} s/it", body), _floats(rf"bs 2:\s*{_NUM} s/it", body)
    if not one or not two or one[0] <= 0 or two[0] <= 0:
        return None
    rounding = 0.0005 / one[0] + 0.0005 / two[0]  # the times are printed to 3 decimals
    return (
        "no seed program (seeds_raw.py's stand-in for the speed baseline, a LoRA block stack of its own with this "
        "repro's widths but not its model (affine LayerNorms, one fused qkv adapter, another loss), timed in a plain "
        f"loop, batch 1 then 2, no batch 4 between, gave {_x(two[0] / 2 / one[0])} per sample, "
        f"±{rounding:.1%} from its 3-decimal times, one process, no CI: not a measure of the claim)"
    )


def _solve(body: str) -> str | None:
    ms = {(b, int(n)): float(t) for b, n, t in re.findall(rf"(default|cusolver) (511|512) {_NUM} ms", body)}
    said = [
        f"{b} {_x(ms[b, 512] / ms[b, 511])}" for b in ("default", "cusolver") if ms.get((b, 511)) and (b, 512) in ms
    ]
    return ", ".join(said) if said else None


def _memset_torch(body: str) -> str | None:
    yes, no = _floats(rf"memset=True:\s*{_NUM} ms", body), _floats(rf"memset=False:\s*{_NUM} ms", body)
    return f"torch {_x(yes[0] / no[0])}" if yes and no and no[0] > 0 else None


def _memset_cuda(body: str) -> str | None:
    us = _floats(rf"Execution time:\s*{_NUM}\s*us", body)  # memset first, then kernel (seeds_raw.py's order)
    return f"seed.cu {_x(us[0] / us[1])}" if len(us) == 2 and us[1] > 0 else None


_SEEDS: Mapping[str, Callable[[str], str | None]] = {
    "000": _linear,
    "001": _adam,
    "002": _lora,
    "003": _solve,
    "004-torch": _memset_torch,
    "004-cuda": _memset_cuda,
}


def seeds(log: str, ids: Sequence[str]) -> str:
    """``The seeds' programs, run again by seeds_raw.py (...): ...``: each program's ratio, for the repros in
    ``ids``; "" when the log has none of them."""
    heads = list(_SECTION.finditer(log))
    said: dict[str, list[str]] = {}
    for i, m in enumerate(heads):
        body = log[m.end() : heads[i + 1].start() if i + 1 < len(heads) else len(log)]
        read = _SEEDS.get(m["key"])
        got = read(body) if read is not None and m["id"] in ids else None
        if got:
            arch = re.search(r"-arch=(native|sm_[0-9]+a?)", m["rest"])
            # native builds for the GPU it runs on: the same target as the run's own build on that GPU.
            built = " (nvcc -arch=native: the GPU it ran on)" if arch and arch[1] == "native" else ""
            built = f" (-arch={arch[1]})" if arch and not built else built
            said.setdefault(m["id"], []).append(got + built)
    if not said:
        return ""
    each = "; ".join(f"{rid} {', '.join(v)}" for rid, v in said.items())
    return (
        f" The seeds' programs again, by seeds_raw.py (`attached/{SEEDS_LOG}`; one process each, no CI; a "
        f"program that times one call moves between processes more than one that times many): {each}."
    )


UNTESTED = "not tested as the cause"


def _without_held(doc: Artifact, later: Mapping[str, object], ratio: float) -> str:
    """``; without them, `attached/quick-ID.json` read 0.963x (95% CI 0.953-0.969), the script's 0.995 outside it
    too``: each later run of this repro on this GPU, with this run's params and not a smoke run, that timed the
    headline's two arms and no other (as the script does), its headline's CI set beside the script's ``ratio``;
    "" where no attached run did."""
    head = headline_row(doc)
    if head is None:
        return ""
    said = []
    for name in sorted(later):
        again = later[name]
        if not isinstance(again, Artifact) or again.repro.id != doc.repro.id or again.error is not None:
            continue
        v, row = again.verdict, headline_row(again)
        if row is None or row.comparison != head.comparison or v.status == "smoke" or again.smoke:
            continue
        if not same_gpu(again, doc) or dict(again.repro.params) != dict(doc.repro.params):
            continue
        if v.value is None or v.ci_low is None or v.ci_high is None or again.timed_arms() != {head.num, head.den}:
            continue
        d = side_places(ratio, v.ci_low, v.ci_high)
        where = "within it" if v.ci_low <= ratio <= v.ci_high else "outside it too"
        got = ratio_with_ci(v.value, v.ci_low, v.ci_high, verdict_label(v), places=d)
        suspect = " (suspect there)" if again.validity.flag == "suspect" else ""
        said.append(f"{code('attached/' + name)} read {got}{suspect}, the script's {ratio:.{d}f} {where}")
    return f"; without them, {'; '.join(said)}" if said else ""


def _alone(doc: Artifact, later: Mapping[str, object], ratio: float) -> str:
    """``; its script times bs2 and bs1 alone, the run's rounds held bs4 too, not tested as the cause``: where the
    run timed its headline's two arms in rounds with other arms, which a standalone script (each comparison's two
    arms alone) does not. One difference of several (the script's own sampling is another): said, not blamed.
    Where a later run attached (``later``) timed the two and no other arm, what it read instead of "not tested"
    (``_without_held``)."""
    head = headline_row(doc)
    if head is None or not head.num or not head.den:
        return ""
    arms = group_arms(doc.variants, head.num, head.den)
    if arms is None:
        return ""  # not one group of the harness's schedule (an external program's arms): nothing to set beside
    others = [a for a in arms if a not in (head.num, head.den)]
    group = next(v.timing.group for v in doc.variants if v.name == head.num and v.timing is not None)
    # Every group of a repro's schedule takes its turn in the same rounds.
    more = any(v.timing and v.timing.rounds and v.timing.group not in (None, group) for v in doc.variants)
    if not others and not more:
        return ""
    (num, den, *rest), shared = unprefixed([head.num, head.den, *others])
    held = [*([", ".join(rest) + (f" (arms {shared}*)" if shared else "")] if rest else [])]
    held += ["other groups' arms"] if more else []
    held_words = " and ".join(held)
    said = text(f"; its script times {num} and {den} alone, the run's rounds held {held_words} too")
    return said + (_without_held(doc, later, ratio) or text(", " + UNTESTED))


# What a script whose metric is not its harness's headline's says of its own (fused-adam's: "this script times whole
# steps with CUDA events", where the harness's headline is kernel time per step).
_WHOLE = re.compile(r"this script times (whole steps)\b")
# What a script that sizes itself to the free GPU memory prints (fused-adam's): the ratio is for fewer tensors.
_SIZED_DOWN = re.compile(r"sizing down to ([0-9]{1,6}) of ([0-9]{1,6}) tensors")


def scripts(
    docs: Sequence[Artifact],
    outputs: Mapping[str, str],
    lean: bool = False,
    later: Mapping[str, object] | None = None,
) -> str:
    """``Each repro's standalone script, run here (...): ...``: the ratio each printed for its repro's headline
    comparison, against the headline; "" without any. ``lean``: how many agree within the check and the
    farthest, with in full only the scripts outside it, and none with what the run's rounds held beside its arms
    (``_alone``, the full form's). ``later``: the attached artifacts of later runs (name -> artifact), read where
    a script lies outside the run's CI."""
    said, unchecked, off = [], [], []
    outside: list[str] = []  # the repros whose script lies outside their headline's CI (the run's process only)
    for d in docs:
        printed = outputs.get(f"script-{d.repro.id}.out")
        v = d.verdict
        if printed is None:
            continue
        try:
            got = parse_output(printed)
        except (ValueError, IndexError):  # a garbled output: nothing to set beside the run
            continue
        if v.value is None:  # no headline measured: what the script timed instead, unchecked
            fit = _SIZED_DOWN.search(printed)
            sized = f" at {fit.group(1)} of {fit.group(2)} tensors, sized to fit" if fit else ""
            sized = f" of {whole.group(1)}{sized}" if (whole := _WHOLE.search(printed)) else sized
            first = [
                f"{text(d.repro.id)} {text(name)} {row['ratio']:.3f}{sized}"
                for name, row in got.items()
                if row.get("ratio") is not None
            ]
            unchecked += first[:1]
            said += [f"{x} (no headline to check it against)" for x in first[:1]]
            continue
        row = got.get(v.headline or "") or next(iter(got.values()), {})
        ratio = row.get("ratio")
        if ratio is not None:
            missed = v.ci_low is not None and v.ci_high is not None and not v.ci_low <= ratio <= v.ci_high
            # The full form gives the script's own arm times too (its process alone, beside the run's medians).
            arms = [f"{k} {fmt_time(t)}" for k, t in row.items() if k.startswith("t(") and not lean]
            times = f"; {text(', '.join(arms))}" if arms else ""
            alone = _alone(d, later or {}, ratio) if missed and not lean else ""
            said.append(f"{text(d.repro.id)} {ratio:.3g} ({ratio / v.value - 1:+.1%}{times}{alone})")
            off.append((abs(ratio / v.value - 1), d.repro.id, said[-1]))
            outside += [text(d.repro.id)] if missed else []
    if not said:
        return ""
    lead = " Standalone scripts run here (`attached/script-<id>.out`; one process each"
    if not lean or not off:
        beyond = f"; {_outside(outside)}" if outside else ""
        checked = f"within {SCRIPT_CHECK:.0%} of the headline is the check, not its CI"
        return f"{lead}: {checked}): {', '.join(said)}{beyond}."
    far = max(off)
    out = [x for x in off if x[0] > SCRIPT_CHECK]
    agree = f"{len(off) - len(out)} of {len(off)} within {SCRIPT_CHECK:.0%} of their headlines, the check, not a CI"
    notes = [_outside(outside)] if outside else []
    notes += [f"farthest: {far[2]}"] if far not in out else []
    agree += f" ({'; '.join(notes)})" if notes else ""
    rest = [x[2] for x in out] + [f"{x} (no headline)" for x in unchecked]
    return f"{lead}): {agree}" + (f"; {', '.join(rest)}" if rest else "") + "."


def _outside(ids: Sequence[str]) -> str:
    """``2 outside the run's CI (lora-batch-scaling, graph-memset): no spread here bounds a script (...)``."""
    return f"{len(ids)} outside the run's CI ({', '.join(ids)}): {NOT_THE_RUN}"


def words(
    docs: Sequence[Artifact],
    outputs: Mapping[str, str],
    with_seeds: bool = True,
    later: Mapping[str, object] | None = None,
) -> str:
    """The two sentences above, for the report's re-run paragraph; the scripts' alone unless ``with_seeds``.
    ``later``: as for ``scripts``."""
    log = outputs.get(SEEDS_LOG) if with_seeds else None
    said = scripts(docs, outputs, lean=not with_seeds, later=later)
    return said + (seeds(log, [d.repro.id for d in docs]) if log else "")


def lean_cuts(
    docs: Sequence[Artifact], outputs: Mapping[str, str], later: Mapping[str, object] | None = None
) -> list[str]:
    """Whose numbers ``words(..., with_seeds=False)`` leaves out of what ``outputs`` hold: "seeds_raw.py's" where
    its log is attached, "each script's" where the scripts' sentence is shortened."""
    cut = scripts(docs, outputs, later=later) != scripts(docs, outputs, lean=True, later=later)
    return [x for x, has in (("seeds_raw.py's", SEEDS_LOG in outputs), ("each script's", cut)) if has]


def wanted(name: str) -> bool:
    """Whether an attached file is one the report reads: these programs' output, the re-run's install log, the
    harness's history and its maker's note."""
    return name in (SEEDS_LOG, HISTORY, RERUN_LOG, NOTE) or SCRIPT_OUT.fullmatch(name) is not None


# What a run's maker says of the machine that the harness cannot know (why a library is absent, say): its first
# paragraph, at most NOTE_LIMIT characters, goes under the report's "Not tested here" as their words; its whole
# text is read for the commands its own time limit stopped (stopped_by_limit).
NOTE = "NOTE.txt"
NOTE_LIMIT = 400
_PARAGRAPH = re.compile(r"\r?\n[ \t]*\r?\n")  # a blank line, CRLF or a whitespace-only one included


# How a run's maker (tools/gpu-final.sh) says in its note that its own time limit stopped a command: the artifact
# records the signal, not who sent it. ``'<command>' LIMIT_WORDS``, the command as the report names it
# (``reruns._flags``), or ``'the re-run lines of ID ID ...'`` for the re-runs.
LIMIT_WORDS = "was stopped by this script's own time limit"
_RERUN_LIMIT = re.compile(r"'the re-run lines of ([^']*)' " + re.escape(LIMIT_WORDS))


def stopped_by_limit(note_text: str | None, command: str | None = None, rerun_of: str | None = None) -> bool:
    """Whether the maker's note says its own time limit stopped ``command`` (or, with ``rerun_of``, the re-runs,
    that repro's among them)."""
    said = " ".join((note_text or "").split())  # a hand-wrapped note reads as one line
    if rerun_of is not None:
        return any(rerun_of in m[1].split() for m in _RERUN_LIMIT.finditer(said))
    return command is not None and f"'{command}' {LIMIT_WORDS}" in said


def note(outputs: Mapping[str, str]) -> str | None:
    """The maker's note's first paragraph on one line (cut at NOTE_LIMIT characters with an ellipsis), or None."""
    said = " ".join(_PARAGRAPH.split((outputs.get(NOTE) or "").strip(), maxsplit=1)[0].split())
    if not said:
        return None
    return said if len(said) <= NOTE_LIMIT else said[: NOTE_LIMIT - 1].rstrip() + "…"


# What the re-run's installs printed (pip's output; repro.evidence.reruns reads where each requirement came from).
RERUN_LOG = "rerun.log"
# The harness's commits with their source digests, one line each, a run's maker may attach (tools/device-tree.sh):
# ``<short hash> <commit date or time, UTC> <digest's first 12> <subject>``.
HISTORY = "harness-history.txt"
# How tools/harness-history.py marks a commit's line with the files it changed under repro/repros/.
HISTORY_MARK = "[repro/repros: "
_HISTORY_LINE = re.compile(r"^(?P<commit>[0-9a-f]{7,40}) \S+ (?P<digest>[0-9a-f]{12}) ", re.M)


def commit_of(digest: str | None, outputs: Mapping[str, str]) -> str | None:
    """The newest commit an attached harness history lists with a source digest, or None."""
    history = outputs.get(HISTORY)
    if not digest or history is None:
        return None
    found = [m["commit"] for m in _HISTORY_LINE.finditer(history) if m["digest"] == digest[:12]]
    return found[0] if found else None  # newest first: a commit that left the package as it was repeats its digest


def read(path: Path) -> str:
    """The first READ_LIMIT bytes of an attached file, as text (undecodable bytes replaced)."""
    with path.open("rb") as f:
        return f.read(READ_LIMIT).decode("utf-8", errors="replace")
