"""The project's size rule: no module under repro/, tests/ or tools/ is over 600 lines."""

from __future__ import annotations

from pathlib import Path

from helpers import ROOT

MAX_LINES = 600
CHECKED = ("repro", "tests", "tools")


def _lines(path: Path) -> int:
    return len(path.read_bytes().splitlines())


def test_no_module_is_over_600_lines() -> None:
    sizes = {path.relative_to(ROOT).as_posix(): _lines(path) for top in CHECKED for path in (ROOT / top).rglob("*.py")}
    assert len(sizes) > 100, sorted(sizes)  # the walk found the modules: an empty one would pass vacuously
    over = sorted((path, n) for path, n in sizes.items() if n > MAX_LINES)
    assert not over, f"modules over {MAX_LINES} lines (split them by topic): " + ", ".join(
        f"{path} ({n} lines)" for path, n in over
    )
