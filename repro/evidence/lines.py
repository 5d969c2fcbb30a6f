"""The lines of a repro's short report section, each computed from the artifact's fields: the seed's
source and its experiment beside ours, what the headline holds for, the kernels that differ, the
re-run band, the re-run block; and the band note under the report's summary table."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from repro.core.results import VariantResult
from repro.evidence import band, band_runs, scope
from repro.evidence.agreement import agree as agreed
from repro.evidence.agreement import module_runs, not_run_bands, other_models, slack
from repro.evidence.declared import Declared
from repro.evidence.markdown import code, fence, fmt_pct, fmt_time, ratio_with_ci, side_places, text
from repro.evidence.model import Artifact
from repro.evidence.seedlines import seed_rows
from repro.evidence.standalone import rerun
from repro.evidence.variants import diff_pairs, is_smoke, kernel_diff, kernel_total_us

__all__ = [
    "band_line",
    "diff_lines",
    "install_block",
    "missing_module",
    "module_state",
    "rerun_block",
    "restated",
    "scope_lines",
    "stack_line",
]

# Kernel-diff bullets in a repro's section; the rest are in the artifact.
DIFF_BULLETS = 3
DECIDED = ("reproduced", "not_reproduced")
# Statuses that carry a measured headline on a GPU: the band compares those, whatever the claim's status.
MEASURED = (*DECIDED, "inconclusive", "undecided")


def scope_lines(doc: Artifact) -> list[str]:
    """Where the effect holds and where it does not: the headline's settings on the side its own status
    puts them, then every other comparison on the side its row's status puts it."""
    status = doc.verdict.status
    if status not in DECIDED:
        return []  # a smoke, skipped, inconclusive or error run holds for nothing
    found = scope.conditions(doc)
    if found is None:
        return []
    head, holds, fails = found
    if status == "reproduced":
        holds = [f"{head} (headline)", *holds]
    else:
        # Not reproduced though the headline's whole CI lies above 1.0: the size the repro asks for is what failed.
        short = f"; above 1.0, under the repro's {doc.verdict.threshold:g}" if scope.held_side(doc) else ""
        fails = [f"{head} (headline{short})", *fails]
    magma = doc.machine.torch_has_magma
    if magma is not None:
        # What "default" means for torch.linalg here: MAGMA where torch was built with it.
        said = "default backend (MAGMA here)" if magma else "default backend (no MAGMA here)"
        holds = [h.replace("default backend", said, 1) for h in holds]
        fails = [f.replace("default backend", said, 1) for f in fails]
    out = [f"Holds for: {text('; '.join(holds))}"] if holds else []
    return out + ([f"Does not hold for: {text('; '.join(fails))}"] if fails else [])


# The harness's own detail sentences that a line of the section computes again from the numbers:
# the seed's program against the headline (seed_vs_ours), the other comparisons over and under the
# threshold and what "default backend" means here (scope_lines).
_SEED_DETAIL = ("The seed's program, re-implemented", "The seed's own program")  # the second: older artifacts
_ENDS_IN_RATIO = re.compile(r" was ([0-9.]+x \(95% CI [0-9.]+-[0-9.]+\))\.$")
_SCOPE_DETAILS = ("Also over ", "Below the threshold at every ", "The default backend here is ")
# A sentence listing the other backends' ratios (fused-adam): the comparisons table has each, and
# "Not tested here" the backends that did not run.
_TABLE_DETAIL = "Other backends, "
_RATIO = re.compile(r"[0-9.]+x \(95% CI [0-9.]+-[0-9.]+\)")


def restated(doc: Artifact, detail: str) -> bool:
    """Whether the section already says what ``detail`` says, computed from the artifact's numbers:
    besides the sentences above, one that ends in a comparison's own ratio and CI, as its row has them."""
    rows = {ratio_with_ci(r.ratio, r.ci_low, r.ci_high) for r in doc.verdict.breakdown}
    if (m := _ENDS_IN_RATIO.search(detail)) and m.group(1) in rows:
        return True
    if detail.startswith(_TABLE_DETAIL):
        said = _RATIO.findall(detail)
        return bool(said) and all(x in rows for x in said)
    if detail.startswith(_SEED_DETAIL):
        return bool(seed_rows(doc))
    if detail.startswith(_SCOPE_DETAILS[2]):
        return any("MAGMA here" in ln for ln in scope_lines(doc))
    return detail.startswith(_SCOPE_DETAILS[:2]) and bool(scope_lines(doc))


