"""Subprocess entry of ``repro all``: run one repro from a JSON request (on stdin) and write its artifact."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from repro.core.context import SamplingConfig
from repro.core.errors import ReproError
from repro.core.fsio import NoSpace
from repro.run.execute import RunRequest, execute, stderr_log
from repro.run.progress import Display

# Must match runner.NO_SPACE_EXIT (not imported: the runner pulls in more than a worker needs).
NO_SPACE_EXIT = 28


def main(argv: list[str]) -> int:
    """Run the request in ``argv[0]``, or read from stdin when there is no argument."""
    return run_spec(json.loads(argv[0] if argv else sys.stdin.read()))


def run_spec(spec: dict[str, Any]) -> int:
    """Run one request (the runner's worker spec); the exit code the runner reads."""
    req = RunRequest(
        repro_id=spec["repro_id"],
        overrides=spec.get("overrides", {}),
        smoke=spec.get("smoke", False),
        repro_paths=[Path(p) for p in spec.get("repro_paths", [])],
        sampling=SamplingConfig(**spec.get("sampling", {})),
        command=spec.get("command", []),
        collect_env=spec.get("collect_env", True),
        quick=spec.get("quick", False),
    )
    # stderr is the repro's log file here: plain lines, which `repro all` shows as its status line.
    display = Display(sys.stderr, live=False)
    try:
        doc, path = execute(req, Path(spec["run_dir"]), log=display.log, progress=display.progress)
    except NoSpace as exc:
        print(f"error: {exc}", file=sys.stderr)
        return NO_SPACE_EXIT
    except ReproError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    stderr_log(f"{req.repro_id}: {doc['verdict']['status']} -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
