"""The one exception family of the harness, mapped to exit codes in ``cli.py``."""

from __future__ import annotations

import re


class ReproError(Exception):
    """Base class: a failure the user can act on; its message is one line."""

    exit_code = 1


class UsageError(ReproError):
    """Bad input (unknown id, bad --set, unwritable --out, invalid file): exit code 2."""

    exit_code = 2


class CliffReproduced(ReproError):
    """``--fail-on reproduced`` tripped: exit code 3 so a downstream CI can gate on it."""

    exit_code = 3


# Where a reason goes on to name the exception it came from ("...: ModuleNotFoundError: No module named 'x'").
_EXCEPTION = re.compile(r": (?=[A-Z][A-Za-z]*(?:Error|Exception): )")


def reason_only(reason: str | None) -> str:
    """A skip or error reason without the exception that says it again (that stays in the artifact)."""
    return _EXCEPTION.split(reason or "", maxsplit=1)[0]
