"""artifact.schema.json alone validates an artifact: no registry, no flags, no network."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from helpers import ROOT

from repro.evidence import artifact, schemagen

SCHEMA = ROOT / "schemas" / "artifact.schema.json"
REFERENCE = ROOT / "artifacts" / "reference" / "h200" / "paired" / "all" / "20261129T233452Z-51a4de"

# Loaded by every Python started with this folder on PYTHONPATH: any socket connect or name
# lookup raises, so a validator that tries to fetch a $ref fails loudly instead of waiting.
NO_NETWORK = """
import socket

class NetworkBlocked(OSError):
    pass

def _blocked(*args, **kwargs):
    raise NetworkBlocked("network blocked by the test (a schema $ref was fetched)")

socket.socket.connect = _blocked
socket.socket.connect_ex = _blocked
socket.create_connection = _blocked
socket.getaddrinfo = _blocked
"""


def _offline(tmp_path: Path) -> dict[str, str]:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(NO_NETWORK)
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    # A dead proxy too: a client that ignored the patched socket would still not get out.
    env.update(PYTHONPATH=str(site), HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9")
    return env


def _check_jsonschema(tmp_path: Path, schema: Path, doc: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "check_jsonschema", "--schemafile", str(schema), str(doc)]
    return subprocess.run(cmd, capture_output=True, text=True, env=_offline(tmp_path), timeout=300, check=False)


@pytest.mark.parametrize("target", schemagen.TARGETS)
def test_every_schema_is_generated_fresh_and_refers_only_inside_itself(target: str) -> None:
    path = ROOT / "schemas" / target
    assert path.read_text() == schemagen.expected(ROOT / "schemas", target), "run: python -m repro.evidence.schemagen"
    assert all(r.startswith("#/") for r in _refs(json.loads(path.read_text())))


def test_the_inlined_fingerprint_is_generated_from_its_one_source() -> None:
    assert SCHEMA.read_text() == schemagen.expected(), "run: python -m repro.evidence.schemagen"
    art = json.loads(SCHEMA.read_text())
    fp = json.loads((ROOT / "schemas" / "fingerprint.schema.json").read_text())
    inlined = art["$defs"]["fingerprint"]
    assert {k: v for k, v in inlined.items() if k != "$comment"} == {
        k: v for k, v in fp.items() if k not in ("$schema", "$id")
    }
    assert art["properties"]["fingerprint"] == {"$ref": "#/$defs/fingerprint"}


def test_a_stale_copy_is_caught(tmp_path: Path) -> None:
    for name in artifact.SCHEMA_FILES:
        (tmp_path / name).write_text((ROOT / "schemas" / name).read_text())
    fp = json.loads((tmp_path / "fingerprint.schema.json").read_text())
    fp["properties"]["extra_probe"] = {"type": "string"}
    (tmp_path / "fingerprint.schema.json").write_text(json.dumps(fp))
    assert (tmp_path / "artifact.schema.json").read_text() != schemagen.expected(tmp_path)
    assert '"extra_probe"' in schemagen.expected(tmp_path)


def _refs(node: object) -> list[str]:
    if isinstance(node, dict):
        return [v for k, v in node.items() if k == "$ref"] + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


@pytest.mark.parametrize("name", artifact.SCHEMA_FILES)
def test_ids_name_no_domain_and_every_ref_stays_inside(name: str) -> None:
    schema = json.loads((ROOT / "schemas" / name).read_text())
    assert schema["$id"].startswith("urn:gpu-repro:"), schema["$id"]
    assert "://" not in json.dumps({k: v for k, v in schema.items() if k != "$schema"}).replace(
        "https://json-schema.org/draft/2020-12/schema", ""
    ).replace('"format": "uri"', "")
    assert all(r.startswith("#/") for r in _refs(schema))


def test_plain_jsonschema_validate_with_the_one_file() -> None:
    schema = json.loads(SCHEMA.read_text())
    doc = json.loads((REFERENCE / "5090-linear.json").read_text())
    jsonschema.validate(doc, schema)  # no registry, no resolver: nothing to fetch
    bad = copy.deepcopy(doc)
    bad["fingerprint"]["harness"]["name"] = "something-else"  # checked only by the inlined fingerprint
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_check_jsonschema_with_no_flags_and_the_network_blocked(tmp_path: Path) -> None:
    ok = _check_jsonschema(tmp_path, SCHEMA, REFERENCE / "solve-512-cliff.json")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    doc = json.loads((REFERENCE / "graph-memset.json").read_text())
    doc["fingerprint"]["gpu"]["sm_count"] = "many"
    bad_path = tmp_path / "bad.json"
    bad_path.write_text(json.dumps(doc))
    bad = _check_jsonschema(tmp_path, SCHEMA, bad_path)
    assert bad.returncode == 1 and "sm_count" in bad.stdout + bad.stderr


def test_the_network_block_really_blocks_a_fetch(tmp_path: Path) -> None:
    # The control: the same setup refuses a schema whose $ref must be fetched, so the test
    # above cannot pass by reaching the network.
    remote = tmp_path / "remote.schema.json"
    remote.write_text(json.dumps({"$ref": "https://json-schema.example/never.json"}))
    doc = tmp_path / "doc.json"
    doc.write_text("{}")
    proc = _check_jsonschema(tmp_path, remote, doc)
    assert proc.returncode != 0 and "network blocked by the test" in proc.stdout + proc.stderr
    probe = [sys.executable, "-c", "import urllib.request; urllib.request.urlopen('https://pypi.org', timeout=5)"]
    blocked = subprocess.run(probe, capture_output=True, text=True, env=_offline(tmp_path), timeout=60, check=False)
    assert blocked.returncode != 0 and "network blocked by the test" in blocked.stderr


def test_old_artifacts_still_validate_and_new_fields_are_optional() -> None:
    doc = json.loads((REFERENCE / "lora-batch-scaling.json").read_text())
    assert doc["schema_version"] == "1.1" and "impact" not in doc["repro"]
    assert artifact.validation_errors(doc) == []
    doc["schema_version"] = artifact.ARTIFACT_SCHEMA_VERSION
    doc["repro"].update(
        impact="x", seed_gpus=["RTX 5090"], script="print(1)", plots=[{"name": "b", "x": "batch", "x_label": "batch"}]
    )
    assert artifact.validation_errors(doc) == []
    doc["repro"]["plots"] = [{"name": "b"}]
    assert artifact.validation_errors(doc)
