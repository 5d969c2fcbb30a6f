"""The table tools/gpu-final.sh prints last: each repro's verdict, and its standalone script's ratio against it.

python tools/gpu-final-table.py OUT_DIR RUN_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from repro.evidence.standalone import parse_output

REPROS = ("5090-linear", "fused-adam-capturable", "lora-batch-scaling", "solve-512-cliff", "graph-memset")


def main(out: Path, run: Path) -> None:
    print("| repro | status | headline (CI) | script ratio | script vs headline | within 10% |")
    print("|---|---|---|---|---|---|")
    for rid in REPROS:
        path = run / f"{rid}.json"
        if not path.is_file():
            print(f"| {rid} | no artifact | | | | |")
            continue
        v = json.loads(path.read_text())["verdict"]
        head = f"{v['value']:.4f} ({v['ci_low']:.4f}-{v['ci_high']:.4f})" if v.get("value") is not None else "-"
        printed = out / "scripts" / f"{rid}.out"
        got = parse_output(printed.read_text()) if printed.is_file() else {}
        row = got.get(v.get("headline") or "") or next(iter(got.values()), {})
        ratio = row.get("ratio")
        if ratio is None or v.get("value") is None:
            print(f"| {rid} | {v['status']} | {head} | - | - | - |")
            continue
        diff = ratio / v["value"] - 1
        ok = "yes" if abs(diff) <= 0.10 else "NO"
        print(f"| {rid} | {v['status']} | {head} | {ratio:.4f} | {diff * 100:+.1f}% | {ok} |")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
