#!/usr/bin/env bash
# Issue-11 evidence on a GPU machine: the standalone scripts of the two headline comparisons
# (`repro script ...`, plain torch) against the harness's own headline for the same params
# (`repro run ...`). Their ratios should agree within 10%. Everything goes under $OUT; a table
# is printed last. Expected device time: about 90 s (two torch imports and profiler start-ups
# per harness run dominate; each script times ~25 rounds).
# Usage: OUT=/some/dir tools/gpu-scripts.sh   (SMOKE=1: shrunken sizes, default backend: a CPU dry run
# of the plumbing, not evidence)
set -uo pipefail
out=${OUT:?set OUT to an empty folder}
mkdir -p "$out/runs"
repro=(python3 -m repro)
cases=(
    "5090-linear|--set tf32_variants=false"
    "solve-512-cliff|--set backends=cusolver --set batches=128 --set n_min=511 --set n_max=512"
)
if [ "${SMOKE:-0}" = 1 ]; then
    cases=("5090-linear|--smoke --set tf32_variants=false" "solve-512-cliff|--smoke --set batches=4")
fi
for case in "${cases[@]}"; do
    id=${case%%|*}
    # shellcheck disable=SC2206  # the --set words are meant to split
    sets=(${case#*|})
    "${repro[@]}" script "$id" "${sets[@]}" >"$out/$id.py" 2>"$out/$id.script.err"
    t0=$(date +%s)
    python3 "$out/$id.py" >"$out/$id.script.txt" 2>>"$out/$id.script.err"
    echo "$id script: rc=$? $(($(date +%s) - t0)) s" | tee -a "$out/timings.txt"
    t0=$(date +%s)
    "${repro[@]}" run "$id" "${sets[@]}" --no-collect-env --budget 3 --out "$out/runs/$id" >"$out/$id.run.json" \
        2>"$out/$id.run.log" --json
    echo "$id harness: rc=$? $(($(date +%s) - t0)) s" | tee -a "$out/timings.txt"
done
python3 - "$out" <<'PY'
import glob
import json
import sys
from pathlib import Path

from repro.evidence.standalone import parse_output

out = Path(sys.argv[1])
rows = []
for rid in ("5090-linear", "solve-512-cliff"):
    script = parse_output((out / f"{rid}.script.txt").read_text()) if (out / f"{rid}.script.txt").exists() else {}
    arts = glob.glob(str(out / "runs" / rid / "*" / f"{rid}.json"))
    v = json.loads(Path(arts[0]).read_text())["verdict"] if arts else {}
    head = v.get("headline")
    s = (script.get(head) or next(iter(script.values()), {})).get("ratio")
    h = v.get("value")
    diff = abs(s - h) / h * 100 if s and h else None
    ok = "yes" if diff is not None and diff <= 10 else "NO"
    rows.append((rid, head, s, h, diff, ok))
lines = ["| repro | comparison | script ratio | harness ratio (95% CI) | difference | within 10% |", "|---|---|---|---|---|---|"]
for rid, head, s, h, diff, ok in rows:
    ci = ""
    for a in glob.glob(str(out / "runs" / rid / "*" / f"{rid}.json")):
        vv = json.loads(Path(a).read_text())["verdict"]
        ci = f" ({vv['ci_low']:.3f}-{vv['ci_high']:.3f})" if vv.get("ci_low") is not None else ""
    fs = f"{s:.3f}" if s else "-"
    fh = f"{h:.3f}{ci}" if h else "-"
    fd = f"{diff:.1f}%" if diff is not None else "-"
    lines.append(f"| {rid} | {head} | {fs} | {fh} | {fd} | {ok} |")
(out / "table.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
