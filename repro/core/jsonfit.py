"""Evidence that fits a size budget and stays evidence: JSON cut only at element boundaries (what is
shown still parses), and collect_env shortened with its library section kept.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["fit_json", "shorten_collect_env"]

_LIBRARIES = "Versions of relevant libraries:"


def _nodes(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    out: list[tuple[tuple[Any, ...], Any]] = []
    if path and (isinstance(value, dict | list) or (isinstance(value, str) and len(value) > 80)):
        out.append((path, value))
    if isinstance(value, dict):
        for k, v in value.items():
            out += _nodes(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _nodes(v, (*path, i))
    return out


def _placeholder(value: Any, keep: int) -> Any:
    if isinstance(value, str):
        return value[: max(keep, 0)] + f"... <{len(value) - max(keep, 0)} more characters: see the artifact>"
    kind = "keys" if isinstance(value, dict) else "items"
    return f"<{len(value)} {kind} elided: see the artifact>"


def fit_json(value: Any, limit: int, indent: int | None = 1) -> tuple[str, bool]:
    """``value`` as JSON of at most ``limit`` characters, and whether anything was elided.

    Whole elements are replaced, never cut through: each step elides the smallest element
    (an object, an array, or the tail of a long string) whose removal covers the excess, or
    the largest one when none does, and says in its place what was there. The text always
    parses. ("", True) when not even the top level fits.
    """
    seps = (",", ":") if indent is None else None  # compact when asked: more evidence per character

    def dumps(v: Any) -> str:
        return json.dumps(v, indent=indent, separators=seps)

    text = dumps(value)
    if len(text) <= limit:
        return text, False
    work = json.loads(text)
    for _ in range(10_000):
        excess = len(text) - limit
        if excess <= 0:
            return text, True
        sized = [(len(dumps(v)), p, v) for p, v in _nodes(work)]
        sized = [t for t in sized if not (isinstance(t[2], str) and "see the artifact>" in t[2])]
        if not sized:
            break
        covering = [t for t in sized if t[0] - 60 >= excess]
        size, path, node = min(covering, key=lambda t: t[0]) if covering else max(sized, key=lambda t: t[0])
        parent = work
        for key in path[:-1]:
            parent = parent[key]
        keep = size - excess - 80 if isinstance(node, str) else 0
        parent[path[-1]] = _placeholder(node, keep)
        text = dumps(work)
    return ("", True) if len(text) > limit else (text, True)


def shorten_collect_env(text: str, limit: int) -> str:
    """collect_env output in at most ``limit`` characters, its library section always kept.

    collect_env prints blocks separated by blank lines; the CPU block (lscpu: flags,
    vulnerabilities) says least about a GPU cliff and shrinks to its model line first, then
    the other blocks lose lines from their end. The library block (the pip and conda
    packages PyTorch's issue template asks for) is never cut unless it alone is over.
    """
    if len(text) <= limit:
        return text
    blocks = text.rstrip("\n").split("\n\n")
    libs = next((i for i, b in enumerate(blocks) if b.lstrip().startswith(_LIBRARIES)), None)
    for i, b in enumerate(blocks):
        if b.lstrip().startswith("CPU:"):
            keep = [ln for ln in b.splitlines() if ln.startswith(("CPU:", "Model name", "CPU(s):", "Architecture"))]
            blocks[i] = "\n".join(keep + ["(other lscpu lines left out: see the artifact)"])
    out = "\n\n".join(blocks)
    if len(out) <= limit:
        return out
    tail = blocks[libs] if libs is not None else ""
    head_blocks = [b for i, b in enumerate(blocks) if i != libs]
    note = "\n... (shortened: the full output is in the artifact)\n\n"
    room = limit - len(tail) - len(note)
    if room <= 0:
        return (tail[: max(limit - len(note), 0)] + note).rstrip()
    head = "\n\n".join(head_blocks)
    return head[:room].rsplit("\n", 1)[0] + note + tail