def _diff_pair(doc: Artifact) -> tuple[VariantResult, VariantResult] | None:
    """The kernel diff's pair (``diff_pairs``' first) as its comparison reads, from its denominator to its
    numerator; None in a smoke run or without one."""
    pairs = [] if is_smoke(doc) else diff_pairs(doc)
    if not pairs:
        return None
    base, other = pairs[0]
    if any(r.num == base.name and r.den == other.name for r in doc.verdict.breakdown):
        base, other = other, base
    return base, other


def kernels_alone(doc: Artifact) -> str | None:
    """Where the kernel diff's pair by kernel time alone gives a ratio outside its row's CI: that ratio, and what
    each form's timed median per call holds beyond its kernels; None elsewhere (or without both times)."""
    pair = _diff_pair(doc)
    if pair is None:
        return None
    base, other = pair
    row = next((r for r in doc.verdict.breakdown if r.num == other.name and r.den == base.name), None)
    kern = [kernel_total_us(v) * 1e-6 for v in (base, other)]
    timed = [v.timing.stats.median if v.timing is not None else 0.0 for v in (base, other)]
    if row is None or row.ci_low is None or row.ci_high is None or not all(x > 0 for x in [*kern, *timed]):
        return None
    # Only calls timed by events around eager launches, longer than their kernels, and a row on that time: a
    # kernel-time row or a graph replay is not what the sentence explains, and a finding may say it already.
    eager = all(v.timing is not None and v.timing.method == "cuda_events" for v in (base, other))
    if row.basis == "kernel" or not eager or any(t < k for t, k in zip(timed, kern, strict=True)):
        return None
    if "kernels alone" in doc.verdict.finding:
        return None
    alone = kern[1] / kern[0] * float(row.scale or 1.0)
    if row.ci_low <= alone <= row.ci_high:
        return None
    over = " and ".join(f"+{fmt_time(t - k)}" for t, k in zip(timed, kern, strict=True))
    lo, hi = row.ci_low, row.ci_high
    d = side_places(alone, lo, hi)  # printed apart from the CI's ends it lies outside of
    return (
        f"By kernel time alone, {text(base.label or base.name)} -> {text(other.label or other.name)} reads "
        f"{alone:.{d}f}x, outside its row's CI ({lo:.{d}f}-{hi:.{d}f}): each timed call held {over} "
        "beyond its kernels (the CUDA events also count the launch's host latency and host gaps inside a call)."
    )


def diff_lines(doc: Artifact) -> list[str]:
    """The verdict's own pair only: which kernels appear, disappear or change, at most DIFF_BULLETS."""
    pair = _diff_pair(doc) if doc.verdict.variants else None
    if pair is None:
        return []
    base, other = pair
    changes = kernel_diff(base, other)
    total = (
        f"kernel time per call {fmt_time(kernel_total_us(base) * 1e-6)} -> {fmt_time(kernel_total_us(other) * 1e-6)}"
    )
    timed = [v.timing.stats.median if v.timing is not None else None for v in (base, other)]
    if all(isinstance(t, float) and t > 0 for t in timed):
        # The timed samples' median per call: CUDA events around calls on an idle queue also count the first
        # launch's host latency and host gaps inside a call, which the profiled kernel time does not.
        total += f"; timed {fmt_time(timed[0])} -> {fmt_time(timed[1])}"
    # The headline's own pair was timed outside the profiler (a pure CUDA twin): the nearest profiled pair
    # stands in, and the line says so.
    own = {base.name, other.name} == set(doc.verdict.variants)
    whose = "Kernels," if own else "Kernels of a profiled pair (the headline's was not profiled):"
    head = f"{whose} {text(base.label or base.name)} -> {text(other.label or other.name)} ({total}"
    if not changes:
        return [f"{head}): the same kernels, times within 10%"]
    rest = changes[DIFF_BULLETS:]
    if rest:
        # What the bullets leave out, counted by kind, so a changed kernel mix is never hidden.
        kinds = [(sum(c.startswith(m) for c in rest), w) for m, w in (("+ ", "appear"), ("- ", "disappear"))]
        moved = sum(c.startswith("~ ") for c in rest)
        said = [f"{n} {w}" for n, w in kinds if n] + ([f"{moved} change"] if moved else [])
        head += f"; not shown: {', '.join(said)}"
    head += "):"  # the bullets come largest change in time per call first (kernel_diff)
    # kernel_diff's lines start "+ ", "- " or "~ "; the words after say the same, and a leading "- "
    # would open a list inside the list item.
    return [head] + [f"  - {c[2:]}" for c in changes[:DIFF_BULLETS]]


