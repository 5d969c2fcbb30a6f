#!/usr/bin/env bash
# Issue-8 evidence on a GPU machine: five back-to-back `repro run 5090-linear` processes, the
# older-API plugin copy of 5090-linear (the shim), then `repro all` N times back to back.
# Usage: tools/gpu-paired.sh OUT_DIR [N_ALL]
set -uo pipefail
out=${1:?usage: tools/gpu-paired.sh OUT_DIR [N_ALL]}
n_all=${2:-1}
repro=(python3 -m repro)
mkdir -p "$out"
for i in 1 2 3 4 5; do
    "${repro[@]}" run 5090-linear --out "$out/run5" 2>>"$out/run5.log"
done
"${repro[@]}" run legacy-linear --repro-path tests/plugins_legacy --out "$out/plugin" 2>>"$out/plugin.log"
for i in $(seq 1 "$n_all"); do
    t0=$(date +%s.%N)
    "${repro[@]}" all --out "$out/all" --timeout 600 2>>"$out/all.log"
    echo "repro all #$i wall $(python3 -c "print(f'{$(date +%s.%N) - $t0:.1f}')") s" | tee -a "$out/walls.txt"
done
python3 tools/summarize.py "$out"
