"""The Docker lanes without an engine: the lock file, and the docker calls build/run/lock and the Make targets make.

A fake client stands in for the docker SDK's where the call's arguments are the point (GPU
device requests, which no engine here can honour, build args, error paths). What a real engine
does with them (builds, runs, make matrix, compare) is tested in tests/test_engine.py and .ci/run.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import docker.errors
import pytest
import typer
from docker.types import DeviceRequest
from typer.testing import CliRunner

from repro import __version__
from repro.cli.docker import compare_cmd, images_app
from repro.core.errors import ReproError, UsageError
from repro.lanes import images

ROOT = Path(__file__).resolve().parent.parent
LANES = ("cu126-pt26", "cu128-nightly", "nemo")
DIGEST = "sha256:" + "ab" * 32
ALL_GPUS = DeviceRequest(count=-1, capabilities=[["gpu"]])


# --------------------------------------------------------------------------- a fake docker client


class FakeContainer:
    def __init__(self, client: FakeClient) -> None:
        self.client = client
        self.id = "c0ffee"

    def attach(self, **kwargs: Any) -> Iterable[tuple[bytes | None, bytes | None]]:
        self.client.calls.append(["attach", kwargs])
        return iter(self.client.output)

    def wait(self, **kwargs: Any) -> dict[str, Any]:
        return {"StatusCode": self.client.exit_code, "Error": None}

    def stop(self, **kwargs: Any) -> None:
        self.client.calls.append(["stop", kwargs])

    def remove(self, **kwargs: Any) -> None:
        self.client.calls.append(["remove", kwargs])


class FakeClient:
    """Records every call the way the docker SDK would receive it."""

    def __init__(
        self,
        *,
        present: Iterable[str] = (),
        registry: dict[str, Any] | None = None,
        build_stream: list[dict[str, Any]] | None = None,
        output: list[tuple[bytes | None, bytes | None]] | None = None,
        exit_code: int = 0,
        on_run: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.calls: list[list[Any]] = []
        self.present = set(present)
        self.registry = registry or {}
        self.build_stream = build_stream or [{"stream": "Step 1/9 : FROM x\n"}, {"aux": {"ID": "sha256:" + "1" * 64}}]
        self.output = output if output is not None else [(b"out\n", None), (None, b"err\n")]
        self.exit_code = exit_code
        self.on_run = on_run
        client = self

        class Api:
            def build(self, **kwargs: Any) -> Iterable[dict[str, Any]]:
                with tarfile.open(fileobj=kwargs.pop("fileobj"), mode="r") as tar:
                    kwargs["context"] = sorted(tar.getnames())
                client.calls.append(["build", kwargs])
                return iter(client.build_stream)

        class Images:
            def get(self, ref: str) -> Any:
                client.calls.append(["images.get", ref])
                if ref not in client.present:
                    raise docker.errors.ImageNotFound(f"No such image: {ref}")
                return SimpleNamespace(id="sha256:" + "2" * 64, tags=[ref])

            def get_registry_data(self, ref: str) -> Any:
                client.calls.append(["registry", ref])
                answer = client.registry.get(ref, docker.errors.NotFound(f"manifest unknown: {ref}"))
                if isinstance(answer, Exception):
                    raise answer
                return SimpleNamespace(id=answer)

        class Containers:
            def run(self, image: str, **kwargs: Any) -> FakeContainer:
                client.calls.append(["run", {"image": image, **kwargs}])
                if client.on_run:
                    client.on_run({"image": image, **kwargs})
                return FakeContainer(client)

        self.api, self.images, self.containers = Api(), Images(), Containers()

    def called(self, kind: str) -> list[Any]:
        return [args for name, args in self.calls if name == kind]


@pytest.fixture
def cli() -> CliRunner:
    return CliRunner(env={"COLUMNS": "120", "TERM": "dumb"})


def make_app() -> typer.Typer:
    """The commands as cli.py registers them (add_typer + command), on an app of our own."""
    from repro.cli.main import app as main_app

    test_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    test_app.registered_commands.extend(main_app.registered_commands)
    test_app.add_typer(images_app, name="images")
    test_app.command("compare")(compare_cmd)
    return test_app


@pytest.fixture
def app() -> typer.Typer:
    return make_app()


@pytest.fixture
def tmp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout whose lock file a test may rewrite: the real docker/ and sources, a copied lock."""
    root = tmp_path / "checkout"
    (root / "docker").mkdir(parents=True)
    shutil.copy(ROOT / images.LOCK_FILE, root / images.LOCK_FILE)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "*.whl")
    for rel in ("repro", "schemas", "docker/ca", *[f"docker/{lane}" for lane in LANES]):
        shutil.copytree(ROOT / rel, root / rel, symlinks=True, ignore=skip)
    for rel in ("pyproject.toml", "docker/requirements.txt", "docker/install-repro.sh"):
        shutil.copy(ROOT / rel, root / rel)
    monkeypatch.setattr(images, "repo_root", lambda: root)
    monkeypatch.setattr(images, "git_commit", lambda root: "0123abc")
    return root


