"""Where a repro's wall time goes, in this process: ``execute`` under cProfile, per repro.

python tools/profile-repro.py OUT_DIR REPRO_ID [REPRO_ID ...]

Writes OUT_DIR/<id>.pstats and OUT_DIR/<id>.txt (the 40 largest cumulative and own times) and
prints one line per repro: wall seconds, status, the run's phases. cProfile slows Python-heavy
work (trace parsing) more than GPU-bound work, so shares are a guide, not a measurement of a
normal run; the run's own phases_s/measure_s come from its clock as usual.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

from repro.evidence.artifact import new_run_id
from repro.run.execute import RunRequest, execute


def main(out: Path, ids: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    run_dir = out / new_run_id()
    run_dir.mkdir()
    for rid in ids:
        prof = cProfile.Profile()
        t = time.perf_counter()
        prof.enable()
        doc, _ = execute(RunRequest(rid, collect_env=False), run_dir)
        prof.disable()
        wall = time.perf_counter() - t
        prof.dump_stats(str(out / f"{rid}.pstats"))
        text = io.StringIO()
        for key in ("cumulative", "tottime"):
            pstats.Stats(prof, stream=text).sort_stats(key).print_stats(40)
        (out / f"{rid}.txt").write_text(text.getvalue())
        run, status = doc["run"], doc["verdict"]["status"]
        print(f"{rid}: {wall:.1f} s, {status}, phases {run.get('phases_s')}, measure {run.get('measure_s')}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
