"""Fault suite, rendering and reading: hostile artifacts stay inert text; hostile JSON is one line and exit 2.

The structure checks parse the markdown with cmark-gfm (GitHub's renderer) into XML and compare
the block skeleton of a report made from a hostile artifact with that of the same artifact
holding plain strings: any injected heading, list, table row, fence, details or HTML shows up.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, cmark_xml

from repro.evidence import artifact, compare, markdown
from repro.evidence.report import CUT_NOTE, PASTE_LINES, report
from repro.run import scripts

(REFERENCE,) = (ROOT / "artifacts" / "reference" / "h200" / "run-5090-linear").glob("*/5090-linear.json")
NS = "{http://commonmark.org/xml/1.0}"
needs_cmark = pytest.mark.skipif(shutil.which("cmark-gfm") is None, reason="cmark-gfm not installed (CI installs it)")

# Every trick found breaking reports: headings, fences, details, raw HTML, table pipes, lists, quotes, links.
PAYLOAD = (
    "x\n# injected heading\n```\n</details>\n\n<script>alert(1)</script><img src=x onerror=alert(1)> | a | b\n"
    "- [link](javascript:alert(1)) **b** ~~s~~ \\| `c` &amp; <b>\n\n<details><summary>z</summary>\n\n"
    "~~~\n----\n1. item\n> quote\n===\n"
)
FENCE_BREAKER = "````````\n</details>\n\n# after the fence\n<script>x</script>\n````````````"


def _set_fields(doc: dict[str, Any], s: str, code: str, tag: str) -> dict[str, Any]:
    """``doc`` with every rendered free-text field set to ``s`` (code blocks to ``code``; ``tag`` keeps names apart)."""
    d = copy.deepcopy(doc)
    d["repro"]["title"] = s
    d["repro"]["seed_claim"] = s
    d["repro"]["upstream"] = ["https://x.example/a)**b**(c_d_#e*f*" if "\n" in s else "https://plain.example/a"]
    d["repro"]["params"] = {f"{s}{tag}": s}
    v = d["verdict"]
    v["finding"] = s
    v["details"] = [s, s]
    d["validity"] = {"flag": "suspect", "reasons": [s, s]}
    d["warnings"] = [s, s]
    d["error"] = {"kind": "crash", "message": s, "stderr_tail": code, "exit_code": None, "signal": None}
    names = {}
    for i, var in enumerate(d["variants"]):
        names[var["name"]] = f"{s}{tag}{i}"
        var["name"] = var["label"] = names[var["name"]]
        for k in var.get("kernels") or []:
            k["name"] = f"{s}{k['name']}"
    v["variants"] = [names[n] for n in v["variants"]]
    d["run"]["rerun"] = s
    d["run"]["command"] = [s, s]
    fp = d["fingerprint"]
    fp["collect_env"]["output"] = code
    fp["gpu"]["name"] = s
    fp["container"]["env"]["GPU_REPRO_LANE"] = s + tag
    assert artifact.validation_errors(d) == []
    return d


_STRUCTURE = {"text", "softbreak", "linebreak", "emph", "strong", "code", "strikethrough"}


def skeleton(markdown: str) -> list[str]:
    """Every node but plain inline text, with its depth; raw HTML nodes with their content."""
    out: list[str] = []

    def walk(node: ET.Element, depth: int) -> None:
        tag = node.tag.removeprefix(NS)
        if tag not in _STRUCTURE:
            keep = ("level", "type", "tight", "delimiter", "start", "info")  # not link destinations or titles
            attrs = ",".join(f"{k}={v}" for k, v in sorted(node.attrib.items()) if k in keep)
            html = f" {node.text!r}" if tag.startswith("html") else ""
            out.append(f"{'  ' * depth}{tag}({attrs}){html}")
        for child in node:
            walk(child, depth + 1)

    walk(cmark_xml(markdown), 0)
    return out


def _html_nodes(markdown: str) -> list[str]:
    root = cmark_xml(markdown)
    return [n.text or "" for n in root.iter() if n.tag.removeprefix(NS) in ("html_block", "html_inline")]


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return artifact.load(REFERENCE)


@needs_cmark
def test_hostile_artifact_report_has_exactly_the_plain_structure(reference: dict[str, Any]) -> None:
    hostile = report([_set_fields(reference, PAYLOAD, FENCE_BREAKER, "")])
    plain = report([_set_fields(reference, "plain words", "plain\ncode", "")])
    assert skeleton(hostile) == skeleton(plain)
    html = _html_nodes(hostile)
    assert not [h for h in html if "<script" in h or "<img" in h or "<b>" in h]
    # The repro's details and the environment's: nothing the artifact says opens or closes one.
    assert sum(h.startswith("<details>") for h in html) == sum(h.startswith("</details>") for h in html) >= 2
    headings = [n for n in cmark_xml(hostile).iter() if n.tag == f"{NS}heading"]
    # The title, "Not tested here", the repro, "Environment": no heading injected by the artifact.
    assert [h.get("level") for h in headings] == ["1", "2", "2", "2"]


@needs_cmark
def test_hostile_artifact_with_the_catalogs_lookup_keeps_the_plain_structure(reference: dict[str, Any]) -> None:
    # The lookup's notes name the artifact's repro id; a hostile id stays text in them too.
    def doc(s: str, code: str) -> dict[str, Any]:
        d = _set_fields(reference, s, code, "")
        d["repro"]["params"] = {}  # params the catalog accepts: the script is regenerated and shown
        return d

    def hostile_id(d: dict[str, Any]) -> dict[str, Any]:
        d = copy.deepcopy(d)
        d["repro"]["id"] = "x-" + PAYLOAD  # not in the catalog: the note says so
        return d

    for make, says in ((lambda d: d, "Script: `scripts/"), (hostile_id, "No standalone script could")):
        bad = [make(doc(PAYLOAD, FENCE_BREAKER))]
        good = [make(doc("plain words", "plain\ncode"))]
        hostile = report(bad, declared=scripts.declared(bad))
        plain = report(good, declared=scripts.declared(good))
        assert says in hostile and says in plain
        assert skeleton(hostile) == skeleton(plain)
        assert not [h for h in _html_nodes(hostile) if "<script" in h or "<img" in h or "<b>" in h]


@needs_cmark
def test_hostile_artifact_compare_has_exactly_the_plain_structure(reference: dict[str, Any], tmp_path: Path) -> None:
    def run_folder(name: str, doc: dict[str, Any]) -> Path:
        d: Path = tmp_path / name / doc["run"]["run_id"]
        d.mkdir(parents=True)
        artifact.write_artifact(doc, d / "5090-linear.json")
        return d

    other = run_folder("b", _set_fields(reference, "other words", "other", "B"))
    hostile = run_folder("h", _set_fields(reference, PAYLOAD, FENCE_BREAKER, ""))
    plain = run_folder("p", _set_fields(reference, "plain words", "c", ""))
    bad = compare.markdown(compare.compare([hostile, other]))
    good = compare.markdown(compare.compare([plain, other]))
    assert skeleton(bad) == skeleton(good)
    assert set(_html_nodes(bad)) <= {"<br>"}
    headings = [n for n in cmark_xml(bad).iter() if n.tag == f"{NS}heading"]
    assert len(headings) == 2


@needs_cmark
@pytest.mark.parametrize("limit", [3000, 6000, 12000, 20000])
def test_cut_report_closes_every_block_and_the_note_is_text(reference: dict[str, Any], limit: int) -> None:
    doc = _set_fields(reference, PAYLOAD, FENCE_BREAKER * 300, "")
    docs = [doc, copy.deepcopy(doc)]
    docs[1]["repro"]["id"] = "5090-linear-b"
    out = report(docs, limit=limit)
    assert len(out) <= limit and out.count("\n") < PASTE_LINES
    root = cmark_xml(out)
    html = [n.text or "" for n in root.iter() if n.tag.removeprefix(NS) == "html_block"]
    assert sum(h.startswith("<details>") for h in html) == sum(h.startswith("</details>") for h in html)
    paragraphs = ["".join(p.itertext()).strip() for p in root if p.tag == f"{NS}paragraph"]
    # What did not fit is named in a note that renders as text: blocks left out, or the report cut after them.
    assert any(p.startswith("Left out here, in the bundle") for p in paragraphs)
    if CUT_NOTE in out:
        last = list(root)[-1]
        assert last.tag == f"{NS}paragraph"
        assert "".join(last.itertext()).strip().startswith("Report cut at the size limit")


def test_fences_outrun_their_content() -> None:
    body = "a\n" + "`" * 7 + "\nb"
    block = markdown.fence(body)
    assert block.startswith("`" * 8) and block.endswith("`" * 8)


def test_text_escapes_html_markdown_and_newlines() -> None:
    out = markdown.text("<img src=x> & *b* [l](u) `c`\n# h")
    assert "<" not in out and "\n" not in out
    assert out == "&lt;img src=x&gt; &amp; \\*b\\* \\[l\\](u) \\`c\\` # h"
    assert markdown.text("# h") == "\\# h" and markdown.text("1. x") == "1\\. x" and markdown.text("a|b") == "a\\|b"
    assert markdown.md_cell(markdown.text("a|b", cell=True)) == "a\\|b"


# --------------------------------------------------------------------------- hostile JSON


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "repro", *args], capture_output=True, text=True, timeout=120)


def _assert_one_line_exit_2(p: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and "RecursionError" not in p.stderr
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    for n in needles:
        assert n in errors[0]


@pytest.mark.parametrize("depth", [985, 5000, 200_000])
def test_deep_nesting_is_one_line_exit_2(tmp_path: Path, depth: int) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * depth + "]" * depth)
    nested = tmp_path / "nested.json"
    doc = json.loads(REFERENCE.read_text())
    doc["extra"] = {"x": json.loads("[" * 900 + "]" * 900)} if depth < 1000 else {"x": 1}
    nested.write_text(json.dumps(doc))
    for args in (["validate", str(path)], ["report", str(path)], ["compare", str(path), str(REFERENCE)]):
        _assert_one_line_exit_2(_cli(*args), "deep.json", "nests too deeply")
    if depth < 1000:  # a valid artifact with a deep `extra` (parses, but would break the validator)
        _assert_one_line_exit_2(_cli("validate", str(nested)), "nests too deeply")


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e999", "-1e999"])
def test_non_finite_numbers_are_rejected(tmp_path: Path, token: str) -> None:
    text = REFERENCE.read_text()
    doc = json.loads(text)
    value = doc["verdict"]["value"]
    path = tmp_path / "nan.json"
    path.write_text(text.replace(f'"value": {json.dumps(value)}', f'"value": {token}', 1))
    assert token in path.read_text()
    for args in (["validate", str(path)], ["report", str(path)], ["compare", str(path), str(REFERENCE)]):
        _assert_one_line_exit_2(_cli(*args), "nan.json", "not valid JSON")


@pytest.mark.parametrize("field", ["id", "run_id"])
def test_identifiers_with_a_trailing_newline_fail_the_schema(reference: dict[str, Any], field: str) -> None:
    doc = copy.deepcopy(reference)
    section = doc["repro"] if field == "id" else doc["run"]
    section[field] += "\n"
    errors = artifact.validation_errors(doc)
    assert errors and any(field in e for e in errors)
    # Every pattern in both schemas refuses a trailing newline (Python's `$` would accept one).
    for name in artifact.SCHEMA_FILES:
        text = json.dumps(artifact.schema(name))
        assert text.count('$"') == 0, f"{name}: a pattern ends in a bare $"


def test_trailing_newline_id_is_exit_2_on_the_cli(reference: dict[str, Any], tmp_path: Path) -> None:
    doc = copy.deepcopy(reference)
    doc["repro"]["id"] += "\n"
    path = tmp_path / "nl.json"
    path.write_text(json.dumps(doc))
    _assert_one_line_exit_2(_cli("validate", str(path)), "nl.json", "repro/id")
