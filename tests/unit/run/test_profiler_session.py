"""The harness's profiler session: what it records, and that it leaves torch._inductor unimported."""

from __future__ import annotations

import json
import subprocess
import sys

PROGRAM = """
import json, sys
import torch
from repro.run.kernels import chrome_trace, profiler_session, quiet_profiler_stderr

x = torch.ones(64, 64)
with quiet_profiler_stderr(), profiler_session(cuda=False) as prof:
    torch.mm(x, x)
trace = json.loads(chrome_trace(prof))
names = sorted({e.get("name", "") for e in trace.get("traceEvents", [])})
print(json.dumps({"inductor": "torch._inductor" in sys.modules, "names": names}))
"""


def test_a_session_records_the_ops_and_never_imports_inductor() -> None:
    # torch.profiler.profile imports torch._inductor when a session starts (seconds in a fresh
    # process); the harness's session must record the same ops without it.
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=120, check=True)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert "aten::mm" in seen["names"]
    assert seen["inductor"] is False
