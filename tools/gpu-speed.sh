#!/usr/bin/env bash
# The speed acceptance in one device call, in this order: the seeds' raw scripts (seeds_raw.py),
# three `repro all` with defaults back to back (the first is the bench's), `repro all --target-ci
# 0.02 --budget 2` right after them, `repro all --quick`, five `repro run 5090-linear` with
# defaults. A time guard skips a step that would not end before GPU_SPEED_BUDGET_S (default
# 585 s) from the start, and says so; each step also runs under `timeout` for the seconds left.
# Then tools/gpu-speed-table.py prints the table last: wall times and ratios against the seeds,
# statuses against the committed H200 evidence, headline half-widths, the GPU-busy share, the
# 5-run spread and CI overlaps.
# Everything lands under OUT; extra arguments (e.g. --smoke for a CPU dry run) go to every
# `repro` command. PYTHON picks the interpreter (default python3).
# Usage: tools/gpu-speed.sh OUT [repro arguments...]
set -uo pipefail
out=${1:?usage: tools/gpu-speed.sh OUT [repro arguments...]}
shift
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-python3}
budget=${GPU_SPEED_BUDGET_S:-585}
seeds=$here/../../shared/bench/seeds_raw.py
[ -f "$seeds" ] || seeds=$here/seeds_raw.py
mkdir -p "$out"
start=$(date +%s.%N)
: >"$out/steps.tsv"  # name, rc, seconds (or "skipped")
echo "seeds_raw.py: $seeds (sha256 $(sha256sum "$seeds" | cut -d' ' -f1))" | tee "$out/gpu-speed.log"

left() { "$py" -c "import sys; print(max(0, int($budget - ($(date +%s.%N) - $start))))"; }
seconds_of() { awk -F'\t' -v n="$1" '$1 == n && $3 != "skipped" { print $3 }' "$out/steps.tsv" | tail -1; }

# step NAME GUESS_S COMMAND...: run COMMAND (its output in OUT/NAME.log) unless GUESS_S more
# seconds would pass the budget.
step() {
  local name=$1 guess=$2
  shift 2
  local rest
  rest=$(left)
  if [ "${guess%.*}" -ge "$rest" ]; then
    echo "skipped $name: needs about ${guess%.*} s, ${rest} s left of ${budget} s" | tee -a "$out/gpu-speed.log"
    printf '%s\t-\tskipped\n' "$name" >>"$out/steps.tsv"
    return 0
  fi
  local t0 t1 rc
  t0=$(date +%s.%N)
  timeout --kill-after=5 "$rest" "$@" >"$out/$name.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  local secs
  secs=$("$py" -c "print(f'{$t1 - $t0:.1f}')")
  echo "$name rc=$rc ${secs} s" | tee -a "$out/gpu-speed.log"
  printf '%s\t%s\t%s\n' "$name" "$rc" "$secs" >>"$out/steps.tsv"
}

step seeds 60 env OUT="$out" "$py" "$seeds"
step all1 150 "$py" -m repro all --out "$out/all1" "$@"
full=$(seconds_of all1)
full=${full:-150}
step all2 "$full" "$py" -m repro all --out "$out/all2" "$@"
step all3 "$full" "$py" -m repro all --out "$out/all3" "$@"
step loose "$("$py" -c "print(int(${full} * 0.75) + 1)")" "$py" -m repro all --target-ci 0.02 --budget 2 --out "$out/loose" "$@"
step quick "$("$py" -c "print(int(${full} * 0.45) + 1)")" "$py" -m repro all --quick --out "$out/quick" "$@"
for i in 1 2 3 4 5; do
  one=$(seconds_of linear1)
  step "linear$i" "${one:-18}" "$py" -m repro run 5090-linear --out "$out/linear$i" "$@"
done
"$py" "$here/gpu-speed-table.py" "$out" | tee "$out/table.md"
