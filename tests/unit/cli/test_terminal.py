"""Terminal escape injection: artifact and spec text is printed inert by report, compare and matrix collect."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT
from typer.testing import CliRunner

from repro.cli.main import app
from repro.core.terminal import clean
from repro.evidence import artifact
from repro.lanes.matrix import plan as plan_mod
from repro.lanes.matrix import run as run_mod

(REFERENCE,) = (ROOT / "artifacts" / "reference" / "h200" / "run-5090-linear").glob("*/5090-linear.json")
# color=True on every call: click strips CSI colour codes from output that is not a terminal, which
# would hide the very sequences a terminal would obey; a terminal is what is played here.
runner = CliRunner()

CSI = "\x1b[2J\x1b[1;1H\x1b[31;1m"  # clear the screen, home the cursor, red
OSC8 = "\x1b]8;;https://evil.example/\x1b\\click here\x1b]8;;\x1b\\"  # a hyperlink whose text lies
OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"  # writes the clipboard
C1 = "\x9b2J\x9d0;title\x9c\x90+q\x9c"  # the same, introduced by 8-bit C1 code points
PAYLOAD = f"visible{CSI}words {OSC8} {OSC52}{C1} end\r\x08\x00"
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        (CSI + "x", "x"),
        (OSC8, "click here"),
        ("a" + OSC52 + "b", "ab"),
        ("a\x1b]0;window title\x1b\\b", "ab"),
        ("a\x1bP1$r0m\x1b\\b", "ab"),  # DCS
        ("a\x1b(0b\x1bcc\x1b7d", "abcd"),  # charset switch, reset, save cursor
        ("a\x9b1;2Hb\x9d8;;u\x9cc", "abc"),  # C1 CSI and OSC
        ("a\x1b]52;c;unterminated\nnext line", "a\nnext line"),  # ends at the line, not the output
        ("tab\tand\nnewline stay; é 漢字 🚀 too", "tab\tand\nnewline stay; é 漢字 🚀 too"),
        ("over\rwrite\x08\x7f\x00", "overwrite"),
        ("lone ESC at the end\x1b", "lone ESC at the end"),
    ],
)
def test_clean_drops_sequences_whole_and_keeps_the_words(raw: str, want: str) -> None:
    assert clean(raw) == want
    assert not CONTROL.search(clean(raw).replace("\n", "").replace("\t", ""))


def _hostile(doc: dict[str, Any], tag: str) -> dict[str, Any]:
    d = copy.deepcopy(doc)
    s = PAYLOAD + tag
    d["repro"]["title"] = s
    d["repro"]["params"] = {f"p{tag}": s}
    d["verdict"]["finding"] = s
    d["verdict"]["details"] = [s]
    d["warnings"] = [s]
    d["validity"] = {"flag": "suspect", "reasons": [s]}
    for var in d["variants"]:
        for k in var.get("kernels") or []:
            k["name"] = f"{s}{k['name']}"
    fp = d["fingerprint"]
    fp["env"] = {**fp["env"], "CUDA_LAUNCH_BLOCKING": s}
    fp["container"]["env"]["GPU_REPRO_LANE"] = s
    fp["gpu"]["name"] = s
    fp["collect_env"]["output"] = s
    d["error"] = {"kind": "crash", "message": s, "stderr_tail": s, "exit_code": None, "signal": None}
    assert artifact.validation_errors(d) == []
    return d


def _run_folder(base: Path, doc: dict[str, Any]) -> Path:
    d: Path = base / doc["run"]["run_id"]
    d.mkdir(parents=True)
    artifact.write_artifact(doc, d / "5090-linear.json")
    return d


def _assert_inert(text: str, words: bool = True) -> None:
    assert "\x1b" not in text and not CONTROL.search(text.replace("\n", "").replace("\t", "")), repr(text[:300])
    assert not words or "visible" in text  # the words themselves still print


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return artifact.load(REFERENCE)


def test_report_prints_no_escape_sequence(reference: dict[str, Any], tmp_path: Path) -> None:
    run = _run_folder(tmp_path, _hostile(reference, "R"))
    r = runner.invoke(app, ["report", str(run)], color=True)
    assert r.exit_code == 0, r.output
    _assert_inert(r.output)


def test_compare_prints_no_escape_sequence(reference: dict[str, Any], tmp_path: Path) -> None:
    a = _run_folder(tmp_path / "a", _hostile(reference, "A"))
    b = _run_folder(tmp_path / "b", _hostile(reference, "B"))
    r = runner.invoke(app, ["compare", str(a), str(b)], color=True)
    assert r.exit_code == 0, r.output
    _assert_inert(r.output)


def test_matrix_collect_prints_and_writes_no_escape_sequence(reference: dict[str, Any], tmp_path: Path) -> None:
    doc = {
        "schema_version": 1,
        "name": "t",
        "lanes": [{"name": "host"}],
        "repros": ["5090-linear"],
        "gpus": [{"count": 0}],
    }
    p = plan_mod.build(doc, check_catalog=False)
    root = tmp_path / "m"
    run_mod.prepare(p, root, dry_run=False)
    hostile = _hostile(reference, "M")
    hostile["fingerprint"]["scheduler"] = {"kind": None, "matrix_cell": p.cells[0].id}
    _run_folder(root / "cells" / p.cells[0].id, hostile)
    run_mod._record(root, "local", {p.cells[0].id: {"backend": "local", "state": PAYLOAD}}, {})
    r = runner.invoke(app, ["matrix", "collect", str(root)], color=True)
    assert r.exit_code == 0 and "000-host-5090-linear: not_reproduced - visible" in r.output, r.output
    _assert_inert(r.output)
    (report,) = (root / "collected").glob("*/report.md")
    _assert_inert(report.read_text())


def test_errors_quoting_an_artifact_print_no_escape_sequence(tmp_path: Path) -> None:
    bad = tmp_path / f"x{CSI}{OSC52}.json"
    bad.write_text('{"kind": "gpu-repro.artifact", "schema_version": "1.0", "repro": "' + "\\u001b[2J" + '"}')
    r = runner.invoke(app, ["validate", str(bad)], color=True)
    assert r.exit_code == 2 and r.output.startswith("error: "), r.output
    _assert_inert(r.output, words=False)
