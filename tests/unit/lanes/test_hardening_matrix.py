"""Hardening of `repro matrix`: hostile specs, forged cells, clashing k8s names, secrets on disk.

Each test plays one attack from the adversarial review against the real code and checks that it
does no harm (no planted command runs, no forged verdict is believed, no secret is written).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, TESTS

from repro.core.errors import UsageError
from repro.lanes.matrix import launch, slurm
from repro.lanes.matrix import plan as plan_mod
from repro.lanes.matrix import run as run_mod
from repro.lanes.matrix.plan import Lane, Plan

PLUGINS = TESTS / "plugins_matrix"


def spec(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema_version": 1,
        "name": "h",
        "smoke": True,
        "timeout_s": 60,
        "collect_env": False,
        "lanes": [{"name": "host"}, {"name": "img", "image": "gpu-repro:cu126-pt26"}],
        "repros": ["5090-linear"],
        "gpus": [{"count": 1}],
    }
    doc.update(over)
    return doc


# --------------------------------------------------------------------------- A: the sbatch script and the shell


def _stub_bin(tmp_path: Path, record: Path) -> Path:
    """``srun``, ``docker`` and ``podman`` that only record their arguments (NUL-separated, one call a line)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("srun", "docker", "podman"):
        stub = bin_dir / name
        stub.write_text(f'#!/bin/sh\n{{ printf "%s\\0" {name} "$@"; echo; }} >> {shlex.quote(str(record))}\n')
        stub.chmod(0o755)
    return bin_dir