def stack_line(doc: Artifact, declared: Declared) -> str | None:
    """Where in the stack the evidence puts the cliff (the repro's words), opened by the kernels
    that disappear and appear across the headline pair, from the artifact's kernel lists."""
    pairs = diff_pairs(doc) if declared.stack and not is_smoke(doc) else []
    if not pairs or doc.verdict.status != "reproduced":
        return None
    small, large = pairs[0]
    if any(r.num == small.name and r.den == large.name for r in doc.verdict.breakdown):
        small, large = large, small
    gone = [k for k in kernel_diff(small, large) if k.startswith("- ")]
    came = [k for k in kernel_diff(small, large) if k.startswith("+ ")]
    if not gone or not came:
        return f"Where in the stack: {text(declared.stack)}"
    switch = f"{gone[0][2:].split(' disappears')[0]} gives way to {came[0][2:].split(' appears')[0]}"
    built = doc.machine.torch_git_version
    this = f" This build: torch {text(built[:12])}." if built else ""
    return f"Where in the stack: {switch} across the headline pair; {text(declared.stack)}{this}"


def _run_ci(doc: Artifact) -> float:
    """This run's headline CI half-width over its value; 0.0 without a CI."""
    v = doc.verdict
    value = float(v.value or 0.0)
    return (float(v.ci_high) - float(v.ci_low)) / 2 / value if v.ci_low is not None and v.ci_high is not None else 0.0


def band_agreement(doc: Artifact, b: band.Band) -> str:
    """``agreement.agree``'s word on this run's headline against band ``b``: the whole band widened by one run's
    slack, which counts as at least this run's own CI half-width (relative), as two or three GPUs can agree more
    closely than one run's CI can tell."""
    return agreed(b.center, float(doc.verdict.value or 0.0), b, _run_ci(doc), centred=True)


def slack_words(doc: Artifact, b: band.Band) -> str:
    """Which slack widens band ``b`` in ``band_agreement``: this run's CI, or one GPU's re-run spread, the larger."""
    ci = _run_ci(doc)
    return "this run's CI" if slack(b, ci) == ci else "one GPU's re-run spread"


