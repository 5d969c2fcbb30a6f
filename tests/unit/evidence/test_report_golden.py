"""Golden outputs: `repro report` and `repro compare` of committed artifacts, one per schema version
(1.0 to 1.3 artifacts and a cliff search), byte for byte.

The goldens were rendered by the code before the evidence layer read artifacts through ``repro.evidence.model``;
a change in wording changes them on purpose: regenerate with ``python tests/unit/evidence/test_report_golden.py``
and review the diff. ``tools/evidence_snapshot.py`` renders every committed artifact the same way.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[3]  # as helpers.ROOT; this file also runs as a script
GOLDEN = ROOT / "tests" / "golden"
REF = "artifacts/reference/h200"
RUN5 = f"{REF}/paired/attempt1-rounds/run5"
CASES: dict[str, list[str]] = {
    "report-1.0-all.md": ["report", f"{REF}/all/20261129T181709Z-c09f5d"],
    "report-1.1-run5.md": ["report", f"{RUN5}/20261129T231107Z-5637e3"],
    "report-1.2-bench.md": ["report", f"{REF}/bench/all/20261130T172037Z-c761fb"],
    "report-1.3-make.md": ["report", f"{REF}/make/20261201T111128Z-798ae1"],
    "report-cliff.md": ["report", f"{REF}/cliff/solve-default/20261130T165324Z-c273f5"],
    "compare-run5.md": ["compare", f"{RUN5}/20261129T231107Z-5637e3", f"{RUN5}/20261129T231123Z-5aa7f9"],
    "compare-run5.json": ["compare", "--json", f"{RUN5}/20261129T231107Z-5637e3", f"{RUN5}/20261129T231123Z-5aa7f9"],
}


def render(args: list[str]) -> str:
    from repro.cli.main import app

    res = CliRunner().invoke(app, args, env={"COLUMNS": "120", "NO_COLOR": "1"})
    return f"exit {res.exit_code}\n{res.stdout}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_rendered_output_matches_its_golden(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the goldens name the artifacts by their paths relative to the repository
    assert render(CASES[name]) == (GOLDEN / name).read_text()


if __name__ == "__main__":
    import os

    os.chdir(ROOT)
    for name, args in CASES.items():
        (GOLDEN / name).write_text(render(args))
        print(f"wrote {GOLDEN / name}", file=sys.stderr)
