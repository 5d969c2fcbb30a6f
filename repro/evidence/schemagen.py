"""Keep every artifact schema self-contained: what one schema takes from another is inlined under ``$defs``.

``schemas/fingerprint.schema.json`` is the one source of truth for the fingerprint, and
``schemas/artifact.schema.json`` for the sections a cliff artifact shares with it (repro, run,
validity, error). Each schema that uses them carries generated copies under ``$defs``, so a
maintainer can validate an artifact with that one file (``check-jsonschema --schemafile``,
``jsonschema.validate``) and nothing is fetched. ``python -m repro.evidence.schemagen`` rewrites the
copies (and points the references at them); ``--check`` exits 1 when one is stale
(tests/unit/evidence/test_schema_standalone.py runs the check).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "schemas"
# The schemas kept self-contained, and the copy that inlines the fingerprint in each.
TARGETS = ("artifact.schema.json", "cliff.schema.json")
DEF_NAME = "fingerprint"
POINTER = f"#/$defs/{DEF_NAME}"
_DEFS_LINE = '  "$defs": {\n'
# A reference into another schema file: "fingerprint.schema.json" or "artifact.schema.json#/properties/run".
_EXTERNAL = re.compile(r'"\$ref": "([a-z]+)\.schema\.json(?:#/properties/([A-Za-z0-9_]+))?"')
_GENERATED_LINE = re.compile(r'^    "[A-Za-z0-9_]+": \{"\$comment": "generated from ')


def generated(source: str) -> str:
    return f"generated from {source} by `python -m repro.evidence.schemagen`; edit that file, not this copy"


def _rebase(node: Any, pointer: str) -> Any:
    """The copied schema's own "#/..." references, pointed at where its copy lives."""
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str) and v.startswith("#"):
                out[k] = pointer + v[1:]
            else:
                out[k] = _rebase(v, pointer)
        return out
    if isinstance(node, list):
        return [_rebase(v, pointer) for v in node]
    return node


def _copy(source_name: str, source: dict[str, Any], section: str | None, def_name: str) -> dict[str, Any]:
    """A whole schema (without ``$schema``/``$id``) or one of its properties, ready for ``$defs``."""
    body = source if section is None else source["properties"][section]
    body = {k: v for k, v in body.items() if k not in ("$schema", "$id")}
    if section is not None and "$ref" in json.dumps(body):
        raise ValueError(f"{source_name}#/properties/{section} holds a $ref; inline it by hand or extend schemagen")
    rebased: dict[str, Any] = _rebase(body, f"#/$defs/{def_name}")
    return {"$comment": generated(source_name), **rebased}


def inline(artifact_schema: dict[str, Any], fingerprint_schema: dict[str, Any]) -> dict[str, Any]:
    """The artifact schema with the fingerprint schema copied under ``$defs`` (as ``splice`` writes it)."""
    out: dict[str, Any] = json.loads(json.dumps(artifact_schema))
    out["properties"]["fingerprint"] = {"$ref": POINTER}
    out.setdefault("$defs", {})[DEF_NAME] = _copy("fingerprint.schema.json", fingerprint_schema, None, DEF_NAME)
    return out


def splice(text: str, sources: dict[str, dict[str, Any]]) -> str:
    """``text`` (a schema file) with every reference into another schema file pointed at a fresh copy
    under ``$defs``, each on one line first in ``$defs``. Text, not a re-dump: the hand-written layout
    of the rest of the file stays as it is. Running it twice changes nothing."""
    wanted: dict[str, tuple[str, str | None]] = {}

    def local(m: re.Match[str]) -> str:
        stem, section = m.group(1), m.group(2)
        name = DEF_NAME if stem == "fingerprint" and section is None else f"{stem}_{section}"
        wanted[name] = (f"{stem}.schema.json", section)
        return f'"$ref": "#/$defs/{name}"'

    text = _EXTERNAL.sub(local, text)
    # References already pointed at copies keep their copies (the second run of an idempotent rewrite).
    for line in text.splitlines():
        m = re.match(r'^    "([A-Za-z0-9_]+)": \{"\$comment": "generated from ([a-z]+\.schema\.json)', line)
        if m and m.group(1) not in wanted:
            name, src = m.group(1), m.group(2)
            wanted[name] = (src, None if name == DEF_NAME else name.split("_", 1)[1])
    lines = [ln for ln in text.splitlines(keepends=True) if not _GENERATED_LINE.match(ln)]
    if _DEFS_LINE not in lines:
        raise ValueError("expected a top-level line '  \"$defs\": {' in the schema")
    at = lines.index(_DEFS_LINE) + 1
    for name in sorted(wanted, reverse=True):
        src, section = wanted[name]
        copy = _copy(src, sources[src], section, name)
        lines.insert(at, f'    "{name}": {json.dumps(copy, ensure_ascii=False)},\n')
    return "".join(lines)


def expected(schema_dir: Path = SCHEMA_DIR, target: str = "artifact.schema.json") -> str:
    """A target schema's text as it must be, given the schemas it copies from on disk."""
    sources = {
        name: json.loads((schema_dir / name).read_text())
        for name in ("artifact.schema.json", "fingerprint.schema.json")
        if (schema_dir / name).is_file()
    }
    return splice((schema_dir / target).read_text(), sources)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args not in ([], ["--check"]):
        print(f"usage: python -m repro.evidence.schemagen [--check]; got {' '.join(args)!r}", file=sys.stderr)
        return 2
    stale = []
    for target in TARGETS:
        path = SCHEMA_DIR / target
        if not path.is_file():
            continue
        want = expected(SCHEMA_DIR, target)
        if path.read_text() != want:
            if args:
                stale.append(str(path))
            else:
                path.write_text(want)
    for path_text in stale:
        print(f"{path_text}: a generated $defs copy is stale; run python -m repro.evidence.schemagen", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