def band_line(doc: Artifact, bands: Sequence[band.Band]) -> str | None:
    """Where this run falls among the GPUs of its model that the band holds, and how to list them."""
    v = doc.verdict
    if v.status not in MEASURED or v.value is None:
        got = not_run_bands(doc, bands, brief=False)
        return f"Re-run elsewhere: this run has no headline; {text(got)}." if got else None
    b = band.lookup(doc, bands)
    if b is None:
        differ = band.other_params(doc, bands)
        why = f" (the band's runs of this model set other params: {text(', '.join(differ))})" if differ else ""
        # Another model's band in the table's cell: how many of its runs ran this repro module file.
        seen = other_models(doc, bands)
        code = f" The table's {text(seen[0].gpu)} span: {said}." if seen and (said := module_runs(doc, seen[0])) else ""
        return (
            f"Re-run elsewhere: no cross-GPU data for these params on this GPU model{why}; "
            f"the CI says nothing about another GPU.{code}"
        )
    value = float(v.value or 0.0)
    uuid = doc.machine.gpu_uuid or ""
    others = [p.value for p in b.points if p.uuid != uuid] or [p.value for p in b.points]
    if value < min(others):
        where = "below all"
    elif value > max(others):
        where = "above all"
    else:
        where = "inside their range"
    ci, agreement = _run_ci(doc), band_agreement(doc, b)
    within = "within" if agreement == "consistent" else "outside"
    gpus = f"{len(others)} other" if len(others) < len(b.points) else f"{len(others)}"
    lo, hi = _sig4(min(others)), _sig4(max(others))
    read = f"GPU read {lo}" if len(others) == 1 else f"GPUs read {lo}-{hi}"
    below, above = b.sides()
    width = f"the band's range (-{fmt_pct(below * 100)}/+{fmt_pct(above * 100)} of {_sig4(b.center)})"
    if b.same_gpu is not None and max(ci, b.same_gpu[0]) > 0:  # the larger of the two: both named, the rule said
        width += (
            f" widened by the larger of this run's CI (±{fmt_pct(ci * 100)}) and one GPU's re-run spread"
            f" (±{fmt_pct(b.same_gpu[0] * 100)})"
        )
    elif ci > 0:
        width += f" widened by this run's CI (±{fmt_pct(ci * 100)})"
    harness = band.versions(b)
    made = f", {len(harness)} harness versions" if len(harness) > 1 else ""
    if made and (bare := sum(not p.harness for p in b.points)):  # runs from before the digest was recorded
        made += f" and the runs of {bare} GPU{'s' * (bare > 1)} that recorded none"
    same, known = b.same_source(doc.repro.source_sha256 or "")
    if known and same < known:  # the repro's code differed between runs: part of the spread may be the method's
        made += f"; {same} of {known} runs with this run's repro module file, its helpers and the sampler not compared"
    # A suspect run's value is not the GPU's alone: the agreement is never said without that.
    suspect = ", but this run is suspect" if doc.validity.flag == "suspect" else ""
    return (
        f"Re-run elsewhere ({text(b.headline or 'headline')}{made}): {gpus} "
        f"{text(b.gpu)} {read}, this run {_sig4(value)} ({where}), {within} {width}: {agreement}{suspect}."
    )


def _sig4(x: float) -> str:
    """Four significant digits, trailing zeros kept (1.000, not 1), so values line up."""
    return f"{x:#.4g}".rstrip(".")


# How the harness words a module that would not import ("No module named 'x'", "x.y is not importable",
# "x.y is not installed").
_NO_MODULE = re.compile(r"No module named '([A-Za-z_][\w.]*)'|\b([A-Za-z_][\w.]*) is not (importable|installed)\b")


def module_state(doc: Artifact) -> str:
    """How ``missing_module``'s module was missing: "not installed" where the reason says no such package
    was found (ModuleNotFoundError for it), else "not importable" (present, but failed to load)."""
    v = doc.verdict
    claim = (v.claim.reason or "") if v.claim is not None else ""
    said = " ".join([claim, v.finding or "", *(x.reason or "" for x in v.not_run)])
    module = missing_module(doc)
    # Absent: no such top-level package ("No module named 'x'"), or the harness said "x[.y] is not installed".
    absent = any(
        m[1] == module or (m[2] and m[2].split(".")[0] == module and m[3] == "installed")
        for m in _NO_MODULE.finditer(said)
    )
    return "not installed" if absent else "not importable"


def missing_module(doc: Artifact) -> str | None:
    """The top-level module whose absence kept the seed's own subject from running (fused-adam:
    ``transformer_engine``), from the verdict's claim reason, or a skipped verdict's reasons."""
    v = doc.verdict
    if v.claim is not None and not v.claim.tested:
        said = [v.claim.reason or ""]
    elif v.status == "skipped":
        said = [v.finding, *(x.reason for x in v.not_run)]
    else:
        return None
    for reason in said:
        if m := _NO_MODULE.search(reason):
            return str(m.group(1) or m.group(2)).split(".")[0]
    return None


