"""Schemas, round-trips, atomic never-overwriting writes, and every committed artifact validating."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT
from jsonschema import Draft202012Validator

from repro.core import stats
from repro.core import verdict as core_verdict
from repro.core.claim import not_tested_here
from repro.core.context import SamplingConfig
from repro.core.results import DECIDED, ROW_KEYS, Achieved, Comparison, Plot, Ratio, VerdictOf
from repro.core.spec import Kernel, RunResult, Stats, Timing, VariantResult, Verdict, Work, from_jsonable
from repro.evidence import artifact, model
from repro.run import catalog
from repro.run.execute import RunRequest, execute

RUN_ID = re.compile(r"^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{4,}$")
# Every artifact committed as evidence: the *.json files of each run folder (`repro cliff`
# artifacts have their own schema and golden test in tests/unit/cliff/test_cliff_command.py).
COMMITTED_DOCS = {
    p: json.loads(p.read_text())
    for p in sorted((ROOT / "artifacts" / "reference").rglob("*.json"))
    if RUN_ID.match(p.parent.name) and not p.name.startswith(".") and ".cliff-" not in p.name
}
COMMITTED_DOCS = {p: d for p, d in COMMITTED_DOCS.items() if d.get("kind") == "gpu-repro.artifact"}
COMMITTED = list(COMMITTED_DOCS)
# The ones whose verdict today's code must reach again: measured, and not written by the paired-CI
# method that the "attempt" folders document as superseded (artifacts/reference/h200/paired/README.md).
CURRENT_METHOD = [
    p
    for p in COMMITTED
    if not any("attempt" in part for part in p.relative_to(ROOT).parts)
    and COMMITTED_DOCS[p]["verdict"]["status"] not in ("skipped", "error")
]


@pytest.mark.parametrize("name", artifact.SCHEMA_FILES)
def test_schemas_are_valid_2020_12_with_major_version_in_id(name: str) -> None:
    schema = json.loads((ROOT / "schemas" / name).read_text())
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert ":v1:" in schema["$id"]
    assert "schema_version" in schema["required"]


def test_packaged_schemas_are_the_canonical_ones() -> None:
    # repro/schemas must be a link to the canonical schemas/, not a copy that can drift (comparing the
    # two folders' bytes would compare each file with itself through the link, and could never fail).
    link = ROOT / "repro" / "schemas"
    assert link.is_symlink() and link.resolve() == (ROOT / "schemas").resolve()
    assert artifact.SCHEMA_DIR.resolve() == (ROOT / "schemas").resolve()
    # The wheel ships what the link points at, and the loader finds every schema there.
    assert '"schemas/*.json"' in (ROOT / "pyproject.toml").read_text()
    assert sorted(p.name for p in (ROOT / "schemas").glob("*.json")) == sorted(artifact.SCHEMA_FILES)
    for name in artifact.SCHEMA_FILES:
        assert artifact.schema(name) == json.loads((ROOT / "schemas" / name).read_text())


def _variant() -> VariantResult:
    samples = (1.0e-3, 1.1e-3, 0.9e-3, 1.05e-3, 0.95e-3, 1.0e-3, 1.02e-3)
    timing = Timing("cuda_events", "s", 4, 10, "ci_target", 0.01, 5.0, 0.3, stats.summarize(samples), samples)
    return VariantResult(
        name="linear_fp32",
        label="nn.Linear",
        config={"allow_tf32": False},
        status="ok",
        device="cuda",
        timing=timing,
        kernels=(Kernel("sm90_xmma_gemm", 4, 400.0, 100.0, 1.0),),
        kernel_source="cuda",
        profiled_iterations=4,
        work=Work(flops=1e9, bytes=1e6, ceiling="fp32"),
    )


def test_variant_and_verdict_round_trip() -> None:
    v = _variant()
    verdict = Verdict(
        "m",
        "d",
        1.2,
        1.1,
        1.3,
        0.95,
        1.5,
        "not_reproduced",
        "a finding sentence",
        breakdown=({"batch": 1, "ratio": 1.2},),
    )
    for obj, cls in ((v, VariantResult), (verdict, Verdict)):
        data = artifact.to_jsonable(obj)
        assert from_jsonable(cls, json.loads(json.dumps(data))) == obj


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory, fast: SamplingConfig) -> tuple[dict[str, Any], Path]:
    """One real 5090-linear smoke run (artifact and its path), shared: the tests below only read it."""
    run_dir = tmp_path_factory.mktemp("smoke") / artifact.new_run_id()
    run_dir.mkdir()
    return execute(RunRequest("5090-linear", smoke=True, sampling=fast), run_dir)


def test_artifact_round_trip_through_schema(smoke_run: tuple[dict[str, Any], Path]) -> None:
    doc, path = smoke_run
    assert artifact.validation_errors(doc) == []
    loaded = artifact.load(path)
    assert loaded == doc
    variants = [from_jsonable(VariantResult, v) for v in loaded["variants"]]
    assert [artifact.to_jsonable(v) for v in variants] == loaded["variants"]
    assert from_jsonable(Verdict, loaded["verdict"]).status == doc["verdict"]["status"]
    fp_errors = artifact.validation_errors(doc["fingerprint"], "fingerprint.schema.json")
    assert fp_errors == []


def test_schema_rejects_what_it_should(smoke_run: tuple[dict[str, Any], Path]) -> None:
    doc, _ = smoke_run
    broken = json.loads(json.dumps(doc))
    broken["verdict"]["status"] = "maybe"
    assert any("verdict" in e for e in artifact.validation_errors(broken))
    broken = json.loads(json.dumps(doc))
    broken["run"]["created_utc"] = "yesterday"  # format checking is on
    assert any("created_utc" in e for e in artifact.validation_errors(broken))
    broken = json.loads(json.dumps(doc))
    broken["verdict"]["value"] = None  # a decided verdict must carry its number
    assert artifact.validation_errors(broken)


def test_write_new_is_atomic_and_never_overwrites(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    artifact.write_new(target, b"first")
    with pytest.raises(FileExistsError, match="never overwritten"):
        artifact.write_new(target, b"second")
    assert target.read_bytes() == b"first"
    assert os.listdir(tmp_path) == ["a.json"]  # no temp file left behind


def test_invalid_document_is_never_written(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="fails its schema"):
        artifact.write_artifact({"schema_version": "1.0"}, tmp_path / "x.json")
    assert not (tmp_path / "x.json").exists()


def test_run_ids_are_unique_and_sortable() -> None:
    # 24 random bits per id: 50 ids in one second collide with probability about 7e-5 (200 made it 1e-3, seen once).
    now = dt.datetime(2026, 12, 5, 11, 26, 17, tzinfo=dt.timezone.utc)
    ids = {artifact.new_run_id(now) for _ in range(50)}
    assert len(ids) == 50 and all(i.startswith("20261205T112617Z-") for i in ids)
    later = artifact.new_run_id(now + dt.timedelta(seconds=1))
    assert all(i < later for i in ids)


def test_committed_reference_artifacts_exist() -> None:
    # Each one's schema validation: test_model's test_every_committed_artifact_loads_into_the_model
    # (model.load validates before it types).
    assert COMMITTED, "artifacts/reference/ holds no artifacts"


def _one_of_each_shape() -> list[Path]:
    """The smallest committed artifact of each (schema version, repro, verdict status)."""
    shapes: dict[tuple[str, str, str], Path] = {}
    for path in sorted(COMMITTED, key=lambda p: p.stat().st_size):
        doc = COMMITTED_DOCS[path]
        shapes.setdefault((doc["schema_version"], doc["repro"]["id"], doc["verdict"]["status"]), path)
    return sorted(shapes.values())


def test_committed_artifacts_validate_with_check_jsonschema() -> None:
    # A second validator, the CLI users run, over one artifact of each shape; every committed
    # artifact is validated in-process against the same schema by test_committed_artifact_validates.
    exe = Path(sys.executable).parent / "check-jsonschema"
    if not exe.exists():
        pytest.skip("check-jsonschema is not installed in this environment")
    schema_dir = ROOT / "schemas"
    res = subprocess.run(
        [
            str(exe),
            "--base-uri",
            schema_dir.as_uri() + "/",
            "--schemafile",
            str(schema_dir / "artifact.schema.json"),
            *map(str, _one_of_each_shape()),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.filterwarnings("ignore:repro.(spec|catalog|measure|verdict) is the first plugin API:DeprecationWarning")
@pytest.mark.parametrize("path", CURRENT_METHOD, ids=[str(p.relative_to(ROOT)) for p in CURRENT_METHOD])
def test_committed_verdict_recomputes_from_its_variants(path: Path) -> None:
    """Golden files: today's verdict code, fed the committed measurements, reaches the same decision.

    The wording of findings may improve after a run (the artifact names the harness
    commit that wrote it); the status, the number and its CI may not change.
    """
    doc = json.loads(path.read_text())
    cls = catalog.get(doc["repro"]["id"], [ROOT / "tests" / "plugins_legacy"])
    params = cls.Params(**{k: tuple(v) if isinstance(v, list) else v for k, v in doc["repro"]["params"].items()})
    result = RunResult(variants=tuple(from_jsonable(VariantResult, v) for v in doc["variants"]), extra=doc["extra"])
    gpu = doc["fingerprint"].get("gpu") or {}
    verdict = cls().verdict(params, result)
    if doc["run"].get("quick"):  # as execute does for --quick: a not-reproduced CI over the threshold is undecided
        verdict = core_verdict.as_quick(verdict, doc["run"]["rerun"])
    decided = not_tested_here(verdict, cls.claim_arch, gpu.get("compute_capability"), gpu.get("name"))
    again = artifact.to_jsonable(decided)
    stored = doc["verdict"]
    # Since schema 1.3 a verdict resting on a stand-in for the seed's subject (torch's AdamW where
    # the seed is about TE's FusedAdam) is "inconclusive": the claim itself was not tested.
    # A claim about another GPU architecture is "inconclusive" on this one (not_tested_here, as execute does).
    untested = again["claim"] is not None and again["claim"]["tested"] is False
    assert again["status"] == ("inconclusive" if untested and stored["status"] in DECIDED else stored["status"])
    if again["value"] is None and stored["value"] is not None:
        # Since schema 1.6 a verdict whose headline (the seed's subject) did not run has no value; the
        # ratio the older verdict headlined (a stand-in's) is a breakdown row, recomputed the same.
        assert untested and again["status"] == "inconclusive"
        rows = [r for r in again["breakdown"] if r["comparison"] == stored.get("headline", r["comparison"])]
        row = min(rows, key=lambda r: abs(r["ratio"] - stored["value"]))
        assert row["ratio"] == pytest.approx(stored["value"])
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((stored["ci_low"], stored["ci_high"]))
        return
    assert again["value"] == pytest.approx(stored["value"])
    if again["ci_level"] > stored["ci_level"]:
        # Since schema 1.1 a "worst of k" verdict holds each of its k CIs at 1 - 0.05/k
        # (Bonferroni): the recomputed interval may only be wider than the stored one.
        assert again["ci_low"] <= stored["ci_low"] + 1e-12 and again["ci_high"] >= stored["ci_high"] - 1e-12
    else:
        assert (again["ci_low"], again["ci_high"]) == pytest.approx((stored["ci_low"], stored["ci_high"]))
    if not untested:
        assert again["finding"].split(":")[0] == stored["finding"].split(":")[0]


@pytest.mark.parametrize("path", COMMITTED, ids=[str(p.relative_to(ROOT)) for p in COMMITTED])
def test_committed_gpu_variants_carry_rate_and_share_of_a_measured_ceiling(path: Path) -> None:
    doc = json.loads(path.read_text())
    assert doc["validity"]["flag"] in ("valid", "suspect", "not_applicable")
    ceilings = doc["fingerprint"]["ceilings"] or {}
    for v in doc["variants"]:
        if v["status"] != "ok" or v["device"] != "cuda":
            continue
        a = v["achieved"]
        assert a is not None, v["name"]
        assert (a["tflops"] or a["gbps"]) and a["pct_of_ceiling"] is not None, v["name"]
        assert a["ceiling_value"] == pytest.approx(ceilings[a["ceiling"]]["value"]), v["name"]


@pytest.mark.parametrize(
    ("definition", "model"),
    [("stats", Stats), ("timing", Timing), ("kernel", Kernel), ("variant", VariantResult), ("verdict", Verdict)],
)
def test_the_schema_and_the_result_types_describe_the_same_fields(definition: str, model: type) -> None:
    """One format: every field of a result type is a property of its schema definition, and back."""
    schema = json.loads((artifact.SCHEMA_DIR / "artifact.schema.json").read_text())["$defs"][definition]
    fields = {f.name for f in dataclasses.fields(model)}
    assert set(schema["properties"]) == fields
    assert set(schema.get("required", ())) <= fields


def _at(path: str, schema: str = "artifact.schema.json") -> dict[str, Any]:
    """The schema object at a '/'-separated path of an artifact schema."""
    node: Any = json.loads((artifact.SCHEMA_DIR / schema).read_text())
    for part in path.split("/") if path else []:
        node = node[int(part)] if isinstance(node, list) else node[part]
    assert isinstance(node, dict)
    return node


# (schema location, the type that reads it, fields derived at load rather than read from the document)
READ_MODEL: list[tuple[str, type, frozenset[str]]] = [
    ("", model.Artifact, frozenset({"machine", "raw"})),
    ("properties/repro", model.ReproInfo, frozenset({"recorded"})),
    ("properties/repro/properties/plots/items", Plot, frozenset()),
    ("properties/run", model.RunInfo, frozenset()),
    ("properties/validity", model.Validity, frozenset()),
    ("properties/error/oneOf/1", model.ErrorInfo, frozenset()),
    ("$defs/verdict", model.Verdict, frozenset()),
    ("$defs/verdict/properties/claim", model.Claim, frozenset()),
    ("$defs/verdict/properties/not_run/items", model.NotRun, frozenset()),
    ("$defs/variant", VariantResult, frozenset()),
    ("$defs/variant/properties/work", Work, frozenset()),
    ("$defs/variant/properties/achieved", Achieved, frozenset()),
    ("$defs/timing", Timing, frozenset()),
    ("$defs/stats", Stats, frozenset()),
    ("$defs/kernel", Kernel, frozenset()),
    ("cliff:", model.Cliff, frozenset({"machine", "raw"})),
    ("cliff:properties/sweep", model.Sweep, frozenset()),
    ("cliff:properties/search", model.Search, frozenset()),
    ("cliff:$defs/point", model.Point, frozenset()),
    ("cliff:$defs/step", model.Step, frozenset()),
]


@pytest.mark.parametrize(
    ("where", "cls", "derived"),
    READ_MODEL,
    ids=[("cliff-" if w.startswith("cliff:") else "") + c.__name__ for w, c, _ in READ_MODEL],
)
def test_the_schema_and_the_read_model_describe_the_same_fields(where: str, cls: type, derived: frozenset[str]) -> None:
    """One format for reading too: each class of repro.evidence.model (and each result type it reuses)
    has a field per property of its schema object and no other, and every field without a default
    is one the schema requires, so every document that validates fills it. ``cliff:`` locations are
    in the cliff schema."""
    node = _at(
        where.removeprefix("cliff:"), "cliff.schema.json" if where.startswith("cliff:") else "artifact.schema.json"
    )
    named = set(node.get("properties", ())) | set(node.get("required", ()))
    fields = {f.name for f in dataclasses.fields(cls)} - derived
    assert named == fields
    needed = {
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    assert needed <= set(node.get("required", ())), needed - set(node.get("required", ()))


def test_the_read_verdict_and_its_rows_have_the_written_fields() -> None:
    """One description of a verdict: the written and the read verdict are both ``VerdictOf``; a row
    ``repro.core.verdict.breakdown_row`` writes has ``Row``'s fields in order, then its qualifiers,
    and reads back whole."""
    assert issubclass(Verdict, VerdictOf) and issubclass(model.Verdict, VerdictOf)
    assert [f.name for f in dataclasses.fields(model.Verdict)] == [f.name for f in dataclasses.fields(Verdict)]
    c = Comparison("a/b", "a", "b", 1.5, label="A over B", qualifiers={"batch": 4, "status": "shadowed"})
    written = core_verdict.breakdown_row(Ratio(c, 2.0, 1.9, 2.1, "reproduced", "above", True, 40), False, None)
    assert list(written)[: len(ROW_KEYS)] == [f.name for f in dataclasses.fields(model.Row)][:-1]
    assert set(written) - ROW_KEYS == {"batch"} and written["status"] == "reproduced"
    (row,) = model.run_of({"verdict": {"breakdown": [json.loads(json.dumps(written))]}}).verdict.breakdown
    assert {**{k: getattr(row, k) for k in ROW_KEYS}, **row.qualifiers} == written
    assert row.qualifiers == {"batch": 4} and row.n == 40 and row.headline is False


def test_the_raw_timings_shortcut_reports_what_the_draft_reports() -> None:
    # An array of raw timings is checked in one pass when every item is a non-negative number;
    # otherwise item by item, so a bad item still gets the draft's own error at its path.
    from jsonschema import Draft202012Validator

    from repro.evidence.artifact import _TIMES, _draft

    schema = {"type": "object", "properties": {"samples": {"type": "array", "items": _TIMES}}}
    plain = Draft202012Validator(schema)
    quick = _draft()(schema)
    for doc in ({"samples": [0.1, 2, 0]}, {"samples": [0.1, -1.0, 3]}, {"samples": [1, True]}, {"samples": ["x"]}):
        want = sorted((list(e.absolute_path), e.message) for e in plain.iter_errors(doc))
        got = sorted((list(e.absolute_path), e.message) for e in quick.iter_errors(doc))
        assert got == want, doc
