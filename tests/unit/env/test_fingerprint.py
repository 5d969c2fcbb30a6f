"""Fingerprint: probes degrade to null + error, the env allowlist holds, secrets and home paths never leave."""

from __future__ import annotations

import json
import platform
import tarfile
from pathlib import Path

import pytest
from helpers import member_bytes

from repro.core.context import SamplingConfig
from repro.core.redact import redactor
from repro.env import fingerprint
from repro.run.execute import RunRequest, execute

MAPS = """\
7f0000000000-7f0000001000 r-xp 00000000 08:01 1 /opt/venv/site-packages/nvidia/cublas/lib/libcublasLt.so.13
7f0000001000-7f0000002000 r-xp 00000000 08:01 2 /opt/venv/site-packages/nvidia/cublas/lib/libcublas.so.13
7f0000002000-7f0000003000 r-xp 00000000 08:01 3 /usr/lib/x86_64-linux-gnu/libcudnn.so.9.14.0
7f0000003000-7f0000004000 rw-p 00000000 00:00 0
7f0000004000-7f0000005000 r-xp 00000000 08:01 4 /usr/lib/libcudart.so.13.0.48
"""


def test_loaded_libraries_from_maps() -> None:
    libs = fingerprint.loaded_libraries(MAPS)
    assert libs["cublasLt"].endswith("libcublasLt.so.13")
    assert libs["cublas"].endswith("libcublas.so.13")
    assert libs["cudnn"].endswith("libcudnn.so.9.14.0")
    assert "cusolver" not in libs and "nccl" not in libs


def test_failing_probe_records_null_and_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fingerprint, "loaded_libraries", lambda maps=None: {"cublas": "/nonexistent/libcublas.so.13"})
    fp = fingerprint.collect()
    assert fp["software"]["libraries"]["cublas"] == {
        "path": "/nonexistent/libcublas.so.13",
        "version": None,
        "loaded": True,
    }
    assert "libraries.cublas" in fp["errors"] and "OSError" in fp["errors"]["libraries.cublas"]


def test_fingerprint_without_torch_section() -> None:
    fp = fingerprint.collect(with_torch=False)
    assert fp["software"]["torch"] is None and fp["gpu"] is None
    assert fp["host"]["python"] == platform.python_version()


def test_env_allowlist_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "1")
    monkeypatch.setenv("SOME_RANDOM_VAR", "value")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)  # allowlisted, and set for the whole suite (conftest.py)
    env = fingerprint.collect(with_torch=False)["env"]
    assert env == {"TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "1"}


def test_knobs_recorded() -> None:
    k = fingerprint.knobs()
    assert k["float32_matmul_precision"] in ("highest", "high", "medium")
    assert isinstance(k["cuda_matmul_allow_tf32"], bool)


def test_redactor_strips_home_user_dirs_hostname_and_secrets() -> None:
    redact = redactor(hostname="gpu-box-17", home="/home/alice", secrets=["ghp_SECRETVALUE123"])
    doc = {
        "path": "/home/alice/proj/x.py",
        "other": "/home/bob/data and /Users/carol/x",
        "host": "gpu-box-17",
        "argv": ["--token", "ghp_SECRETVALUE123"],
        "/home/alice/key": 1,
    }
    out = json.dumps(redact(doc))
    for leaked in ("alice", "bob", "carol", "gpu-box-17", "ghp_SECRETVALUE123"):
        assert leaked not in out
    assert "~/proj/x.py" in out and "/home/<user>" in out and "<hostname>" in out and "<redacted>" in out


SECRETS = {
    "GITHUB_TOKEN": "ghp_planted0000000000000000000000000001",
    "HF_TOKEN": "hf_planted00000000000000000000000000002",
    "AWS_SECRET_ACCESS_KEY": "planted/aws/secret/key/0000000000000003",
    "WANDB_API_KEY": "planted0wandb0key0000000000000000000004",
    "OPENAI_API_KEY": "sk-planted00000000000000000000000000005",
}


def test_no_secret_reaches_artifact_report_or_bundle(
    monkeypatch: pytest.MonkeyPatch, run_dir: Path, fast: SamplingConfig, tmp_path: Path
) -> None:
    from repro.evidence import bundle
    from repro.evidence.report import report as render_report

    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)
    hostname = platform.node()
    # A secret and a home path smuggled into a param value and the recorded command.
    doc, path = execute(
        RunRequest(
            "5090-linear",
            smoke=True,
            sampling=fast,
            command=["repro", "run", "5090-linear", "--token", SECRETS["HF_TOKEN"], str(Path.home() / "x")],
        ),
        run_dir,
    )
    report = render_report([doc])
    (run_dir / "report.md").write_text(report)
    tar = bundle.build(run_dir, tmp_path / "b.tar.gz")
    blobs = [path.read_text(), report]
    with tarfile.open(tar) as tf:
        for member in tf.getmembers():
            if member.isfile():
                data = member_bytes(tf, member)
                if member.name.endswith(".gz"):
                    import gzip

                    data = gzip.decompress(data)
                blobs.append(data.decode(errors="replace"))
    home = str(Path.home())
    for blob in blobs:
        for name, secret in SECRETS.items():
            assert secret not in blob, f"{name} leaked"
        if len(hostname) >= 3:
            assert hostname not in blob
        assert f"{home}/" not in blob


