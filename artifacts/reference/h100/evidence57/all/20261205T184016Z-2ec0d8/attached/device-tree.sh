#!/usr/bin/env bash
# The source tree a device run gets, in DIR (default .tree): tree.tar, a `git archive` of HEAD without artifacts/
# but the bench run's (artifacts/reference/h200/bench/all)
# (no .git, so no stale commit can be recorded), with harness-history.txt at its root (tools/harness-history.py:
# the harness's commits up to HEAD, each with its source digest; tools/gpu-final.sh attaches it to the run), and
# COMMIT (HEAD's short hash, for GPU_REPRO_TREE_COMMIT). PYTHON: a Python that imports repro's dependencies.
# Usage: tools/device-tree.sh [DIR]   (run from a clean checkout; a dirty tree would not be what is archived)
set -euo pipefail
dir=${1:-.tree}
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    echo "device-tree: the checkout has uncommitted changes; commit them first (the archive is HEAD)" >&2
    exit 2
fi
rm -rf "$dir" && mkdir -p "$dir"
git archive HEAD -- . ':(exclude)artifacts' >"$dir/tree.tar"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The bench run's artifacts (1 MB): the verdicts tools/gpu-speed-table.py compares a speed run's with.
git archive HEAD -- artifacts/reference/h200/bench/all >"$tmp/bench.tar"
tar -Af "$dir/tree.tar" "$tmp/bench.tar"
"${PYTHON:-python3}" tools/harness-history.py HEAD >"$tmp/harness-history.txt"
tar -rf "$dir/tree.tar" -C "$tmp" harness-history.txt
git rev-parse --short HEAD >"$dir/COMMIT"
echo "device-tree: $dir/tree.tar ($(du -h "$dir/tree.tar" | cut -f1)) of $(cat "$dir/COMMIT")," \
    "harness-history.txt: $(wc -l <"$tmp/harness-history.txt") commits"
