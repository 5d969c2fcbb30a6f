#!/usr/bin/env bash
# Produce the project's reference evidence on a GPU machine, exactly as committed under
# artifacts/reference/: doctor, `repro run 5090-linear`, `repro all`, a second run with one
# knob changed, the comparison, and a bundle. Usage: tools/gpu-evidence.sh OUT_DIR [LABEL]
set -uo pipefail
out=${1:?usage: tools/gpu-evidence.sh OUT_DIR [LABEL]}
label=${2:-h200}
repro=(python3 -m repro)
ref="$out/$label"
mkdir -p "$ref"
newest() { ls -1d "$1"/*/ | sort | tail -n 1; }

"${repro[@]}" doctor | tee "$ref/doctor.txt"
"${repro[@]}" doctor --json > "$ref/doctor.json"
"${repro[@]}" run 5090-linear --out "$ref/run-5090-linear"
"${repro[@]}" all --out "$ref/all" --timeout 900
all_run=$(newest "$ref/all")
# The same repro with one knob changed: cuBLAS forced to TF32 whatever torch asks.
TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 "${repro[@]}" run 5090-linear --out "$ref/tf32-override"
"${repro[@]}" compare "$all_run/5090-linear.json" "$(newest "$ref/tf32-override")" --out "$ref/compare-tf32-override.md"
# The linalg backend as the one knob: solve-512-cliff at batch 128, default vs cusolver.
for backend in default cusolver; do
    "${repro[@]}" run solve-512-cliff --set backends=$backend --set batches=128 --out "$ref/solve-$backend"
done
"${repro[@]}" compare "$(newest "$ref/solve-default")" "$(newest "$ref/solve-cusolver")" --out "$ref/compare-linalg-backend.md"
"${repro[@]}" bundle "$all_run" --out "$out/bundle.tar.gz"
ls -la "$out/bundle.tar.gz"
"${repro[@]}" validate "$ref"/*/*/