def with_digest(lock: images.Lock, lane: str, digest: str = DIGEST) -> images.Lane:
    import dataclasses

    return dataclasses.replace(lock.lanes[lane], digest=digest)


# --------------------------------------------------------------------------- the lock file


def test_lock_pins_each_lane_to_an_exact_tag() -> None:
    lock = images.load_lock()
    assert list(lock.lanes) == list(LANES)
    assert lock.lanes["cu126-pt26"].base == "pytorch/pytorch:2.6.0-cuda12.6-cudnn9-devel"
    assert lock.lanes["cu128-nightly"].base == "nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04"
    assert lock.lanes["nemo"].base == "nvcr.io/nvidia/nemo:26.08.01"
    assert lock.lanes["cu128-nightly"].build_args["TORCH_NIGHTLY"] == "2.12.0.dev20260407+cu128"
    for lane in lock.lanes.values():
        assert images.tag_problem(lane.base) is None
        assert lane.image == f"gpu-repro:{lane.name}"
        # A digest is only ever what `repro images lock` got from a registry, never typed in.
        assert lane.digest is None or (lane.digest.startswith("sha256:") and lane.resolved_utc)


@pytest.mark.parametrize(
    ("ref", "problem"),
    [
        ("pytorch/pytorch:2.6.0-cuda12.6-cudnn9-devel", None),
        ("localhost:5000/team/img:1.2", None),
        ("ubuntu", "has no tag"),
        ("localhost:5000/team/img", "has no tag"),
        ("ubuntu:latest", "floating tag 'latest'"),
        ("ubuntu:24.04@" + DIGEST, "carries a digest"),
    ],
)
def test_tag_problem(ref: str, problem: str | None) -> None:
    got = images.tag_problem(ref)
    assert (got is None) if problem is None else (problem in (got or ""))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda lk: lk["lanes"]["nemo"].update(base="nvcr.io/nvidia/nemo:latest"), "floating tag 'latest'"),
        (lambda lk: lk["lanes"]["nemo"].update(digest="sha256:abc"), "expected null or sha256:<64 hex>"),
        (lambda lk: lk["lanes"]["nemo"].update(build_args={"X": 1}), "build_args"),
        (lambda lk: lk.update(lanes={}), "non-empty 'lanes'"),
        (lambda lk: lk.update(schema_version=2), "schema_version 1"),
    ],
)
def test_bad_lock_is_an_error_naming_file_and_field(tmp_path: Path, edit: Callable[[Any], None], message: str) -> None:
    raw = json.loads((ROOT / images.LOCK_FILE).read_text())
    edit(raw)
    path = tmp_path / "images.lock.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(ReproError, match=message) as info:
        images.load_lock(path)
    assert str(path) in str(info.value)