# How a section's re-run items begin: what the re-run needs installed, and why no command was rebuilt.
RERUN_NEEDS = "To test the seed's claim, the re-run needs"
RERUN_NOT_REBUILT = "Re-run: not rebuilt here"


def rerun_block(doc: Artifact) -> tuple[list[str], str | None]:
    """(list items, shell block): the ``repro run`` command, from validated fields only, and, when the
    seed's subject did not run for want of a module, that the re-run needs it; what to install first is
    in the report's one install block (``install_block``)."""
    r = rerun(doc)
    needs = missing_module(doc)
    items = [f"{RERUN_NEEDS} {code(needs)} installed{_how_to_install(doc, needs)}."]
    items = items if needs else []
    if r.args is None:
        return [*items, f"{RERUN_NOT_REBUILT} ({text(r.why_not)})."], None
    command = r.command()
    return items, fence(command, "bash") if command else None


# A pip requirement as a repro may name it for its claim: a name, extras, an exact version.
_PIP_SPEC = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,80}(?:\[[a-z0-9_,-]{1,40}\])?(?:==[0-9][0-9a-z.+]{0,30})?")


def _how_to_install(doc: Artifact, module: str | None) -> str:
    """``: `pip install ...` (words)`` from the repro's ``extra["claim_needs"]`` when it names the missing
    module and a well-formed pip requirement; else nothing."""
    said = doc.extra.get("claim_needs")
    if not isinstance(said, Mapping) or not module or said.get("module") != module:
        return ""
    spec = said.get("pip")
    if not isinstance(spec, str) or not _PIP_SPEC.fullmatch(spec):
        return ""
    note = said.get("note")
    room = _room(doc, said)
    return f": {code(shlex.join(['pip', 'install', spec]))}" + (
        f" ({text(note)}{room})" if isinstance(note, str) and note else f" ({room[2:]})" if room else ""
    )


def _gib(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) and x > 0 else None


def _room(doc: Artifact, said: Mapping[str, Any]) -> str:
    """``; about 109.9 GiB of GPU memory at these sizes (its standalone script: 94.2 GiB; the seed's program, one form
    at a time: 62.8 GiB), more than this GPU's 79.2 GiB: `--set n_tensors=...` or a larger GPU``:
    from ``claim_needs``; the run's own figure is ``run_gpu_memory_gib`` (older artifacts record the script's only)."""
    run, script, seed = (_gib(said.get(k)) for k in ("run_gpu_memory_gib", "gpu_memory_gib", "seed_gpu_memory_gib"))
    first = run or script
    if first is None:
        return ""
    whose = "" if run else " for its standalone script"
    others = [f"its standalone script: about {script:g} GiB"] if run and script else []
    others += [f"the seed's program, one form at a time: about {seed:g} GiB"] if seed else []
    room = f"; about {first:g} GiB of GPU memory at these sizes{whose}" + (f" ({'; '.join(others)})" if others else "")
    gpu = doc.fingerprint.get("gpu")
    total = _gib(gpu.get("memory_total_bytes")) if isinstance(gpu, Mapping) else None
    if total is not None and first * 2**30 > total:
        # The run's need grows with its tensors: about how many fit 90% of this GPU's memory (the rest is the CUDA
        # context's and other processes'; the harness checks the free memory), where the run's own need is known.
        n = (doc.repro.params or {}).get("n_tensors")
        fit = int(n * 0.9 * total / (run * 2**30)) if run and isinstance(n, int) and n > 0 else None
        about = f" (about {fit} of its {n} tensors fit in 90% of it)" if fit else ""
        room += f", more than this GPU's {total / 2**30:.1f} GiB{about}: `--set n_tensors=...` or a larger GPU"
    return room


