"""The lock file of image pins: lanes, their exact tags and digests, load and atomic save."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.core.errors import ReproError, UsageError
from repro.evidence.artifact import FILE_MODE

LOCK_FILE = Path("docker") / "images.lock.json"
LOCK_ENV = "GPU_REPRO_LOCK"  # another lock file (e.g. docker/standins/images.lock.json) for every command
LOCK_SCHEMA_VERSION = 1

DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
# Tags that move by design; a lane pinned to one of them is not pinned.
_FLOATING_TAGS = frozenset({"latest", "nightly", "main", "master", "edge", "stable"})


@dataclass(frozen=True)
class Lane:
    """One pinned stack: its base image (exact tag, digest once resolved) and the image we build."""

    name: str
    base: str
    digest: str | None
    image: str
    build_args: Mapping[str, str] = field(default_factory=dict)
    description: str = ""
    resolved_utc: str | None = None

    @property
    def dockerfile(self) -> str:
        """The Dockerfile's path inside the build context (the repository root)."""
        return f"docker/{self.name}/Dockerfile"

    @property
    def base_ref(self) -> str:
        """What FROM pulls: ``tag@digest`` when the digest is known (the digest wins), else the tag."""
        return f"{self.base}@{self.digest}" if self.digest else self.base


@dataclass(frozen=True)
class Lock:
    """The parsed lock file; ``raw`` keeps keys this code does not know so a rewrite keeps them."""

    path: Path
    raw: dict[str, Any]
    lanes: dict[str, Lane]


def tag_problem(ref: str) -> str | None:
    """Why ``ref`` is not an exact tag (``None`` when it is): no tag, a floating tag, or a digest."""
    if "@" in ref:
        return "carries a digest; the lock keeps the tag in 'base' and the digest in 'digest'"
    name = ref.rsplit("/", 1)[-1]
    if ":" not in name:
        return "has no tag; expected repository:tag"
    tag = name.split(":", 1)[1]
    if not tag or tag.lower() in _FLOATING_TAGS:
        return f"has the floating tag {tag!r}; expected an exact version tag"
    return None


def repo_root() -> Path:
    """The checkout holding docker/images.lock.json: this package's checkout, else the working folder."""
    # parents: images/ -> lanes/ -> repro/ -> the checkout
    for candidate in (Path(__file__).resolve().parents[3], Path.cwd()):
        if (candidate / LOCK_FILE).is_file():
            return candidate
    raise ReproError(
        f"{LOCK_FILE} not found next to the package or in {Path.cwd()}; run `repro images` from a gpu-repro checkout"
    )


def _bad(path: Path, what: str) -> ReproError:
    return ReproError(f"{path}: {what}")


def _lane_from(path: Path, name: str, entry: Any) -> Lane:
    if not isinstance(entry, Mapping):
        raise _bad(path, f"lane {name!r} is {type(entry).__name__}; expected an object")
    base = entry.get("base")
    if not isinstance(base, str) or tag_problem(base):
        raise _bad(path, f"lane {name!r}: base {base!r} {tag_problem(base) if isinstance(base, str) else 'is missing'}")
    digest = entry.get("digest")
    if digest is not None and (not isinstance(digest, str) or not DIGEST_RE.match(digest)):
        raise _bad(path, f"lane {name!r}: digest {digest!r}; expected null or sha256:<64 hex>")
    image = entry.get("image")
    if not isinstance(image, str) or not image:
        raise _bad(path, f"lane {name!r}: image {image!r}; expected the tag to build, e.g. gpu-repro:{name}")
    args = entry.get("build_args") or {}
    if not isinstance(args, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in args.items()):
        raise _bad(path, f"lane {name!r}: build_args must map names to strings")
    return Lane(
        name=name,
        base=base,
        digest=digest,
        image=image,
        build_args=dict(args),
        description=str(entry.get("description") or ""),
        resolved_utc=entry.get("resolved_utc"),
    )


def load_lock(path: Path | None = None) -> Lock:
    """Read and check the lock file; a malformed one is an error naming the file and the field."""
    if path is None:
        path = Path(os.environ[LOCK_ENV]) if os.environ.get(LOCK_ENV) else repo_root() / LOCK_FILE
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file; expected an image lock file like docker/images.lock.json") from None
    except json.JSONDecodeError as exc:
        raise _bad(path, f"not valid JSON ({exc})") from None
    if not isinstance(raw, dict) or raw.get("schema_version") != LOCK_SCHEMA_VERSION:
        raise _bad(path, f"expected an object with schema_version {LOCK_SCHEMA_VERSION}")
    lanes = raw.get("lanes")
    if not isinstance(lanes, dict) or not lanes:
        raise _bad(path, "expected a non-empty 'lanes' object")
    return Lock(path=path, raw=raw, lanes={name: _lane_from(path, name, e) for name, e in lanes.items()})


def select(lock: Lock, names: Sequence[str]) -> list[Lane]:
    """The named lanes in the order given (all of them, in lock order, when none are named)."""
    if not names:
        return list(lock.lanes.values())
    out: list[Lane] = []
    for name in names:
        if name not in lock.lanes:
            raise UsageError(f"unknown lane {name!r}; known: {', '.join(lock.lanes)}")
        if lock.lanes[name] not in out:
            out.append(lock.lanes[name])
    return out


def write_lock(lock: Lock, updates: Mapping[str, Mapping[str, Any]]) -> Lock:
    """Merge ``updates`` (lane -> fields) into the lock file, atomically; returns the new lock."""
    raw = json.loads(json.dumps(lock.raw))
    for name, fields in updates.items():
        raw["lanes"][name].update(fields)
    text = json.dumps(raw, indent=2) + "\n"
    fd, tmp = tempfile.mkstemp(dir=lock.path.parent, prefix=f".{lock.path.name}.", suffix=".tmp")
    os.fchmod(fd, FILE_MODE)  # mkstemp makes 0600; the lock file is for everyone to read
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, lock.path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return load_lock(lock.path)


def describe(lanes: Iterable[Lane]) -> list[list[str]]:
    """Rows for a table of lanes: name, base, digest, image."""
    return [[ln.name, ln.base, ln.digest or "(not resolved)", ln.image] for ln in lanes]
