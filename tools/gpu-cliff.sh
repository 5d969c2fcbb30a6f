#!/usr/bin/env bash
# Issue-14 evidence on a GPU machine: the three `repro cliff` acceptance commands, each in its own
# process, outputs under $OUT (or OUT_DIR), a table last. No matplotlib is needed: without it the
# plots are skipped here and `repro report RUN_DIR/*.json --out FILE` draws them on a CPU machine.
#
# Measured on one H200 (2026-11-30) with a 45 s search budget: 62 s for the cuSOLVER sweep
# (its 9-point grid alone took 49 s, so that budget stopped it before refining), 26 s for the
# default backend, 31 s for 5090-linear. The commands run with the default budget
# (repro.cliff.search.DEFAULT_BUDGET_S) unless CLIFF_BUDGET is set.
# Usage: OUT=/some/dir tools/gpu-cliff.sh   (or tools/gpu-cliff.sh OUT_DIR)
set -uo pipefail
out=${1:-${OUT:?usage: tools/gpu-cliff.sh OUT_DIR (or set OUT)}}
budget=()
[ -n "${CLIFF_BUDGET:-}" ] && budget=(--budget "$CLIFF_BUDGET")
repro=(python3 -m repro)
mkdir -p "$out"
step() {  # name, then the repro cliff arguments
    local name=$1
    shift
    local t0
    t0=$(date +%s.%N)
    "${repro[@]}" cliff "$@" "${budget[@]}" --out "$out/$name" 2>"$out/$name.log"
    echo "rc=$? wall=$(python3 -c "print(f'{$(date +%s.%N) - $t0:.1f}')")" >"$out/$name.wall"
    tail -n 4 "$out/$name.log"
}
step solve-cusolver solve-512-cliff --param n --range 480:560 --set backends=cusolver --set batches=64
step solve-default solve-512-cliff --param n --range 480:560 --set backends=default --set batches=64
step linear-features 5090-linear --param features --range 700:800
"${repro[@]}" validate "$out"/*/*/ 2>&1 | tail -n 3
python3 - "$out" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
print(f"\n{'run':<16} {'status':<8} {'timed':>9} {'wall s':>7}  steps (kernels before -> after)")
for name in ("solve-cusolver", "solve-default", "linear-features"):
    wall = open(os.path.join(out, f"{name}.wall")).read().strip()
    docs = glob.glob(os.path.join(out, name, "*", "*.cliff-*.json"))
    if not docs:
        print(f"{name:<16} {'none':<8} {'-':>9} {wall:>7}  (see {name}.log)")
        continue
    d = json.load(open(docs[0]))
    se = d["search"]
    if d["status"] in ("skipped", "error"):
        print(f"{name:<16} {d['status']:<8} {'-':>9} {wall.split('wall=')[-1]:>7}  {d['finding'][:100]}")
        continue
    steps = "; ".join(
        f"{s['lo']}->{s['hi']}{'' if s['resolved'] else '?'} x{s['ratio']:.2f} [{s['ci_low']:.2f},{s['ci_high']:.2f}]"
        f" ({(s['kernels_before'] or ['-'])[0][:30]} -> {(s['kernels_after'] or ['-'])[0][:30]})"
        for s in d["steps"]
    ) or f"no step (grid spacing {se['resolution']})"
    timed = f"{se['points_measured']}/{se['dense_points']}"
    print(f"{name:<16} {d['status']:<8} {timed:>9} {wall.split('wall=')[-1]:>7}  {steps}")
PY