# nvcc flags as the twin records them (-O3 -arch=sm_90): shown only in this shape.
_FLAGS = re.compile(r"(?:-[A-Za-z0-9]+(?:=[a-z0-9_]+)?)(?: -[A-Za-z0-9]+(?:=[a-z0-9_]+)?){0,5}")
_TORCH = re.compile(r"[0-9]+\.[0-9]+(?:\.[0-9]+)?(?:[a-z0-9.]*)?(?:\+[a-z0-9.]+)?")
_CUDA = re.compile(r"([0-9]+)\.([0-9]+)")
# A release version as pip pins it (13.0.3, 12.9.0.post1): the artifact's ``extra`` is open, so only this
# shape is pinned.
_VERSION = re.compile(r"[0-9]+(?:\.[0-9]+){0,3}(?:(?:a|b|rc|\.post|\.dev)[0-9]+)?")


def _torch_line(doc: Artifact) -> tuple[str, str] | None:
    """(pip line, words) for the torch the run recorded: from PyPI when its installed metadata's version
    has no local tag while ``torch.__version__`` has one (PyPI takes no local tags, so that wheel is
    PyPI's), else from PyTorch's index for its CUDA build."""
    version, cuda = doc.machine.torch_version, doc.machine.torch_cuda_built
    if not isinstance(version, str) or not _TORCH.fullmatch(version):
        return None
    m = _CUDA.fullmatch(cuda) if isinstance(cuda, str) else None
    said = doc.machine.torch_install.get("version")
    if isinstance(said, str) and _VERSION.fullmatch(said) and "+" in version and version.split("+", 1)[0] == said:
        # Inferred, not recorded: PyPI takes no local tag, so a build whose metadata has none is PyPI's.
        return shlex.join(["pip", "install", f"torch=={said}"]), (
            f"torch {said} from PyPI ({version} here, PyPI's as inferred: no index recorded, no local tag; "
            "nvidia-* wheels: `packages.txt`)"
        )
    index = f"cu{m.group(1)}{m.group(2)}" if m else "cpu"
    line = shlex.join(
        ["pip", "install", f"torch=={version}", "--index-url", f"https://download.pytorch.org/whl/{index}"]
    )
    return line, f"torch {version} ({f'CUDA {cuda}' if m else 'no CUDA'})"


_STAMP = re.compile(r"(\d{4})-?(\d\d)-?(\d\d)T(\d\d):?(\d\d):?(\d\d)Z")


def _built_when(twin: Mapping[str, object], doc: Artifact) -> str:
    """``; binary built 03:32:34 UTC by this run, before its first repro, ...`` (or before this run, or by this
    repro), from the twin's record and the run id's start time; "" where either is missing."""
    mtime = twin.get("binary_mtime_utc")
    stamp = _STAMP.match(str(mtime or ""))
    start = _STAMP.match(doc.run.run_id or "")
    if stamp is None or start is None:
        return ""
    when = "by this run, before its first repro" if stamp.groups() >= start.groups() else "before this run"
    if twin.get("binary_cached") is False:
        when = "by this repro"
    return (
        f"; built {stamp[4]}:{stamp[5]}:{stamp[6]} UTC {when}, cached by the source's sha256, nvcc's version, "
        "arch and flags"
    )