def _run_script(tmp_path: Path, text: str, index: int) -> list[list[str]]:
    """Run an sbatch script's array task ``index`` under bash with the stubs; the calls the stubs saw."""
    record = tmp_path / f"calls-{index}"
    record.write_text("")
    script = tmp_path / "job.sbatch"
    script.write_text(text)
    env = {
        "PATH": f"{_stub_bin(tmp_path, record)}:{os.environ['PATH']}",
        "SLURM_ARRAY_TASK_ID": str(index),
        "SLURM_ARRAY_JOB_ID": "7",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "HOME": str(tmp_path),
    }
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    res = subprocess.run(["bash", str(script)], env=env, cwd=cwd, capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    return [line.split("\0")[:-1] for line in record.read_text().splitlines() if line]


def _hostile_plan(lane: dict[str, Any], **over: Any) -> Plan:
    """A plan built past the schema (as a hand-edited plan file would be) with one hostile lane."""
    p = plan_mod.build(spec(lanes=[{"name": "evil"}], **over), check_catalog=False)
    evil = Lane(name="evil", **lane)
    cells = tuple(dataclasses.replace(c, lane=evil) for c in p.cells)
    return dataclasses.replace(p, cells=cells)


PAYLOADS = ("$(touch {c})", "`touch {c}`", "${{IFS}}$(touch {c})${{CUDA_VISIBLE_DEVICES}}", "';touch {c};'")


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("form", ["docker", "podman", "pyxis", "native"])
def test_hostile_words_reach_srun_verbatim_and_run_nothing(tmp_path: Path, payload: str, form: str) -> None:
    canary = tmp_path / "PWNED"
    word = payload.format(c=canary)
    if form == "native":
        lane: dict[str, Any] = {"python": f"/usr/bin/python3{word}"}
    else:
        lane = {"image": f"gpu-repro:x{word}", "engine_args": [f"--label=x{word}", word]}
    plugin = tmp_path / f"plugins{word}"
    p = _hostile_plan(lane, repro_paths=[str(plugin)])
    cells = list(p.cells)
    text = slurm.script(p, cells, tmp_path / "m", {c.index: form for c in cells}, None)
    (call,) = _run_script(tmp_path, text, cells[0].index)
    assert not canary.exists(), f"{form}: {word!r} ran a command"
    assert call[0] == "srun"
    if form == "native":
        assert f"/usr/bin/python3{word}" in call
    elif form == "pyxis":
        assert f"--container-image={launch.pyxis_ref(f'gpu-repro:x{word}')}" in call
    else:
        assert f"gpu-repro:x{word}" in call and f"--label=x{word}" in call and word in call
        # The only expansion is the generator's own: Slurm's GPUs for the task.
        gpus = call[call.index("--gpus") + 1] if form == "docker" else call[call.index("--device") + 1]
        assert gpus == ('"device=0,1"' if form == "docker" else "nvidia.com/gpu=0,1")
        assert any(str(plugin.resolve()) in a for a in call)


@pytest.mark.parametrize(
    ("where", "change"),
    [
        ("slurm.partition", {"slurm": {"partition": "gpu\ntouch {c}"}}),
        ("slurm.account", {"slurm": {"account": "acct\ntouch {c}"}}),
        ("slurm.sbatch_args[0]", {"slurm": {"sbatch_args": ["--mem=1G\ntouch {c}"]}}),
        ("gpus[0].slurm_gres", {"gpus": [{"count": 1, "slurm_gres": "gpu:1\ntouch {c}"}]}),
        ("gpus[0].slurm_constraint", {"gpus": [{"count": 1, "slurm_constraint": "h200\ntouch {c}"}]}),
        ("slurm.partition", {"slurm": {"partition": "gpu --wrap=x"}}),
        ("gpus[0].slurm_gres", {"gpus": [{"count": 1, "slurm_gres": "gpu:1 $(touch {c})"}]}),
        ("slurm.sbatch_args[0]", {"slurm": {"sbatch_args": ["not-an-option"]}}),
        ("lanes[0].image", {"lanes": [{"name": "a", "image": "x$(touch {c})"}]}),
        ("lanes[0].image", {"lanes": [{"name": "a", "image": "x\ntouch {c}"}]}),
        ("lanes[0].python", {"lanes": [{"name": "a", "python": "python\rtouch {c}"}]}),
        ("lanes[0].engine_args[0]", {"lanes": [{"name": "a", "image": "x", "engine_args": ["-e\nA=1"]}]}),
        ("lanes[0].env.A", {"lanes": [{"name": "a", "env": {"A": "1\x1b[2J"}}]}),
        ("lanes[0].env", {"lanes": [{"name": "a", "env": {"A=B": "1"}}]}),
        ("repro_paths[0]", {"repro_paths": ["/p\ntouch {c}"]}),
        ("repro_paths[0]", {"repro_paths": ["/p,/etc"]}),
        ("repros[0]", {"repros": ["../../x"]}),
        ("k8s.pvc", {"k8s": {"pvc": "a b"}}),
    ],
)
def test_the_schema_refuses_control_characters_and_non_tokens(
    tmp_path: Path, where: str, change: dict[str, Any]
) -> None:
    canary = tmp_path / "PWNED"
    doc = json.loads(json.dumps(spec(**change)).replace("{c}", str(canary)))
    with pytest.raises(UsageError) as exc:
        plan_mod.build(doc, check_catalog=False)
    assert str(exc.value).startswith(f"matrix spec: {where}"), str(exc.value)
    assert not canary.exists()


@pytest.mark.parametrize(
    "hack",
    [
        lambda p, c: dataclasses.replace(p, slurm={"partition": f"gpu\ntouch {c}"}),
        lambda p, c: dataclasses.replace(p, slurm={"sbatch_args": [f"--mem=1G\ntouch {c}"]}),
        lambda p, c: dataclasses.replace(
            p,
            cells=tuple(
                dataclasses.replace(x, gpus=dataclasses.replace(x.gpus, slurm_gres=f"gpu:1\ntouch {c}"))
                for x in p.cells
            ),
        ),
        lambda p, c: dataclasses.replace(
            p,
            cells=tuple(
                dataclasses.replace(x, lane=dataclasses.replace(x.lane, python=f"py\ntouch {c}")) for x in p.cells
            ),
        ),
    ],
)
def test_a_plan_past_the_schema_still_gets_no_line_of_its_own(tmp_path: Path, hack: Any) -> None:
    # plan.json is rebuilt through the schema too; this is the generator's own second line of defence.
    canary = tmp_path / "PWNED"
    p = hack(plan_mod.build(spec(lanes=[{"name": "host"}]), check_catalog=False), canary)
    with pytest.raises(UsageError, match="control character"):
        slurm.script(p, list(p.cells), tmp_path / "m", {c.index: "native" for c in p.cells}, None)


def test_an_out_folder_that_would_split_a_mount_list_is_refused(tmp_path: Path) -> None:
    p = plan_mod.build(spec(), check_catalog=False)
    img = [c for c in p.cells if c.lane.image][0]
    for root in (tmp_path / "a,b", tmp_path / "a:b"):
        for form in ("docker", "pyxis"):
            with pytest.raises(UsageError, match="comma, colon"):
                slurm.task_argv(img, root, form)


def test_the_local_dry_run_prints_lines_a_shell_runs_as_shown(tmp_path: Path) -> None:
    canary = tmp_path / "PWNED"
    word = f"$(touch {canary})"
    p = plan_mod.build(
        spec(
            lanes=[
                {"name": "native", "python": f"/bin/echo{word}"},
                {"name": "img", "image": "gpu-repro:cu126-pt26", "engine_args": [word]},
            ],
            gpus=[{"count": 0}],
        ),
        check_catalog=False,
    )
    opts = run_mod.Options(backend="local", launcher="docker", dry_run=True)
    # Image lanes take --launcher docker, native ones run natively whatever the launcher.
    _, text = run_mod.run(p, tmp_path / "m", opts, log=lambda s: None)
    assert text is not None
    record = tmp_path / "calls"
    record.write_text("")
    env = {"PATH": f"{_stub_bin(tmp_path, record)}:{os.environ['PATH']}"}
    for line in text.splitlines():
        subprocess.run(["bash", "-c", line], env=env, cwd=tmp_path, capture_output=True, timeout=30)
    assert not canary.exists()
    (call,) = [ln.split("\0")[:-1] for ln in record.read_text().splitlines() if ln]
    assert call[0] == "docker" and word in call


def test_k8s_objects_carry_hostile_words_as_data_only(tmp_path: Path) -> None:
    # No shell in a pod: args are an exec vector, env and plan are data. The schema's patterns keep
    # names and labels DNS-safe; a hostile python or engine_args cannot reach a k8s Job (image lanes only).
    from repro.lanes.matrix import k8s

    p = plan_mod.build(spec(lanes=[{"name": "img", "image": "gpu-repro:cu126-pt26"}]), check_catalog=False)
    ((_, (cm, job), _),) = k8s.manifests(p, list(p.cells), plan_mod.to_doc(p), "abcdef")
    container = job.spec.template.spec.containers[0]
    assert container.command is None and container.args[:2] == ["matrix", "cell"]


def test_sys_executable_native_line_still_runs(tmp_path: Path) -> None:
    p = plan_mod.build(spec(lanes=[{"name": "host"}]), check_catalog=False)
    text = slurm.script(p, list(p.cells), tmp_path / "m", {0: "native"}, None)
    (call,) = _run_script(tmp_path, text, 0)
    assert call[:4] == ["srun", "--ntasks=1", sys.executable, "-m"]


# --------------------------------------------------------------------------- C: k8s Job names


@pytest.mark.parametrize(
    "lanes",
    [
        ["cu126.pt26", "cu126-pt26"],
        ["a" * 39 + "x", "a" * 39 + "y"],  # the same first 52 characters once prefixed
        ["nemo", "n.emo", "n-emo"],
    ],
)
def test_k8s_job_names_are_unique_valid_and_keep_the_attempt(tmp_path: Path, lanes: list[str]) -> None:
    import re

    from repro.lanes.matrix import k8s

    doc = spec(
        name="m" * 40,
        lanes=[{"name": n, "image": "gpu-repro:cu126-pt26"} for n in lanes],
        gpus=[{"count": 1}, {"count": 2}],
    )
    p = plan_mod.build(doc, check_catalog=False)
    jobs = k8s.manifests(p, list(p.cells), plan_mod.to_doc(p), "abc123")
    names = [name for name, _, _ in jobs]
    assert len(set(names)) == len(names) == 2 * len(lanes), names
    for name, (cm, job), _ in jobs:
        assert len(name) <= 52 and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name), name
        assert name.endswith("-abc123") and cm.metadata.name == job.metadata.name == name
    # --backend k8s writes one manifest per Job before submitting: no FileExistsError any more.
    paths = k8s.write_manifests(tmp_path / "k8s", jobs)
    assert len({p.name for p in paths}) == len(jobs)
    with pytest.raises(UsageError, match="exists; expected a new k8s attempt"):
        k8s.write_manifests(tmp_path / "k8s", jobs)


