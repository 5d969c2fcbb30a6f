"""``bundle.attached_inputs``: what a run folder's attached/ gives its report, for `repro report` and `repro bundle`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import ROOT

from repro.evidence import bundle, printed

RUN = next((ROOT / "artifacts" / "reference" / "h100" / "evidence52" / "all").iterdir())


def test_the_run_folders_attached_files_are_read_and_an_unreadable_one_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    got = bundle.attached_inputs(RUN)
    assert "rerun-graph-memset.json" in got["reruns"] and "script-graph-memset.out" in got["printed"]
    run = tmp_path / RUN.name
    shutil.copytree(RUN, run)
    (run / "attached" / "broken.json").write_text("{not json")  # not an artifact: named, not read
    real = printed.read

    def refuse(path: Path, *a: object, **kw: object) -> str:
        if path.name == "NOTE.txt":
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(printed, "read", refuse)
    again = bundle.attached_inputs(run)
    assert "NOTE.txt" in again["attached"] and "NOTE.txt" not in again["printed"]
    assert "broken.json" in again["attached"] and "broken.json" not in again["reruns"]
    assert set(again["printed"]) == set(got["printed"]) - {"NOTE.txt"}
