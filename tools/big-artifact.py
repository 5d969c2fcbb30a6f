"""Build a large artifact for timing ``repro report``: a committed reference artifact with many kernels
of long, template-heavy names in each measured variant, grown until the file reaches a target size.

    python tools/big-artifact.py --out /tmp/big [--mb 50] [--name-chars 600] [--from FILE]

Writes ``<out>/<run-id>/<repro-id>.json`` (schema-valid, never overwriting) and prints its path,
size and kernel count. The names share long heads and tails and differ in the middle, so cutting
them to one report line makes many read alike: the case that made kernel-name shortening quadratic.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from repro.evidence import artifact  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FROM = ROOT / "artifacts/reference/h200/evidence/all/20261201T111151Z-438281/5090-linear.json"
RUN_ID = "20261201T000000Z-b16b16"


def kernel_name(i: int, chars: int) -> str:
    """A C++ kernel name of about ``chars`` characters, unique by ``i``, alike at both ends.

    Every third name differs only in its parameter list (which a short name drops), the others in
    the middle of their template arguments (which a cut to one line drops).
    """
    if i % 3 == 0:
        head = "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(cutlass::gemm::kernel::"
        tail = ">::Params)"
    else:
        head = "void at::native::(anonymous namespace)::elementwise_kernel<128, 4, "
        tail = ", cutlass::epilogue::thread::LinearCombination<float, 4, float, float>, float, 3>(int, Functor)"
    middle = f"at::native::Functor{i % 97}<float, {i // 97}>, cutlass::arch::OpClassTensorOp{i}"
    pad = max(0, chars - len(head) - len(tail) - len(middle))
    filler = ", ".join(f"cutlass::layout::RowMajorTile{j}<{j}>" for j in range(pad // 36 + 1))[:pad]
    cut = filler.rfind(">") + 1  # whole template arguments only
    filler = filler[:cut]
    half = filler.find(", ", len(filler) // 2) + 2 if ", " in filler else 0
    opener = "GemmUniversal<" if i % 3 == 0 else ""
    return head + opener + filler[:half] + middle + (", " + filler[half:] if filler[half:] else "") + tail


def grow(doc: dict[str, Any], target_bytes: int, name_chars: int) -> tuple[dict[str, Any], int]:
    """``doc`` with kernels added to each measured variant until its JSON is about ``target_bytes``."""
    out = copy.deepcopy(doc)
    measured = [v for v in out["variants"] if v.get("status") == "ok"]
    if not measured:
        raise SystemExit("the reference artifact has no measured variant to add kernels to")
    sample = {"name": kernel_name(0, name_chars), "count": 10, "total_us": 123.4, "mean_us": 12.34, "per_call": 1.0}
    per_kernel = len(json.dumps(sample, indent=2)) + 8 * 4  # indent of a kernel inside a variant
    room = target_bytes - len(json.dumps(out, indent=2))
    per_variant = max(1, room // per_kernel // len(measured))
    n = 0
    for v_index, v in enumerate(measured):
        for j in range(per_variant):
            # Half the names are shared between variants (the kernel diff's "changes"), half are a variant's own.
            i = j if j % 2 == 0 else j + (v_index + 1) * per_variant
            v["kernels"].append(
                {
                    "name": kernel_name(i, name_chars),
                    "count": 10 + j % 5,
                    "total_us": 100.0 + (j * 7 + v_index * 13) % 1000,
                    "mean_us": 10.0 + j % 9,
                    "per_call": 1.0,
                }
            )
            n += 1
    return out, n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="folder that gets <run-id>/<repro-id>.json")
    ap.add_argument("--mb", type=float, default=50.0, help="target size in MB (10^6 bytes); default 50")
    ap.add_argument("--name-chars", type=int, default=600, help="characters per kernel name; default 600")
    ap.add_argument("--from", dest="source", type=Path, default=DEFAULT_FROM, help="the reference artifact")
    args = ap.parse_args(argv)
    doc = artifact.load(args.source)
    big, n = grow(doc, int(args.mb * 1e6), args.name_chars)
    big["run"]["run_id"] = RUN_ID
    folder = args.out / RUN_ID
    folder.mkdir(parents=True, exist_ok=True)
    path = artifact.write_artifact(big, folder / f"{big['repro']['id']}.json")
    print(f"{path}: {path.stat().st_size} bytes, {n} kernels added, names of {args.name_chars} characters")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
