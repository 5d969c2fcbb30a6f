"""`repro matrix`: the spec and its cells, the three backends' output, collect, resume (local backend, for real)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, TESTS
from typer.testing import CliRunner

from repro.cli.main import app
from repro.core.errors import UsageError
from repro.env.placement import scheduler_section
from repro.lanes.matrix import collect, k8s, launch, local, slurm
from repro.lanes.matrix import plan as plan_mod
from repro.lanes.matrix import run as run_mod

PLUGINS = TESTS / "plugins_matrix"
runner = CliRunner()


def spec(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema_version": 1,
        "name": "t",
        "smoke": True,
        "timeout_s": 120,
        "budget_s": 0.2,
        "collect_env": False,
        "repro_paths": [str(PLUGINS)],
        "lanes": [{"name": "host"}, {"name": "knob", "env": {"TORCH_LINALG_PREFER_CUSOLVER": "1"}}],
        "repros": [
            "5090-linear",
            {"id": "test-crash-on-lane", "set": {"crash_lane": "knob", "marker": "/nonexistent"}},
        ],
        "gpus": [{"count": 0}],
    }
    doc.update(over)
    return doc


def write(tmp_path: Path, doc: dict[str, Any], name: str = "spec.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


# --------------------------------------------------------------------------- the spec and its cells


def test_cells_are_numbered_selector_then_lane_then_repro() -> None:
    p = plan_mod.build(spec(gpus=[{"count": 1, "sku": "NVIDIA-H200"}, {"count": 2, "sku": "NVIDIA-A100"}]))
    assert [c.id for c in p.cells[:3]] == [
        "000-host-5090-linear",
        "001-host-test-crash-on-lane",
        "002-knob-5090-linear",
    ]
    assert len(p.cells) == 8 and p.cells[4].id == "004-host-5090-linear-g1" and p.cells[4].gpus.count == 2
    assert p.cells[1].sets == {"crash_lane": "knob", "marker": "/nonexistent"}


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"lanes": []}, "lanes: [] should be non-empty"),
        ({"lanes": [{"name": "Bad Name"}]}, "lanes[0].name"),
        ({"gpus": [{"count": -1}]}, "gpus[0].count"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"lanes": [{"name": "a", "digest": "sha256:" + "0" * 64}]}, "lanes[0].digest"),
        ({"lanes": [{"name": "a"}, {"name": "a"}]}, "lanes[1].name"),
        ({"repros": ["no-such-repro"]}, "repros[0]: unknown repro 'no-such-repro'"),
        ({"repros": [{"id": "5090-linear", "set": {"nope": 1}}]}, "nope"),
        ({"extra": 1}, "Additional properties"),
    ],
)
def test_bad_spec_exits_2_naming_the_field(tmp_path: Path, change: dict[str, Any], named: str) -> None:
    path = write(tmp_path, spec(**change))
    r = runner.invoke(app, ["matrix", "plan", str(path)])
    assert r.exit_code == 2, r.output
    assert named in r.output and r.output.startswith("error: ") and len(r.output.strip().splitlines()) == 1


def test_plan_prints_every_cell(tmp_path: Path) -> None:
    r = runner.invoke(app, ["matrix", "plan", str(write(tmp_path, spec()))])
    assert r.exit_code == 0, r.output
    for cid in ("000-host-5090-linear", "003-knob-test-crash-on-lane"):
        assert cid in r.stdout
    assert "4 cells" in r.stderr


def test_spec_not_json_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "s.json"
    bad.write_text("{nope")
    with pytest.raises(UsageError, match="not valid JSON"):
        plan_mod.load(bad)


# --------------------------------------------------------------------------- the fingerprint's scheduler section


def test_scheduler_section_names_slurm_task_and_node() -> None:
    env = {"SLURM_JOB_ID": "12", "SLURM_ARRAY_JOB_ID": "10", "SLURM_ARRAY_TASK_ID": "2", "SLURMD_NODENAME": "gpu07"}
    s = scheduler_section({**env, "GPU_REPRO_MATRIX_CELL": "002-a-b"})
    assert s == {
        "kind": "slurm",
        "matrix_cell": "002-a-b",
        "job_id": "12",
        "array_job_id": "10",
        "array_task_id": "2",
        "node": "gpu07",
    }
    k = scheduler_section({"GPU_REPRO_POD_NAME": "p-0", "GPU_REPRO_NODE_NAME": "n1", "JOB_COMPLETION_INDEX": "0"})
    assert k["kind"] == "k8s" and k["pod"] == "p-0" and k["node"] == "n1"
    assert scheduler_section({}) == {"kind": None, "matrix_cell": None}


# --------------------------------------------------------------------------- slurm: script and polling (no cluster)


def test_array_spec() -> None:
    assert slurm.array_spec([0, 1, 2, 3], 2) == "0-3%2"
    assert slurm.array_spec([5, 1, 2, 9], None) == "1-2,5,9"


def test_slurm_script_forms(tmp_path: Path) -> None:
    doc = spec(
        lanes=[{"name": "host"}, {"name": "img", "image": "gpu-repro:cu126-pt26", "digest": "sha256:" + "a" * 64}],
        gpus=[{"count": 1, "slurm_gres": "gpu:h200:1"}],
        slurm={"partition": "gpu", "max_parallel": 3},
    )
    p = plan_mod.build(doc)
    for form, expect in [
        ("pyxis", "srun --container-image=gpu-repro:cu126-pt26@sha256:"),
        ("docker", "srun --ntasks=1 docker run --rm --network none --init"),
        ("podman", "podman run --rm --network none"),
    ]:
        launchers = {c.index: launch.choose(form, c, slurm=True) for c in p.cells}
        text = slurm.script(p, p.cells, tmp_path, launchers, 3)
        assert "#SBATCH --array=0-3%3" in text and "#SBATCH --gres=gpu:h200:1" in text
        assert "#SBATCH --partition=gpu" in text and f"--output={tmp_path}/logs/cell-%a.out" in text
        assert expect in text
        # The native lane runs natively whatever the image form; the cell number is the array index.
        assert f"srun --ntasks=1 {sys.executable} -m repro matrix cell --plan {tmp_path}/plan.json --cell 0" in text
        if form == "pyxis":
            mounts = f"--container-mounts={tmp_path}:/artifacts,{PLUGINS}:/opt/gpu-repro/plugins/0:ro"
            assert f"{mounts} --no-container-entrypoint repro matrix cell" in text
        if form != "pyxis":  # the spec's plugin folder, mounted read-only, is the container cell's --repro-path
            assert f"-v {PLUGINS}:/opt/gpu-repro/plugins/0:ro" in text
        assert "--cell 2 --root /artifacts --repro-path /opt/gpu-repro/plugins/0" in text
        if form == "docker":
            # Slurm's GPU for the task reaches the container; the scheduler's ids reach the fingerprint.
            assert '--gpus "\\"device=${CUDA_VISIBLE_DEVICES}\\""' in text and "-e SLURM_ARRAY_TASK_ID" in text
    bash = subprocess.run(["bash", "-n"], input=text, text=True, capture_output=True)
    assert bash.returncode == 0, bash.stderr


def test_pyxis_reference_sets_off_the_registry() -> None:
    assert launch.pyxis_ref("nvcr.io/nvidia/nemo:26.08.01") == "nvcr.io#nvidia/nemo:26.08.01"
    assert launch.pyxis_ref("localhost:5000/standin/x:1") == "localhost:5000#standin/x:1"
    assert (
        launch.pyxis_ref("pytorch/pytorch:2.6.0-cuda12.6-cudnn9-devel") == "pytorch/pytorch:2.6.0-cuda12.6-cudnn9-devel"
    )
    assert launch.pyxis_ref("gpu-repro:nemo") == "gpu-repro:nemo"


def test_image_lane_without_engine_or_pyxis_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    p = plan_mod.build(spec(lanes=[{"name": "img", "image": "x:1"}]))
    monkeypatch.setattr(launch, "has_pyxis", lambda srun="srun": False)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(UsageError, match="no pyxis, docker or podman"):
        launch.choose("auto", p.cells[0], slurm=True)
    monkeypatch.setattr(launch, "has_pyxis", lambda srun="srun": True)
    assert launch.choose("auto", p.cells[0], slurm=True) == "pyxis"


class FakeSlurm:
    """squeue answers from a script of states; sacct is disabled (no slurmdbd), scontrol gives the end."""

    def __init__(self, squeue: Sequence[str], scontrol: str) -> None:
        self.squeue = list(squeue)
        self.scontrol = scontrol
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(argv))
        if argv[0] == "squeue":
            out = self.squeue.pop(0) if self.squeue else ""
            return subprocess.CompletedProcess(list(argv), 0, out, "")
        if argv[0] == "sacct":
            return subprocess.CompletedProcess(list(argv), 1, "", "Slurm accounting storage is disabled")
        if argv[0] == "scontrol":
            return subprocess.CompletedProcess(list(argv), 0, self.scontrol, "")
        return subprocess.CompletedProcess(list(argv), 0, "", "")


def test_wait_polls_then_reads_scontrol_without_accounting() -> None:
    fake = FakeSlurm(
        ["7_0|RUNNING|None|n1\n7_1|PENDING|JobArrayTaskLimit|\n", "7_1|RUNNING|None|n1\n", ""],
        "JobId=8 ArrayJobId=7 ArrayTaskId=0 JobState=COMPLETED Reason=None ExitCode=0:0 NodeList=n1\n"
        "JobId=9 ArrayJobId=7 ArrayTaskId=1 JobState=FAILED Reason=NonZeroExitCode ExitCode=1:0 NodeList=n1\n",
    )
    w = slurm.Watch("7", [0, 1])
    assert slurm.wait(w, 100, run=fake, sleep=lambda s: None, log=lambda s: None) is None
    assert w.tasks[1].state == "FAILED" and w.tasks[1].reason == "NonZeroExitCode" and w.tasks[1].source == "scontrol"
    assert not any(c[0] == "scancel" for c in fake.calls)


def test_wait_cancels_after_timeout() -> None:
    fake = FakeSlurm(["7_0|RUNNING|None|n1\n"] * 10, "")
    clock = iter(range(100))
    w = slurm.Watch("7", [0])
    why = slurm.wait(w, 3, run=fake, sleep=lambda s: None, clock=lambda: next(clock), log=lambda s: None)
    assert why and "timeout" in why and ["scancel", "7"] in fake.calls


def test_ctrl_c_cancels_the_job() -> None:
    fake = FakeSlurm(["7_0|RUNNING|None|n1\n"] * 10, "")

    def interrupt(_: float) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        slurm.wait(slurm.Watch("7", [0]), 100, run=fake, sleep=interrupt, log=lambda s: None)
    assert ["scancel", "7"] in fake.calls


# --------------------------------------------------------------------------- k8s: checked against the client's models


def test_k8s_dry_run_round_trips_through_the_client_models(tmp_path: Path) -> None:
    import kubernetes
    import yaml

    doc = spec(
        lanes=[{"name": "cu126", "image": "gpu-repro:cu126-pt26"}, {"name": "nemo", "image": "gpu-repro:nemo"}],
        repros=["5090-linear", "graph-memset", "solve-512-cliff"],
        gpus=[{"count": 1, "sku": "NVIDIA-H200"}],
        k8s={"namespace": "ml", "pvc": "repro-artifacts", "backoff_limit_per_index": 2},
    )
    r = runner.invoke(
        app, ["matrix", "run", str(write(tmp_path, doc)), "--backend", "k8s", "--dry-run", "--out", str(tmp_path / "m")]
    )
    assert r.exit_code == 0, r.output
    assert not (tmp_path / "m").exists()  # a dry run writes nothing
    docs = list(yaml.safe_load_all(r.stdout))
    assert [d["kind"] for d in docs] == ["ConfigMap", "Job", "ConfigMap", "Job"]
    api = kubernetes.client.ApiClient()

    jobs = [api.deserialize(json.dumps(d), "V1Job", "application/json") for d in docs if d["kind"] == "Job"]
    for job, raw in zip(jobs, [d for d in docs if d["kind"] == "Job"], strict=True):
        assert api.sanitize_for_serialization(job) == raw  # nothing the models do not know
        spec_ = job.spec
        assert spec_.completion_mode == "Indexed" and spec_.completions == 3 and spec_.backoff_limit_per_index == 2
        pod = spec_.template.spec
        assert pod.restart_policy == "Never" and pod.node_selector == {"nvidia.com/gpu.product": "NVIDIA-H200"}
        (c,) = pod.containers
        assert c.resources.limits == {"nvidia.com/gpu": "1"}
        assert c.args[:2] == ["matrix", "cell"] and "JOB_COMPLETION_INDEX" in c.args
        assert {e.name for e in c.env} >= {"GPU_REPRO_POD_NAME", "GPU_REPRO_NODE_NAME"}
        assert any(
            v.persistent_volume_claim and v.persistent_volume_claim.claim_name == "repro-artifacts" for v in pod.volumes
        )
    assert jobs[0].spec.template.spec.containers[0].image == "gpu-repro:cu126-pt26"
    assert "--cells" in jobs[1].spec.template.spec.containers[0].args
    assert jobs[1].spec.template.spec.containers[0].args[-3] == "3,4,5"
    plan_doc = json.loads(docs[0]["data"]["plan.json"])
    assert plan_doc["cells"][4]["repro"] == "graph-memset"


def test_k8s_refuses_native_lanes() -> None:
    p = plan_mod.build(spec())
    with pytest.raises(UsageError, match="native"):
        k8s.groups(p.cells)


# --------------------------------------------------------------------------- local backend, for real


def test_local_slots() -> None:
    assert local.slots(["0", "1"], 1, None) == ["0", "1"]
    assert local.slots(["0", "1", "2", "3"], 2, None) == ["0,1", "2,3"]
    assert local.slots(["0", "1"], 1, 1) == ["0"]
    assert local.slots([], 0, 3) == [None, None, None]
    with pytest.raises(UsageError, match="need 1 GPU"):
        local.slots([], 1, None)


def _cells_dirs(root: Path) -> dict[str, int]:
    return {d.name: sum(1 for _ in d.iterdir()) for d in sorted((root / "cells").iterdir())}


@pytest.mark.slow
def test_local_run_crash_collect_resume(tmp_path: Path) -> None:
    marker = tmp_path / "crash"
    marker.write_text("")
    doc = spec(
        repros=[
            "5090-linear",
            "graph-memset",
            {"id": "test-crash-on-lane", "set": {"crash_lane": "knob", "marker": str(marker)}},
        ]
    )
    path, out = write(tmp_path, doc), tmp_path / "m"
    r = runner.invoke(app, ["matrix", "run", str(path), "--out", str(out), "--max-parallel", "2"])
    assert r.exit_code == 1, r.output  # one cell failed
    assert "5 done, 1 missing or failed" in r.stderr
    plan, rows = collect.collect(out)
    assert [r.status for r in rows] == ["smoke", "skipped", "smoke", "smoke", "skipped", "error"]
    crashed = rows[5]
    assert crashed.note == "crash: the repro process died of SIGSEGV" and crashed.doc is not None
    assert crashed.doc.machine.scheduler.matrix_cell == "005-knob-test-crash-on-lane"
    assert rows[3].doc is not None and rows[3].doc.fingerprint["env"]["TORCH_LINALG_PREFER_CUSOLVER"] == "1"
    (report,) = (out / "collected").glob("*/report.md")
    text = report.read_text()
    assert "| 5   | knob   | test-crash-on-lane" in text and "cell 5 `005-knob-test-crash-on-lane`: error" in text

    # Resume: the same spec and folder reruns only the failed cell (now passing: the marker is gone).
    marker.unlink()
    r = runner.invoke(app, ["matrix", "run", str(path), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "resuming 1 of 6 cells: 5" in r.stderr
    counts = _cells_dirs(out)
    assert counts == {c.id: (2 if c.index == 5 else 1) for c in plan.cells}
    _, rows = collect.collect(out)
    assert all(r.done for r in rows) and rows[5].attempts == 2 and rows[5].status == "smoke"

    # A third run has nothing to do; another spec in the same folder is refused.
    r = runner.invoke(app, ["matrix", "run", str(path), "--out", str(out)])
    assert r.exit_code == 0 and "nothing to run" in r.stderr
    other = write(tmp_path, spec(name="other"), "other.json")
    r = runner.invoke(app, ["matrix", "run", str(other), "--out", str(out)])
    assert r.exit_code == 2 and "holds another matrix" in r.output


def test_collect_reports_a_missing_cell_with_the_schedulers_reason(tmp_path: Path) -> None:
    p = plan_mod.build(spec())
    root = tmp_path / "m"
    run_mod.prepare(p, root, dry_run=False)
    run_mod._record(
        root,
        "slurm",
        {
            "001-host-test-crash-on-lane": {
                "backend": "slurm",
                "task": "7_1",
                "state": "CANCELLED",
                "reason": "cancelled by repro matrix after the 5 s timeout",
                "log": "logs/cell-1.out",
            }
        },
        {},
    )
    _, rows = collect.collect(root)
    assert rows[0].status == "missing" and "never ran" in rows[0].note
    assert (
        rows[1].status == "missing"
        and "slurm: CANCELLED, reason cancelled by repro matrix after the 5 s timeout" in rows[1].note
    )
    r = runner.invoke(app, ["matrix", "collect", str(root)])
    assert r.exit_code == 1 and "0 done, 4 missing or failed" in r.stderr


def test_collect_of_a_folder_without_plan_exits_2(tmp_path: Path) -> None:
    r = runner.invoke(app, ["matrix", "collect", str(tmp_path)])
    assert r.exit_code == 2 and "no plan.json" in r.output


def test_bad_options_exit_2_before_anything_is_written(tmp_path: Path) -> None:
    path = write(tmp_path, spec())
    for args, named in [
        (["--backend", "lsf"], "--backend 'lsf'"),
        (["--devices", "a,b"], "--devices 'a,b'"),
        (["--launcher", "apptainer"], "--launcher 'apptainer'"),
        (["--max-parallel", "0"], "--max-parallel 0"),
    ]:
        r = runner.invoke(app, ["matrix", "run", str(path), "--out", str(tmp_path / "m"), *args])
        assert r.exit_code == 2 and named in r.output, r.output
        assert not (tmp_path / "m").exists()


class _FakeKube:
    """The two kubernetes APIs `repro matrix run --backend k8s` calls, answering as a cluster would."""

    def __init__(self) -> None:
        import kubernetes

        self.models = kubernetes.client
        self.created: list[tuple[str, Any]] = []

    def __getattr__(self, name: str) -> Any:  # every model class is the real one
        return getattr(self.models, name)

    def CoreV1Api(self) -> Any:  # noqa: N802 - the client's own name
        fake = self

        class Core:
            def create_namespaced_config_map(self, ns: str, body: Any) -> None:
                fake.created.append((ns, body))

            def list_namespaced_pod(self, ns: str, label_selector: str) -> Any:
                m = fake.models

                def pod(i: int, reason: str, code: int) -> Any:
                    term = m.V1ContainerStateTerminated(reason=reason, exit_code=code)
                    return m.V1Pod(
                        metadata=m.V1ObjectMeta(
                            name=f"{label_selector.split('=')[1]}-{i}",
                            annotations={"batch.kubernetes.io/job-completion-index": str(i)},
                        ),
                        spec=m.V1PodSpec(containers=[], node_name="gpu-node-3"),
                        status=m.V1PodStatus(
                            phase="Failed" if code else "Succeeded",
                            container_statuses=[
                                m.V1ContainerStatus(
                                    name="repro",
                                    image="x",
                                    image_id="",
                                    ready=False,
                                    restart_count=0,
                                    state=m.V1ContainerState(terminated=term),
                                )
                            ],
                        ),
                    )

                return m.V1PodList(items=[pod(0, "Completed", 0), pod(1, "OOMKilled", 137)])

        return Core()

    def BatchV1Api(self) -> Any:  # noqa: N802
        fake = self

        class Batch:
            def create_namespaced_job(self, ns: str, body: Any) -> None:
                fake.created.append((ns, body))

            def read_namespaced_job_status(self, name: str, ns: str) -> Any:
                return fake.models.V1Job(status=fake.models.V1JobStatus(succeeded=1, failed=1))

        return Batch()


def test_k8s_submit_records_each_index_pod_and_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    fake = _FakeKube()
    monkeypatch.setattr(
        k8s, "_client", lambda: SimpleNamespace(client=fake, config=SimpleNamespace(load_kube_config=lambda: None))
    )
    doc = spec(
        lanes=[{"name": "img", "image": "gpu-repro:nemo"}], gpus=[{"count": 1}], k8s={"namespace": "ml", "pvc": "c"}
    )
    p = plan_mod.build(doc)
    run_mod.run(p, tmp_path / "m", run_mod.Options(backend="k8s"), log=lambda s: None)
    assert [type(body).__name__ for _, body in fake.created] == ["V1ConfigMap", "V1Job"]
    assert {ns for ns, _ in fake.created} == {"ml"}
    _, rows = collect.collect(tmp_path / "m")
    # The artifacts live on the claim, not here: each row says what the pod did and where.
    assert rows[0].status == "missing" and "k8s: Succeeded" in rows[0].note and "node gpu-node-3" in rows[0].note
    assert "reason OOMKilled, exit 137" in rows[1].note
    assert (tmp_path / "m" / "k8s").is_dir()


def test_cell_command_picks_its_cell_from_an_index_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # What a pod of an Indexed Job runs: --cells names the Job's cells, JOB_COMPLETION_INDEX picks one.
    p = plan_mod.build(spec())
    root = tmp_path / "m"
    run_mod.prepare(p, root, dry_run=False)
    monkeypatch.setenv("JOB_COMPLETION_INDEX", "1")
    # The cell sets these for its repro's process (its own, in real use); the test gets them undone.
    for name in ("GPU_REPRO_LANE", "GPU_REPRO_MATRIX_CELL"):
        monkeypatch.setenv(name, "")
    args = ["matrix", "cell", "--plan", str(root / "plan.json"), "--root", str(root)]
    r = runner.invoke(app, [*args, "--cells", "3,0", "--index-env", "JOB_COMPLETION_INDEX"])
    assert r.exit_code == 0, r.output
    assert "cell 0 000-host-5090-linear: smoke" in r.stderr
    assert [d.name for d in (root / "cells").iterdir()] == ["000-host-5090-linear"]
    monkeypatch.setenv("JOB_COMPLETION_INDEX", "2")
    r = runner.invoke(app, [*args, "--cells", "3,0", "--index-env", "JOB_COMPLETION_INDEX"])
    assert r.exit_code == 2 and "$JOB_COMPLETION_INDEX='2' with --cells 3,0" in r.output
    r = runner.invoke(app, [*args, "--cell", "9"])
    assert r.exit_code == 2 and "cell 9: not in the plan; expected 0..3" in r.output


def test_report_of_a_large_matrix_fits_one_github_comment() -> None:
    from repro.evidence import model
    from repro.evidence.markdown import REPORT_LIMIT

    # A real H200 artifact stands in for every cell of a 60-cell matrix.
    path = ROOT / "artifacts/reference/h200/paired/all/20261129T233452Z-51a4de/5090-linear.json"
    doc = model.run_of(model.load(path))
    p = plan_mod.build(spec(lanes=[{"name": f"lane{i}"} for i in range(10)], repros=["5090-linear"] * 6))
    rows = [collect.Row(c, doc.verdict.status, path, doc, 1, doc.verdict.finding, {}) for c in p.cells]
    text = collect.markdown(p, rows)
    assert len(p.cells) == 60 and len(text) <= REPORT_LIMIT
    assert all(f"| {c.index:<3} | lane" in text for c in p.cells)
