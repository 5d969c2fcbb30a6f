"""Progress of a measurement as the user sees it: one live line on a terminal, sparse plain lines otherwise.

The measurement code calls one structured hook, ``progress(phase, name, samples, rel_ci)``, and
never formats output itself; :class:`Display` turns those calls (and log lines) into text.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Literal, Protocol, TextIO

# Plain (non-terminal) output, e.g. ``repro all``'s per-repro log, gets at most one sampling line
# per this many seconds: enough for the batch's status line to move, few enough to keep logs short.
PLAIN_INTERVAL_S = 2.0
_CLEAR = "\r\x1b[2K"  # carriage return, then erase the whole line (ANSI EL2)

# The steps of timing one variant (or one paired group), in order.
Phase = Literal["warm-up", "sampling", "paired rounds", "profiling", "done"]


class Progress(Protocol):
    """The hook's shape: ``phase`` says which step of timing ``name`` is at."""

    def __call__(self, phase: Phase, name: str, samples: int, rel_ci: float | None) -> None: ...


def no_progress(phase: Phase, name: str, samples: int, rel_ci: float | None) -> None:
    """The default hook: report nothing (library use, tests)."""


def describe(phase: Phase, name: str, samples: int, rel_ci: float | None) -> str:
    """``  linear_fp32: sampling, 120 samples, CI +-0.84%``: one event as words."""
    parts = [f"  {name}: {phase}"]
    if samples:
        parts.append(f"{samples} samples")
    if rel_ci is not None:
        parts.append(f"CI +-{rel_ci:.2%}")
    return ", ".join(parts)


class Display:
    """Renders log lines and progress events on one stream.

    On a terminal the progress is a single line rewritten in place, and a log line is printed
    above it. Elsewhere (a file, a pipe) every phase change is one line, and sampling updates
    are thinned to one per :data:`PLAIN_INTERVAL_S`.
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        live: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.clock = clock
        self._line = ""  # the live line now shown (terminal only)
        self._last: tuple[str, Phase] | None = None  # (name, phase) of the last event
        self._last_plain = float("-inf")

    def log(self, message: str) -> None:
        """A log line; on a terminal it goes above the live progress line."""
        if self.live and self._line:
            self.stream.write(f"{_CLEAR}{message}\n{self._line}")
        else:
            self.stream.write(message + "\n")
        self.stream.flush()

    def progress(self, phase: Phase, name: str, samples: int, rel_ci: float | None) -> None:
        """The :class:`Progress` hook."""
        text = describe(phase, name, samples, rel_ci)
        key = (name, phase)
        if self.live:
            if phase == "done":
                self.stream.write(f"{_CLEAR}{text}\n")
                self._line = ""
            else:
                self.stream.write(f"{_CLEAR}{text}")
                self._line = text
        else:
            now = self.clock()
            if key == self._last and now - self._last_plain < PLAIN_INTERVAL_S:
                return
            self._last_plain = now
            self.stream.write(text + "\n")
        self._last = key
        self.stream.flush()

    def close(self) -> None:
        """End a live line that is still open, so the next output starts on a fresh line."""
        if self.live and self._line:
            self.stream.write("\n")
            self.stream.flush()
            self._line = ""
