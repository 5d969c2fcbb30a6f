"""Fault suite, extra keys: an object the schema leaves open takes an unknown key and report, compare
and validate still work; an object it closes refuses the key in one line and exit 2, never a traceback."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT
from typer.testing import CliRunner

from repro.cli.main import app
from repro.core.results import Plot
from repro.evidence import artifact

EVIDENCE = ROOT / "artifacts" / "reference" / "h200" / "evidence" / "all" / "20261201T111151Z-438281"
(CLIFF,) = (ROOT / "artifacts" / "reference" / "h200" / "cliff" / "solve-default").glob("*/*.cliff-n.json")
# lora and solve declare plots (solve's grouped by two config keys); graph-memset has a seed's-program row.
REFERENCES = [EVIDENCE / f"{rid}.json" for rid in ("lora-batch-scaling", "solve-512-cliff", "graph-memset")] + [CLIFF]
EXTRA = "zz_extra"
runner = CliRunner()


def _objects(node: Any, at: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    """The path of every object in ``node``."""
    if isinstance(node, dict):
        yield at
        for k, v in node.items():
            yield from _objects(v, (*at, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _objects(v, (*at, i))


def _at(doc: Any, path: tuple[str | int, ...]) -> Any:
    for k in path:
        doc = doc[k]
    return doc


def _run_folder(base: Path, name: str, doc: dict[str, Any], file: str) -> Path:
    folder: Path = base / name / doc["run"]["run_id"]
    folder.mkdir(parents=True)
    (folder / file).write_text(json.dumps(doc))
    return folder


def _closed_and_open(doc: dict[str, Any], value: Any) -> tuple[set[tuple[str | int, ...]], dict[str, Any]]:
    """(the objects whose schema refuses an extra key, ``doc`` with ``value`` under EXTRA in every other object)."""
    mutated = copy.deepcopy(doc)
    paths = list(_objects(mutated))
    for path in paths:
        _at(mutated, path)[EXTRA] = value
    closed = set()
    for e in artifact.validator(artifact.schema_name(mutated)).iter_errors(mutated):
        path = tuple(e.absolute_path)
        if path[-1:] == (EXTRA,):  # a map whose values have a type (env, phases_s): the value is refused
            closed.add(path[:-1])
        else:
            assert "Additional properties" in e.message and EXTRA in e.message, (path, e.message)
            closed.add(path)
    for path in closed:
        del _at(mutated, path)[EXTRA]
    assert artifact.validation_errors(mutated, artifact.schema_name(mutated)) == []
    return closed, mutated


@pytest.mark.parametrize("value", ["x", {"a": [1, None]}], ids=["string", "object"])
@pytest.mark.parametrize("reference", REFERENCES, ids=lambda p: p.name)
def test_an_extra_key_in_any_open_object_costs_report_and_compare_nothing(
    reference: Path, value: Any, tmp_path: Path
) -> None:
    doc = json.loads(reference.read_text())
    closed, mutated = _closed_and_open(doc, value)
    opened = len(list(_objects(mutated))) - len(closed)
    assert opened > 20  # the key really went into the variants, kernels, verdict, fingerprint, ...
    run = _run_folder(tmp_path, "extra", mutated, reference.name)
    plain = _run_folder(tmp_path, "plain", doc, reference.name)
    for cmd in (["validate", str(run)], ["report", str(run)], ["compare", str(plain), str(run)]):
        res = runner.invoke(app, cmd)
        assert res.exit_code == 0 and res.exception is None, (cmd, res.output, res.exception)
    assert f"## `{doc['repro']['id']}`" in runner.invoke(app, ["report", str(run)]).output


@pytest.mark.parametrize("reference", REFERENCES, ids=lambda p: p.name)
def test_an_extra_key_in_a_closed_object_is_one_line_and_exit_2(reference: Path, tmp_path: Path) -> None:
    doc = json.loads(reference.read_text())
    closed, _ = _closed_and_open(doc, "x")
    assert () in closed  # the artifact's top level is closed in every schema
    if doc["repro"].get("plots"):
        assert ("repro", "plots", 0) in closed
    # One object of each kind: the first item of a list stands for the others.
    kinds = {tuple("*" if isinstance(k, int) else k for k in p): p for p in sorted(closed, key=str, reverse=True)}
    for path in kinds.values():
        bad = copy.deepcopy(doc)
        _at(bad, path)[EXTRA] = "x"
        run = _run_folder(tmp_path, "/".join(map(str, path)) or "root", bad, reference.name)
        for cmd in (["validate", str(run)], ["report", str(run)], ["compare", str(run), str(run)]):
            res = runner.invoke(app, cmd)
            assert res.exit_code == 2 and isinstance(res.exception, SystemExit), (cmd, path, res.exception)
            assert res.output.count("\n") <= 2 and EXTRA in res.output, res.output


def test_the_schema_of_a_plot_lists_exactly_the_fields_the_renderer_reads() -> None:
    items = artifact.schema()["properties"]["repro"]["properties"]["plots"]["items"]
    assert set(items["properties"]) == {f.name for f in dataclasses.fields(Plot)}
    assert items["additionalProperties"] is False
    assert set(items["required"]) == {f.name for f in dataclasses.fields(Plot) if f.default is dataclasses.MISSING}
