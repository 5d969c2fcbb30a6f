"""Evidence that fits a size budget and stays evidence: JSON cut only at element boundaries (what is
shown still parses), and collect_env shortened with its library section kept.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["fit_json", "shorten_collect_env"]

_DEPTHS: tuple[int | None, ...] = (None, 8, 6, 5, 4, 3, 2, 1)
_CAPS: tuple[int | None, ...] = (None, 64, 24, 8, 3, 1)
_STRING = 600  # long strings (a traceback, a stderr tail) are cut first, keeping their start
_LIBRARIES = "Versions of relevant libraries:"


def _prune(value: Any, depth: int | None, cap: int | None, string: int | None) -> Any:
    if isinstance(value, str) and string is not None and len(value) > string:
        return value[:string] + f"... <{len(value) - string} more characters in the artifact>"
    if isinstance(value, dict | list) and depth == 0:
        kind = "keys" if isinstance(value, dict) else "items"
        return f"<{len(value)} {kind} elided: see the artifact>"
    nxt = None if depth is None else depth - 1
    if isinstance(value, dict):
        return {k: _prune(v, nxt, cap, string) for k, v in value.items()}
    if isinstance(value, list):
        kept = [_prune(v, nxt, cap, string) for v in (value if cap is None else value[:cap])]
        if cap is not None and len(value) > cap:
            kept.append(f"<{len(value) - cap} more items elided: see the artifact>")
        return kept
    return value


def fit_json(value: Any, limit: int, indent: int = 1) -> tuple[str, bool]:
    """``value`` as indented JSON of at most ``limit`` characters, and whether anything was elided.

    Lists are shortened first (their first items kept, a string saying how many more), then
    nesting below a depth is replaced by a string naming what was there; the text always
    parses. ("", True) when not even the top level fits.
    """
    full = json.dumps(value, indent=indent)
    if len(full) <= limit:
        return full, False
    for depth in _DEPTHS:
        for cap in _CAPS:
            text = json.dumps(_prune(value, depth, cap, _STRING), indent=indent)
            if len(text) <= limit:
                return text, True
    return "", True


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