def test_unknown_lane_names_it_and_the_known_ones() -> None:
    with pytest.raises(UsageError) as info:
        images.select(images.load_lock(), ["cu118"])
    assert str(info.value) == "unknown lane 'cu118'; known: cu126-pt26, cu128-nightly, nemo"
    assert [ln.name for ln in images.select(images.load_lock(), [])] == list(LANES)


def test_write_lock_keeps_other_fields(tmp_root: Path) -> None:
    lock = images.load_lock()
    new = images.write_lock(lock, {"nemo": {"digest": DIGEST, "resolved_utc": "2026-01-01T00:00:00Z"}})
    assert new.lanes["nemo"].digest == DIGEST and new.lanes["cu126-pt26"] == lock.lanes["cu126-pt26"]
    assert new.raw["about"] == lock.raw["about"]
    assert not list((tmp_root / "docker").glob(".images.lock.json.*"))


# --------------------------------------------------------------------------- build


def test_build_uses_digest_when_locked_and_passes_pins_and_provenance(tmp_root: Path) -> None:
    lock = images.load_lock()
    fake = FakeClient()
    lines: list[str] = []
    lane = with_digest(lock, "cu128-nightly")
    built = images.build([lane], root=tmp_root, docker_client=fake, log=lines.append)
    (call,) = fake.called("build")
    assert call["buildargs"] == {
        "BASE_IMAGE": f"nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04@{DIGEST}",
        "BASE_DIGEST": DIGEST,
        "GIT_COMMIT": "0123abc",
        "HARNESS_VERSION": __version__,
        "TORCH_NIGHTLY": "2.12.0.dev20260407+cu128",
    }
    assert call["tag"] == "gpu-repro:cu128-nightly"
    assert call["dockerfile"] == "docker/cu128-nightly/Dockerfile"
    assert call["custom_context"] is True and call["decode"] is True and call["pull"] is False
    assert call["labels"]["dev.gpu-repro.lane"] == "cu128-nightly"
    assert call["labels"]["org.opencontainers.image.created"].endswith("Z")
    assert "docker/cu128-nightly/Dockerfile" in call["context"]
    assert not any("no digest" in line for line in lines)
    assert built == [images.Built("cu128-nightly", "gpu-repro:cu128-nightly", "sha256:" + "1" * 64)]


def test_build_from_tag_without_digest_says_so(tmp_root: Path) -> None:
    fake = FakeClient()
    lines: list[str] = []
    images.build([images.load_lock().lanes["nemo"]], root=tmp_root, docker_client=fake, log=lines.append)
    (call,) = fake.called("build")
    assert call["buildargs"]["BASE_IMAGE"] == "nvcr.io/nvidia/nemo:26.08.01"
    assert call["buildargs"]["BASE_DIGEST"] == ""
    assert any("no digest for nvcr.io/nvidia/nemo:26.08.01" in line for line in lines)


def test_build_context_is_only_what_the_image_needs() -> None:
    lock = images.load_lock()
    for lane in lock.lanes.values():
        buf = io.BytesIO()
        names = images.write_context(ROOT, lane, buf)
        tops = {n.split("/")[0] for n in names}
        assert tops == {"pyproject.toml", "repro", "schemas", "docker"}, tops
        assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
        others = [
            n
            for n in names
            if n.startswith("docker/") and n.count("/") > 1 and not n.startswith((f"docker/{lane.name}", "docker/ca/"))
        ]
        assert not others, others
        buf.seek(0)
        with tarfile.open(fileobj=buf) as tar:
            link = tar.getmember("repro/schemas")
            assert link.issym() and link.linkname == "../schemas"
            assert tar.getmember("schemas/artifact.schema.json").isfile()


