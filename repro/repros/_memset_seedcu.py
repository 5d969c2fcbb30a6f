"""graph-memset: the seed document's ``seed.cu``, built with nvcc and run unchanged, beside the twin.

The seed's program takes one argument (``memset`` or ``kernel``), captures 1000 4-byte
``cudaMemsetAsync`` or 1000 ``zero_out<<<1,1>>>`` into one graph, replays it 5 times untimed and
prints the host-clock time of one more replay ("Execution time: <n>us"). It runs on the process's
first GPU, so each run here sees only the repro's GPU (``visible_as_first``). One process per form and
run, memset first as the seed ran them, a few times over: no CI, the spread of the runs instead. The
program checks no CUDA error, so a replay that did nothing still prints a time: one under
``MIN_PLAUSIBLE_US`` is taken as a failed run.
"""

from __future__ import annotations

import hashlib
import os
import re
import statistics
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from repro.api import Context, VariantResult, seed_programs
from repro.repros._twin import TwinBuild, build_twin, cache_dir, twin_archs

SEED_CU_RUNS = 3  # per form; each a process of its own
SEED_CU_TIMEOUT_S = 60.0
FORMS = ("memset", "kernel")
_PRINTED = re.compile(r"Execution time: (\d+)us")
# A replay of 1000 graph nodes takes hundreds of microseconds (600-1000 us on an H200); a few microseconds
# means the graph never ran (no device, no kernel image for this GPU, a failed capture).
MIN_PLAUSIBLE_US = 50


def seed_cu_text() -> str | None:
    """The seed's ``seed.cu`` as the package holds it; None when it holds none."""
    return seed_programs().get("graph-memset", {}).get("seed.cu")


def seed_cu_source(cache: Path | None = None) -> Path:
    """``seed.cu`` written once into the build cache under a name that holds its digest (nvcc needs a file)."""
    body = seed_cu_text()
    if body is None:
        raise FileNotFoundError("the package holds no seed.cu for graph-memset")
    data = body.encode()
    folder = cache or cache_dir()
    path = folder / f"seed_graph_memset_{hashlib.sha256(data).hexdigest()[:12]}.cu"
    if not path.is_file() or path.read_bytes() != data:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    return path


def build_seed_cu(archs: Sequence[str], cache: Path | None = None) -> TwinBuild:
    """Build (or reuse) the seed's program; a failure is a TwinBuildError or an OSError."""
    return build_twin(seed_cu_source(cache), cache=cache, archs=archs)


def visible_as_first(device_index: int, env: dict[str, str]) -> dict[str, str]:
    """``env`` with CUDA_VISIBLE_DEVICES naming only the GPU this process sees as ``device_index``,
    so a program that uses its first GPU uses that one."""
    out = dict(env)
    if device_index == 0:
        return out  # the same visibility: its first GPU is ours
    shown = [x.strip() for x in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if x.strip()]
    out["CUDA_VISIBLE_DEVICES"] = shown[device_index] if device_index < len(shown) else str(device_index)
    return out


def run_seed_cu(build: TwinBuild, device_index: int, runs: int = SEED_CU_RUNS) -> dict[str, Any]:
    """Run the built seed program ``runs`` times per form (memset, then kernel, alternating), each in its
    own process on the GPU this process sees as ``device_index``; the microseconds each printed, their
    medians and ratio. The program checks no CUDA error, so a time under MIN_PLAUSIBLE_US is a failed run."""
    env = visible_as_first(device_index, dict(os.environ))
    us: dict[str, list[int]] = {f: [] for f in FORMS}
    for _ in range(runs):
        for form in FORMS:
            proc = subprocess.run(
                [str(build.binary), form], capture_output=True, text=True, timeout=SEED_CU_TIMEOUT_S, env=env
            )
            found = _PRINTED.search(proc.stdout)
            if proc.returncode != 0 or found is None or int(found.group(1)) < MIN_PLAUSIBLE_US:
                said = (proc.stderr or proc.stdout).strip()[-200:] or "no output"
                raise RuntimeError(f"seed.cu {form} exited {proc.returncode} without a time: {said}")
            us[form].append(int(found.group(1)))
    med = {f: statistics.median(v) for f, v in us.items()}
    return {
        "argv": [f"./seed {f}" for f in FORMS],
        "nvcc_flags": build.flags,
        "nvcc": build.nvcc_version.splitlines()[-1] if build.nvcc_version else None,
        "runs_per_form": runs,
        "us": us,
        "median_us": med,
        "ratio": med["memset"] / med["kernel"] if med["kernel"] else None,
    }


