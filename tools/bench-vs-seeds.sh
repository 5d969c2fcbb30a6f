#!/usr/bin/env bash
# Issue-15 benchmark (a benchmark, not a timed test): the seed documents' own snippets
# (seeds_raw.py: each in its own process, wall-clock, no intervals) and `repro all` back to
# back in one job, then both wall times, their ratio, and where `repro all`'s time went
# (each artifact's run.phases_s and per-variant warm-up/sampling/profiling).
# seeds_raw.py is ../shared/bench/seeds_raw.py where that exists, else the copy in tools/
# (a GPU machine gets only this repository); its sha256 is printed so the two can be matched.
# Usage: tools/bench-vs-seeds.sh OUT_DIR [repro all arguments...]
set -uo pipefail
out=${1:?usage: tools/bench-vs-seeds.sh OUT_DIR [repro all arguments...]}
shift
here=$(cd "$(dirname "$0")" && pwd)
seeds=$here/../../shared/bench/seeds_raw.py
[ -f "$seeds" ] || seeds=$here/seeds_raw.py
mkdir -p "$out"
echo "seeds_raw.py: $seeds (sha256 $(sha256sum "$seeds" | cut -d' ' -f1))"
t0=$(date +%s.%N)
OUT=$out python3 "$seeds" >"$out/seeds_raw.log" 2>&1
echo "seeds_raw rc=$?"
t1=$(date +%s.%N)
python3 -m repro all --out "$out/all" "$@" 2>"$out/all.log"
echo "repro all rc=$?"
t2=$(date +%s.%N)
python3 - "$out" "$t0" "$t1" "$t2" <<'PY'
import glob
import json
import os
import sys

from repro.evidence import artifact

out, t0, t1, t2 = sys.argv[1], *map(float, sys.argv[2:])
seeds, repro = t1 - t0, t2 - t1
lines = ["| repro | status | headline (95% CI) | half-width | seconds | where the time went |", "| --- | --- | --- | --- | --- | --- |"]
for path in sorted(glob.glob(os.path.join(out, "all", "*", "*.json"))):
    d = json.load(open(path))
    v = d["verdict"]
    hw = (v["ci_high"] - v["ci_low"]) / 2 / v["value"] if v.get("value") and v.get("ci_low") is not None else None
    head = f"{v['value']:.4f} ({v['ci_low']:.4f}-{v['ci_high']:.4f})" if hw is not None else "-"
    spent = artifact.format_breakdown(artifact.time_breakdown(d))
    busy = artifact.format_busy(d)
    spent += f"; {busy}" if busy else ""
    lines.append(
        f"| {d['repro']['id']} | {v['status']} | {head} | {f'{hw:.2%}' if hw is not None else '-'} "
        f"| {d['run']['duration_s']:.1f} | {spent} |"
    )
lines += [
    "",
    "| | wall time |",
    "| --- | --- |",
    f"| raw seed scripts (seeds_raw.py) | {seeds:.1f} s |",
    f"| `repro all` | {repro:.1f} s |",
    f"| ratio repro all / seeds | {repro / seeds:.2f}x |",
]
text = "\n".join(lines)
open(os.path.join(out, "bench.md"), "w").write(text + "\n")
print(text)
PY
