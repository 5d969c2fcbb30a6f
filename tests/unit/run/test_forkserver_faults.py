"""Every way a repro can fail becomes an error artifact of its kind, with the fork server and without.

Its own file, apart from test_forkserver.py: the two hangs take their timeout in each mode, and
the fork-server tests' module fixtures stay out of this file.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from faults import FAST, PLUGINS

from repro.evidence import artifact
from repro.run import runner

# Each way a repro can fail that the test plugins act out, and the error kind its artifact must carry.
FAULT_KINDS = {
    "test-segfault": "crash",  # SIGSEGV
    "test-hostile": "crash",  # SIGSEGV after printing markdown, HTML and a token
    "test-raises": "exception",
    "test-hang": "timeout",
    "test-forks-hang": "timeout",  # after detaching grandchildren
}
HANGS = [rid for rid, kind in FAULT_KINDS.items() if kind == "timeout"]
# A batch's timeout covers a fresh worker's torch import, seconds on a loaded machine; the repros
# that end by themselves get that long. A hang is killed at its timeout, whenever in its start it
# is: its kind is "timeout" either way, so the hangs get a short one and the batch waits less.
TIMEOUT_S = {"ends": 25.0, "hangs": 5.0}


@pytest.mark.parametrize("fork_server", [True, False], ids=["fork-server", "fresh-workers"])
@pytest.mark.parametrize("batch", ["ends", "hangs"])
def test_every_fault_kind_becomes_an_error_artifact(
    run_dir: Path, fork_server: bool, batch: str, progress: Callable[[str], None]
) -> None:
    ids = [rid for rid in FAULT_KINDS if (rid in HANGS) == (batch == "hangs")]
    outcomes = runner.run_all(
        ids,
        run_dir,
        smoke=True,
        timeout_s=TIMEOUT_S[batch],
        repro_paths=[PLUGINS],
        sampling=FAST,
        command=["repro", "all"],
        progress=False,
        collect_env=False,
        fork_server=fork_server,
    )
    kinds = {}
    for rid in ids:
        doc = artifact.load(run_dir / f"{rid}.json")
        kinds[rid] = (doc["verdict"]["status"], (doc["error"] or {}).get("kind"))
    became = sum(kinds[rid] == ("error", FAULT_KINDS[rid]) for rid in ids)
    mode = "with the fork server" if fork_server else "without the fork server"
    progress(f"summary: fault kinds ({batch}) {mode}: {became} of {len(ids)} became error artifacts of their kind")
    assert kinds == {rid: ("error", FAULT_KINDS[rid]) for rid in ids}
    assert [o.status for o in outcomes] == ["error"] * len(ids)  # one outcome each: the batch went on
