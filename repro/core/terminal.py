"""Text for a terminal: what an artifact or a spec says, without the control sequences that would drive it.

Bottom layer (standard library only). An artifact, a matrix spec or a scheduler's record is text
from elsewhere; printed raw, an ESC sequence in it moves the cursor, rewrites earlier lines (CSI),
plants a hyperlink whose text lies about its target (OSC 8), or writes the reader's clipboard
(OSC 52). ``clean`` leaves the words and drops the sequences, so every command that prints such
text prints it inert, whether to a terminal, a pipe or a file.
"""

from __future__ import annotations

import re

# ECMA-48 sequences, each removed whole (its parameters included), whether introduced by ESC or by
# the 8-bit C1 code point (U+009B CSI, U+009D OSC, ...), which some terminals still obey:
# - CSI: parameter bytes, intermediate bytes, a final byte (cursor moves, colours, erasing);
# - OSC, DCS, SOS, PM, APC: a string up to ST (ESC \ or U+009C) or BEL. An unterminated one ends at
#   the line's end, so one hostile field cannot swallow the rest of the output;
# - any other escape: ESC, intermediate bytes, a final byte (charset switches, resets, keypad modes).
_SEQUENCE = re.compile(
    r"""
      (?:\x1b\[|\x9b) [\x30-\x3f]* [\x20-\x2f]* [\x40-\x7e]?
    | (?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f]) [^\x07\x1b\x9c\n]* (?:\x07|\x1b\\|\x9c)?
    | \x1b [\x20-\x2f]* [\x30-\x7e]?
    """,
    re.VERBOSE,
)
# What is left of the controls: C0 but tab and newline (a carriage return or backspace rewrites the
# line), DEL, and C1.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean(text: str) -> str:
    """``text`` without escape sequences and control characters; tabs and newlines stay."""
    return _CONTROL.sub("", _SEQUENCE.sub("", text))