def test_build_failure_is_one_error_line(tmp_root: Path) -> None:
    fake = FakeClient(
        build_stream=[
            {"stream": "error: torch==2.12.0.dev20260407+cu128 is not available from https://...\n"},
            {
                "error": "The command '/bin/sh -c sh /tmp/install-torch.sh' returned a non-zero code: 1",
                "errorDetail": {"code": 1},
            },
        ]
    )
    lines: list[str] = []
    lane = images.load_lock().lanes["cu128-nightly"]
    with pytest.raises(ReproError) as info:
        images.build([lane], root=tmp_root, docker_client=fake, log=lines.append)
    assert str(info.value).startswith("building gpu-repro:cu128-nightly failed: The command")
    assert "\n" not in str(info.value)
    assert any("is not available" in line for line in lines)  # the build log reached the user


def test_build_args_override_and_bad_pairs() -> None:
    lane = images.load_lock().lanes["cu128-nightly"]
    args = images.build_args(
        lane,
        "c",
        images.parse_pairs(["TORCH_WHEEL=https://x/t.whl", "TORCH_NIGHTLY=2.8.0.dev20250419+cu128"], "--build-arg"),
    )
    assert args["TORCH_WHEEL"] == "https://x/t.whl" and args["TORCH_NIGHTLY"] == "2.8.0.dev20250419+cu128"
    with pytest.raises(UsageError, match="--build-arg 'NOPE': expected KEY=VALUE"):
        images.parse_pairs(["NOPE"], "--build-arg")


# --------------------------------------------------------------------------- run


def test_run_passes_gpus_mount_caller_user_and_no_network(tmp_path: Path) -> None:
    lane = images.load_lock().lanes["nemo"]
    fake = FakeClient(present=[lane.image], exit_code=3)
    out, err = io.BytesIO(), io.BytesIO()
    code = images.run(
        lane,
        out=tmp_path / "out",
        args=["run", "5090-linear", "--smoke"],
        docker_client=fake,
        env={"TORCH_LINALG_PREFER_CUSOLVER": "1"},
        stdout=out,
        stderr=err,
    )
    assert code == 3
    (call,) = fake.called("run")
    assert call["image"] == "gpu-repro:nemo"
    assert call["command"] == ["run", "5090-linear", "--smoke"]
    assert call["device_requests"] == [ALL_GPUS]
    assert call["volumes"] == {str((tmp_path / "out").resolve()): {"bind": "/artifacts", "mode": "rw"}}
    assert call["user"] == images.caller_user()
    assert call["network_mode"] == "none"
    assert call["environment"] == {"TORCH_LINALG_PREFER_CUSOLVER": "1"}
    assert call["detach"] is True
    assert (tmp_path / "out").is_dir()
    assert out.getvalue() == b"out\n" and err.getvalue() == b"err\n"
    assert fake.called("remove") == [{"force": True}]


def test_run_without_args_leaves_the_image_cmd(tmp_path: Path) -> None:
    lane = images.load_lock().lanes["cu126-pt26"]
    fake = FakeClient(present=[lane.image])
    assert images.run(lane, out=tmp_path, args=[], docker_client=fake, stdout=io.BytesIO(), stderr=io.BytesIO()) == 0
    assert fake.called("run")[0]["command"] is None


@pytest.mark.parametrize(
    ("gpus", "want"),
    [("all", [ALL_GPUS]), ("none", []), ("0,1", [DeviceRequest(device_ids=["0", "1"], capabilities=[["gpu"]])])],
)
def test_gpu_device_requests(gpus: str, want: list[Any]) -> None:
    assert images.device_requests(gpus) == want


def test_bad_gpus_is_usage_error() -> None:
    with pytest.raises(UsageError, match="--gpus '0,': expected all, none, or device ids"):
        images.device_requests("0,")


def test_run_missing_image_says_how_to_build(tmp_path: Path) -> None:
    lane = images.load_lock().lanes["nemo"]
    with pytest.raises(ReproError, match=r"image gpu-repro:nemo not found; build it with `make image-nemo`"):
        images.run(lane, out=tmp_path / "o", args=[], docker_client=FakeClient())
    assert not (tmp_path / "o").exists()


# --------------------------------------------------------------------------- lock


