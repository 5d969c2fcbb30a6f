"""Standalone reproducers: a plain-torch script per repro that a maintainer runs without gpu-repro.

A repro declares its script with ``Repro.script(params, only)``, returning the body that
builds its inputs and calls ``compare(...)`` once per ratio; ``build`` wraps that body in
the same prelude every script shares: the versions and GPU it runs on (and a refusal to run
on CPU unless asked), the timing helper (CUDA events on a GPU, perf_counter on CPU),
interleaved rounds so drift hits both sides alike, one line defining the ratio, and the
lines it prints (both medians and their paired ratio). A repro whose headline is not torch
(graph-memset's pure CUDA twin) writes its own shell script; ``heredoc`` embeds files in it.
Nothing here imports torch: the text is generated. Finding a repro's script by id reads the
plugin registry, so it lives in ``repro.run.scripts``.
"""

from __future__ import annotations

import json
import re
import shlex
import string
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from repro.core.context import SamplingConfig
from repro.core.errors import UsageError
from repro.core.results import Comparison
from repro.core.verdict import headline_candidates

__all__ = [
    "CPU_ENV",
    "PRELUDE",
    "build",
    "comparison_filter",
    "harness_lines",
    "heredoc",
    "is_python",
    "parse_output",
    "py_assign",
    "ratio_definition",
    "string_lines",
    "wrap_comment",
]

# Rounds of (A, B) then (B, A); each sample is a batch of calls lasting about SAMPLE_S, so
# the event overhead (a few us) is noise even for microsecond ops. 21 rounds is the
# harness's floor (SamplingConfig.min_rounds, 20) made odd so the median is one round's.
ROUNDS = 21
SAMPLE_S = 0.02
# A round's value of each side is the median of this many samples, as in the harness's
# paired rounds (one slow sample cannot move a round).
SAMPLES_PER_ROUND = SamplingConfig().samples_per_round
# Set to 1, the environment allows a run on CPU as --cpu does (for CI that cannot pass flags).
CPU_ENV = "GPU_REPRO_SCRIPT_CPU"
LINE = 120  # the project's line length (pyproject's ruff config); generated files keep to it

# string.Template, not str.format: the prelude is Python full of braces. $-names are filled in.
PRELUDE = string.Template("""\
ROUNDS, PER_ROUND, SAMPLE_S = $rounds, $per_round, $sample_s
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
GPU = torch.cuda.get_device_name() if DEVICE == "cuda" else "no CUDA GPU"
print(f"torch {torch.__version__} | torch.version.cuda {torch.version.cuda} | GPU: {GPU}")
if DEVICE == "cpu" and "--cpu" not in sys.argv[1:] and os.environ.get("$cpu_env") != "1":
    why = "no CUDA GPU: a CPU run is not evidence about a GPU"
    print(f"{why}; pass --cpu (or $cpu_env=1) to run anyway", file=sys.stderr)
    sys.exit(2)
if DEVICE == "cpu":
    print("WARNING: running on CPU (--cpu): CPU times, not evidence about a GPU")
print(
$definition
)


def per_call(fn, calls):  # seconds per call: CUDA events on a GPU, perf_counter on CPU
    if DEVICE == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / calls
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def compare(label, name_a, fn_a, name_b, fn_b, scale=1.0):  # A and B in the same rounds, order alternating
    for fn in (fn_a, fn_b) * 3:  # warm-up
        fn()
    calls = max(1, int(SAMPLE_S / max(per_call(fn_a, 1), per_call(fn_b, 1), 1e-7)))
    a, b = [], []
    for i in range(ROUNDS):
        for fn, out in ((fn_a, a), (fn_b, b))[:: 1 - 2 * (i % 2)]:
            fn()  # untimed, as in the harness
            if DEVICE == "cuda":
                torch.cuda.synchronize()
            out.append(statistics.median(per_call(fn, calls) for _ in range(PER_ROUND)))
    ratio = statistics.median(x / y * scale for x, y in zip(a, b, strict=True))
    for name, xs in ((name_a, a), (name_b, b)):
        print(f"[{label}] t({name}) = {statistics.median(xs) * 1e3:.6g} ms (median of per-call times, {ROUNDS} rounds)")
    plain = statistics.median(a) / statistics.median(b) * scale
    scaled = f" x {scale:.6g}" if scale != 1 else ""
    print(f"[{label}] ratio t({name_a})/t({name_b}){scaled} = {ratio:.4f} (paired; medians give {plain:.4f})")
    return ratio
""")


