"""Subprocess entry of ``repro all``: run one repro from a JSON request and write its artifact."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from repro.errors import ReproError
from repro.execute import RunRequest, execute, stderr_log
from repro.measure import SamplingConfig
from repro.progress import Display


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    req = RunRequest(
        repro_id=spec["repro_id"],
        overrides=spec.get("overrides", {}),
        smoke=spec.get("smoke", False),
        repro_paths=[Path(p) for p in spec.get("repro_paths", [])],
        sampling=SamplingConfig(**spec.get("sampling", {})),
        command=spec.get("command", []),
    )
    # stderr is the repro's log file here: plain lines, which `repro all` shows as its status line.
    display = Display(sys.stderr, live=False)
    try:
        doc, path = execute(req, Path(spec["run_dir"]), log=display.log, progress=display.progress)
    except ReproError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    stderr_log(f"{req.repro_id}: {doc['verdict']['status']} -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
