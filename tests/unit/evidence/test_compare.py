"""`repro compare`: real CPU artifacts from two "lanes" side by side, and the fingerprint fields that differ."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from helpers import ROOT, TORCH_BLOCKER
from typer.testing import CliRunner

from repro.cli.evidence import compare_cmd
from repro.core.errors import UsageError
from repro.core.verdict import fmt_ratio
from repro.evidence import agreement, band, compare

RUN = ["run", "5090-linear", "--smoke", "--budget", "0.2", "--target-ci", "0.05", "--no-collect-env"]


@pytest.fixture(scope="module")
def lanes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two real smoke runs that differ in lane, image and one knob-changing env var (run concurrently)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GPU_REPRO_", "TORCH_ALLOW_TF32"))}
    setups = {
        "cu126-pt26": {
            "GPU_REPRO_LANE": "cu126-pt26",
            "GPU_REPRO_IMAGE": "pytorch/pytorch:2.6.0-cuda12.6-cudnn9-devel",
        },
        "nemo": {
            "GPU_REPRO_LANE": "nemo",
            "GPU_REPRO_IMAGE": "nvcr.io/nvidia/nemo:26.08.01",
            "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "1",
        },
    }
    root = tmp_path_factory.mktemp("lanes")
    procs = {}
    for lane, extra in setups.items():
        procs[lane] = subprocess.Popen(
            [sys.executable, "-m", "repro.cli.main", *RUN, "--out", str(root / lane)],
            env={**base, **extra},
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    for proc in procs.values():
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    return {lane: root / lane for lane in setups}


def artifact_of(lane_dir: Path) -> Path:
    (path,) = lane_dir.glob("*/5090-linear.json")
    return path


def rows_of(md: str, first_header: str) -> list[list[str]]:
    """The rows (cells stripped) of the markdown table whose first header cell is ``first_header``."""
    lines = md.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("|") and ln.split("|")[1].strip() == first_header)
    out = []
    for ln in lines[start:]:
        if not ln.startswith("|"):
            break
        out.append([c.strip() for c in ln.strip().strip("|").split("|")])
    return [out[0], *out[2:]]  # drop the |---| rule


def write_doc(path: Path, doc: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


# --------------------------------------------------------------------------- the comparison


def test_side_by_side_table_and_fingerprint_diff(lanes: dict[str, Path]) -> None:
    doc = compare.compare([lanes["cu126-pt26"], lanes["nemo"]])
    md = compare.markdown(doc)
    assert md.startswith("# gpu-repro compare: cu126-pt26 vs nemo\n")

    # Columns go by short keys; the environment table says which is which.
    envs = {r[0]: r[1:] for r in rows_of(md, "env")[1:]}
    assert envs["**A**"][0] == "cu126-pt26" and envs["**B**"][0] == "nemo"
    head, *body = rows_of(md, "repro")
    assert head == ["repro", "threshold", "A", "B"]
    (row,) = body
    assert row[:2] == ["`5090-linear`", "1.5"]
    for lane, cell in zip(("cu126-pt26", "nemo"), row[2:], strict=True):
        art = json.loads(artifact_of(lanes[lane]).read_text())
        v = art["verdict"]
        assert f"**{v['status']}**" in cell
        assert fmt_ratio(v["value"], v["ci_low"], v["ci_high"]) in cell  # as many decimals as its CI needs
        assert "_smoke_" in cell
        top = {x["name"]: x["kernels"][0]["name"] for x in art["variants"]}
        assert f"linear_fp32: `{top['linear_fp32']}`" in cell and f"manual_fp32: `{top['manual_fp32']}`" in cell

    assert rows_of(md, "field")[0] == ["field", "A", "B"]
    diff = {r[0]: r[1:] for r in rows_of(md, "field")[1:]}
    assert diff["`env.TORCH_ALLOW_TF32_CUBLAS_OVERRIDE`"] == ["-", "1"]
    assert diff["`container.env.GPU_REPRO_LANE`"] == ["cu126-pt26", "nemo"]
    assert diff["`container.env.GPU_REPRO_IMAGE`"] == [
        "pytorch/pytorch:2.6.0-cuda12.6-cudnn9-devel",
        "nvcr.io/nvidia/nemo:26.08.01",
    ]
    # Same machine, same torch: nothing else may show up but volatile fields are never listed.
    assert not [k for k in diff if k.startswith(("`collect_env", "`ceilings", "`gpu.state"))]
    assert "`software.torch.version`" not in diff


def test_json_carries_the_same_structure(lanes: dict[str, Path]) -> None:
    doc = compare.compare([lanes["cu126-pt26"], lanes["nemo"]])
    assert doc["kind"] == "gpu-repro.compare" and doc["schema_version"] == "1.1"
    assert [e["label"] for e in doc["environments"]] == ["cu126-pt26", "nemo"]
    assert doc["environments"][1]["base_image"] == "nvcr.io/nvidia/nemo:26.08.01"
    (rep,) = doc["repros"]
    art = json.loads(artifact_of(lanes["nemo"]).read_text())
    res = rep["results"]["nemo"]
    assert res["value"] == art["verdict"]["value"] and res["status"] == art["verdict"]["status"]
    assert res["artifact"] == str(artifact_of(lanes["nemo"]))
    assert [k["variant"] for k in res["key_kernels"]] == ["linear_fp32", "manual_fp32"]
    assert res["key_kernels"][0]["kernels"][0]["name"] == art["variants"][0]["kernels"][0]["name"]
    fields = {r["field"]: r["values"] for r in doc["fingerprint_diff"]}
    assert fields["env.TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"] == {"nemo": "1"}
    json.dumps(doc)  # plain JSON all the way down


def test_verdict_named_variants_win_over_the_guess(lanes: dict[str, Path], tmp_path: Path) -> None:
    art = json.loads(artifact_of(lanes["nemo"]).read_text())
    art["verdict"]["variants"] = ["manual_fp32", "linear_fp32"]
    path = write_doc(tmp_path / "named.json", art)
    res = compare.build(compare.load_environments([path]))["repros"][0]["results"]["nemo"]
    assert [k["variant"] for k in res["key_kernels"]] == ["manual_fp32", "linear_fp32"]
    assert res["variants_named_by_verdict"] is True


# --------------------------------------------------------------------------- inputs and labels


def test_lane_folder_takes_its_newest_run(lanes: dict[str, Path], tmp_path: Path) -> None:
    old = json.loads(artifact_of(lanes["cu126-pt26"]).read_text())
    new = json.loads(artifact_of(lanes["nemo"]).read_text())
    lane_dir = tmp_path / "lane"
    write_doc(lane_dir / "20200101T000000Z-aaaaaa" / "5090-linear.json", old)
    write_doc(lane_dir / "29990101T000000Z-bbbbbb" / "5090-linear.json", new)
    (lane_dir / "29990101T000000Z-cccccc").mkdir()  # a run that left no artifact is not "newest"
    (env,) = compare.load_environments([lane_dir])
    assert env.run_ids() == [new["run"]["run_id"]]
    assert [p.parent.name for p, _ in env.artifacts] == ["29990101T000000Z-bbbbbb"]


def test_labels_fall_back_to_stack_and_stay_unique(lanes: dict[str, Path], tmp_path: Path) -> None:
    art = json.loads(artifact_of(lanes["cu126-pt26"]).read_text())
    bare = copy.deepcopy(art)
    bare["fingerprint"]["container"]["env"] = {}
    bare_path = write_doc(tmp_path / "bare.json", bare)
    lane_a = artifact_of(lanes["cu126-pt26"])
    envs = compare.load_environments([bare_path, lane_a, lane_a, lanes["nemo"], lane_a])
    run_id = art["run"]["run_id"]
    assert [e.label for e in envs] == [
        f"torch {art['fingerprint']['software']['torch']['version']} / no CUDA GPU / {run_id}",
        f"cu126-pt26 ({run_id})",
        f"cu126-pt26 ({run_id}) #2",
        "nemo",
        f"cu126-pt26 ({run_id}) #3",
    ]


def test_repro_missing_in_one_environment_and_notes(lanes: dict[str, Path], tmp_path: Path) -> None:
    a = json.loads(artifact_of(lanes["cu126-pt26"]).read_text())
    b = json.loads(artifact_of(lanes["nemo"]).read_text())
    run_b = tmp_path / "b" / b["run"]["run_id"]
    b["repro"]["params"]["batch"] = 8
    write_doc(run_b / "5090-linear.json", b)
    other = copy.deepcopy(b)
    other["repro"]["id"] = "solve-512-cliff"
    write_doc(run_b / "solve-512-cliff.json", other)
    doc = compare.compare([artifact_of(lanes["cu126-pt26"]), run_b])
    assert [r["id"] for r in doc["repros"]] == ["5090-linear", "solve-512-cliff"]
    assert doc["repros"][1]["results"]["cu126-pt26"] is None
    a_batch = a["repro"]["params"]["batch"]
    assert doc["notes"] == [f"`5090-linear`: param `batch` differs between environments: {a_batch} in A; 8 in B"]
    md = compare.markdown(doc)
    solve = next(r for r in rows_of(md, "repro")[1:] if r[0] == "`solve-512-cliff`")
    assert solve[2] == "not run"
    assert f"- `5090-linear`: param `batch` differs between environments: {a_batch} in A; 8 in B" in md
    assert a["repro"]["params"]["batch"] != 8


def test_bad_inputs_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file or folder"):
        compare.compare([tmp_path / "missing"])
    (tmp_path / "empty" / "logs").mkdir(parents=True)
    with pytest.raises(UsageError, match="holds no artifacts and no run folders"):
        compare.compare([tmp_path / "empty"])
    (tmp_path / "junk.json").write_text("{")
    with pytest.raises(UsageError, match="not valid JSON"):
        compare.compare([tmp_path / "junk.json"])
    with pytest.raises(UsageError, match="no input"):
        compare.compare([])


def test_long_labels_become_keys_and_cuda_keeps_its_minor_version(lanes: dict[str, Path], tmp_path: Path) -> None:
    docs = []
    for i, lane in enumerate(("cu126-pt26", "nemo")):
        doc = json.loads(artifact_of(lanes[lane]).read_text())
        doc["fingerprint"]["container"]["env"] = {}  # no lane: the label is "torch X / GPU / run id"
        doc["fingerprint"]["software"]["torch"]["cuda_built"] = "13.0"
        doc["run"]["run_id"] = f"20261129T18111{i}Z-66c1a{i}"
        docs.append(write_doc(tmp_path / f"{i}" / doc["run"]["run_id"] / "5090-linear.json", doc))
    md = compare.markdown(compare.compare([d.parent for d in docs]))
    title = md.splitlines()[0]
    assert title == "# gpu-repro compare: 2 environments (A, B)"
    envs = rows_of(md, "env")
    assert envs[0][:6] == ["env", "label", "GPU", "driver", "torch", "CUDA"]
    assert [r[5] for r in envs[1:]] == ["13.0", "13.0"]  # not 13: tabulate no longer parses it
    assert envs[1][1].startswith("torch ") and envs[1][1].endswith("20261129T181110Z-66c1a0")
    assert rows_of(md, "repro")[0] == ["repro", "threshold", "A", "B"]
    assert max(len(ln) for ln in md.splitlines() if ln.startswith("| repro")) < 400


# --------------------------------------------------------------------------- the pieces


def test_flatten_and_volatile_fields() -> None:
    flat = compare.flatten({"a": {"b": 1, "c": [1, 2], "d": {}}, "e": None})
    assert flat == {"a.b": 1, "a.c": [1, 2], "e": None}
    for key in ("collect_env.output", "ceilings.fp32.value", "gpu.state.power_w", "gpu.nvml.temperature_c"):
        assert compare.is_volatile(key), key
    for key in ("gpu.nvml.power_limit_w", "software.libraries.cublas.path", "env.CUDA_LAUNCH_BLOCKING", "gpu.uuid"):
        assert not compare.is_volatile(key), key


def test_markdown_stays_under_the_limit(lanes: dict[str, Path]) -> None:
    doc = compare.compare([lanes["cu126-pt26"], lanes["nemo"]])
    doc["fingerprint_diff"] = [{"field": f"x.f{i}", "values": {"nemo": "v" * 70}} for i in range(2000)]
    md = compare.markdown(doc, limit=20_000)
    assert len(md) <= 20_000
    assert "more differing fields left out to fit GitHub's size limit; see --json" in md


# --------------------------------------------------------------------------- CLI


@pytest.fixture
def app() -> typer.Typer:
    a = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    a.command("compare")(compare_cmd)

    @a.command("noop")
    def _noop() -> None:  # a second command keeps `compare` a subcommand, as in repro's app
        pass

    return a


def test_cli_markdown_json_and_out(app: typer.Typer, lanes: dict[str, Path], tmp_path: Path) -> None:
    cli = CliRunner(env={"COLUMNS": "120", "TERM": "dumb"})
    paths = [str(lanes["cu126-pt26"]), str(lanes["nemo"])]
    r = cli.invoke(app, ["compare", *paths])
    assert r.exit_code == 0, r.output
    assert "## Fingerprint fields that differ" in r.output
    r = cli.invoke(app, ["compare", *paths, "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["kind"] == "gpu-repro.compare"
    out = tmp_path / "compare.md"
    r = cli.invoke(app, ["compare", *paths, "--out", str(out)])
    assert r.exit_code == 0 and out.read_text().startswith("# gpu-repro compare: cu126-pt26 vs nemo")
    r = cli.invoke(app, ["compare", *paths, "--out", str(out)])
    assert r.exit_code == 2
    assert (
        r.output.strip() == f"error: --out {out}: exists; expected a new file name (comparisons are never overwritten)"
    )
    r = cli.invoke(app, ["compare", str(tmp_path / "nope")])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1 and "Traceback" not in r.output


def test_compare_never_imports_torch(lanes: dict[str, Path], tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(TORCH_BLOCKER)
    code = (
        "import sys, typer; from repro.cli.evidence import compare_cmd; a = typer.Typer(); "
        "a.command('compare')(compare_cmd); a.command('x')(lambda: None); a(['compare', *sys.argv[1:]])"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    r = subprocess.run(
        [sys.executable, "-c", code, str(lanes["cu126-pt26"]), str(lanes["nemo"]), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["environments"][1]["label"] == "nemo"
    blocked = subprocess.run([sys.executable, "-c", "import torch"], env=env, capture_output=True, text=True)
    assert blocked.returncode != 0


def test_lane_dirs_copy_cleanly(lanes: dict[str, Path], tmp_path: Path) -> None:
    # A user may move lane folders around (e.g. attach them to an issue); compare reads them anywhere.
    moved = shutil.copytree(lanes["nemo"], tmp_path / "moved")
    assert compare.build(compare.load_environments([moved]))["environments"][0]["label"] == "nemo"


def test_one_input_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from repro.cli.main import app

    src = next((ROOT / "artifacts" / "reference" / "h200" / "bench" / "all").iterdir())
    res = CliRunner().invoke(app, ["compare", str(src), "--out", str(tmp_path / "c.md")])
    assert res.exit_code == 2
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and "compare needs two or more environments" in lines[0] and str(src) in lines[0]
    assert not (tmp_path / "c.md").exists()


def test_headlines_are_judged_by_the_rerun_band_between_gpus(tmp_path: Path) -> None:
    ref = ROOT / "artifacts" / "reference" / "h200"
    a = next((ref / "bench" / "all").iterdir()) / "solve-512-cliff.json"
    b = next((ref / "paired" / "final" / "all1").iterdir()) / "solve-512-cliff.json"
    md = compare.markdown(compare.compare([a, b]))
    # The shipped band less the two runs compared: both are committed, so both are among its runs.
    ids = [json.loads(p.read_text())["run"]["run_id"] for p in (a, b)]
    assert all(any(i in p.runs for x in band.load() for p in x.points) for i in ids)
    found = band.lookup(json.loads(a.read_text()), band.without(band.load(), ids))
    assert found is not None and len(found.points) >= 3
    below, above = found.sides()
    reach = agreement.reach(found)[0]
    assert (
        f"consistent (the band: -{below * 100:.1f}%/+{above * 100:.1f}% of {found.center:.4g} over "
        f"{len(found.points)} GPUs; two runs agree within ±{reach * 100:.1f}%)"
    ) in md
    far = json.loads(b.read_text())
    far["verdict"]["value"] *= 1.2
    (tmp_path / "far.json").write_text(json.dumps(far))
    md = compare.markdown(compare.compare([a, tmp_path / "far.json"]))
    assert "differs beyond the band" in md
