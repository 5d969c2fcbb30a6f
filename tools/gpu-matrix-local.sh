#!/usr/bin/env bash
# Issue-13 evidence on a GPU machine: do concurrent cells on neighbouring GPUs disturb each other?
# `repro matrix run --backend local` runs the 5 catalog repros twice from one spec:
#   parallel:   --devices 0,1  (two cells at a time, one per GPU)
#   sequential: --devices 0    (the same cells one after another on GPU 0)
# On a 1-GPU machine both runs are sequential on GPU 0 (say so when reporting: it then shows only
# run-to-run spread). Prints a per-repro table last; everything lands under OUT_DIR.
#
#   tools/gpu-matrix-local.sh OUT_DIR          (from the repository root; about 400 s on 2 H200s:
#                                              one `repro all` took 215-260 s there)
#
# Needs a Python with torch, typer and jsonschema importable: python3, or PYTHON=/path/to/python
# (PYTHONPATH is extended with this checkout).
set -uo pipefail
out=${1:?usage: tools/gpu-matrix-local.sh OUT_DIR}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
py=${PYTHON:-python3}
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
# Without nvidia-smi on PATH, ask torch.
[ "${ngpu:-0}" -gt 0 ] || ngpu=$("$py" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
echo "GPUs: $ngpu" | tee "$out/gpus.txt"
nvidia-smi -L >>"$out/gpus.txt" 2>&1 || true

"$py" - "$out/spec.json" <<'PY'
import json, sys
spec = {
    "schema_version": 1,
    "name": "local-gpus",
    # collect_env off: it is the same in both runs, and it costs about 8 s per cell.
    "collect_env": False,
    "timeout_s": 600,
    "lanes": [{"name": "host"}],
    "repros": ["5090-linear", "fused-adam-capturable", "lora-batch-scaling", "solve-512-cliff", "graph-memset"],
    "gpus": [{"count": 1}],
}
json.dump(spec, open(sys.argv[1], "w"), indent=2)
PY

run() {  # run NAME DEVICES
    local t0=$SECONDS
    "$py" -m repro matrix run "$out/spec.json" --backend local --out "$out/$1" --devices "$2" >"$out/$1.log" 2>&1
    echo "$1 (devices $2): exit $?, wall $((SECONDS - t0)) s" | tee -a "$out/walls.txt"
}
if [ "$ngpu" -ge 2 ]; then
    run parallel 0,1
else
    run sequential-a 0
fi
run sequential 0

"$py" - "$out" <<'PY' | tee "$out/comparison.md"
import glob, json, os, sys
out = sys.argv[1]
runs = [r for r in ("parallel", "sequential-a", "sequential") if os.path.isdir(os.path.join(out, r))]


def cells(run):
    found = {}
    for path in glob.glob(os.path.join(out, run, "cells", "*", "*", "*.json")):
        doc = json.load(open(path))
        if doc.get("kind") == "gpu-repro.artifact":
            sched = doc["fingerprint"].get("scheduler") or {}
            found[doc["repro"]["id"]] = (doc, sched)
    return found


a, b = (cells(r) for r in runs)
def gpu(doc):
    g = doc["fingerprint"].get("gpu") or {}
    cvd = (doc["fingerprint"].get("env") or {}).get("CUDA_VISIBLE_DEVICES", "?")
    return f"{cvd} {str(g.get('uuid') or '?')[:13]}"


print(f"| repro | {runs[0]}: ratio [CI] | GPU (index uuid) | {runs[1]}: ratio [CI] | GPU (index uuid) | change | CIs overlap |")
print("|---|---|---|---|---|---|---|")
for rid in sorted(set(a) | set(b)):
    row = [rid]
    vals = []
    for side in (a, b):
        if rid not in side:
            row += ["missing", "-"]
            vals.append(None)
            continue
        v = side[rid][0]["verdict"]
        where = gpu(side[rid][0])
        if v.get("value") is None:
            row += [v["status"], where]
            vals.append(None)
        else:
            row += [f"{v['value']:.4f} [{v['ci_low']:.4f}, {v['ci_high']:.4f}] {v['status']}", where]
            vals.append(v)
    if all(vals):
        x, y = vals
        row.append(f"{(y['value'] / x['value'] - 1) * 100:+.2f}%")
        row.append("yes" if x["ci_low"] <= y["ci_high"] and y["ci_low"] <= x["ci_high"] else "NO")
    else:
        row += ["-", "-"]
    print("| " + " | ".join(row) + " |")
PY
