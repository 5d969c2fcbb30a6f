"""Keep artifact.schema.json self-contained: the fingerprint schema is inlined under ``$defs``.

``schemas/fingerprint.schema.json`` is the one source of truth for the fingerprint; its copy
under ``$defs/fingerprint`` of ``schemas/artifact.schema.json`` is generated from it, so a
maintainer can validate an artifact with that one file (``check-jsonschema --schemafile``,
``jsonschema.validate``) and nothing is fetched. ``python -m repro.schemagen`` rewrites the
copy; ``--check`` exits 1 when it is stale (tests/test_schema_standalone.py runs the check).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"
# Where the inlined copy lives inside the artifact schema, and the pointer that reaches it.
DEF_NAME = "fingerprint"
POINTER = f"#/$defs/{DEF_NAME}"


def _rebase(node: Any) -> Any:
    """The fingerprint schema's own "#/..." references, pointed at its inlined copy."""
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str) and v.startswith("#"):
                out[k] = POINTER + v[1:]
            else:
                out[k] = _rebase(v)
        return out
    if isinstance(node, list):
        return [_rebase(v) for v in node]
    return node


GENERATED = "generated from fingerprint.schema.json by `python -m repro.schemagen`; edit that file, not this copy"
_DEFS_LINE = '  "$defs": {\n'
_COPY_PREFIX = f'    "{DEF_NAME}": {{"$comment": '


def inline(artifact_schema: dict[str, Any], fingerprint_schema: dict[str, Any]) -> dict[str, Any]:
    """The artifact schema with the fingerprint schema copied under ``$defs`` (no ``$schema``/``$id``).

    The copy drops ``$id`` so it is no separate resource: every reference resolves inside
    the one document, whatever base URI a validator gives it.
    """
    copy = {"$comment": GENERATED, **{k: v for k, v in fingerprint_schema.items() if k not in ("$schema", "$id")}}
    out: dict[str, Any] = json.loads(json.dumps(artifact_schema))
    out["properties"]["fingerprint"] = {"$ref": POINTER}
    out.setdefault("$defs", {})[DEF_NAME] = _rebase(copy)
    return out


def splice(artifact_text: str, fingerprint_schema: dict[str, Any]) -> str:
    """``artifact_text`` with its inlined copy replaced by a fresh one, on one line first in ``$defs``.

    Text, not a re-dump: the hand-written layout of the rest of the file stays as it is.
    """
    lines = [ln for ln in artifact_text.splitlines(keepends=True) if not ln.startswith(_COPY_PREFIX)]
    if _DEFS_LINE not in lines:
        raise ValueError("artifact.schema.json: expected a top-level line '  \"$defs\": {'")
    copy: dict[str, Any] = inline({"properties": {}}, fingerprint_schema)["$defs"][DEF_NAME]
    at = lines.index(_DEFS_LINE) + 1
    lines.insert(at, f'    "{DEF_NAME}": {json.dumps(copy, ensure_ascii=False)},\n')
    return "".join(lines)


def expected(schema_dir: Path = SCHEMA_DIR) -> str:
    """The artifact schema's text as it must be, given the fingerprint schema on disk."""
    fp = json.loads((schema_dir / "fingerprint.schema.json").read_text())
    return splice((schema_dir / "artifact.schema.json").read_text(), fp)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    path = SCHEMA_DIR / "artifact.schema.json"
    want = expected()
    if args == ["--check"]:
        if path.read_text() != want:
            print(f"{path}: $defs/{DEF_NAME} is stale; run python -m repro.schemagen", file=sys.stderr)
            return 1
        return 0
    if args:
        print(f"usage: python -m repro.schemagen [--check]; got {' '.join(args)!r}", file=sys.stderr)
        return 2
    path.write_text(want)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