def test_the_fingerprint_command_runs_collect_env_in_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    # No second interpreter that imports torch again (issue 15): the command uses the in-process probe.
    import json

    from typer.testing import CliRunner

    from repro.cli.main import app

    monkeypatch.setattr(fingerprint, "collect_env_in_process", lambda: {"output": "IN-PROCESS", "error": None})
    r = CliRunner().invoke(app, ["fingerprint", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["collect_env"] == {"output": "IN-PROCESS", "error": None}


def test_collect_env_runs_once_per_run_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[int] = []

    def probe() -> dict[str, object]:
        calls.append(1)
        return {"output": f"collect_env #{len(calls)}", "error": None}

    monkeypatch.setattr(fingerprint, "collect_env_in_process", probe)
    first = fingerprint.collect_env_for_run(tmp_path)
    again = fingerprint.collect_env_for_run(tmp_path)
    assert first == again == {"output": "collect_env #1", "error": None} and len(calls) == 1
    # Out of the way of anything that globs the run folder for artifacts.
    assert list(tmp_path.glob("*.json")) == [] and (tmp_path / fingerprint.COLLECT_ENV_FILE).is_file()
    # A failed probe is not kept: the next repro of the run tries again.
    other = tmp_path / "other"
    monkeypatch.setattr(fingerprint, "collect_env_in_process", lambda: {"output": None, "error": "pip hung"})
    assert fingerprint.collect_env_for_run(other)["error"] == "pip hung"
    monkeypatch.setattr(fingerprint, "collect_env_in_process", probe)
    assert fingerprint.collect_env_for_run(other)["output"] == "collect_env #2"


def test_collect_env_starts_its_probes_at_once_and_reports_their_own_answers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from torch.utils import collect_env as ce

    def report() -> str:
        # Like collect_env: probes one after another through the module's ``run``; an answer it cannot parse
        # raises (as the first pass's "failed" answers may make it), and a later probe depends on an earlier one.
        got = [
            ce.run(f"date +%s.%N >{tmp_path}/s{i}; sleep 1; date +%s.%N >{tmp_path}/e{i}; echo {i}") for i in range(4)
        ]
        if got[0][0] != 0:
            raise ValueError("cannot parse")
        extra = ce.run("echo only-in-the-second-pass")
        return "|".join(out for _, out, _ in [*got, extra])

    monkeypatch.setattr(ce, "get_pretty_env_info", report)
    got = fingerprint.collect_env_in_process()
    assert got == {"output": "0|1|2|3|only-in-the-second-pass", "error": None}
    assert ce.run is not None and ce.run.__name__ == "run"  # collect_env's own run is back
    starts = [float((tmp_path / f"s{i}").read_text()) for i in range(4)]
    ends = [float((tmp_path / f"e{i}").read_text()) for i in range(4)]
    assert max(starts) < min(ends)  # every probe ran beside every other, not one after another


def test_closing_the_probes_stops_one_still_running() -> None:
    import time

    probes = fingerprint._Probes()
    probes.start("sleep 30")
    deadline = time.monotonic() + 10
    while not probes._trees and time.monotonic() < deadline:
        time.sleep(0.05)
    (tree,) = probes._trees
    assert tree.poll() is None
    probes.close()  # as after the reading, or on a Ctrl-C inside it
    assert tree.poll() is not None
    assert probes._run("echo late") == (1, "", "not run")  # a probe queued behind is never started