def test_lock_writes_only_digests_the_registry_returned(tmp_root: Path) -> None:
    lock = images.load_lock()
    fake = FakeClient(
        registry={
            "pytorch/pytorch:2.6.0-cuda12.6-cudnn9-devel": DIGEST,
            "nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04": "not-a-digest",
            "nvcr.io/nvidia/nemo:26.08.01": docker.errors.APIError("unauthorized: authentication required"),
        }
    )
    lines: list[str] = []
    outcome = images.resolve_digests(lock, list(lock.lanes.values()), docker_client=fake, log=lines.append)
    assert outcome.updated == {"cu126-pt26": DIGEST}
    assert set(outcome.failed) == {"cu128-nightly", "nemo"}
    after = images.load_lock()
    assert after.lanes["cu126-pt26"].digest == DIGEST and after.lanes["cu126-pt26"].resolved_utc
    assert after.lanes["cu128-nightly"] == lock.lanes["cu128-nightly"]
    assert after.lanes["nemo"] == lock.lanes["nemo"]
    assert any(line.startswith("nemo: could not resolve") and "kept the old entry" in line for line in lines)
    # Resolving again changes nothing and rewrites nothing.
    before = (tmp_root / images.LOCK_FILE).read_text()
    again = images.resolve_digests(after, [after.lanes["cu126-pt26"]], docker_client=fake, log=lines.append)
    assert again.unchanged == ["cu126-pt26"] and (tmp_root / images.LOCK_FILE).read_text() == before


# --------------------------------------------------------------------------- CLI


def one_error_line(output: str) -> str:
    lines = [ln for ln in output.splitlines() if ln.strip()]
    assert len(lines) == 1, output
    assert "Traceback" not in output
    return lines[0]


def test_cli_unknown_lane_exit_2(cli: CliRunner, app: typer.Typer) -> None:
    for args in (["images", "build", "cu118"], ["images", "run", "cu118"], ["images", "lock", "cu118"]):
        r = cli.invoke(app, args)
        assert r.exit_code == 2, r.output
        assert one_error_line(r.output) == "error: unknown lane 'cu118'; known: cu126-pt26, cu128-nightly, nemo"