def _needs(doc: Artifact, lean: bool = False) -> tuple[list[str], list[str]]:
    """(pip lines, words) for what a repro's variants used beyond torch, as its artifact records it:
    cuda-bindings (``extra.memset_via``; pinned to ``extra.cuda_bindings`` where recorded, else the major
    version of torch's CUDA) and nvcc for a pure CUDA twin (``extra.twin.nvcc``; when its binary was
    built, but ``lean``)."""
    extra = doc.extra  # the repro's own record: the schema leaves it open
    rid = text(doc.repro.id)
    lines, words = [], []
    cuda = doc.machine.torch_cuda_built
    m = _CUDA.fullmatch(cuda) if isinstance(cuda, str) else None
    if str(extra.get("memset_via") or "").startswith("cuda.bindings"):
        ran = extra.get("cuda_bindings")
        if isinstance(ran, str) and _VERSION.fullmatch(ran):
            pin = f"cuda-bindings=={ran}"
        else:
            pin = f"cuda-bindings=={m.group(1)}.*" if m else "cuda-bindings"
        lines.append(shlex.join(["pip", "install", pin]))
        words.append(f"cuda-bindings ({rid}'s torch-graph memset variants; without it they are skipped)")
    twin = extra.get("twin")
    twin = twin if isinstance(twin, Mapping) else {}
    said = twin.get("nvcc")
    if isinstance(said, str):
        nvcc = text(said.removeprefix("Build "))
        flags = twin.get("nvcc_flags")
        built = f", {code(flags)}" if isinstance(flags, str) and _FLAGS.fullmatch(flags) else ""
        path = twin.get("nvcc_path")
        at = f" at {code(path)}" if isinstance(path, str) and path else ""
        when = "" if lean else _built_when(twin, doc)
        words.append(f"nvcc on PATH ({rid}'s pure CUDA twin; this run's{at}: {nvcc}{built}{when})")
    return lines, words


def python_env_words(docs: Sequence[Artifact]) -> str:
    """`` This run's Python: ...``: the interpreter, its package folders in import order and how the
    harness was installed, where every artifact recorded the same (fingerprint ``host.python_env``)."""
    seen = {
        (str(env.get("executable")), tuple(map(str, env.get("package_folders") or ())), str(env.get("harness_install")))
        for d in docs
        for env in [d.machine.host.python_env]
        if env.get("executable")
    }
    if len(seen) != 1:
        return ""
    exe, folders, install = next(iter(seen))
    python = next((d.machine.host.python for d in docs if d.machine.host.python), None)
    where = f"; packages: {' then '.join(code(f) for f in folders)}" if folders else ""
    return f" This run's Python: {text(python or '?')} ({code(exe)}{where}); harness: {text(install)}."


# The wheel's optional dependencies that ``repro report`` draws plots with (pyproject.toml's extra).
PLOTS_EXTRA = "plots"


# A recorded command the report repeats: `repro all` or `repro run` with plain words (options, ids,
# paths, numbers); anything else an artifact says it ran is not shown as a command to copy.
_PLAIN_WORD = re.compile(r"[A-Za-z0-9_./=,:+@-]+")


def _plain_command(argv: Sequence[str]) -> bool:
    if len(argv) < 2 or Path(argv[0]).name != "repro" or argv[1] not in ("all", "run"):
        return False
    return all(_PLAIN_WORD.fullmatch(w) and "://" not in w for w in argv)


def _run_command(docs: Sequence[Artifact]) -> str | None:
    """The command that made the run, as recorded (the whole batch at once, when it was `repro all`); None where
    the docs record none, or several."""
    ran = sorted({shlex.join(d.run.command) for d in docs if _plain_command(d.run.command)})
    return ran[0] if len(ran) == 1 else None


def _has_packages(docs: Sequence[Artifact]) -> bool:
    return any(d.machine.packages_sha256 for d in docs)


def lean_parts(docs: Sequence[Artifact]) -> list[str]:
    """What a lean re-run paragraph (``install_block``'s ``lean``) leaves out of the run's, in the Left-out note's
    words: the command, where one was recorded; the Python line, where there is one; the package list, where the
    run recorded one."""
    return [
        *(["command"] if _run_command(docs) else []),
        *(["Python"] if python_env_words(docs) else []),
        *(["packages"] if _has_packages(docs) else []),
    ]