def test_a_k8s_name_clash_is_one_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from repro.lanes.matrix import k8s

    monkeypatch.setattr(k8s, "job_name", lambda plan, cells, attempt: f"gpu-repro-same-{attempt}")
    p = plan_mod.build(spec(lanes=[{"name": n, "image": "x"} for n in ("a", "b")]), check_catalog=False)
    with pytest.raises(UsageError, match="is the same for lane 'a'"):
        k8s.manifests(p, list(p.cells), plan_mod.to_doc(p), "abc123")


# --------------------------------------------------------------------------- D: secrets stay off disk

HF = "hf_" + "Zx9" * 8  # a Hugging Face token's shape
SECRETS = {"HF_TOKEN": HF, "DB_URL": "postgres://alice:pw-in-url-77@db.example/x", "MINE": "only-marked-secret-42"}


def _secret_spec(**over: Any) -> dict[str, Any]:
    env = {**SECRETS, "PLAIN": "visible-value"}
    lanes = [
        {"name": "img", "image": "gpu-repro:cu126-pt26", "env": env, "secret_env": ["MINE"]},
        {"name": "other", "image": "gpu-repro:cu126-pt26", "env": {"HF_TOKEN": "hf_" + "Q" * 24}},
    ]
    return spec(**{"lanes": lanes, **over})


