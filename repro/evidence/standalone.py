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
import math
import re
import shlex
import string
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from repro import __version__
from repro.core.context import SamplingConfig
from repro.core.errors import UsageError
from repro.core.results import Comparison
from repro.core.verdict import headline_candidates
from repro.evidence import model
from repro.evidence.model import Artifact

__all__ = [
    "CPU_ENV",
    "PRELUDE",
    "Harness",
    "rendered_by",
    "Rerun",
    "build",
    "comparison_filter",
    "harness_of",
    "heredoc",
    "is_python",
    "parse_output",
    "py_assign",
    "ratio_definition",
    "rerun",
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


# What the re-run lines take from an artifact, each checked here against the schema's own patterns
# (a report may be rendered from a document that was never validated): nothing else reaches a command.
_VERSION = re.compile(r"[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?(\+[a-z0-9]+(\.[a-z0-9]+)*)?")
_COMMIT = re.compile(r"[0-9a-f]{7,40}(-dirty)?")
_DIGEST = re.compile(r"[0-9a-f]{64}")
_REPRO_ID = re.compile(r"[a-z0-9][a-z0-9-]*")
_RUN_ID = re.compile(r"[0-9]{8}T[0-9]{6}Z-[0-9a-f]{4,}")
_PARAM = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A param value goes on a command line: printable ASCII, no comma inside a list item, not too long.
_VALUE = re.compile(r"[ -~]{0,200}")
_GIT_STATES = {"clean", "dirty", "not_a_checkout", "declared"}
# Why no commit is named (``repro.env.harness.git_identity``): the source digest is then the identity.
_NO_COMMIT = {
    "dirty": "no commit (the source differed from its checkout's HEAD)",
    "not_a_checkout": "no commit (not run from a git checkout)",
    "clean": "commit unknown",
}


def _checked(pattern: re.Pattern[str], value: Any) -> str | None:
    return value if isinstance(value, str) and pattern.fullmatch(value) else None


def _value(v: Any) -> str | None:
    """A param value as ``--set`` parses it back (``repro.core.spec.build_params``), or None."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else None
    if isinstance(v, str):
        return v if _VALUE.fullmatch(v) else None
    if isinstance(v, list) and v:
        items = [_value(x) if not isinstance(x, list) else None for x in v]
        if any(i is None or "," in i or not i.strip() for i in items):
            return None
        return ",".join(str(i) for i in items)
    return None


@dataclass(frozen=True)
class Harness:
    """The harness that made an artifact, from validated fields only."""

    version: str | None
    digest: str | None  # source_sha256: the wheel in the bundle is named from it
    commit: str | None
    git_state: str | None

    def wheel(self) -> str | None:
        """The wheel a bundle carries for this harness (``repro.evidence.wheel.file_name``)."""
        if not self.digest:
            return None
        from repro.evidence import wheel  # here: repros import this module for ``build`` alone

        name = wheel.file_name(self.digest)
        if self.version and "+" not in self.version and self.version != __version__:
            # Made by another release than the one rendering: its wheel carries its own version.
            name = f"{wheel.DIST}-{self.version}+src.{self.digest[:12]}-py3-none-any.whl"
        return name

    def words(self, listed: str | None = None) -> str:
        """``gpu-repro 0.1.0, source 1a2b3c4d5e6f, commit 680f57eaec77`` (or why there is none).

        ``listed``: the commit an attached harness history gives for this digest, said where no commit was recorded.
        """
        parts = [f"gpu-repro {self.version or 'unknown version'}"]
        parts.append(f"source {self.digest[:12]}" if self.digest else "no source digest recorded")
        if self.commit:
            declared = " (declared by the image)" if self.git_state == "declared" else ""
            parts.append(f"commit {self.commit[:12]}{declared}")
        else:
            parts.append(_NO_COMMIT.get(self.git_state or "", "commit unknown"))
            if listed:
                history = "attached/harness-history.txt: the newest it lists with this digest"
                parts.append(f"the package of commit {listed[:12]} ({history})")
        return ", ".join(parts)


def harness_of(doc: Artifact | Mapping[str, Any]) -> Harness:
    """The artifact's ``fingerprint.harness``, each field kept only when it matches its schema pattern."""
    h = model.run_of(doc).machine.harness
    state = h.git_state
    return Harness(
        version=_checked(_VERSION, h.version),
        digest=_checked(_DIGEST, h.source_sha256),
        commit=_checked(_COMMIT, h.git_commit),
        git_state=state if isinstance(state, str) and state in _GIT_STATES else None,
    )


@dataclass(frozen=True)
class Rerun:
    """How to run an artifact's repro again with the harness that made it.

    ``args``: ``repro run ID --set k=v ...`` rebuilt from ``repro.id`` and ``repro.params`` (never
    the artifact's ``run.rerun`` or ``run.command``: a crafted artifact could put any shell there);
    None, with ``why_not``, when a field is not what a command can carry. Where the artifact records
    its re-run command and its harness has a wheel to bundle, only the params that command set are
    given (the rest are the bundled harness's defaults, the same source as the run's); the values still
    come from ``repro.params``.
    """

    args: tuple[str, ...] | None
    why_not: str | None
    harness: Harness
    run_id: str | None

    def install(self) -> str | None:
        """``pip install ./<run-id>/harness/<wheel>``: the wheel a bundle of this run carries."""
        wheel = self.harness.wheel()
        if not wheel or not self.run_id:
            return None
        return shlex.join(["pip", "install", f"./{self.run_id}/harness/{wheel}"])

    def command(self) -> str | None:
        return shlex.join(self.args) if self.args else None

    def script_command(self) -> str | None:
        """``repro script ID --set ...``: the standalone script for the same params."""
        return shlex.join(["repro", "script", *self.args[2:]]) if self.args else None

    def lines(self) -> list[str]:
        """Shell lines, one command each (no line holds a newline: every word went through shlex)."""
        return [c for c in (self.install(), self.command()) if c]

    def predates(self) -> str | None:
        """For a run made before harness digests, what identifies its harness instead of a wheel."""
        if self.harness.digest:
            return None
        commit = self.harness.commit or "unknown"
        return f"this run predates harness digests: harness {self.harness.version or 'unknown'}, commit {commit}"


def rerun(doc: Artifact | Mapping[str, Any]) -> Rerun:
    """The re-run of ``doc`` from its validated fields (see ``Rerun``)."""
    a = model.run_of(doc)
    harness = harness_of(a)
    run_id = _checked(_RUN_ID, a.run.run_id)
    rid = _checked(_REPRO_ID, a.repro.id)
    if rid is None:
        return Rerun(None, "the artifact's repro id is not one a command can carry", harness, run_id)
    args = ["repro", "run", rid]
    # Only a bundled wheel has the run's defaults; without one (a run before harness digests) every param is given.
    chosen = set_keys(a.run.rerun) if harness.wheel() and run_id else None
    for key, value in a.repro.params.items():
        if chosen is not None and key not in chosen:
            continue  # the harness's default, which the bundled wheel has too
        shown = _value(value)
        if not isinstance(key, str) or not _PARAM.fullmatch(key) or shown is None:
            why = "a param in the artifact is not one a command can carry (see repro.params)"
            return Rerun(None, why, harness, run_id)
        args += ["--set", f"{key}={shown}"]
    if a.run.smoke:
        args.append("--smoke")
    return Rerun(tuple(args), None, harness, run_id)


def set_keys(recorded: str | None) -> set[str] | None:
    """The param names a recorded ``repro run ID --set k=v ...`` command set; None when none is recorded
    or it does not parse (then every param is given). Only the names are read from it."""
    if not recorded:
        return None
    try:
        words = shlex.split(recorded)
    except ValueError:
        return None
    if words[:2] != ["repro", "run"]:
        return None
    return {w.split("=", 1)[0] for prev, w in zip(words, words[1:], strict=False) if prev == "--set" and "=" in w}


def comparison_filter(comparisons: Sequence[Comparison], only: str | None, repro_id: str) -> list[Comparison]:
    """The comparisons a script covers: the headline candidates, or the one ``only`` names."""
    if only is None:
        return headline_candidates(comparisons)
    names = [c.name for c in comparisons]
    if only not in names:
        raise UsageError(f"--comparison {only!r} for {repro_id}: expected one of {', '.join(names)}")
    return [c for c in comparisons if c.name == only]


_OWN: dict[object, str] = {}


def _own_source() -> str:
    """This installation's digest, read once per process (per digest function: a test may stand another in)."""
    from repro.env import harness

    fn = harness.source_sha256
    if fn not in _OWN:
        _OWN[fn] = fn()
    return _OWN[fn]


def rendered_by(docs: Sequence[Artifact]) -> str | None:
    """A note where a run recorded a harness digest that is not this installation's: its words are this harness's,
    so they can differ from the run's own reports (report.md, and report-full.md where the bundle has one), as can
    the band data it ships (``band.without`` keeps the run itself out of it); None
    where every recorded digest is this one's."""
    if not any((d := harness_of(doc).digest) and d != _own_source() for doc in docs):
        return None
    return (
        "_Rendered by another harness than the run's: words, checks and band data can differ from the bundle's "
        "reports, not the run's own numbers._"
    )
