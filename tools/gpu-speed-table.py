"""The table tools/gpu-speed.sh prints last, from what it left under OUT.

Wall time of every step and its ratio to the seeds' raw scripts; per `repro all` run each
repro's status (and whether it matches the committed H200 evidence), headline with its CI and
half-width, seconds and GPU-busy share; the spread of the five 5090-linear runs (max/min - 1)
and whether every pair of their CIs overlaps; whether the three full runs agree on statuses and
their headline CIs overlap pairwise; whether the 2% / 2 s run was faster than the first full one.

Usage: python tools/gpu-speed-table.py OUT
"""

from __future__ import annotations

import glob
import itertools
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from repro.evidence import artifact  # noqa: E402

# The verdicts the speed issue compares against: the bench run's (tools/device-tree.sh carries its artifacts).
REFERENCE = Path(__file__).resolve().parent.parent / "artifacts/reference/h200/bench/all"
ALL_RUNS = ("all1", "all2", "all3", "quick", "loose")


def steps(out: str) -> dict[str, tuple[str, str]]:
    """name -> (rc, seconds or 'skipped'), from OUT/steps.tsv."""
    rows: dict[str, tuple[str, str]] = {}
    path = os.path.join(out, "steps.tsv")
    if os.path.exists(path):
        for line in Path(path).read_text().splitlines():
            name, rc, secs = (line.split("\t") + ["", "", ""])[:3]
            rows[name] = (rc, secs)
    return rows


def docs(folder: str) -> dict[str, dict[str, Any]]:
    """repro id -> artifact, for the one run folder under ``folder``."""
    out = {}
    for path in sorted(glob.glob(os.path.join(folder, "*", "*.json"))):
        d = json.loads(Path(path).read_text())
        if isinstance(d, dict) and d.get("kind") == "gpu-repro.artifact":
            out[d["repro"]["id"]] = d
    return out


def head(d: dict[str, Any]) -> tuple[float | None, float | None, float | None]:
    v = d["verdict"]
    return v.get("value"), v.get("ci_low"), v.get("ci_high")


def half(d: dict[str, Any]) -> float | None:
    value, lo, hi = head(d)
    return (hi - lo) / 2 / value if value and lo is not None and hi is not None else None


def overlap(a: dict[str, Any], b: dict[str, Any]) -> bool | None:
    (_, alo, ahi), (_, blo, bhi) = head(a), head(b)
    if None in (alo, ahi, blo, bhi):
        return None
    return bool(alo <= bhi and blo <= ahi)  # type: ignore[operator]


def same_as(d: dict[str, Any], want: str | None) -> str:
    """Whether this run's verdict is the reference's. The bench ran before per-claim statuses: where
    ours is ``inconclusive`` because the claim was not tested here, its headline comparison's own
    status (what this GPU measured) is compared, and said so; with no headline, there is nothing to compare."""
    got = d["verdict"]["status"]
    if want is None:
        return "-"
    if got == want:
        return "yes"
    claim = d["verdict"].get("claim") or {}
    if got != "inconclusive" or claim.get("tested", True):
        return f"NO (reference {want})"
    head = next((r for r in d["verdict"].get("breakdown") or [] if r.get("headline")), None)
    if head is None:
        return f"- (claim untested, no headline measured; reference {want})"
    if head.get("status") == want:
        return f"yes as measured ({want}; claim untested here)"
    return f"NO as measured ({head.get('status')}; reference {want})"


def fmt_head(d: dict[str, Any]) -> str:
    value, lo, hi = head(d)
    if value is None:
        return "-"
    return f"{value:.4f} ({lo:.4f}-{hi:.4f})" if lo is not None and hi is not None else f"{value:.4f}"


def main() -> int:
    out = sys.argv[1]
    st = steps(out)
    ref = docs(str(REFERENCE)) if REFERENCE.exists() else {}
    seeds = st.get("seeds", ("", "skipped"))[1]
    seeds_s = float(seeds) if seeds not in ("", "skipped") else None
    lines = ["| step | rc | seconds | ratio to seeds |", "| --- | --- | --- | --- |"]
    for name, (rc, secs) in st.items():
        ratio = f"{float(secs) / seeds_s:.2f}x" if seeds_s and secs != "skipped" and name != "seeds" else "-"
        lines.append(f"| {name} | {rc} | {secs} | {ratio} |")
    runs = {name: docs(os.path.join(out, name)) for name in ALL_RUNS}
    lines += [
        "",
        "| run | repro | status | same as reference | headline (95% CI) | half-width | seconds | GPU busy |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, by_id in runs.items():
        for rid, d in sorted(by_id.items()):
            got = d["verdict"]["status"]
            same = same_as(d, ref.get(rid, {}).get("verdict", {}).get("status"))
            hw = half(d)
            busy = artifact.gpu_busy(d)
            lines.append(
                f"| {name} | {rid} | {got} | {same} | {fmt_head(d)} | {f'{hw:.2%}' if hw is not None else '-'} "
                f"| {d['run']['duration_s']:.1f} | {f'{busy[1]:.0%}' if busy else '-'} |"
            )
    lines.append("")
    linear = [d for i in range(1, 6) for d in docs(os.path.join(out, f"linear{i}")).values()]
    values = [head(d)[0] for d in linear if head(d)[0]]
    if len(values) >= 2:
        spread = max(values) / min(values) - 1  # type: ignore[type-var, operator]
        pairs = [overlap(a, b) for a, b in itertools.combinations(linear, 2)]
        lines.append(
            f"5090-linear, {len(linear)} runs: spread {spread:.2%} (max/min - 1), "
            f"CIs overlap pairwise: {'yes' if all(pairs) else 'NO'} ({sum(bool(p) for p in pairs)}/{len(pairs)})"
        )
    else:
        lines.append(f"5090-linear: {len(linear)} run(s) with a headline, no spread")
    full = [runs[n] for n in ("all1", "all2", "all3") if runs[n]]
    if len(full) >= 2:
        ids = sorted(set.intersection(*(set(r) for r in full)))
        agree = all(len({r[i]["verdict"]["status"] for r in full}) == 1 for i in ids)
        bad = [
            f"{i} ({a}/{b})"
            for i in ids
            for (a, ra), (b, rb) in itertools.combinations(enumerate(full, 1), 2)
            if overlap(ra[i], rb[i]) is False
        ]
        lines.append(
            f"{len(full)} full runs: same statuses {'yes' if agree else 'NO'}; headline CIs overlap pairwise: "
            + ("yes" if not bad else "NO for " + ", ".join(bad))
        )
    else:
        lines.append(f"{len(full)} full run(s): nothing to compare")
    defaults = [float(st[n][1]) for n in ("all1", "all2", "all3") if n in st and st[n][1] not in ("", "skipped")]
    lo = st.get("loose", ("", "skipped"))[1]
    if defaults and lo not in ("", "skipped"):
        fastest = min(defaults)
        lines.append(
            f"--target-ci 0.02 --budget 2: {lo} s against {', '.join(f'{d:.1f}' for d in defaults)} s for the "
            f"defaults; {float(lo) / fastest:.2f}x the fastest default run"
        )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
