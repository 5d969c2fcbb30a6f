"""The Docker lanes' CLI (`repro images ...`) and Make targets without an engine, against a fake client."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import typer
from docker.types import DeviceRequest
from docker_fakes import DIGEST, LANES, PEM, ROOT, FakeClient, copy_checkout
from typer.testing import CliRunner

from repro.cli.docker import images_app
from repro.cli.evidence import compare_cmd
from repro.lanes.images import container, engine
from repro.lanes.images.build import CA_IN_CONTEXT
from repro.lanes.images.lock import LOCK_FILE, load_lock

ALL_GPUS = DeviceRequest(count=-1, capabilities=[["gpu"]])


@pytest.fixture
def cli() -> CliRunner:
    return CliRunner(env={"COLUMNS": "120", "TERM": "dumb"})


def make_app() -> typer.Typer:
    """The commands as repro/cli/main.py registers them (add_typer + command), on an app of our own."""
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
    """A copy of the checkout whose lock file a test may rewrite (see docker_fakes.copy_checkout)."""
    return copy_checkout(tmp_path, monkeypatch)


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
        c = engine.client()
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
    monkeypatch.setattr("repro.lanes.images.engine.client", lambda: fake)
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
    assert call["network_mode"] == "none" and call["user"] == container.caller_user()


def test_cli_build_and_lock(cli: CliRunner, app: typer.Typer, tmp_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeClient(registry={"nvcr.io/nvidia/nemo:26.08.01": DIGEST})
    monkeypatch.setattr("repro.lanes.images.engine.client", lambda: fake)
    r = cli.invoke(app, ["images", "build", "cu128-nightly", "--build-arg", "TORCH_WHEEL=https://example.org/t.whl"])
    assert r.exit_code == 0, r.output
    assert fake.called("build")[0]["buildargs"]["TORCH_WHEEL"] == "https://example.org/t.whl"
    r = cli.invoke(app, ["images", "build"])
    assert [c["tag"] for c in fake.called("build")[1:]] == [f"gpu-repro:{lane}" for lane in LANES]
    r = cli.invoke(app, ["images", "lock"])
    assert r.exit_code == 1  # two lanes could not be resolved
    assert "could not resolve cu126-pt26, cu128-nightly; their entries in images.lock.json are unchanged" in r.output
    assert load_lock().lanes["nemo"].digest == DIGEST
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


def test_cli_build_takes_ca_bundle_from_env_and_lock_from_option(
    cli: CliRunner, app: typer.Typer, tmp_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeClient()
    monkeypatch.setattr("repro.lanes.images.engine.client", lambda: fake)
    bundle = tmp_path / "corp.pem"
    bundle.write_bytes(PEM)
    other = tmp_path / "other.lock.json"
    raw = json.loads((tmp_root / LOCK_FILE).read_text())
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
    assert call["network_mode"] == "host" and CA_IN_CONTEXT in call["context"]
    assert f"using the CA bundle {bundle} from $PIP_CERT" in r.output
    r = cli.invoke(app, ["images", "list", "--json"], env={"GPU_REPRO_LOCK": str(other)})
    assert json.loads(r.output)["nemo"]["base"] == "localhost:5000/standin/nemo:1"
    r = cli.invoke(app, ["images", "build", "nemo", "--ca-bundle", str(tmp_path / "none.pem")])
    assert r.exit_code == 2 and "--ca-bundle" in one_error_line(r.output)
    r = cli.invoke(app, ["images", "list", "--lock", str(tmp_path / "missing.json")])
    assert r.exit_code == 2 and "missing.json: no such file" in one_error_line(r.output)
