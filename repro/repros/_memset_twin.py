"""graph-memset's pure CUDA twin: the source, its output read into variants, its arguments, and
the standalone bash script that builds and runs it (``repro script graph-memset``)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from repro.api import Comparison, SamplingConfig, Timing, VariantResult, Work, achieved, standalone, stats
from repro.repros._twin import _NO_NATIVE_GPU, TwinBuild, TwinRun, TwinRunError


class TwinParams(Protocol):
    """The repro params the twin's command line is made of."""

    @property
    def ops(self) -> int: ...
    @property
    def twin_replays(self) -> int: ...
    @property
    def twin_rounds(self) -> int: ...
    @property
    def twin_warmup(self) -> int: ...
    @property
    def twin_work_iters(self) -> int: ...
    @property
    def twin_episodes(self) -> int: ...
    @property
    def twin_work_replays(self) -> int: ...


TWIN_SOURCE = Path(__file__).resolve().parent / "csrc" / "graph_memset.cu"

# (twin variant, label); the twin prints samples under these names. A binary built from an
# earlier csrc/graph_memset.cu prints no seed_* samples: those variants are then left out.
OPTIONAL_TWIN_VARIANTS = frozenset({"seed_memset", "seed_fill"})
TWIN_VARIANTS: tuple[tuple[str, str], ...] = (
    ("memset", "twin: cudaMemsetAsync (4 B) node"),
    ("fill", "twin: fill kernel node"),
    ("work_only", "twin: work kernel only"),
    ("memset_work", "twin: cudaMemsetAsync + work kernel"),
    ("fill_work", "twin: fill kernel + work kernel"),
    ("seed_memset", "seed's program: cudaMemsetAsync (4 B) nodes, one replay, host clock"),
    ("seed_fill", "seed's program: zero_out<<<1,1>>> nodes, one replay, host clock"),
)

# (variant, op, with the matmul) on the torch side; op None is "nothing".
# --------------------------------------------------------------------------- its output


def parse_twin_output(text: str, expected: Sequence[str] | None = None) -> dict[str, Any]:
    """The twin's one JSON object, checked: every variant a non-empty list of positive seconds.

    ``expected``: the variants asked for with --variants (default: all but the optional ones);
    each must have samples, and any other variant printed is checked too."""
    try:
        doc = json.loads(text.strip())
    except json.JSONDecodeError as exc:
        msg = f"twin output is not one JSON object ({exc.msg} at char {exc.pos}): {text[:200]!r}"
        raise ValueError(msg) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("variants"), dict):
        got = sorted(doc) if isinstance(doc, dict) else type(doc).__name__
        raise ValueError(f"twin output lacks a 'variants' object; got {got}")
    if not isinstance(doc.get("ops"), int) or doc["ops"] < 1:
        raise ValueError(f"twin output 'ops' must be a positive integer; got {doc.get('ops')!r}")
    required = set(expected) if expected is not None else {n for n, _ in TWIN_VARIANTS} - OPTIONAL_TWIN_VARIANTS
    for name, _ in TWIN_VARIANTS:
        samples = doc["variants"].get(name)
        if samples is None and name not in required:
            continue
        if not isinstance(samples, list) or not samples:
            raise ValueError(f"twin output has no samples for variant {name!r}")
        if not all(isinstance(x, int | float) and math.isfinite(x) and x > 0 for x in samples):
            raise ValueError(f"twin output variant {name!r} has a sample that is not a positive number")
    return doc


# Each op of either kind writes one 4-byte int; a memset or fill is latency-bound, so its
# share of the copy ceiling is tiny, which is the point: it is not moving data.
OP_BYTES = 4.0


def twin_work(name: str, work_n: int, work_iters: int) -> Work:
    """Work of one twin op: 4 bytes per memset/fill; the work kernel does one FMA (2 FLOPs)
    per element and iteration, reading and writing each float once."""
    op_bytes = OP_BYTES if name != "work_only" else 0.0
    if "work" not in name:
        return Work(bytes=op_bytes, ceiling="copy")
    return Work(flops=2.0 * work_n * work_iters, bytes=8.0 * work_n + op_bytes, ceiling="fp32")


