"""The harness's own identity: a digest of its installed source, and a git commit only when the tree matches it."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import repro

GitState = Literal["clean", "dirty", "not_a_checkout", "declared"]

# What a wheel of the package carries (pyproject's package-data plus the code): the digest covers
# exactly these, so a checkout and the wheel built from it give the same digest.
_SUFFIXES = (".py", ".json", ".cu")
_NAMES = ("py.typed",)
_SKIP_DIRS = ("__pycache__",)


def package_root() -> Path:
    """The folder of the running ``repro`` package."""
    return Path(repro.__file__).resolve().parent


def package_files(root: Path | None = None) -> Iterator[tuple[str, Path]]:
    """(posix path inside the package, file) for every shipped file, sorted; links to folders are followed."""
    base = package_root() if root is None else root
    found: list[tuple[str, Path]] = []
    for folder, dirs, files in os.walk(base, followlinks=True):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        for name in files:
            if name.endswith(_SUFFIXES) or name in _NAMES:
                path = Path(folder) / name
                found.append((path.relative_to(base).as_posix(), path))
    yield from sorted(found)


def source_sha256(root: Path | None = None) -> str:
    """sha256 over each shipped file's package path and bytes, in sorted order."""
    h = hashlib.sha256()
    for rel, path in package_files(root):
        data = path.read_bytes()
        h.update(f"{rel}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def _git(checkout: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True, timeout=10)


def git_identity(root: Path | None = None) -> tuple[str | None, GitState]:
    """The commit that holds exactly this source, or None with why.

    A commit is named only when the package folder is the ``repro/`` of a git checkout whose HEAD
    tracks every shipped file and whose tree differs from HEAD nowhere under it (staged or not).
    A copy of the package inside an unrelated repository, or a stale ``.git`` beside a changed
    tree, gives no commit. ``GPU_REPRO_GIT_COMMIT`` (set by the lane images, which carry no .git)
    is reported as ``declared``.
    """
    declared = os.environ.get("GPU_REPRO_GIT_COMMIT")
    if declared:
        return declared, "declared"
    pkg = package_root() if root is None else root
    checkout = pkg.parent
    if not (checkout / ".git").exists():
        return None, "not_a_checkout"
    top = _git(checkout, "rev-parse", "--show-toplevel")
    head = _git(checkout, "rev-parse", "--verify", "HEAD")
    commit = head.stdout.strip()
    if top.returncode or Path(top.stdout.strip()).resolve() != checkout or not re.fullmatch(r"[0-9a-f]{40}", commit):
        return None, "not_a_checkout"
    paths = [pkg.name, *_link_targets(pkg)]
    tracked = _git(checkout, "ls-files", "-z", "--", *paths)
    real = [path.resolve() for _, path in package_files(pkg)]
    if not all(path.is_relative_to(checkout) for path in real):
        return None, "dirty"
    shipped = {path.relative_to(checkout).as_posix() for path in real}
    changed = _git(checkout, "diff", "--quiet", "HEAD", "--", *paths)
    if tracked.returncode or not shipped <= set(tracked.stdout.split("\0")) or changed.returncode != 0:
        return None, "dirty"
    return commit, "clean"


def _link_targets(pkg: Path) -> list[str]:
    """Checkout folders the package reaches through links (``repro/schemas -> ../schemas``)."""
    return sorted(
        os.path.relpath(child.resolve(), pkg.parent) for child in pkg.iterdir() if child.is_symlink() and child.is_dir()
    )


def install_mode(dist: str = "gpu-repro") -> str:
    """How the running harness is installed: "editable install of <dir>", "installed from <wheel or
    archive name>", "installed" (no record of where from), or run from a source tree. Every copy of
    the distribution's metadata on sys.path is read (a build's egg-info in the working folder is one)."""
    here = package_root()
    said = "run from its source tree (not installed)"
    for found in importlib.metadata.distributions(name=dist):
        try:
            raw = json.loads(found.read_text("direct_url.json") or "{}")
        except ValueError:
            raw = {}
        raw = raw if isinstance(raw, dict) else {}
        parsed = urllib.parse.urlparse(str(raw.get("url") or ""))
        url = urllib.request.url2pathname(parsed.path) if parsed.scheme == "file" else ""
        info = raw.get("dir_info")
        if isinstance(info, dict) and info.get("editable"):
            if not url or Path(url).resolve() in (here, *here.parents):
                return f"editable install of {url or 'an unrecorded folder'}"
            continue
        site = Path(str(found.locate_file(""))).resolve()
        if site.name in ("site-packages", "dist-packages"):
            if site in here.parents:
                return f"installed from {Path(url).name}" if url else "installed"
            said += f", ahead of the copy installed in {site}"  # e.g. PYTHONPATH puts the tree first
    pythonpath = [Path(p).resolve() for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return said + (" (PYTHONPATH names its folder)" if here.parent in pythonpath else "")


def python_env() -> dict[str, Any]:
    """The interpreter, its prefix, the package folders on sys.path in import order, and how the harness
    is installed: what a re-run in a fresh venv would differ in."""
    folders = [p for p in sys.path if p.rstrip("/").endswith(("site-packages", "dist-packages"))]
    return {
        "executable": sys.executable,
        "prefix": sys.prefix,
        "base_prefix": sys.base_prefix,
        "package_folders": folders,
        "harness_install": install_mode(),
    }
