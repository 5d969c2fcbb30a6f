"""Does graph-memset's pure CUDA twin read differently when another CUDA context is open?

The twin's memset/fill ratio read 1.35 inside `repro all` and 1.50 from the standalone script on
the same H200 (artifacts/reference/h200/evidence/table.md). Inside the harness the twin is a child
of a process that holds a torch CUDA context and has just replayed torch CUDA graphs; the script
runs it alone. This tool runs the same binary, with the harness's twin arguments, under three
conditions, interleaved and repeated:

  alone       the twin is the only process with a CUDA context
  idle_ctx    another process holds an initialised torch CUDA context and sleeps
  parent_ctx  the twin's parent holds a torch CUDA context and replays a torch CUDA graph of
              1000 memsets just before starting it (as the harness's worker does)

and prints per run the median per-op time of the memset and fill nodes, their ratio of medians
and the paired ratio (median over rounds of the per-round ratio, the harness's headline).

Usage: python3 tools/gpu-twin-context.py OUT_DIR [REPS]   (needs nvcc, torch with CUDA, a GPU)
"""

from __future__ import annotations

import json
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
print("ready", flush=True)
time.sleep(float(sys.argv[1]))
"""

PARENT = """
import subprocess, sys, torch
buf = torch.zeros(1, dtype=torch.int32, device="cuda")
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
proc = subprocess.run(sys.argv[1:], capture_output=True, text=True, check=True)
sys.stdout.write(proc.stdout)
"""


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
    if condition == "idle_ctx":
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, "120"], stdout=subprocess.PIPE, text=True)
        assert holder.stdout is not None
        holder.stdout.readline()
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        holder.kill()
        holder.wait()
    elif condition == "parent_ctx":
        out = subprocess.run([sys.executable, "-c", PARENT, *cmd], capture_output=True, text=True, check=True).stdout
    else:
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    doc = json.loads(out)
    return {"condition": condition, "wall_s": round(time.monotonic() - t0, 1), **summarise(doc), "doc": doc}


def main() -> None:
    out = Path(sys.argv[1])
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    out.mkdir(parents=True, exist_ok=True)
    binary = out / "graph_memset"
    subprocess.run(["nvcc", "-O3", "-arch=native", "-o", str(binary), str(SOURCE)], check=True)
    results = []
    for rep in range(reps):
        for condition in ("alone", "idle_ctx", "parent_ctx"):
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
