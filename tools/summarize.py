"""Print one line per artifact under the given folders: id, status, headline ratio and CI, pairing, stop reason.

Used at the end of GPU evidence runs so the device call's output ends with a short table.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    rows = []
    for root in argv:
        for f in sorted(Path(root).rglob("*.json")):
            try:
                doc = json.loads(f.read_text())
            except (OSError, json.JSONDecodeError):
                continue
            if not isinstance(doc, dict) or doc.get("kind") != "gpu-repro.artifact":
                continue
            v = doc["verdict"]
            heads = [x for x in doc["variants"] if x["name"] in (v.get("variants") or [])]
            stops = {x["timing"]["stop_reason"] for x in heads if x.get("timing")}
            nr = {len(x["timing"].get("rounds") or []) for x in heads if x.get("timing")}
            val = v.get("value")
            ci = f"{v['ci_low']:.4f}-{v['ci_high']:.4f}" if v.get("ci_low") is not None else "-"
            hw = (v["ci_high"] - v["ci_low"]) / 2 / val if val else None
            rows.append(
                f"{f.parent.name[:22]:22} {doc['repro']['id']:22} {v['status']:15} "
                f"{(f'{val:.4f}' if val is not None else '-'):>8} {ci:>15} "
                f"{(f'{hw:.2%}' if hw is not None else '-'):>7} paired={v.get('paired')} "
                f"stop={','.join(sorted(stops))} rounds={','.join(map(str, sorted(nr)))} "
                f"{doc['run']['duration_s']:.0f}s"
            )
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
