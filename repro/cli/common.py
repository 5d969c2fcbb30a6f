"""What every ``repro`` command module shares: the Typer app settings, error mapping, ``--out FILE`` checks.

``repro/cli.py`` and ``repro/cli_docker.py`` both import from here and never from each other, so
the CLI has no import cycle.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer

from repro.core.errors import CliffReproduced, ReproError, UsageError
from repro.core.terminal import clean

F = TypeVar("F", bound=Callable[..., Any])


def new_typer(name: str, help: str) -> typer.Typer:
    """A Typer app with the settings every ``repro`` (sub)command shares.

    ``rich_markup_mode=None`` selects click's plain help formatter. Typer 0.29's rich formatter
    prints each option's Python type beside it, flags included (``--smoke <bool>``, even
    ``--help <bool>``), which reads as if a flag took a value; the plain formatter shows flags as
    flags (``--smoke``) and values by their metavar (``--out DIR``).
    """
    return typer.Typer(
        name=name,
        help=help,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )


def err(message: str) -> None:
    """One ``error: ...`` line on stderr (inert: a message may quote an artifact's or a spec's text)."""
    typer.echo(f"error: {clean(message)}", err=True)


def echo_text(text: str, *, err: bool = False, nl: bool = True) -> None:
    """``typer.echo`` of text that comes from an artifact, a spec, a scheduler or a file name: escape
    sequences and control characters dropped (``repro.core.terminal``), so it cannot drive the terminal."""
    typer.echo(clean(text), err=err, nl=nl)


def handles_errors(fn: F) -> F:
    """Map the library's exceptions to one stderr line and their exit code (no traceback)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except KeyboardInterrupt:
            err("interrupted by SIGINT")
            raise typer.Exit(130) from None
        except ReproError as exc:
            if isinstance(exc, CliffReproduced):
                echo_text(str(exc), err=True)
            else:
                err(str(exc))
            raise typer.Exit(exc.exit_code) from None

    return wrapper  # type: ignore[return-value]


def write_new_file(out: Path, text: str, what: str) -> None:
    """Write ``text`` to a new file ``out`` (``--out``); an existing file or unwritable folder is a UsageError."""
    from repro.evidence.artifact import write_new

    check_new_file(out, what)
    write_new(out, text.encode())


def check_new_file(out: Path, what: str) -> None:
    """A UsageError unless ``out`` can be created: it does not exist and its folder is writable."""
    if out.exists():
        raise UsageError(f"--out {out}: exists; expected a new file name ({what} are never overwritten)")
    if not out.parent.is_dir() or not os.access(out.parent, os.W_OK):
        raise UsageError(f"--out {out}: expected a file in a writable folder")
