"""Builders shared by the tests: timed variants from known samples, and a torch blocker."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from repro.core.spec import Timing
from repro.core.stats import summarize

# The repository and its tests/ folder, wherever under tests/ a test file sits.
TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

# Timing.method's values (repro.core.results.Timing); mypy checks the two agree where timing_for passes it on.
TimingMethod = Literal["cuda_events", "graph_replay", "perf_counter", "external"]


def timing_for(
    samples: Sequence[float], method: TimingMethod = "cuda_events", calls_per_sample: int = 1, budget_s: float = 5.0
) -> Timing:
    """A Timing as the harness would record it for these samples (stopped on the CI target)."""
    return Timing(
        method=method,
        unit="s",
        calls_per_sample=calls_per_sample,
        warmup_calls=3,
        stop_reason="ci_target",
        target_rel_ci=0.01,
        budget_s=budget_s,
        elapsed_s=1.0,
        stats=summarize(samples),
        samples=tuple(samples),
    )


# A sitecustomize body that makes `import torch` fail as a missing module does, for the no-torch tests.
TORCH_BLOCKER = """
import sys
class _Block:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError("torch is blocked for this test (as if not installed)", name=name)
        return None
sys.meta_path.insert(0, _Block())
"""


def member_bytes(tar: tarfile.TarFile, member: str | tarfile.TarInfo) -> bytes:
    """The content of ``member``, which must be a regular file of the archive."""
    fh = tar.extractfile(member)
    assert fh is not None, f"{member}: not a regular file in {tar.name!r}"
    return fh.read()


def full_text(verdict: object) -> str:
    """A verdict's finding and its further sentences, as the report prints them."""
    finding = getattr(verdict, "finding")  # noqa: B009
    details = getattr(verdict, "details", ())
    return " ".join([finding, *details])


def copy_of_the_repo(dest: Path) -> Path:
    """The working tree as a fresh clone would have it (tracked and new files, nothing ignored)."""
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, files):
        src, dst = ROOT / name.decode(), dest / name.decode()
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():  # repro/schemas links to ../schemas, as git keeps it
            os.symlink(os.readlink(src), dst)
        elif src.is_file():
            shutil.copy2(src, dst)
    return dest


def cmark_xml(markdown: str) -> ET.Element:
    """``markdown`` parsed as GitHub does (cmark-gfm with its extensions), as cmark's XML tree."""
    out = subprocess.run(
        ["cmark-gfm", "-e", "table", "-e", "strikethrough", "-e", "autolink", "-e", "tagfilter", "-t", "xml"],
        input=markdown,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return ET.fromstring(out)
