#!/usr/bin/env bash
# Evidence on one GPU machine in one call, from a copy of the tree without .git:
#   1. `make setup` from a fresh tree with no .venv, offline (PIP_NO_INDEX, PIP_FIND_LINKS=WHEELS);
#   2. `repro all` with the .venv that made, its wall time in walls.tsv;
#   3. the seeds' raw scripts (tools/seeds_raw.py) and every repro's standalone script (`repro script ID`),
#      their output in the run's attached/ folder;
#   4. `repro all --target-ci 0.02 --budget 2`, then `repro all --quick`, each when FINAL_BUDGET_S (default 540)
#      leaves room for it and for steps 5-7 (so do the seeds' raw scripts and the standalone scripts in step 3);
#   5. `repro bundle` of the run;
#   6. that bundle's harness installed into a fresh venv by the report's install lines (offline: torch and
#      cuda-bindings are met by the machine's own), the re-run lines of RERUN_IDS (default: every repro) run
#      there, and the installed harness's source digest checked against the artifacts';
#   7. what steps 4 and 6 printed, the wall times and the steps attached, and the run bundled again, so the
#      bundle carries the re-run's check.
# Everything lands under OUT_DIR; a table is printed last.
#
#   tools/gpu-final.sh OUT_DIR WHEELS      (from the tree's root; about 8 minutes on an H200)
set -uo pipefail
# Every Python here is a venv this script makes: an inherited PYTHONPATH (the tree, a --target folder) would put
# another copy of the harness or its dependencies ahead of what the steps install, and the re-run would not be the
# bundled wheel's.
unset PYTHONPATH
out=${1:?usage: tools/gpu-final.sh OUT_DIR WHEELS}
wheels=$(cd "${2:?usage: tools/gpu-final.sh OUT_DIR WHEELS}" && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
tree=$PWD
RERUN_IDS=${RERUN_IDS:-5090-linear fused-adam-capturable graph-memset lora-batch-scaling solve-512-cliff}
t0=$SECONDS
step() { echo "[$((SECONDS - t0)) s] $*" | tee -a "$out/steps.txt"; }

step "GPU: $(nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,power.limit --format=csv,noheader 2>&1)"
# The CUDA twins' build cache (repro.repros._twin.cache_dir) of this call alone: every binary the run uses is built
# by it, never one an earlier process on this machine left behind.
# The re-run in a fresh venv (step 6) gets another empty one: the bundled wheel builds its own twin.
XDG_CACHE_HOME=$(mktemp -d /tmp/gpu-final-cache.XXXXXX) && export XDG_CACHE_HOME
rerun_cache=$(mktemp -d /tmp/gpu-final-rerun-cache.XXXXXX)
trap 'rm -rf "$XDG_CACHE_HOME" "$rerun_cache"' EXIT
step "build caches: $XDG_CACHE_HOME, and $rerun_cache for the re-run, each empty at the start of this call"
step "make setup (offline, fresh tree, no .venv: $(test -e .venv && echo present || echo absent))"
echo "PIP_NO_INDEX=1 PIP_FIND_LINKS=$wheels make setup" >"$out/make.command"
PIP_NO_INDEX=1 PIP_FIND_LINKS=$wheels timeout 150 make setup >"$out/make.log" 2>&1
step "make: exit $?"

step "repro all"
all_t0=$SECONDS
timeout 420 .venv/bin/repro all --out "$out/all" >"$out/all.json" 2>"$out/all.log" --json
step "repro all: exit $?"
all_s=$((SECONDS - all_t0))
printf 'repro all\t%s\n' "$all_s" >"$out/walls.tsv"
run=$(find "$out/all" -mindepth 1 -maxdepth 1 -type d | sort | tail -1)

if [ -z "$run" ]; then
    step "repro all left no run folder: nothing to bundle"
    exit 1
fi
# The seeds' raw scripts right after `repro all`, their output attached to the run (the bundle packs attached/),
# when the budget leaves room for them and for the bundle, the re-run and the scripts after them (200 s).
mkdir -p "$run/attached"
gpu_line=$(nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader 2>&1 | head -1)
# attached/README.txt, from the files there when a bundle is made.
write_readme() {
    local at="$run/attached"
    {
        echo "Files tools/gpu-final.sh attached to run $(basename "$run") after 'repro all' ended, on the same machine"
        if [ -f "$at/rerun-check.txt" ]; then
            local later="the re-run's files (rerun*)" kind
            for kind in loose quick; do
                [ -f "$at/$kind.txt" ] && later="$later, the $kind run's ($kind-*)"
            done
            [ -f "$out/seeds_raw.json" ] && later="$later, seeds_raw.json"
            echo "and GPU ($gpu_line), before the 'repro bundle' that packed them; $later, steps.txt"
            echo "and walls.tsv were copied here after a first bundle, whose wheel the re-run installed:"
        else
            echo "and GPU ($gpu_line), before 'repro bundle':"
        fi
        [ -f "$at/seeds_raw.log" ] && echo "- seeds_raw.log: seeds_raw.py (here) ran the seeds' own programs (seeds/ in the bundle), each" \
            "in its own process, with $(command -v python3) (the machine's Python, the one that holds its torch);"
        echo "- seeds_raw.py runs from here too (python3 seeds_raw.py, on a GPU machine with torch, and nvcc for"
        echo "  004-cuda): it reads the programs from the bundle's seeds/ folder;"
        ls "$at"/script-*.out >/dev/null 2>&1 && echo "- script-<id>.out: 'repro script <id>' run with that python3" \
            "(stdout, then stderr), each printing its versions first;"
        # The tree's kind as found here, not as its maker meant it: an archive has no .git and holds the history.
        if [ -e "$tree/.git" ]; then
            echo "- the source tree was a git checkout (HEAD $(git -C "$tree" rev-parse --short HEAD 2>/dev/null ||" \
                "echo unknown)), not tools/device-tree.sh's archive: the artifacts' git_state says whether their" \
                "repro/ matched that HEAD; only the harness digest identifies the source otherwise;"
        elif [ -n "${GPU_REPRO_TREE_COMMIT:-}" ]; then
            echo "- the source tree was a git archive of gpu-repro commit $GPU_REPRO_TREE_COMMIT (its maker's" \
                "record: without .git the artifacts record no commit, only the harness digest; the repository has" \
                "no public URL here);"
        fi
        [ -f "$at/harness-history.txt" ] && echo "- harness-history.txt: the harness's commits up to the commit" \
            "above that changed repro/, schemas/ or pyproject.toml (the package's digest changes with no other), one line each (short hash, commit time in UTC, the source digest a run of it records, subject), written by its" \
            "maker before making the tree (tools/device-tree.sh); the bundle's wheel holds that commit's source;"
        [ -f "$at/NOTE.txt" ] && echo "- NOTE.txt: what the report's Not-tested section quotes as its maker's note;"
        echo "- Makefile.txt (the tree's Makefile), setup_venv.py (what 'make setup' runs), device-tree.sh and"
        echo "  harness-history.py (how the tree and its history were made), gpu-final-table.py (the table below"
        echo "  stdout): the tree's tools this run used besides the harness, which the bundle's wheel holds;"
        [ -f "$at/seeds_raw.json" ] && echo "- seeds_raw.json: seeds_raw.py's wall time per program (walls.tsv's baseline);"
        echo "- gpu-final.sh: the driver that ran all of this, from a gpu-repro source tree (tools/gpu-final.sh OUT"
        echo "  WHEELS, after 'make setup' installed the harness into .venv, a venv over the machine's Python); it is"
        echo "  here as the record of what ran, and does not run from the bundle;"
        [ -f "$at/steps.txt" ] && echo "- steps.txt, walls.tsv: its steps and wall times;"
        [ -f "$at/make.log" ] && echo "- make-command.txt, make.log: how 'make setup' installed the harness into .venv" \
            "(offline, from a local wheelhouse) and what it printed; all.json, all.log: 'repro all --json''s" \
            "summary on stdout and its log on stderr;"
        for kind in loose quick; do
            [ -f "$at/$kind.txt" ] && echo "- $kind.txt, $kind-report.md, $kind-<id>.json: the headlines, the report and" \
                "the artifacts of 'repro all $([ "$kind" = loose ] && echo "--target-ci 0.02 --budget 2" || echo "--quick")'," \
                "run after this run into another run folder;"
        done
        [ -f "$at/rerun-check.txt" ] && echo "- rerun.sh, rerun.log, rerun-check.txt, rerun-<id>.json: the report's" \
            "install lines (offline, from a local wheelhouse; torch and cuda-bindings met by the machine's own)" \
            "and its re-run lines of $RERUN_IDS, run in a fresh venv into which they installed the harness wheel of" \
            "a first bundle of this run (the same source digest), the digest check (with where each re-run imported" \
            "the harness from) and each re-run's artifact."
    } >"$at/README.txt"
}
cp tools/seeds_raw.py tools/gpu-final.sh tools/setup_venv.py tools/gpu-final-table.py tools/device-tree.sh \
    tools/harness-history.py "$run/attached/"
cp Makefile "$run/attached/Makefile.txt"  # a .txt: the bundle packs text by extension
# The harness's commit log, where the tree came with one (tools/device-tree.sh writes it before archiving).
[ -f harness-history.txt ] && cp harness-history.txt "$run/attached/"
# What the harness cannot know about this machine, which the report sets under "Not tested here" as our words.
.venv/bin/python -c 'import transformer_engine.pytorch' 2>/dev/null || echo "Transformer Engine could not be installed" \
    "here, not by choice: this machine reaches no network, and TE's wheel (about 276 MB) exceeds the 64 MiB that" \
    "could be brought to it." >"$run/attached/NOTE.txt"
left=$((${FINAL_BUDGET_S:-540} - (SECONDS - t0)))
if [ "$left" -gt 290 ]; then
    step "seeds' raw scripts ($left s left)"
    seeds_t0=$SECONDS
    OUT="$out" timeout 120 python3 tools/seeds_raw.py >"$out/seeds.log" 2>&1
    step "seeds: exit $?"
    # The baseline is the seeds' own programs' seconds (seeds_raw.json's total): the script's version probe
    # before them (one more torch import) is not a seed's time; the wall with it is kept beside.
    total=$(python3 -c 'import json, sys; print(round(json.load(open(sys.argv[1]))["total"]))' "$out/seeds_raw.json" \
        2>/dev/null)
    [ -n "$total" ] && printf "seeds' raw scripts\t%s\n" "$total" >>"$out/walls.tsv"
    printf "seeds' raw scripts with seeds_raw.py's version probe\t%s\n" "$((SECONDS - seeds_t0))" >>"$out/walls.tsv"
    cp "$out/seeds.log" "$run/attached/seeds_raw.log"
else
    step "seeds' raw scripts skipped: $left s left"
fi

# The five standalone scripts (about 90 s on an H200) when the budget leaves room for them and for steps 5-7.
left=$((${FINAL_BUDGET_S:-540} - (SECONDS - t0)))
if [ "$left" -gt 220 ]; then
    step "standalone scripts ($left s left)"
    mkdir -p "$out/scripts"
    for id in 5090-linear fused-adam-capturable lora-batch-scaling solve-512-cliff graph-memset; do
        .venv/bin/repro script "$id" >"$out/scripts/$id.script" 2>"$out/scripts/$id.err"
        if head -1 "$out/scripts/$id.script" | grep -q bash; then runner=(bash); else runner=(python3); fi
        (cd "$out/scripts" && timeout 60 "${runner[@]}" "$id.script" >"$id.out" 2>>"$id.err")
        step "script $id: exit $?"
        { echo "# repro script $id | python3 | $gpu_line | $(date -u +%FT%TZ)"; cat "$out/scripts/$id.out" "$out/scripts/$id.err"; } \
            >"$run/attached/script-$id.out"
    done
else
    step "standalone scripts skipped: $left s left"
fi

# Steps 4, then 5-7: the runs that take a budget first, as long as `reserve` seconds stay for the bundle, the
# re-runs and the second bundle (about 70 s on an H200 for 5090-linear and graph-memset, about 30 s more with solve,
# about 25 s more with lora).
reserve=150
# A run this script's own `timeout` stopped: said in its maker's note, which the report quotes (the artifact records
# the signal, not who sent it).
timed_out() {  # $1: exit status, $2: the command's words
    [ "$1" = 124 ] && echo "'$2' was stopped by this script's own time limit (timeout, exit 124), not by a fault"         "of the repro it was running." >>"$run/attached/NOTE.txt"
    return 0
}
summary() {  # the headlines of a run folder's artifacts, one line each
    python3 - "$1" <<'PY'
import glob, json, sys
for path in sorted(glob.glob(f"{sys.argv[1]}/*/*.json")):
    d = json.load(open(path))
    v = d.get("verdict") or {}
    ci = f" ({v['ci_low']:.4f}-{v['ci_high']:.4f})" if v.get("ci_low") is not None else ""
    value = f" {v['value']:.4f}{ci}" if v.get("value") is not None else ""
    print(f"{d['repro']['id']}: {v.get('status')}{value}, {d['run']['duration_s']:.1f} s")
PY
}
left=$((${FINAL_BUDGET_S:-540} - (SECONDS - t0)))
if [ "$left" -gt $((all_s * 9 / 10 + reserve)) ]; then
    step "repro all --target-ci 0.02 --budget 2 ($left s left)"
    loose_t0=$SECONDS
    timeout "$((left - reserve))" .venv/bin/repro all --target-ci 0.02 --budget 2 --out "$out/loose" >"$out/loose.json" \
        2>"$out/loose.log" --json
    rc=$?
    step "loose: exit $rc"
    timed_out "$rc" "repro all --target-ci 0.02 --budget 2"
    printf 'repro all --target-ci 0.02 --budget 2\t%s\n' "$((SECONDS - loose_t0))" >>"$out/walls.tsv"
    { echo "# repro all --target-ci 0.02 --budget 2, $((SECONDS - loose_t0)) s"; summary "$out/loose"; } >"$run/attached/loose.txt"
else
    step "repro all --target-ci 0.02 --budget 2 skipped: $left s left, step 2 took $all_s s"
fi

left=$((${FINAL_BUDGET_S:-540} - (SECONDS - t0)))
quick_s=$((all_s * 3 / 5 > 55 ? all_s * 3 / 5 : 55))  # quick runs took 36-45 s, 0.33-0.53 of it (evidence45-48)
if [ "$left" -gt $((quick_s + reserve)) ]; then
    step "repro all --quick ($left s left)"
    quick_t0=$SECONDS
    timeout "$((left - reserve))" .venv/bin/repro all --quick --out "$out/quick" >"$out/quick.json" 2>"$out/quick.log" --json
    rc=$?
    step "quick: exit $rc"
    timed_out "$rc" "repro all --quick"
    printf 'repro all --quick\t%s\n' "$((SECONDS - quick_t0))" >>"$out/walls.tsv"
    { echo "# repro all --quick, $((SECONDS - quick_t0)) s"; summary "$out/quick"; } >"$run/attached/quick.txt"
else
    step "repro all --quick skipped: $left s left, step 2 took $all_s s"
fi

step "repro bundle"
# What made the run and what `repro all` printed: the install's log and command, its JSON summary and log.
cp "$out/make.log" "$out/all.json" "$out/all.log" "$run/attached/" 2>/dev/null
cp "$out/make.command" "$run/attached/make-command.txt" 2>/dev/null  # a .txt: the bundle packs text by extension
write_readme
# The name the report tells a reader to attach: <run-id>.bundle.tar.gz (repro.evidence.report.bundle_names).
bundle="$out/$(basename "$run").bundle.tar.gz"
.venv/bin/repro bundle "$run" --out "$bundle" >>"$out/steps.txt" 2>&1
step "bundle: exit $?"

step "bundled harness into a fresh venv; the report's install lines and the re-run lines of $RERUN_IDS"
fresh=/tmp/fresh-venv
rm -rf "$fresh" /tmp/rerun && mkdir -p /tmp/rerun
python3 -m venv --without-pip "$fresh"
# The machine's torch lives in the venv python3 runs in: the fresh venv sees it through a .pth file.
python3 -c 'import site; print("\n".join(site.getsitepackages()))' \
    >"$("$fresh/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/outer-site.pth"
# pip into the fresh venv: `python -m pip` of its own Python, which installs into it (ensurepip would
# find the outer venv's pip through the .pth and put none here, leaving `pip` on PATH the outer one).
printf '#!/bin/sh\nexec "%s" -m pip "$@"\n' "$fresh/bin/python" >"$fresh/bin/pip" && chmod +x "$fresh/bin/pip"
tar -xzf "$bundle" -C /tmp/rerun
RERUN_IDS="$RERUN_IDS" python3 - "$run/report.md" >"$out/rerun.sh" <<'PY'
import os, sys
text = open(sys.argv[1]).read()
# The report's one install block (before the first section), every line of it: offline here, so torch's and
# cuda-bindings' lines are met by the machine's own (pip says "already satisfied"); then each picked
# section's `repro run` line.
head = text.split("\n## `", 1)[0].split("**Re-run**", 1)[1]
install = head.split("```bash\n", 1)[1].split("```", 1)[0]
print("set -e")
print("\n".join(line for line in install.splitlines() if line.startswith("pip install")))
for rid in os.environ["RERUN_IDS"].split():
    if f"## `{rid}`" not in text:
        continue  # no section for it (the report was cut there): no line to run
    section = text.split(f"## `{rid}`", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    print("\n".join(line for line in block.splitlines() if line.strip() and not line.startswith("#")))
PY
# What is left of the budget, but for the second bundle and the table (about 30 s), and never under a minute.
rerun_s=$((${FINAL_BUDGET_S:-540} - (SECONDS - t0) - 30))
[ "$rerun_s" -lt 60 ] && rerun_s=60
(cd /tmp/rerun && PATH="$fresh/bin:$PATH" XDG_CACHE_HOME=$rerun_cache PIP_NO_INDEX=1 PIP_FIND_LINKS=$wheels \
    timeout "$rerun_s" bash "$out/rerun.sh") \
    >"$out/rerun.log" 2>&1
rc=$?
step "re-run: exit $rc"
timed_out "$rc" "the re-run lines of $RERUN_IDS"
# From /tmp/rerun: the tree's own repro/ must not shadow the installed wheel.
(cd /tmp/rerun && RERUN_IDS="$RERUN_IDS" "$fresh/bin/python" - "$run" /tmp/rerun) >"$out/rerun-check.txt" 2>&1 <<'PY'
import glob, json, os, sys
from repro.env import harness
print("installed harness source_sha256:", harness.source_sha256(), "at", harness.package_root())
for rid in os.environ["RERUN_IDS"].split():
    if not os.path.exists(f"{sys.argv[1]}/{rid}.json"):
        print(f"{rid}: no artifact of repro all")
        continue
    ran = json.load(open(f"{sys.argv[1]}/{rid}.json"))
    print(f"{rid}: repro all's artifact records:", ran["fingerprint"]["harness"]["source_sha256"])
    for path in glob.glob(f"{sys.argv[2]}/artifacts/*/{rid}.json"):
        doc = json.load(open(path))
        v = doc["verdict"]
        print(f"{rid}: re-run artifact records:  ", doc["fingerprint"]["harness"]["source_sha256"])
        print(f"{rid}: re-run's harness:", doc["fingerprint"]["host"]["python_env"]["harness_install"])
        def said(w):  # a verdict's status and headline with its CI, where it has them
            ci = f" ({w['ci_low']:.4f}-{w['ci_high']:.4f})" if None not in (w.get("ci_low"), w.get("ci_high")) else ""
            return f"{w['status']} {w['value']:.4f}{ci}" if w.get("value") is not None else f"{w['status']}, no headline"
        print(f"{rid}: re-run verdict: {said(v)}; repro all: {said(ran['verdict'])}")
PY

step "the re-run's check, the steps and wall times attached; the run bundled again"
cp "$out/rerun.sh" "$out/rerun.log" "$out/rerun-check.txt" "$out/walls.tsv" "$run/attached/"
for rid in $RERUN_IDS; do
    for f in /tmp/rerun/artifacts/*/"$rid".json; do [ -f "$f" ] && cp "$f" "$run/attached/rerun-$rid.json"; done
done
for kind in loose quick; do
    for f in "$out/$kind"/*/report.md; do [ -f "$f" ] && cp "$f" "$run/attached/$kind-report.md"; done
    for f in "$out/$kind"/*/*.json; do [ -f "$f" ] && cp "$f" "$run/attached/$kind-$(basename "$f")"; done
done
[ -f "$out/seeds_raw.json" ] && cp "$out/seeds_raw.json" "$run/attached/"
# The steps up to this bundle's own: its line is the last the attached copy can hold. The folder's steps.txt,
# outside the bundle, has the bundle's exit status and "done".
echo "[$((SECONDS - t0)) s] next: the bundle that carries this file; 'repro bundle' renders its report.md and" \
    "report-full.md again from attached/ as it then is ($(find "$run/attached" -maxdepth 1 -type f | wc -l) files" \
    "before README.txt); the first bundle, which the re-run installed from, is kept beside it as" \
    "first.bundle.tar.gz, not inside it (its wheel is this one's: the same source digest)" >>"$out/steps.txt"
cp "$out/steps.txt" "$run/attached/steps.txt"
write_readme
mv "$bundle" "$out/first.bundle.tar.gz"
.venv/bin/repro bundle "$run" --out "$bundle" >>"$out/steps.txt" 2>&1
step "bundle again: exit $?"
step "done"
cat "$out/walls.tsv"
cd "$tree" && .venv/bin/python tools/gpu-final-table.py "$out" "$run" | tee "$out/table.md"
