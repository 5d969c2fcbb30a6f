#!/usr/bin/env bash
# Issue-8 check on a CPU machine: 20 runs of `repro run 5090-linear --smoke` and of
# `repro all --smoke`, each with --fail-on reproduced; prints each status and exit code,
# then a count. A smoke run must never say reproduced (or not_reproduced) nor exit 3.
# Usage: tools/smoke-20x.sh REPRO_EXE OUT_DIR
set -uo pipefail
repro=${1:?usage: tools/smoke-20x.sh REPRO_EXE OUT_DIR}
out=${2:?usage: tools/smoke-20x.sh REPRO_EXE OUT_DIR}
bad=0
for i in $(seq 1 20); do
    "$repro" run 5090-linear --smoke --fail-on reproduced --out "$out/run$i" 2>/dev/null >/dev/null
    code=$?
    status=$(python3 -c "import json,glob; print(' '.join(json.load(open(f))['verdict']['status'] for f in glob.glob('$out/run$i/*/5090-linear.json')) or 'no artifact')")
    echo "run $i: exit $code, 5090-linear $status"
    if [ "$code" = 3 ] || [ "$status" = reproduced ] || [ "$status" = not_reproduced ]; then bad=$((bad + 1)); fi
done
for i in $(seq 1 20); do
    "$repro" all --smoke --fail-on reproduced --out "$out/all$i" 2>/dev/null >/dev/null
    code=$?
    statuses=$(python3 -c "
import glob, json
docs = [json.load(open(f)) for f in glob.glob('$out/all$i/*/*.json')]
print(' '.join(sorted(d['repro']['id'] + '=' + d['verdict']['status'] for d in docs)) or 'no artifacts')")
    echo "all $i: exit $code, $statuses"
    case "$statuses" in *=reproduced*|*=not_reproduced*) bad=$((bad + 1)) ;; esac
    [ "$code" = 3 ] && bad=$((bad + 1))
done
echo "runs judging the cliff or exiting 3: $bad of 40"