def twin_warmup_replays(doc: Mapping[str, Any], name: str) -> int:
    """Untimed replays of a twin variant per warm-up: the work-kernel variants print their own
    count (``work_warmup``, a share of ``warmup``), the others ``warmup``."""
    if "work" in name and "work_warmup" in doc:
        return int(doc["work_warmup"])
    return int(doc.get("warmup", 0))


def twin_variants(
    doc: Mapping[str, Any],
    build: TwinBuild,
    target_rel_ci: float,
    budget_s: float,
    ceilings: Mapping[str, Any] | None = None,
) -> list[VariantResult]:
    """One 'external'-timed variant per twin variant, from the parsed output.

    elapsed_s is the GPU time of the variant's timed replays (samples x ops): the twin
    interleaves its variants, so the wall time of the whole run belongs to none of them.
    """
    out = []
    ops = int(doc["ops"])
    for name, label in TWIN_VARIANTS:
        if name not in doc["variants"]:
            continue  # not asked for, or an optional variant this binary does not print
        samples = [float(x) for x in doc["variants"][name]]
        per_round = twin_per_round(doc, name)
        # The twin times its variants in interleaved rounds of per_round replays each; the
        # median of each round's replays is that round's value, paired across variants.
        rounds = _rounds(samples, per_round) if per_round > 0 else None
        episode = (int(doc.get("episode_rounds") or 0) or None) if rounds else None
        # A variant's median and CI are over its rounds, the CI widened over the episodes' medians,
        # as the paired ratio's is: replays within a round share the GPU's state, so they are not
        # independent samples, and the spread that matters is between rounds and episodes.
        st = stats.summarize_rounds(rounds, episode) if rounds else stats.summarize(samples)
        warnings = []
        if st.rel_ci_halfwidth > target_rel_ci:
            over = f"{len(samples)} twin replays in {st.n} rounds" if rounds else f"{len(samples)} twin replays"
            warnings.append(
                f"median CI half-width {st.rel_ci_halfwidth:.2%} is above the {target_rel_ci:.2%} target over {over}"
            )
        work = twin_work(name, int(doc.get("work_n") or 0), int(doc.get("work_iters") or 0))
        timing = Timing(
            method="external",
            unit="s",
            calls_per_sample=ops,
            warmup_calls=twin_warmup_replays(doc, name) * ops,
            stop_reason="external",
            target_rel_ci=target_rel_ci,
            budget_s=budget_s,
            elapsed_s=sum(samples) * ops,
            stats=st,
            samples=tuple(samples),
            group="twin" if rounds else None,
            rounds=rounds,
            episode_rounds=episode,
        )
        out.append(
            VariantResult(
                name=f"twin_{name}",
                label=label,
                config={"source": "graph_memset.cu", "ops": ops, "op": name, "work_iters": doc.get("work_iters")},
                status="ok",
                device="cuda",
                timing=timing,
                kernel_source="graph_memset.cu (not profiled)",
                work=work,
                achieved=achieved(work, st.median, ceilings or {}),
                extra={
                    "gpu": doc.get("device"),
                    "compute_capability": doc.get("compute_capability"),
                    "cuda_runtime": doc.get("cuda_runtime"),
                    "cuda_driver": doc.get("cuda_driver"),
                    "arch": build.arch,
                    "binary_cached": build.cached,
                },
                warnings=tuple(warnings),
            )
        )
    return out


# The twin's runs at most, one after another, while its headline's CI is wider than the run asks for.
TWIN_RUNS = 3


def _rounds(samples: Sequence[float], per_round: int) -> tuple[float, ...]:
    """The median of each round of ``per_round`` replays (as ``twin_variants`` cuts them)."""
    return tuple(stats.quantile(sorted(samples[i : i + per_round]), 0.5) for i in range(0, len(samples), per_round))