def seed_cu_clause(got: Any) -> str | None:
    """The report's words for ``extra["seed_cu"]``: what ran and what it printed, or why it did not run."""
    if not isinstance(got, dict):
        return None
    if got.get("error"):
        return f"The seed's own seed.cu did not run here: {got['error']}"
    us, ratio = got.get("us"), got.get("ratio")
    if not isinstance(us, dict) or not isinstance(ratio, int | float):
        return None
    listed = "; ".join(f"{f} {', '.join(str(x) for x in us.get(f, []))} us" for f in FORMS)
    return (
        f"The seed document's seed.cu, built here with nvcc {got.get('nvcc_flags')} (the seed gives no build line) "
        "and run unchanged "
        f"({got.get('runs_per_form')} processes per form, memset first; one 1000-op replay each, host clock): "
        f"{listed}; median memset/kernel {ratio:.2f}x (no CI)"
    )


# How seed.cu's timing differs from the re-implementation's (the twin's seed_* variants), for the report.
SEED_CU_VS = (
    "seed.cu times one replay per process, right after 5 back-to-back replays; the re-implementation, hundreds "
    "in one process, each alone after a synchronize; this run does not tell which of these differences moves the ratio"
)


def seed_cu_extra(got: dict[str, Any]) -> dict[str, Any]:
    """The artifact's ``extra`` entries for the seed's own program: its record, the report's sentence on it,
    and its ratio with how its timing differs from the re-implementation's (``lines.seed_vs_ours``)."""
    ratio = got.get("ratio")
    out: dict[str, Any] = {"seed_cu": got, "seed_as_posted": seed_cu_clause(got)}
    if isinstance(ratio, int | float) and not got.get("error"):
        out.update(seed_as_posted_ratio=float(ratio), seed_as_posted_vs=SEED_CU_VS)
    return out


def seed_cu_run(ctx: Context, device_index: int) -> dict[str, Any]:
    """Build and run the seed's program for graph-memset's ``run``: its record, or the error that stopped it
    (a side measurement: its failure costs only itself)."""
    ctx.log("  seed.cu: the seed document's program, built with nvcc, run unchanged")
    try:
        build = build_seed_cu(twin_archs(device_index))
        return run_seed_cu(build, device_index)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]}


# The re-implementation's variants and the twin's, node by node: (what the report calls it, seed's, twin's).
_NODES = (("memset node", "twin_seed_memset", "twin_memset"), ("kernel node", "twin_seed_fill", "twin_fill"))


def _node_split(have: Mapping[str, VariantResult]) -> tuple[str, str] | None:
    """(``per op: memset node 887 ns against the twin's 915 ns (-3.0%); kernel node ...``, the node whose per-op
    median differs more) from the re-implementation's and the twin's per-op medians; None where one is missing."""
    got = []
    for label, seed, twin in _NODES:
        s, t = have.get(seed), have.get(twin)
        if s is None or t is None or s.timing is None or t.timing is None or not t.median:
            return None
        got.append((label, s.median, t.median, s.median / t.median - 1))
    big = max(got, key=lambda g: abs(g[3]))[0]
    per_op = "; ".join(
        f"{label} {s * 1e9:.0f} ns against the twin's {t * 1e9:.0f} ns ({d:+.1%})" for label, s, t, d in got
    )
    return f"per op: {per_op}", big


def node_differences(have: Mapping[str, VariantResult]) -> str | None:
    """``per op: memset node 887 ns against the twin's 915 ns (-3.0%); kernel node ...; the larger difference is
    the memset node's``; None where a node's median is missing."""
    split = _node_split(have)
    return None if split is None else f"{split[0]}; the larger difference is the {split[1]}'s"


def reimplementation_vs_twin(have: Mapping[str, VariantResult], agree: bool) -> str:
    """The clause after the re-implementation's ratio: the two agree, or which node's per-op time differs from
    the twin's and by how much (the other's too), from this run's medians; the differences in method are named,
    and which of them moves that node is left open: the run does not isolate them."""
    if agree:
        return "; its CI overlaps the twin's, so the two timing methods agree here."
    split = _node_split(have)
    if split is None:
        return "; it differs from the twin's headline (a node's time is missing, so this run cannot say which)."
    per_op, big = split
    return (
        f"; it differs from the twin's headline, {per_op}; the larger difference is the {big}'s. "
        "The seed's method times each replay alone with a host clock (launch included) and its kernels have one "
        "thread, not 32; the twin times replays back to back with CUDA events; this run does not tell which of "
        f"these moves the {big}."
    )
