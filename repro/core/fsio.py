"""Atomic file writes: a file the harness writes is visible only once it is complete.

Every writer goes through here. The bytes land in a hidden temp file in the
target folder, are fsynced, and only then get their final name (a hard link
for never-overwrite files, a rename otherwise). A kill at any moment leaves
either no file or the whole file under the final name; at worst a hidden
``.<name>.*.tmp`` remains, which every reader skips (names starting with ".").
A full disk or quota becomes a ``NoSpace`` error naming the path: one line,
never a traceback.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import io
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from repro.core.errors import ReproError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


FILE_MODE = 0o666 & ~_umask()
# errnos that mean "the filesystem cannot take more bytes", not a bug of ours.
_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


class NoSpace(ReproError):
    """The filesystem holding ``path`` is full (or over quota); nothing was left torn."""

    def __init__(self, path: Path, exc: OSError) -> None:
        self.path = Path(path)
        super().__init__(f"{path}: {exc.strerror or exc} (the filesystem is full; nothing partial was written)")


def is_full(exc: BaseException) -> bool:
    """True when ``exc`` says the disk is full or the quota is exhausted."""
    return isinstance(exc, OSError) and exc.errno in _FULL


def _temp(path: Path) -> tuple[int, str]:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.fchmod(fd, FILE_MODE)  # mkstemp makes 0600; results are meant to be shared
    return fd, tmp


def write_new(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; an existing file is never replaced.

    The final name is a hard link to the fsynced temp file: link() fails if the
    name exists, so two writers cannot clobber each other, and a reader never
    sees a half-written file.
    """

    def link(tmp: str, path: Path) -> None:
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise FileExistsError(f"{path} exists; artifacts are never overwritten") from None

    return _publish(Path(path), data, link)


def write_replace(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically, replacing the file there (for data the harness owns)."""
    return _publish(Path(path), data, lambda tmp, path: os.replace(tmp, path))


def _publish(path: Path, data: bytes, publish: Callable[[str, Path], None]) -> Path:
    """Write an fsynced temp file beside ``path``, then give it its name with ``publish``."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _temp(path)
    except OSError as exc:
        if is_full(exc):
            raise NoSpace(path, exc) from None
        raise
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        publish(tmp, path)
    except OSError as exc:
        if is_full(exc):
            raise NoSpace(path, exc) from None
        raise
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return path


def write_new_gzip(path: Path, data: bytes) -> Path:
    """``write_new`` of ``data`` gzip-compressed (mtime 0, so equal input gives equal bytes)."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz:
        gz.write(data)
    return write_new(path, buf.getvalue())


class StagedFile:
    """A file written bit by bit (a log) that appears under its final name only when closed.

    Until ``publish()`` the bytes live in a hidden temp file next to the target;
    ``publish()`` fsyncs and links it to the final name. Write errors after the
    first are swallowed and counted: a log that cannot grow must not stop the run
    whose output it records (``lost_bytes`` says how much went missing).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, self._tmp = _temp(self.path)
        self._fh = os.fdopen(fd, "wb")
        self.lost_bytes = 0
        self.error: OSError | None = None

    def write(self, data: bytes) -> None:
        """Append ``data``; after a write error, count it as lost instead of raising."""
        if self.error is not None:
            self.lost_bytes += len(data)
            return
        try:
            self._fh.write(data)
            self._fh.flush()
        except OSError as exc:
            self.error = exc
            self.lost_bytes += len(data)

    def publish(self) -> Path | None:
        """Close and give the file its final name; None (and no file) when it could not be completed."""
        try:
            if self.error is None:
                self._fh.flush()
                os.fsync(self._fh.fileno())
        except OSError as exc:
            self.error = exc
        try:
            self._fh.close()
        except OSError as exc:
            self.error = self.error or exc
        try:
            if self.error is None:
                os.link(self._tmp, self.path)
                return self.path
            return None
        except OSError as exc:
            self.error = exc
            return None
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._tmp)


def once_per_run(
    path: Path, compute: Callable[[], dict[str, Any]], keep: Callable[[dict[str, Any]], bool] = lambda v: True
) -> dict[str, Any]:
    """A JSON value computed by the first repro of a run and read by the rest (``path`` in its run folder).

    A value ``keep`` refuses is returned but not written, so the next repro computes it again.
    When a concurrent repro of the same run wrote first, its value wins (one value per run).
    """
    with contextlib.suppress(OSError, ValueError):
        cached = json.loads(path.read_text())
        if isinstance(cached, dict) and keep(cached):
            return cached
    value = compute()
    if keep(value):
        try:
            write_new(path, json.dumps(value, indent=2).encode())
        except FileExistsError:
            with contextlib.suppress(OSError, ValueError):
                theirs = json.loads(path.read_text())
                if isinstance(theirs, dict):
                    return theirs
        except OSError:  # a cache that cannot be written costs time, never the run
            pass
    return value
