"""The typed artifact model: every committed artifact loads, its rows keep their qualifiers, and
rendering and comparing need no plugin registry."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT

from repro.core.errors import UsageError
from repro.evidence import artifact, model

# Every artifact and cliff search committed as evidence or as a fixture: each schema version that
# still validates (1.0 to today's) is among them.
COMMITTED = [
    p
    for src in ("artifacts/reference", "tests/fixtures")
    for p in sorted((ROOT / src).rglob("*.json"))
    if not any(part.startswith(".") for part in p.relative_to(ROOT).parts) and artifact.not_an_artifact(p) is None
]


def _as_json(obj: Any) -> dict[str, Any]:
    """A typed block as its JSON: tuples as lists."""
    return json.loads(json.dumps(dataclasses.asdict(obj)))  # type: ignore[no-any-return]


def _flat(row: model.Row) -> dict[str, Any]:
    fixed = {f.name: getattr(row, f.name) for f in dataclasses.fields(row) if f.name != "qualifiers"}
    return {**fixed, **row.qualifiers}


@pytest.mark.parametrize("path", COMMITTED, ids=[str(p.relative_to(ROOT)) for p in COMMITTED])
def test_every_committed_artifact_loads_into_the_model(path: Path) -> None:
    raw = json.loads(path.read_text())
    doc = model.load(path)
    assert doc.run.run_id == raw["run"]["run_id"] and doc.schema_version == raw["schema_version"]
    if isinstance(doc, model.Cliff):
        # Every field of the cliff's own blocks is the one written (``points_apart`` only where recorded).
        assert _as_json(doc.sweep) == raw["sweep"] and _as_json(doc.search) == raw["search"]
        assert [_as_json(p) for p in doc.points] == raw["points"]
        steps = zip(doc.steps, raw["steps"], strict=True)
        assert [{k: v for k, v in _as_json(s).items() if k in rs} for s, rs in steps] == raw["steps"]
        assert doc.key == f"{raw['repro']['id']}.cliff-{raw['sweep']['param']}"
        assert (doc.status, doc.validity.flag, doc.repro.id) == (
            raw["status"],
            raw["validity"]["flag"],
            raw["repro"]["id"],
        )
        assert doc.raw == raw
        return
    assert doc.repro.id == raw["repro"]["id"] and doc.verdict.status == raw["verdict"]["status"]
    assert [v.name for v in doc.variants] == [v["name"] for v in raw["variants"]]
    for v, rv in zip(doc.variants, raw["variants"], strict=True):
        assert (v.timing.stats.median if v.timing else None) == ((rv["timing"] or {}).get("stats") or {}).get("median")
        assert [k.name for k in v.kernels] == [k["name"] for k in rv["kernels"]]
    # A row read back is the row written: fixed fields where they were, qualifiers beside them.
    for row, rr in zip(doc.verdict.breakdown, raw["verdict"].get("breakdown") or [], strict=True):
        flat = _flat(row)
        assert {k: flat[k] for k in rr} == rr
    assert doc.repro.recorded == frozenset(k for k in model.DECLARABLE if k in raw["repro"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        doc.repro.id = "x"  # type: ignore[misc]


def test_loading_refuses_what_validation_refuses(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    raw = json.loads(COMMITTED[0].read_text())
    raw["verdict"] = {"status": "reproduced"}
    bad.write_text(json.dumps(raw))
    with pytest.raises(UsageError, match="bad.json: fails the"):
        model.load(bad)


_NO_REGISTRY = """
import importlib.abc, sys
from pathlib import Path

BLOCKED = ("repro.run.catalog", "repro.run.scripts", "repro.repros")

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in BLOCKED):
            raise ImportError(f"{name} is blocked: rendering must not load the plugin registry")
        return None

sys.meta_path.insert(0, Block())
from repro.evidence import artifact, compare, model
from repro.evidence.report import report

folders = [Path(a) for a in sys.argv[1:]]
docs = [model.load(p) for p in artifact.expand(folders[:1])]
text = report(docs)
cmp = compare.compare(folders)
md = compare.markdown(cmp)
loaded = sorted(m for m in sys.modules if m.startswith(BLOCKED))
print(len(text), len(md), loaded)
"""


def test_report_and_compare_render_with_the_plugin_registry_blocked() -> None:
    """What a report needs is in the artifact: with the catalog and the repros unimportable, both render."""
    a = ROOT / "artifacts/reference/h200/paired/final/run5/20261130T163155Z-5303a7"
    b = ROOT / "artifacts/reference/h200/paired/final/run5/20261130T163219Z-7c0d63"
    out = subprocess.run(
        [sys.executable, "-c", _NO_REGISTRY, str(a), str(b)], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    chars, md_chars, loaded = out.stdout.split(" ", 2)
    assert int(chars) > 1000 and int(md_chars) > 500 and loaded.strip() == "[]"