def install_block(docs: Sequence[Artifact], reran: str = "", lean: bool = False) -> str | None:
    """What to install before the sections' ``repro run`` lines, once for the report: torch as
    recorded, what a repro's variants needed beyond it, then the bundled harness (or, for a run
    made before harness digests, its version and commit as a comment); where to run it from, and
    what ``repro report`` needs besides to draw the plots. ``reran``: what was run from the bundle
    (``repro.evidence.reruns.words``). ``lean``: without the run's command, Python and package list, which
    the bundle's whole report and ``packages.txt`` hold, and without when a twin's binary was built."""
    lines: list[str] = []
    words: list[str] = []
    wheels: dict[str, str] = {}  # run id -> the harness wheel's path from the folder above the run's
    for doc in docs:
        got = _torch_line(doc)
        if got and got[0] not in lines:
            lines.append(got[0])
            words.append(got[1])
    for doc in docs:
        more, said = _needs(doc, lean)
        lines += [x for x in more if x not in lines]
        words += [w for w in said if w not in words]
    for doc in docs:
        r = rerun(doc)
        harness = r.install() or (f"# {r.predates()}" if r.predates() else None)
        if r.run_id and (wheel := r.harness.wheel()):
            # With its plots extra: `repro report` draws plots only with matplotlib.
            wheels.setdefault(r.run_id, f"./{r.run_id}/harness/{wheel}")
            harness = shlex.join(["pip", "install", f"./{r.run_id}/harness/{wheel}[{PLOTS_EXTRA}]"])
        if harness and harness not in lines:
            lines.append(harness)
    if not lines:
        return None
    # The wheel paths start at the unpacked run folder, so the lines run from the folder that holds it.
    where = (
        f"from the folder holding the unpacked {', '.join(code(f'{rid}/') for rid in wheels)}"
        if wheels
        else "in the folder the bundle unpacks to"
    )
    plots = (
        f"The `{PLOTS_EXTRA}` extra: matplotlib, for `repro report`'s plots."
        if wheels
        else "`repro report RUN_DIR --out FILE` draws plots only with matplotlib "
        f"(the harness's `{PLOTS_EXTRA}` extra)."
    )
    whole = f" This run: {code(ran)}" if (ran := _run_command(docs)) else ""
    if whole and any(d.run.command[1:2] == ("all",) for d in docs):
        whole += " (back to back, ceilings timed once)"
    if whole:
        # What a reader re-running one repro should expect of it against this run.
        whole += ". A lone `repro run` lands in the re-run column's spread, not this CI; `repro compare` of the two"
        whole += " `ID.json` says which."
    whole += python_env_words(docs)
    if _has_packages(docs):
        whole += " Every package installed where this run ran: the bundle's `packages.txt`."
    if lean:  # the Left-out note names the command, Python and packages, and the plots extra speaks for itself
        whole, plots = "", ""
    whole += reran
    return (
        f"**Re-run**, {where}: besides the bundled harness, install "
        f"{'; '.join(words) or 'the torch this run used'}; then each section's `repro run` line "
        f"(this run's params: the defaults but for any `--set`).{whole}\n"
        + fence("\n".join(lines), "bash")
        + (f"\n{plots}\n" if plots else "\n")
    )


def band_notes(docs: Sequence[Artifact], bands: Sequence[band.Band], history: bool = False) -> str:
    """One line under the summary: per band, which arm of the headline moved on its farthest GPUs (outlier_arms),
    and each run whose repro module file ran in none of its runs (``history``: harness-history.txt marks files)."""
    said: dict[str, list[str]] = {}  # per band, however many of the docs fall in it
    runs = len({d.run.run_id for d in docs})
    for doc in docs:
        b = band.lookup(doc, bands) if doc.verdict.status in MEASURED and doc.verdict.value is not None else None
        if b is None:
            continue
        key = f"{b.repro} {b.gpu} {b.params} {b.headline}"
        if key not in said:  # each band's runs read once
            moved = band_runs.outlier_arms(b)
            why = text(f"{doc.repro.id}'s band: {moved}; why is not known")
            said[key] = [f"{why} (`band-runs.json`)"] if moved else []
        ours, known = b.same_source(doc.repro.source_sha256 or "")
        if known and doc.repro.source_sha256 and not ours:
            of = f" in run {doc.run.run_id}" if runs > 1 else ""
            where = " (attached/harness-history.txt marks the commits that changed it)" if history else ""
            said[key].append(text(f"{doc.repro.id}'s module file{of} ran in none of its band's {known} runs{where}"))
    notes = [n for parts in said.values() for n in parts]
    return f"_{'; '.join(notes)}._" if notes else ""