def _leaks(text: str) -> list[str]:
    return [v for v in (*SECRETS.values(), "pw-in-url-77", "hf_" + "Q" * 24) if v in text]


def test_secret_env_values_stay_out_of_plan_json_and_the_k8s_manifests(tmp_path: Path) -> None:
    import yaml

    from repro.lanes.matrix import k8s

    p = plan_mod.build(_secret_spec(k8s={"pvc": "arts"}), check_catalog=False)
    assert p.cells[0].lane.secret_names == ("DB_URL", "HF_TOKEN", "MINE")
    root = tmp_path / "m"
    run_mod.prepare(p, root, dry_run=False)
    text = (root / "plan.json").read_text()
    assert _leaks(text) == [] and "visible-value" in text and "<redacted>" in text
    # A resumed run with the real spec is the same matrix (the digest is over the redacted spec).
    assert len(run_mod.prepare(p, root, dry_run=False)) == len(p.cells)

    jobs = k8s.manifests(p, list(p.cells), plan_mod.to_doc(p), "abc123")
    written = k8s.write_manifests(tmp_path / "k8s", jobs)
    for path in written:
        docs = list(yaml.safe_load_all(path.read_text()))
        assert _leaks(path.read_text()) == []
        assert [d["kind"] for d in docs] == ["ConfigMap", "Secret", "Job"]
        (container,) = docs[2]["spec"]["template"]["spec"]["containers"]
        refs = [e for e in container["env"] if "valueFrom" in e and "secretKeyRef" in e["valueFrom"]]
        assert {e["valueFrom"]["secretKeyRef"]["key"] for e in refs} == set(docs[1]["stringData"])
    # Only the object sent to the API server holds the values.
    name, _, cells = jobs[0]
    sent = k8s.secret(p, cells, name, values=True)
    assert sent is not None
    assert set(sent.string_data.values()) == set(SECRETS.values())


