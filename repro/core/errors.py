"""The one exception family of the harness, mapped to exit codes in ``cli.py``."""

from __future__ import annotations


class ReproError(Exception):
    """Base class: a failure the user can act on; its message is one line."""

    exit_code = 1


class UsageError(ReproError):
    """Bad input (unknown id, bad --set, unwritable --out, invalid file): exit code 2."""

    exit_code = 2


class CliffReproduced(ReproError):
    """``--fail-on reproduced`` tripped: exit code 3 so a downstream CI can gate on it."""

    exit_code = 3