def test_cli_without_engine_is_one_line_exit_1(cli: CliRunner, app: typer.Typer, tmp_path: Path) -> None:
    env = {"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}
    for args in (
        ["images", "build", "nemo"],
        ["images", "run", "nemo", "--out", str(tmp_path / "o")],
        ["images", "lock"],
    ):
        r = cli.invoke(app, args, env=env)
        assert r.exit_code == 1, r.output
        assert one_error_line(r.output).startswith(f"error: the Docker engine is not reachable at unix://{tmp_path}")
    assert not (tmp_path / "o").exists()


def test_stale_engine_socket_is_one_line(cli: CliRunner, app: typer.Typer, tmp_path: Path) -> None:
    path = tmp_path / "docker.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
        dead.bind(str(path))  # a socket file nobody listens on, as a crashed engine leaves behind
    r = cli.invoke(app, ["images", "lock"], env={"DOCKER_HOST": f"unix://{path}"})
    assert r.exit_code == 1
    assert f"error: the Docker engine is not reachable at unix://{path} (cannot connect to" in one_error_line(r.output)


def test_client_speaks_the_engine_api_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Against a stand-in engine that answers /version: the client uses the version it reports."""
    path = tmp_path / "engine.sock"
    body = json.dumps({"ApiVersion": "1.44", "Version": "27.0.0"}).encode()
    requests_seen: list[bytes] = []
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)
    server.settimeout(0.1)  # so the loop notices `done` (closing does not wake accept())
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                request = conn.recv(4096)
                if request:
                    requests_seen.append(request.split(b"\r\n", 1)[0])
                    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                    conn.sendall(head.encode() + body)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
    try:
        c = images.client()
        assert c.api.api_version == "1.44"
        c.close()
    finally:
        done.set()
        thread.join(timeout=5)
        server.close()
    assert requests_seen == [b"GET /version HTTP/1.1"]


def test_cli_without_docker_package(cli: CliRunner, app: typer.Typer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "docker", None)
    r = cli.invoke(app, ["images", "build", "nemo"])
    assert r.exit_code == 1
    assert "docker package is not installed" in one_error_line(r.output)


def test_cli_run_makes_the_right_docker_call(
    cli: CliRunner, app: typer.Typer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeClient(present=["gpu-repro:cu128-nightly"], exit_code=3)
    monkeypatch.setattr(images, "client", lambda: fake)
    out = tmp_path / "lanes" / "cu128-nightly"
    r = cli.invoke(
        app,
        [
            "images",
            "run",
            "cu128-nightly",
            "--out",
            str(out),
            "--env",
            "CUDA_LAUNCH_BLOCKING=1",
            "--",
            "run",
            "solve-512-cliff",
            "--set",
            "batch=128",
            "--out",
            "/ignored/by/us",
        ],
    )
    assert r.exit_code == 3, r.output  # the container's exit code comes back
    (call,) = fake.called("run")
    assert call["command"] == ["run", "solve-512-cliff", "--set", "batch=128", "--out", "/ignored/by/us"]
    assert call["device_requests"] == [ALL_GPUS]
    assert call["volumes"] == {str(out.resolve()): {"bind": "/artifacts", "mode": "rw"}}
    assert call["environment"] == {"CUDA_LAUNCH_BLOCKING": "1"}
    assert call["network_mode"] == "none" and call["user"] == images.caller_user()


def test_cli_build_and_lock(cli: CliRunner, app: typer.Typer, tmp_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeClient(registry={"nvcr.io/nvidia/nemo:26.08.01": DIGEST})
    monkeypatch.setattr(images, "client", lambda: fake)
    r = cli.invoke(app, ["images", "build", "cu128-nightly", "--build-arg", "TORCH_WHEEL=https://example.org/t.whl"])
    assert r.exit_code == 0, r.output
    assert fake.called("build")[0]["buildargs"]["TORCH_WHEEL"] == "https://example.org/t.whl"
    r = cli.invoke(app, ["images", "build"])
    assert [c["tag"] for c in fake.called("build")[1:]] == [f"gpu-repro:{lane}" for lane in LANES]
    r = cli.invoke(app, ["images", "lock"])
    assert r.exit_code == 1  # two lanes could not be resolved
    assert "could not resolve cu126-pt26, cu128-nightly; their entries in images.lock.json are unchanged" in r.output
    assert images.load_lock().lanes["nemo"].digest == DIGEST
    r = cli.invoke(app, ["images", "build", "nemo"])
    assert fake.called("build")[-1]["buildargs"]["BASE_IMAGE"] == f"nvcr.io/nvidia/nemo:26.08.01@{DIGEST}"
    r = cli.invoke(app, ["images", "list", "--json"])
    assert json.loads(r.output)["nemo"]["digest"] == DIGEST


# --------------------------------------------------------------------------- Make


_MAKE_ENV = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "ARGS", "OUT", "LANE", "PYTHON", "VENV", "TEST_VENV")


def make(*args: str, cwd: Path = ROOT, **env: str) -> str:
    r = subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        # A make running this test (make test) must not hand its flags or jobserver to this one.
        # Variables given to that make on its command line reach us through the environment too.
        env={**{k: v for k, v in os.environ.items() if k not in _MAKE_ENV}, **env},
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")
def test_make_targets_wrap_the_cli() -> None:
    stamps = ["-o", ".venv/.installed", "-o", ".venv/.docker"]
    lines = make("-n", *stamps, "matrix").splitlines()
    *runs, last = lines[0].split(" && ")
    assert last.strip() == "true"
    for lane, cmd in zip(LANES, runs, strict=True):
        assert cmd.split() == [
            ".venv/bin/repro",
            "images",
            "run",
            lane,
            "--gpus",
            "all",
            "--out",
            f"artifacts/matrix/{lane}",
            "--",
            "all",
        ]
    assert lines[1].startswith(
        ".venv/bin/repro compare artifacts/matrix/cu126-pt26 artifacts/matrix/cu128-nightly artifacts/matrix/nemo "
        "--out artifacts/matrix/compare-"
    )
    assert make("-n", *stamps, "images").split() == [".venv/bin/repro", "images", "build", *LANES]
    assert make("-n", *stamps, "image-nemo").split() == [".venv/bin/repro", "images", "build", "nemo"]
    assert make("-n", *stamps, "docker-repro-all", "LANE=nemo", "ARGS=--smoke").split() == [
        ".venv/bin/repro",
        "images",
        "run",
        "nemo",
        "--gpus",
        "all",
        "--out",
        "artifacts/lanes/nemo",
        "--",
        "all",
        "--smoke",
    ]
    assert make("-n", *stamps, "docker-repro-solve-512-cliff", "LANE=cu128-nightly").split() == [
        ".venv/bin/repro",
        "images",
        "run",
        "cu128-nightly",
        "--gpus",
        "all",
        "--out",
        "artifacts/lanes/cu128-nightly",
        "--",
        "run",
        "solve-512-cliff",
    ]
    assert make("-n", *stamps, "lock").split() == [".venv/bin/repro", "images", "lock"]
    # The docker SDK comes with the docker extra, installed by the stamp the targets depend on.
    assert "pip install --no-build-isolation -e '.[docker]'" in make("-n", "-B", "-o", ".venv/.installed", "images")


def test_containers_never_run_as_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "getuid", lambda: 0)
    monkeypatch.setattr(os, "getgid", lambda: 0)
    assert images.caller_user() == images.IMAGE_USER == "1000:1000"
    monkeypatch.setattr(os, "getuid", lambda: 1234)
    monkeypatch.setattr(os, "getgid", lambda: 99)
    assert images.caller_user() == "1234:99"


# --------------------------------------------------------------------------- CA bundle, network, --lock

PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def test_ca_bundle_option_then_pip_cert_then_ssl_cert_file(tmp_path: Path) -> None:
    a, b = tmp_path / "a.crt", tmp_path / "b.crt"
    a.write_bytes(PEM)
    b.write_bytes(PEM)
    env = {"PIP_CERT": str(a), "SSL_CERT_FILE": str(b)}
    assert images.ca_bundle_from(str(b), env) == (b, "--ca-bundle")
    assert images.ca_bundle_from(None, env) == (a, "PIP_CERT")
    assert images.ca_bundle_from(None, {"SSL_CERT_FILE": str(b)}) == (b, "SSL_CERT_FILE")
    assert images.ca_bundle_from("", env) == (None, "--ca-bundle")  # '' turns it off
    assert images.ca_bundle_from(None, {}) == (None, "none")


def test_bad_ca_bundle_is_usage_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"--ca-bundle '/nope.crt': cannot read it .*expected a PEM CA bundle"):
        images.ca_bundle_from("/nope.crt", {})
    junk = tmp_path / "junk.crt"
    junk.write_text("not a certificate")
    with pytest.raises(UsageError, match=r"SSL_CERT_FILE '.*junk.crt': no PEM certificate in it"):
        images.ca_bundle_from(None, {"SSL_CERT_FILE": str(junk)})


def test_build_sends_the_ca_bundle_and_network_mode(tmp_root: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "corp.pem"
    bundle.write_bytes(PEM)
    (tmp_root / "docker" / "ca").mkdir(exist_ok=True)
    (tmp_root / "docker" / "ca" / "ca-bundle.crt").write_bytes(b"stale")  # the option's file wins
    lane = images.load_lock().lanes["nemo"]
    buf = io.BytesIO()
    names = images.write_context(tmp_root, lane, buf, bundle)
    assert names.count(images.CA_IN_CONTEXT) == 1
    buf.seek(0)
    with tarfile.open(fileobj=buf) as tar:
        member = tar.extractfile(images.CA_IN_CONTEXT)
        assert member is not None and member.read() == PEM
    fake = FakeClient()
    lines: list[str] = []
    images.build([lane], root=tmp_root, docker_client=fake, ca_bundle=bundle, network="host", log=lines.append)
    (call,) = fake.called("build")
    assert call["network_mode"] == "host" and images.CA_IN_CONTEXT in call["context"]
    assert any(str(bundle) in line for line in lines)
    images.build([lane], root=tmp_root, docker_client=fake, log=lines.append)
    assert "network_mode" not in fake.called("build")[1]  # the engine's default


def test_install_scripts_point_pip_at_the_bundle() -> None:
    # The Dockerfiles copy docker/ca/ next to the scripts; the scripts export PIP_CERT from there.
    for script in ("install-repro.sh", "cu128-nightly/install-torch.sh"):
        text = (ROOT / "docker" / script).read_text()
        assert 'export PIP_CERT="$ca"' in text and '"$(dirname "$0")/ca-bundle.crt"' in text


def test_cli_build_takes_ca_bundle_from_env_and_lock_from_option(
    cli: CliRunner, app: typer.Typer, tmp_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeClient()
    monkeypatch.setattr(images, "client", lambda: fake)
    bundle = tmp_path / "corp.pem"
    bundle.write_bytes(PEM)
    other = tmp_path / "other.lock.json"
    raw = json.loads((tmp_root / images.LOCK_FILE).read_text())
    raw["lanes"]["nemo"]["base"] = "localhost:5000/standin/nemo:1"
    other.write_text(json.dumps(raw))
    r = cli.invoke(
        app,
        ["images", "build", "nemo", "--lock", str(other), "--network", "host"],
        env={"PIP_CERT": str(bundle), "SSL_CERT_FILE": ""},
    )
    assert r.exit_code == 0, r.output
    (call,) = fake.called("build")
    assert call["buildargs"]["BASE_IMAGE"] == "localhost:5000/standin/nemo:1"
    assert call["network_mode"] == "host" and images.CA_IN_CONTEXT in call["context"]
    assert f"using the CA bundle {bundle} from $PIP_CERT" in r.output
    r = cli.invoke(app, ["images", "list", "--json"], env={"GPU_REPRO_LOCK": str(other)})
    assert json.loads(r.output)["nemo"]["base"] == "localhost:5000/standin/nemo:1"
    r = cli.invoke(app, ["images", "build", "nemo", "--ca-bundle", str(tmp_path / "none.pem")])
    assert r.exit_code == 2 and "--ca-bundle" in one_error_line(r.output)
    r = cli.invoke(app, ["images", "list", "--lock", str(tmp_path / "missing.json")])
    assert r.exit_code == 2 and "missing.json: no such file" in one_error_line(r.output)


def test_root_caller_lends_the_folder_and_gets_the_files_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As root the container runs as the image's user; the folder is lent to it and everything comes back to root."""
    calls: list[tuple[str, int, int]] = []
    monkeypatch.setattr(os, "getuid", lambda: 0)
    monkeypatch.setattr(os, "getgid", lambda: 0)
    monkeypatch.setattr(os, "chown", lambda p, u, g: calls.append((str(p), u, g)))
    monkeypatch.setattr(os, "lchown", lambda p, u, g: calls.append((str(p), u, g)))
    monkeypatch.setattr(images, "IMAGE_USER", "4321:4321")  # not the uid that owns tmp_path
    out = tmp_path / "out"
    out.mkdir(mode=0o755)
    (out / "old-run").mkdir()
    owner = (out.stat().st_uid, out.stat().st_gid)
    with images._writable_for_container(out):
        assert calls == [(str(out), 4321, 4321)]
        (out / "new-run").mkdir()
        (out / "new-run" / "a.json").write_text("{}")
    assert calls[1:] == [(str(out), *owner), (str(out / "new-run"), 0, 0), (str(out / "new-run" / "a.json"), 0, 0)]