def ratio_definition(rounds: int | str, round_value: str, note: str | None = None, *, scaled: bool = True) -> str:
    """The one line every script prints to define its ratio: the harness's paired estimator.

    ``rounds``: how many rounds (a number, or a placeholder filled in at run time);
    ``round_value``: what one side's time in one round is; ``note``: how this script's times
    differ from what the harness's headline times, if they do; ``scaled``: some ratio carries a scale.
    """
    scale = " x scale" if scaled else ""
    text = (
        f"ratio = median over {rounds} rounds of t(A)/t(B){scale} per round (paired; {round_value}), "
        "as gpu-repro's verdict takes it; median t(A)/median t(B) can differ"
    )
    return text + (f". {note}" if note else "")


def wrap_comment(text: str, prefix: str = "# ", width: int = LINE) -> list[str]:
    """``text`` as comment lines of at most ``width`` characters."""
    return [prefix + ln for ln in textwrap.wrap(text, width - len(prefix), break_on_hyphens=False)] or [prefix.rstrip()]


def _shown(params: Any) -> str:
    from repro.core.spec import params_to_dict

    values = dict(params) if isinstance(params, Mapping) else params_to_dict(params)
    return json.dumps(values, sort_keys=True)


def build(
    repro_id: str,
    title: str,
    params: Any,
    body: str,
    *,
    needs: str = "torch",
    imports: Sequence[str] = (),
    extra_imports: Sequence[str] = (),
    notes: Sequence[str] = (),
    ratio_note: str | None = None,
) -> str:
    """The whole script: a header naming the repro and its exact params (a params dataclass or a
    mapping), the prelude, then ``body``.

    ``imports``: standard-library modules the body uses beyond the prelude's; ``extra_imports``:
    whole import lines placed after ``import torch`` (e.g. ``import torch.nn.functional as F``).
    Every import sits at the top, so the script passes the project's ruff config. ``notes``:
    paragraphs for the header (what the script needs beyond torch, how it sizes itself);
    ``ratio_note``: how the times differ from the harness's headline, printed with the definition.
    """
    header_lines = [
        *_fill(f"gpu-repro `{repro_id}`, standalone: {title}. Params: {_shown(params)}"),
        *[ln for note in notes for ln in ("", *_fill(note))],
        "",
        *_fill(f"Needs only {needs}. Run: python THIS_FILE.py (without a CUDA GPU it exits 2 unless given --cpu)."),
    ]
    stdlib = sorted({"os", "statistics", "sys", "time", *imports})
    import_lines = [f"import {m}" for m in stdlib] + ["", "import torch", *sorted(extra_imports)]
    definition = ratio_definition(
        ROUNDS,
        f"a round's t is the median of {SAMPLES_PER_ROUND} timed batches of ~{SAMPLE_S * 1e3:g} ms",
        ratio_note,
    )
    prelude = PRELUDE.substitute(
        rounds=ROUNDS,
        per_round=SAMPLES_PER_ROUND,
        sample_s=SAMPLE_S,
        cpu_env=CPU_ENV,
        definition=string_lines(definition, indent=4),
    )
    doc = '"""' + "\n".join(header_lines) + '\n"""\n\n'
    return doc + "\n".join(import_lines) + "\n\n" + prelude + "\n\n" + textwrap.dedent(body).strip() + "\n"


