"""Kernel-name shortening stays linear in the number of names and survives hostile names."""

from __future__ import annotations

import os
import subprocess
import sys
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from _typeshed import TraceFunction

from helpers import ROOT

from repro.core.kernelnames import ELLIPSIS, recut, short_names

# Names that share long heads and tails and differ in the middle: cut to LIMIT characters, most
# read alike, so every name goes through the clash check and the numbering of the ones left alike.
LIMIT = 40


def _names(n: int, first: int = 0) -> list[str]:
    return [
        f"void at::native::elementwise_kernel<128, 4, at::native::Functor{i % 97}<float, {i}>, "
        f"cutlass::layout::RowMajor>(int, at::native::Functor{i % 97}<float, {i}>)"
        for i in range(first, first + n)
    ]


def _lines_run(names: list[str]) -> int:
    """The Python lines short_names executes over ``names``: a count, not a clock, so the same on any load."""
    count = 0

    def tracer(frame: FrameType, event: str, arg: Any) -> TraceFunction:
        nonlocal count
        if event == "line":
            count += 1
        return tracer

    before = sys.gettrace()  # a coverage tool's, say: put back afterwards
    sys.settrace(tracer)
    try:
        short_names(names, LIMIT)
    finally:
        sys.settrace(before)
    return count


def test_short_names_scales_linearly_in_the_number_of_names() -> None:
    # Names not seen before by either pass: short_names keeps a cache of each name's forms.
    small, large = _names(2_000, first=100_000), _names(4_000, first=200_000)
    short = short_names(_names(20_000), LIMIT)
    assert len(short) == 20_000 and len(set(short.values())) > 19_000
    # Doubling the names doubles the lines a linear pass runs; a comparison of every name with every
    # other quadruples them.
    ratio = _lines_run(large) / _lines_run(small)
    assert 1.9 < ratio < 2.1, f"lines(4000) / lines(2000) = {ratio:.3f}; expected 2 (linear)"


def test_names_that_read_alike_are_numbered_apart() -> None:
    head, tail = "k<Functor_" + "a" * 40, "b" * 40 + ">"
    names = [f"{head}{i}{tail}" for i in range(4)]  # cut to 30 characters, all four read alike
    short = short_names(names, 30)
    values = [short[n] for n in names]
    assert len(set(values)) == 4 and all(ELLIPSIS in v for v in values)
    assert [v.rsplit(" #", 1)[-1] for v in values[:3]] == ["1", "2", "3"] and " #" not in values[3]
    pair = short_names(names[:2], 30)
    assert pair[names[0]].endswith(" #1") and " #" not in pair[names[1]]


def test_a_name_nested_past_the_recursion_limit_is_shortened_without_a_crash() -> None:
    deep = "f<" * 20_000 + "x" + ">" * 20_000
    # Closers with nothing open before it must not hide how deep the rest nests.
    hidden = "h" + ")" * 20_000 + "<" + "f<" * 20_000 + "x" + ">" * 20_001
    flat = "g<" + ", ".join(f"Functor{i}<float>" for i in range(20_000)) + ">"
    short = short_names([deep, flat, hidden], 90)
    assert len(short[hidden]) <= 90
    assert len(short[deep]) <= 90 and short[deep].startswith("f<f<")
    assert len(short[flat]) <= 90 and short[flat].startswith("g<Functor0")
    assert recut(f"ran {deep[:10]}{ELLIPSIS}", [deep, flat]).startswith("ran f<")


def test_the_kernel_diff_lists_tied_kernels_alike_in_every_process() -> None:
    # Twenty kernels appear, all at the same time per call: which three the diff names must not
    # depend on the process's string hashing (PYTHONHASHSEED), or two renders of one artifact differ.
    code = (
        "from types import SimpleNamespace as V\n"
        "from repro.core.results import Kernel\n"
        "from repro.evidence.variants import kernel_diff\n"
        "k = lambda n: Kernel(name=n, count=1, total_us=5.0, mean_us=5.0, per_call=1.0)\n"
        "print(kernel_diff(V(kernels=[k('base')]), V(kernels=[k('base')] + [k(f'new{i}') for i in range(20)])))\n"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            env=dict(os.environ, PYTHONHASHSEED=str(seed), PYTHONPATH=str(ROOT)),
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in range(6)
    }
    assert len(outs) == 1 and "new0" in outs.pop()