def headline_halfwidth(doc: Mapping[str, Any]) -> float | None:
    """The relative half-width of the twin headline's paired 95% CI (memset over fill, per round, widened over
    the episodes' medians as the verdict widens it); None where the output has no rounds for the pair."""
    per_round, runs = int(doc.get("per_round") or 0), doc.get("variants") or {}
    if per_round <= 0 or not all(runs.get(n) for n in ("memset", "fill")):
        return None
    memset, fill = (_rounds([float(x) for x in runs[n]], per_round) for n in ("memset", "fill"))
    if len(memset) != len(fill):
        return None
    value, lo, hi = stats.paired_ratio_ci(memset, fill, 0.95, 1.0, int(doc.get("episode_rounds") or 0) or None)
    return stats.rel_halfwidth(value, lo, hi)


def twin_runs(
    once: Callable[[], TwinRun],
    expected: Sequence[str] | None,
    wide_at: float,
    budget_s: float,
    runs: int = TWIN_RUNS,
) -> tuple[float, dict[str, Any]]:
    """Run the twin (``once``), parse its output (``parse_twin_output`` with ``expected``), and run it again, up to
    ``runs`` runs in all, while its headline's CI half-width (``headline_halfwidth``) is over ``wide_at`` and one
    more run as long as the last still ends within ``budget_s`` wall seconds of twin runs: a few extreme episodes
    of one run can hold the widened CI open, and more episodes close it. Each run's replays are appended to the
    last's (its rounds and episodes follow theirs: one run prints whole episodes); ``twin_runs`` counts the runs,
    and the wall seconds are summed."""
    ran = once()
    wall, doc = ran.wall_s, parse_twin_output(ran.stdout, expected)
    n = 1
    # Appended runs keep the rounds and episodes aligned only where every variant printed whole rounds, and its
    # rounds whole episodes.
    episode = int(doc.get("episode_rounds") or 0) or 1
    whole = all(
        not (k := twin_per_round(doc, name)) or (len(v) % k == 0 and len(v) // k % episode == 0)
        for name, v in doc["variants"].items()
    )
    # One more run, as long as the last one, only where it still ends within the budget.
    while whole and n < runs and wall + ran.wall_s <= budget_s and (headline_halfwidth(doc) or 0.0) > wide_at:
        try:
            ran = once()
            more = parse_twin_output(ran.stdout, expected)
        except (TwinRunError, ValueError) as exc:  # the runs so far stand; the artifact says why none followed
            doc = {**doc, "twin_rerun_error": str(exc)[:300]}
            break
        wall += ran.wall_s
        doc = {**doc, "variants": {k: [*v, *more["variants"].get(k, [])] for k, v in doc["variants"].items()}}
        n += 1
    return wall, {**doc, "twin_runs": n}


def twin_per_round(doc: Mapping[str, Any], name: str) -> int:
    """Replays per round of twin variant ``name``: work_per_round for the work-kernel variants
    (--work-replays), else per_round; 0 when the output has no rounds."""
    per_round = int(doc.get("per_round") or 0)
    return int(doc.get("work_per_round") or per_round) if "work" in name else per_round


def twin_args(p: TwinParams, gap_ms: int, variants: Sequence[str] = ()) -> list[str]:
    """The twin's arguments but --device, the same for the harness and the standalone script;
    ``variants`` (twin names) adds --variants, which only a quick run uses."""
    args = [
        "--ops", str(p.ops),
        "--replays", str(p.twin_replays),
        "--rounds", str(p.twin_rounds),
        "--warmup", str(p.twin_warmup),
        "--work-iters", str(p.twin_work_iters),
        "--episodes", str(p.twin_episodes),
        "--gap-ms", str(gap_ms),
        "--work-replays", str(p.twin_work_replays),
    ]  # fmt: skip
    return [*args, "--variants", ",".join(variants)] if variants else args


# --------------------------------------------------------------------------- the standalone script

# Printed names of the twin's variants in the standalone script.
_TWIN_NAMES = {
    "memset": "memset node",
    "fill": "fill kernel <<<1,32>>>",
    "memset_work": "memset + work kernel",
    "fill_work": "fill + work kernel",
    "seed_memset": "memset node, one replay by host clock",
    "seed_fill": "kernel <<<1,1>>>, one replay by host clock",
}
# The twin's per-round ratio, from its JSON, exactly as twin_variants and the verdict pair it:
# a variant's samples are cut into rounds of per_round replays, a round's value is their median,
# and the ratio is the median over rounds of round i's numerator over round i's denominator;
# without rounds the verdict falls back to the ratio of the medians (stats.ratio_ci), and so
# does this. A variant's own median is over its rounds (stats.summarize_rounds), over all its
# replays where the output has no rounds.
TWIN_RATIO_PY = """\
\"\"\"graph-memset's pure CUDA twin: the GPU it ran on and its ratios, from the JSON it printed (stdlib only).\"\"\"

import json
import statistics
import sys

PAIRS = [  # (label, numerator variant, denominator variant, their printed names)
$pairs
]
DEFINITION = (
$definition
)

with open(sys.argv[1]) as f:
    doc = json.load(f)
gpu, cc = doc["device"], doc["compute_capability"]
print(f"GPU: {gpu} (compute capability {cc}) | CUDA runtime {doc['cuda_runtime']}, driver {doc['cuda_driver']}")
per_round = int(doc.get("per_round") or 0)
work_per_round = int(doc.get("work_per_round") or per_round)  # the work-kernel variants' (--work-replays)


def rounds(name, samples):
    k = work_per_round if "work" in name else per_round
    return [statistics.median(samples[i : i + k]) for i in range(0, len(samples), k)]


first = doc["variants"].get(PAIRS[0][1]) or []
print(DEFINITION.format(n=len(rounds(PAIRS[0][1], first)) if per_round else 0, per_round=per_round))
for label, num, den, name_a, name_b in PAIRS:
    a, b = doc["variants"].get(num), doc["variants"].get(den)
    if not a or not b:
        print(f"[{label}] not run: the twin printed no samples for {num if not a else den}")
        continue
    ra, rb = (rounds(num, a), rounds(den, b)) if per_round else ([], [])
    med_a, med_b = statistics.median(ra or a), statistics.median(rb or b)
    over_a = f"{len(a)} replays in {len(ra)} rounds" if ra else f"{len(a)} replays"
    over_b = f"{len(b)} replays in {len(rb)} rounds" if rb else f"{len(b)} replays"
    print(f"[{label}] t({name_a}) = {med_a * 1e6:.6g} us (median over {over_a}, per op)")
    print(f"[{label}] t({name_b}) = {med_b * 1e6:.6g} us (median over {over_b}, per op)")
    if ra and len(ra) == len(rb):
        ratio = statistics.median(x / y for x, y in zip(ra, rb, strict=True))
        how = f"paired: median of the {len(ra)} per-round ratios"
    else:
        ratio, how = med_a / med_b, "unpaired: no rounds in the twin's output, so the ratio of the medians"
    plain = f"the two medians above give {med_a / med_b:.4f}"
    print(f"[{label}] ratio t({name_a})/t({name_b}) = {ratio:.4f} ({how}; {plain})")
"""


def _py_tuple(values: tuple[str, ...]) -> str:
    """One element of a list literal at indent 4: on one line where it fits in 120 characters."""
    line = f"    {values!r},"
    return line if len(line) <= 120 else "    (\n" + "".join(f"        {v!r},\n" for v in values) + "    ),"


def twin_script(p: TwinParams, chosen: Sequence[Comparison], repro_id: str, title: str, torch_form: str) -> str:
    """A bash script that writes csrc/graph_memset.cu verbatim, builds it with one nvcc line (sm_90
    when -arch=native finds no GPU, as _twin.build_twin does), runs it with ``p`` as the harness
    does, and prints the ratios of ``chosen`` with python3's stdlib; ``torch_form`` names the
    comparison that `repro script` gives for the torch-graph form."""
    pairs = []
    for c in chosen:
        num, den = c.num.removeprefix("twin_"), c.den.removeprefix("twin_")
        pairs.append((c.name, num, den, _TWIN_NAMES[num], _TWIN_NAMES[den]))
    definition = standalone.ratio_definition(
        "{n}",
        "a round's t(X) is the median of its {per_round} back-to-back graph replays, per op",
        scaled=False,
    )
    analysis = TWIN_RATIO_PY.replace("$pairs", "\n".join(map(_py_tuple, pairs))).replace(
        "$definition", standalone.string_lines(definition, 4)
    )
    gap_ms = round(SamplingConfig().episode_gap_s * 1000)  # the harness's idle gap between episodes
    args = " ".join(twin_args(p, gap_ms))  # the harness's arguments in a full run (twin_args)
    params = json.dumps(
        {k: getattr(p, k) for k in ("ops", "twin_replays", "twin_rounds", "twin_warmup", "twin_work_iters",
                                    "twin_episodes", "twin_work_replays")} | {"gap_ms": gap_ms},
        sort_keys=True,
    )  # fmt: skip
    header = [
        f"Standalone reproducer for gpu-repro `{repro_id}`: {title}. This is the repro's headline, the pure CUDA "
        "twin: graph_memset.cu below is gpu-repro's repro/repros/csrc/graph_memset.cu, verbatim; no PyTorch.",
        "",
        "Needs only the CUDA toolkit (nvcc), python3's standard library and a CUDA GPU (device 0: set "
        f"CUDA_VISIBLE_DEVICES to pick another). The repro's twin params this script was built with: {params}",
        "",
        f"Generated by `repro script {repro_id}`; run it with `bash THIS_FILE.sh`. It prints nvcc's release and "
        "the GPU first. It builds and runs in a temporary folder, removed at the end unless GPU_REPRO_KEEP=1. "
        f"The torch-graph form of the contrast is `repro script {repro_id} --comparison '{torch_form}'` "
        "(it needs cuda-bindings).",
    ]
    comment = [ln for para in header for ln in standalone.wrap_comment(para)]
    return "\n".join(
        [
            "#!/usr/bin/env bash",
            *comment,
            "set -euo pipefail",
            "",
            "if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then",
            '  PATH="/usr/local/cuda/bin:$PATH"  # where CUDA images put nvcc',
            "fi",
            "for tool in nvcc python3; do",
            '  if ! command -v "$tool" >/dev/null 2>&1; then',
            '    echo "$tool not found on PATH: this script needs the CUDA toolkit and python3" >&2',
            "    exit 2",
            "  fi",
            "done",
            "echo \"nvcc: $(nvcc --version | grep release || echo '(no release line in nvcc --version)')\"",
            'work=$(mktemp -d "${TMPDIR:-/tmp}/graph_memset.XXXXXX")',
            'if [ "${GPU_REPRO_KEEP:-0}" = 1 ]; then echo "files kept in $work"; else trap \'rm -rf "$work"\' EXIT; fi',
            'cd "$work"',
            "",
            standalone.heredoc("graph_memset.cu", TWIN_SOURCE.read_text(), "GRAPH_MEMSET_CU"),
            standalone.heredoc("twin_ratio.py", analysis, "TWIN_RATIO_PY"),
            *standalone.wrap_comment(
                "-arch=native builds for the GPU nvcc sees; with none visible it warns and builds for its default "
                "arch, so sm_90 (Hopper SASS plus PTX that newer GPUs JIT-compile) is the fallback, as in gpu-repro."
            ),
            "if ! nvcc -O3 -arch=native -o graph_memset graph_memset.cu 2>nvcc.log \\",
            f'  || grep -q "{_NO_NATIVE_GPU}" nvcc.log; then',  # no $, backquote or backslash in it
            "  cat nvcc.log >&2",
            '  echo "nvcc -arch=native did not build for a GPU here; falling back to -arch=sm_90" >&2',
            "  rm -f graph_memset",
            "  nvcc -O3 -arch=sm_90 -o graph_memset graph_memset.cu",
            "fi",
            f"if ! ./graph_memset {args} >twin.json; then",
            '  echo "graph_memset failed (its error is above); it needs a CUDA GPU" >&2',
            "  exit 1",
            "fi",
            "python3 twin_ratio.py twin.json",
            "",
        ]
    )