def test_secret_env_values_stay_out_of_the_sbatch_script_and_reach_sbatch_by_environment(tmp_path: Path) -> None:
    p = plan_mod.build(_secret_spec(), check_catalog=False)
    cells = list(p.cells)
    text = slurm.script(p, cells, tmp_path, {c.index: "docker" for c in cells}, None)
    assert _leaks(text) == [] and "-e GPU_REPRO_SECRET_" in text
    seen: list[Any] = []

    def fake(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        seen.append(env)
        return subprocess.CompletedProcess(argv, 0, "41\n", "")

    assert slurm.submit(tmp_path / "x.sbatch", fake, env=slurm.secrets(cells)) == "41"
    assert set(SECRETS.values()) <= set(seen[0].values())


_PROBE = """
import os
from dataclasses import dataclass
from pathlib import Path
from repro.core.spec import Metric, Repro, Requirements, RunResult, Verdict, param
from repro.core.verdict import ratio_verdict
from repro.run.catalog import register


@dataclass(frozen=True)
class Params:
    out: str = param("", help="where to write what the repro sees")


@register
class EnvProbe(Repro):
    id = "test-env-probe"
    title = "records the secret env it sees"
    upstream = ()
    seed_claim = "test fixture"
    Params = Params
    requires = Requirements(cuda=False)
    metric = Metric(name="t(a)/t(b)", description="test ratio", threshold=1.5)

    def run(self, p, ctx):
        seen = {k: v for k, v in os.environ.items() if k in ("HF_TOKEN", "DB_URL", "MINE", "PLAIN")}
        carriers = sorted(k for k in os.environ if k.startswith("GPU_REPRO_SECRET_"))
        Path(p.out).write_text(repr((seen, carriers)))
        a = ctx.measure("a", lambda: sum(range(200)))
        b = ctx.measure("b", lambda: sum(range(100)))
        return RunResult(variants=(a, b))

    def verdict(self, p, result):
        return ratio_verdict(self.metric, result.variant("a"), result.variant("b"),
                             finding=lambda v, lo, hi, status, q: f"ratio {v:.2f}")
"""


def test_a_native_cell_gets_its_secrets_through_the_environment(tmp_path: Path) -> None:
    import ast

    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "probe.py").write_text(_PROBE)
    seen = tmp_path / "seen"
    doc = _secret_spec(
        lanes=[{"name": "host", "env": {**SECRETS, "PLAIN": "visible-value"}, "secret_env": ["MINE"]}],
        repros=[{"id": "test-env-probe", "set": {"out": str(seen)}}],
        repro_paths=[str(plugins)],
        gpus=[{"count": 0}],
        budget_s=0.1,
    )
    p = plan_mod.build(doc)
    root = tmp_path / "m"
    run_mod.run(p, root, run_mod.Options(backend="local", devices=[]), log=lambda s: None)
    env, carriers = ast.literal_eval(seen.read_text())
    assert env == {**SECRETS, "PLAIN": "visible-value"} and carriers == []
    on_disk = "".join(f.read_text(errors="replace") for f in root.rglob("*") if f.is_file())
    assert _leaks(on_disk) == []


def test_scheme_less_credentials_are_redacted_but_image_digests_are_not() -> None:
    from repro.core import redact

    fix = redact.redactor(hostname="nohost", home="/nonexistent", secrets=[])
    command = ["repro", "run", "--out", "alice:hunter2@nas.example:/data", "--out=bob:pw2@h"]
    assert "hunter2" not in str(fix(command)) and "pw2" not in str(fix(command))
    assert fix(command)[3] == "<redacted>@nas.example:/data"
    digest = "gpu-repro:cu126-pt26@sha256:" + "a" * 64
    for keep in (digest, "nvcr.io/nvidia/nemo:26.08@sha256:" + "b" * 64, "git@github.com:o/r.git", "/a/b:c@d"):
        assert fix(keep) == keep
    assert redact.is_secret("HF_TOKEN", "x") and redact.is_secret("URL", "u:p@h") and not redact.is_secret("N", "1")