def _fill(text: str) -> list[str]:
    return textwrap.wrap(text, LINE - 4, break_on_hyphens=False) or [""]


def string_lines(text: str, indent: int) -> str:
    """``text`` as adjacent string literals, one per line, each line within LINE (for a call's parentheses)."""
    width = LINE - indent - 4  # quotes, and room for repr's escapes
    parts = textwrap.wrap(text, width, drop_whitespace=False, break_on_hyphens=False)
    pad = " " * indent
    return "\n".join(f"{pad}{p!r}" for p in parts)


def py_assign(name: str, values: Sequence[Any], body_indent: int = 8) -> str:
    """``NAME = [...]`` for a script body written at ``body_indent`` spaces and dedented by ``build``:
    on one line where it fits the project's line length, else one element a line."""
    one = f"{name} = {list(values)!r}"
    if len(one) <= LINE:
        return one
    pad = " " * body_indent
    return f"{name} = [\n" + "".join(f"{pad}    {v!r},\n" for v in values) + f"{pad}]"


def heredoc(path: str, text: str, delimiter: str) -> str:
    """A bash line that writes ``text`` verbatim to ``path`` (a quoted heredoc: no expansion).

    A line of ``text`` equal to the delimiter would end the heredoc early; that is a ValueError.
    """
    if not re.fullmatch(r"[A-Z][A-Z0-9_]*", delimiter):
        raise ValueError(f"heredoc delimiter {delimiter!r}: expected upper-case letters, digits and _")
    if delimiter in text.splitlines():
        raise ValueError(f"heredoc delimiter {delimiter!r} occurs as a line of the text for {path}")
    body = text if text.endswith("\n") else text + "\n"
    return f"cat > {shlex.quote(path)} <<'{delimiter}'\n{body}{delimiter}\n"


def is_python(script: str) -> bool:
    """Whether a generated script is Python (the shell scripts start with a #! line)."""
    return not script.startswith("#!")


_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}


def parse_output(text: str) -> dict[str, dict[str, float]]:
    """The ratios and times a script printed: ``{label: {"ratio": r, "t(A)": s, ...}}`` (seconds)."""
    out: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        if not line.startswith("[") or "] " not in line or " = " not in line:
            continue
        label, rest = line[1:].split("] ", 1)
        key, value = rest.rsplit(" = ", 1)
        words = value.split()
        number = float(words[0])
        row = out.setdefault(label, {})
        if key.startswith("ratio"):
            row["ratio"] = number
        else:
            unit = words[1] if len(words) > 1 and words[1] in _UNITS else "ms"
            row[key] = number * _UNITS[unit]
    return out


def harness_lines(commit: str | None, version: str | None, rerun: str | None) -> list[str]:
    """Shell lines that rebuild the harness that made an artifact and rerun it.

    The commit comes from the artifact's fingerprint (``harness.git_commit``); without it the
    version is all there is to pin.
    """
    url = "https://github.com/<org>/gpu-repro"  # the clone you got gpu-repro from
    lines = []
    if commit:
        lines += [
            f"git clone {url}.git gpu-repro && cd gpu-repro && git checkout {shlex.quote(commit)}",
            "pip install -e .  # uses the torch already installed; it never installs one",
        ]
    else:
        lines += [f"pip install 'gpu-repro=={version or '?'}'  # no git commit was recorded"]
    if rerun:
        lines.append(rerun)
    return lines


def comparison_filter(comparisons: Sequence[Comparison], only: str | None, repro_id: str) -> list[Comparison]:
    """The comparisons a script covers: the headline candidates, or the one ``only`` names."""
    if only is None:
        return headline_candidates(comparisons)
    names = [c.name for c in comparisons]
    if only not in names:
        raise UsageError(f"--comparison {only!r} for {repro_id}: expected one of {', '.join(names)}")
    return [c for c in comparisons if c.name == only]
