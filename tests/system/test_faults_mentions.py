"""Fault suite, mentions: ``@name``, ``#123``, ``org/repo#5`` and ``GH-7`` in an artifact's strings reach
a report or a comparison as text GitHub links to no one and nothing; links the harness writes stay links.

The rendered markdown is parsed with cmark-gfm (GitHub's renderer); every text and HTML node (not code)
is searched for what GitHub would turn into a mention or an issue reference.
"""

from __future__ import annotations

import copy
import html
import json
import re
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, cmark_xml
from typer.testing import CliRunner

from repro.cli.main import app
from repro.evidence import artifact
from repro.evidence.markdown import ZWJ, html_text, text

EVIDENCE = ROOT / "artifacts" / "reference" / "h200" / "evidence" / "all" / "20261201T111151Z-438281"
(CLIFF,) = (ROOT / "artifacts" / "reference" / "h200" / "cliff" / "solve-default").glob("*/*.cliff-n.json")
NS = "{http://commonmark.org/xml/1.0}"
needs_cmark = pytest.mark.skipif(shutil.which("cmark-gfm") is None, reason="cmark-gfm not installed (CI installs it)")
PAYLOAD = " @octocat #123 org/repo#5 GH-7 mail@example.com"
# What GitHub links: a mention (@user, @org/team), an issue or PR reference (#1, org/repo#1, GH-1).
LIVE = re.compile(r"(?<![A-Za-z0-9_`])@[A-Za-z0-9]|#[0-9]|\bGH-[0-9]", re.IGNORECASE)
runner = CliRunner()


def _with_payload(node: Any, keys: bool = False) -> Any:
    """Every string in ``node`` with PAYLOAD appended; with ``keys``, the keys of maps too."""
    if isinstance(node, str):
        return node + PAYLOAD
    if isinstance(node, list):
        return [_with_payload(v) for v in node]
    if isinstance(node, dict):
        return {(k + PAYLOAD if keys else k): _with_payload(v, k in ("params", "config")) for k, v in node.items()}
    return node


def _hostile(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with PAYLOAD in every string the schema lets carry it (ids, digests, dates and enums cannot)."""
    out = _with_payload(doc)
    check = artifact.validator(artifact.schema_name(doc))
    for _ in range(50):
        errors = list(check.iter_errors(out))
        if not errors:
            return dict(out)
        for e in errors:  # put back what the schema refuses, one field at a time
            path = list(e.absolute_path)
            plain, node = doc, out
            for k in path[:-1]:
                plain, node = plain[k], node[k]
            if path and isinstance(node, dict | list):
                node[path[-1]] = copy.deepcopy(plain[path[-1]])
            else:
                raise AssertionError(f"cannot put back {path}: {e.message}")
    raise AssertionError("the payload kept failing the schema")


def _live(markdown: str) -> list[str]:
    """What GitHub would link in ``markdown``: the text and HTML nodes (code spans and blocks excluded)."""
    found = []
    for node in cmark_xml(markdown).iter():
        tag = node.tag.removeprefix(NS)
        if tag in ("text", "html_inline", "html_block"):
            words = html.unescape(node.text or "")
            found += [words[max(0, m.start() - 20) : m.end() + 10] for m in LIVE.finditer(words)]
    return found


def _run(base: Path, doc: dict[str, Any], name: str) -> Path:
    folder: Path = base / doc["run"]["run_id"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(doc))
    return folder


def test_text_and_html_text_break_mentions_and_references() -> None:
    for helper in (text, html_text):
        out = helper("ping @octocat about #123, org/repo#5 and gh-7")
        assert f"@{ZWJ}octocat" in out and f"#{ZWJ}123" in out and f"repo#{ZWJ}5" in out and f"gh-{ZWJ}7" in out
    assert text("#1 first")[:2] == "\\#"  # still no heading
    # What links nothing stays as it is: a matmul, a count, a word with a hyphen.
    assert text("x @ w.t() + b, # of runs, GH-pages, C#") == "x @ w.t() + b, # of runs, GH-pages, C#"


@needs_cmark
def test_no_mention_or_reference_from_any_artifact_string_is_live(tmp_path: Path) -> None:
    plain_docs = [json.loads(p.read_text()) for p in sorted(EVIDENCE.glob("*.json"))] + [json.loads(CLIFF.read_text())]
    names = [p.name for p in sorted(EVIDENCE.glob("*.json"))] + [CLIFF.name]
    hostile = [_hostile(d) for d in plain_docs]
    run = base = tmp_path / "hostile"
    for d, name in zip(hostile, names, strict=True):
        run = _run(base, d, name)
    other = _run(tmp_path / "plain", plain_docs[0], names[0])
    outputs = {
        "report": runner.invoke(app, ["report", str(run)]),
        "compare": runner.invoke(app, ["compare", str(other), str(run)]),
    }
    for what, res in outputs.items():
        assert res.exit_code == 0, (what, res.output)
        # The payload was rendered (dozens of fields), and none of it links.
        assert res.output.count("octocat") >= 10, (what, res.output.count("octocat"))
        assert _live(res.output) == [], (what, _live(res.output)[:5])
    # The links the harness writes stay links: the plots beside the report, the seed's upstream issue.
    own = runner.invoke(app, ["report", str(EVIDENCE)]).output
    bundled = tmp_path / "evidence.tar.gz"
    assert runner.invoke(app, ["bundle", str(EVIDENCE), "--out", str(bundled)]).exit_code == 0
    with tarfile.open(bundled) as tf:  # the report whole: the pasted one may leave the plots to the bundle
        whole = tf.extractfile(f"{EVIDENCE.name}/report-full.md").read().decode()  # type: ignore[union-attr]
    assert "](plots/lora-batch-scaling.batch.png)" in whole
    assert "(the seed document's; it cites https://github.com/pytorch/pytorch/issues/150725)" in own