# --------------------------------------------------------------------------- B: nobody else's attempt is believed

REFERENCE = next((ROOT / "artifacts" / "reference" / "h200").glob("run-5090-linear/*/5090-linear.json"))
needs_root = pytest.mark.skipif(os.getuid() != 0, reason="plays another local user with os.chown: needs root")


def _artifact_for(cell_id: str, status: str = "reproduced") -> dict[str, Any]:
    from repro.evidence import artifact

    doc = artifact.load(REFERENCE)
    doc["fingerprint"]["scheduler"] = {"kind": None, "matrix_cell": cell_id}
    doc["verdict"]["status"] = status
    doc["verdict"]["finding"] = f"FORGED {status}"
    return doc


def _plant(folder: Path, doc: dict[str, Any], uid: int = 0, mode: int = 0o755, file_uid: int | None = None) -> Path:
    from repro.evidence import artifact

    folder.mkdir(mode=0o755)
    path = artifact.write_artifact(doc, folder / "5090-linear.json")
    os.chown(path, file_uid if file_uid is not None else uid, 0)
    os.chown(folder, uid, 0)
    folder.chmod(mode)
    return path


def _one_image_cell(tmp_path: Path) -> tuple[Plan, Path]:
    p = plan_mod.build(spec(lanes=[{"name": "img", "image": "gpu-repro:cu126-pt26"}]), check_catalog=False)
    root = tmp_path / "m"
    run_mod.prepare(p, root, dry_run=False)
    return p, root


@needs_root
def test_cells_and_attempt_folders_are_the_runners_and_the_container_gets_only_its_attempt(tmp_path: Path) -> None:
    p, root = _one_image_cell(tmp_path)
    # An older gpu-repro left cells/ world-writable and the cell folder to the containers' uid.
    (root / "cells" / p.cells[0].id).mkdir(parents=True)
    (root / "cells").chmod(0o1777)
    os.chown(root / "cells" / p.cells[0].id, 1000, 1000)
    (cell,) = run_mod._prepare_attempts(root, list(p.cells), {0: "docker"})
    for folder in (root / "cells", root / "cells" / cell.id):
        st = folder.stat()
        assert st.st_uid == 0 and st.st_mode & 0o022 == 0, (folder, oct(st.st_mode))
    attempt = root / "cells" / cell.id / str(cell.attempt)
    assert attempt.stat().st_uid == 1000 and attempt.stat().st_mode & 0o022 == 0
    assert ["--attempt", cell.attempt] == launch.cell_args(cell, "/artifacts")[-2:]
    # What the container wrote there goes back to the runner, not writable by others.
    (attempt / "x.json").write_text("{}")
    os.chown(attempt / "x.json", 1000, 1000)
    (attempt / "x.json").chmod(0o666)
    run_mod._give_back(root, [cell])
    for path in (attempt, attempt / "x.json"):
        assert path.stat().st_uid == 0 and path.stat().st_mode & 0o022 == 0


@needs_root
@pytest.mark.parametrize(
    ("how", "plant"),
    [
        ("another owner", {"uid": 4242}),
        ("world-writable", {"mode": 0o777}),
        ("group-writable", {"mode": 0o775}),
        ("artifact of another owner", {"file_uid": 4242}),
    ],
)
def test_a_planted_attempt_is_neither_collected_nor_skipped_on_resume(
    tmp_path: Path, how: str, plant: dict[str, Any]
) -> None:
    from repro.lanes.matrix import collect

    p, root = _one_image_cell(tmp_path)
    (cell,) = run_mod._prepare_attempts(root, list(p.cells), {0: "docker"})
    run_mod._give_back(root, [cell])  # the genuine attempt: the cell died before writing anything
    folder = root / "cells" / cell.id
    _plant(folder / "20990101T000000Z-aaaaaa", _artifact_for(cell.id), **plant)  # newer than the genuine
    _, (r,) = collect.collect(root)
    assert r.status == "missing" and r.attempts == 1 and len(r.ignored) == 1, (how, r)
    assert "FORGED" not in r.note and "untrusted" in r.note
    assert [c.index for c in run_mod.prepare(p, root, dry_run=False)] == [0]  # a resumed run reruns it


