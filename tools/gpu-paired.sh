#!/usr/bin/env bash
# Issue-8 evidence on a GPU machine: five back-to-back `repro run 5090-linear` processes and the
# older-API plugin copy of 5090-linear (the shim) when FIVE=1, then `repro all` N times back to
# back. Each step is packed into OUT_DIR/<step>.tar.gz as soon as it ends, so a call cut short
# still returns what finished. Usage: tools/gpu-paired.sh OUT_DIR [N_ALL] [FIRST_INDEX]
set -uo pipefail
out=${1:?usage: tools/gpu-paired.sh OUT_DIR [N_ALL] [FIRST_INDEX]}
n_all=${2:-1}
first=${3:-1}
repro=(python3 -m repro)
work=$(mktemp -d)
pack() { tar -C "$work" -czf "$out/$1.tar.gz" "$1"; }
if [ "${FIVE:-1}" = 1 ]; then
    for i in 1 2 3 4 5; do
        "${repro[@]}" run 5090-linear --out "$work/run5" 2>>"$work/run5.log"
    done
    mv "$work/run5.log" "$work/run5/"
    pack run5
    "${repro[@]}" run legacy-linear --repro-path tests/plugins_legacy --out "$work/plugin" 2>"$work/plugin.log"
    mv "$work/plugin.log" "$work/plugin/"
    pack plugin
fi
for i in $(seq "$first" $((first + n_all - 1))); do
    t0=$(date +%s.%N)
    "${repro[@]}" all --out "$work/all$i" --timeout 600 2>"$work/all$i.log"
    echo "repro all #$i wall $(python3 -c "print(f'{$(date +%s.%N) - $t0:.1f}')") s" | tee "$work/all$i.wall"
    mv "$work/all$i.log" "$work/all$i.wall" "$work/all$i/"
    pack "all$i"
done
python3 tools/summarize.py "$work"
