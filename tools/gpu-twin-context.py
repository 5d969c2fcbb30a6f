"""Does graph-memset's pure CUDA twin read differently when another CUDA context is open?

The twin's memset/fill ratio read 1.35 inside `repro all` and 1.50 from the standalone script on
the same H200 (artifacts/reference/h200/evidence/table.md). Inside the harness the twin is a child
of a process that holds a torch CUDA context and has just replayed torch CUDA graphs; the script
runs it alone. This tool runs the same binary, with the harness's twin arguments, under these
conditions, interleaved and repeated:

  alone       the twin is the only process with a CUDA context
  idle_ctx    another process holds an initialised torch CUDA context and sleeps
  parent_ctx  the twin's parent holds a torch CUDA context and replays a torch CUDA graph of
              1000 memsets just before starting it (as the harness's worker does)
  parent_ctx_clean_env  as parent_ctx, but the twin gets the environment from before torch's import
  parent_ctx_no_graph   the parent holds a torch CUDA context that has run no graph
  idle_ctx_graph        as idle_ctx, but the other process replayed a 1000-memset graph first
  torch_env   alone, with the variables that importing torch and starting CUDA set in os.environ

and prints per run the median per-op time of the memset and fill nodes, their ratio of medians
and the paired ratio (median over rounds of the per-round ratio, the harness's headline).

Usage: python3 tools/gpu-twin-context.py OUT_DIR [REPS] [CONDITION,...]   (needs nvcc, torch with CUDA, a GPU)
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "repro" / "repros" / "csrc" / "graph_memset.cu"
ARGS = ["--ops", "1000", "--replays", "500", "--warmup", "20", "--rounds", "50", "--episodes", "10"]
ARGS += ["--gap-ms", "500", "--work-iters", "128"]

HOLDER = """
import sys, time, torch
x = torch.zeros(1 << 20, device="cuda"); torch.cuda.synchronize()
if sys.argv[2] == "1":
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        with torch.cuda.graph(g, stream=s):
            for _ in range(1000):
                x[:1].zero_()
    for _ in range(2000):
        g.replay()
    torch.cuda.synchronize()
print("ready", flush=True)
time.sleep(float(sys.argv[1]))
"""

PARENT = """
import os, subprocess, sys
BEFORE = dict(os.environ)
import torch
buf = torch.zeros(1, dtype=torch.int32, device="cuda")
torch.cuda.synchronize()
if os.environ.get("TWIN_PARENT_GRAPH") == "0":
    proc = subprocess.run(sys.argv[1:], capture_output=True, text=True, check=True)
    sys.stdout.write(proc.stdout)
    sys.exit(0)
g = torch.cuda.CUDAGraph()
s = torch.cuda.Stream()
with torch.cuda.stream(s):
    buf.zero_(); torch.cuda.synchronize()
    with torch.cuda.graph(g, stream=s):
        for _ in range(1000):
            buf.zero_()
for _ in range(2000):
    g.replay()
torch.cuda.synchronize()
env = dict(BEFORE) if os.environ.get("TWIN_CLEAN_ENV") == "1" else dict(os.environ)
proc = subprocess.run(sys.argv[1:], capture_output=True, text=True, check=True, env=env)
sys.stdout.write(proc.stdout)
"""


ENVDIFF = """
import json, os
before = dict(os.environ)
import torch
torch.zeros(1, device="cuda")
torch.cuda.synchronize()
print(json.dumps({k: v for k, v in os.environ.items() if before.get(k) != v}))
"""


def torch_env() -> dict[str, str]:
    """The variables that importing torch and starting CUDA add to or change in os.environ."""
    out = subprocess.run([sys.executable, "-c", ENVDIFF], capture_output=True, text=True, check=True).stdout
    added: dict[str, str] = json.loads(out.strip().splitlines()[-1])
    return added


def summarise(doc: dict[str, object]) -> dict[str, float]:
    variants = doc["variants"]
    assert isinstance(variants, dict)
    per_round = int(doc["per_round"])  # type: ignore[call-overload]
    memset, fill = variants["memset"], variants["fill"]
    rounds = [
        statistics.median(memset[i : i + per_round]) / statistics.median(fill[i : i + per_round])
        for i in range(0, min(len(memset), len(fill)), per_round)
    ]
    return {
        "memset_us": statistics.median(memset) * 1e6,
        "fill_us": statistics.median(fill) * 1e6,
        "ratio_of_medians": statistics.median(memset) / statistics.median(fill),
        "paired_ratio": statistics.median(rounds),
        "seed_ratio": statistics.median(variants["seed_memset"]) / statistics.median(variants["seed_fill"]),
    }


def run(condition: str, binary: Path) -> dict[str, object]:
    cmd = [str(binary), *ARGS]
    holder = None
    t0 = time.monotonic()
    if condition in ("idle_ctx", "idle_ctx_graph"):
        graph = "1" if condition == "idle_ctx_graph" else "0"
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, "120", graph], stdout=subprocess.PIPE, text=True)
        assert holder.stdout is not None
        holder.stdout.readline()
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        holder.kill()
        holder.wait()
    elif condition in ("parent_ctx", "parent_ctx_clean_env", "parent_ctx_no_graph"):
        env = dict(os.environ, TWIN_CLEAN_ENV="1" if condition == "parent_ctx_clean_env" else "0")
        env["TWIN_PARENT_GRAPH"] = "0" if condition == "parent_ctx_no_graph" else "1"
        out = subprocess.run(
            [sys.executable, "-c", PARENT, *cmd], capture_output=True, text=True, check=True, env=env
        ).stdout
    elif condition == "torch_env":
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, env={**os.environ, **torch_env()}).stdout
    else:
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    doc = json.loads(out)
    return {"condition": condition, "wall_s": round(time.monotonic() - t0, 1), **summarise(doc), "doc": doc}


def main() -> None:
    out = Path(sys.argv[1])
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    conditions = sys.argv[3].split(",") if len(sys.argv) > 3 else ["alone", "idle_ctx", "parent_ctx"]
    print("torch adds to os.environ:", json.dumps(torch_env()), flush=True)
    out.mkdir(parents=True, exist_ok=True)
    binary = out / "graph_memset"
    subprocess.run(["nvcc", "-O3", "-arch=native", "-o", str(binary), str(SOURCE)], check=True)
    results = []
    for rep in range(reps):
        for condition in conditions:
            r = run(condition, binary)
            r["rep"] = rep
            results.append(r)
            print(f"{condition:11s} rep {rep}: paired {r['paired_ratio']:.4f}", flush=True)
    (out / "twin-context.json").write_text(json.dumps(results, indent=1) + "\n")
    print("| condition | rep | memset us | fill us | ratio of medians | paired ratio | seed program | wall s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        print(
            f"| {r['condition']} | {r['rep']} | {r['memset_us']:.4f} | {r['fill_us']:.4f} "
            f"| {r['ratio_of_medians']:.4f} | {r['paired_ratio']:.4f} | {r['seed_ratio']:.4f} | {r['wall_s']} |"
        )


if __name__ == "__main__":
    main()