@needs_root
def test_an_attempt_of_the_runner_with_another_cells_artifact_or_a_link_is_not_believed(tmp_path: Path) -> None:
    from repro.lanes.matrix import collect

    p, root = _one_image_cell(tmp_path)
    (cell,) = run_mod._prepare_attempts(root, list(p.cells), {0: "native"})
    folder = root / "cells" / cell.id
    _plant(folder / "20990101T000001Z-aaaaaa", _artifact_for("999-other-5090-linear"))
    elsewhere = tmp_path / "elsewhere"
    _plant(elsewhere, _artifact_for(cell.id))
    (folder / "20990101T000002Z-aaaaaa").symlink_to(elsewhere)
    _, (r,) = collect.collect(root)
    assert r.status == "missing" and len(r.ignored) == 2, r
    # The control: the runner's own attempt, with this cell's artifact, is believed (the newest believable).
    _plant(folder / "20990101T000000Z-aaaaaa", _artifact_for(cell.id, "not_reproduced"))
    _, (r,) = collect.collect(root)
    assert r.status == "not_reproduced" and r.done and r.attempts == 3 - 1, r
    assert run_mod.prepare(p, root, dry_run=False) == []


@needs_root
def test_resume_refuses_a_plan_file_that_is_not_the_callers(tmp_path: Path) -> None:
    p, root = _one_image_cell(tmp_path)
    os.chown(root / "plan.json", 4242, 4242)
    with pytest.raises(UsageError, match="owned by uid 4242"):
        run_mod.prepare(p, root, dry_run=False)


@needs_root
def test_the_container_uid_writes_its_own_attempt_and_nothing_beside_it(tmp_path: Path) -> None:
    import tempfile

    from repro.evidence import artifact
    from repro.lanes.matrix import cell as cell_mod
    from repro.lanes.matrix import collect

    # uid 1000 must reach the folder: not under pytest's root-only tmp.
    base = Path(tempfile.mkdtemp(prefix="gpu-repro-test-"))
    try:
        base.chmod(0o755)
        p, root = _one_image_cell(base)
        (cell,) = run_mod._prepare_attempts(root, list(p.cells), {0: "docker"})
        doc = _artifact_for(cell.id, "not_reproduced")
        pid = os.fork()
        if pid == 0:  # `repro matrix cell --attempt` in a container of a root caller: the images' uid
            code = 2
            try:
                os.setgroups([])
                os.setresgid(1000, 1000, 1000)
                os.setresuid(1000, 1000, 1000)
                run_dir = cell_mod.attempt_dir(root, cell, cell.attempt)
                artifact.write_artifact(doc, run_dir / "5090-linear.json")
                try:
                    (root / "cells" / cell.id / artifact.new_run_id()).mkdir()
                    code = 3  # it could plant an attempt of its own
                except PermissionError:
                    code = 0 if run_dir.name == cell.attempt else 4
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        _, (r,) = collect.collect(root)
        assert r.status == "missing" and len(r.ignored) == 1  # still uid 1000's: not believed yet
        run_mod._give_back(root, [cell])
        _, (r,) = collect.collect(root)
        assert r.status == "not_reproduced" and r.ignored == (), r
        for path in root.rglob("*"):
            st = path.lstat()
            assert st.st_uid == 0 and st.st_mode & 0o022 == 0, (path, st.st_uid, oct(st.st_mode))
    finally:
        shutil.rmtree(base, ignore_errors=True)
