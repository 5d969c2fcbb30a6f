"""The Docker lanes' library without an engine: the lock file, and the docker calls build, run and lock make.

A fake client stands in for the docker SDK's where the call's arguments are the point (GPU
device requests, which no engine here can honour, build args, error paths). What a real engine
does with them (builds, runs, make matrix, compare) is tested in tests/system/test_engine.py and .ci/run;
the CLI and the Make targets in tests/unit/lanes/test_images_cli.py.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker.errors
import pytest
from docker.types import DeviceRequest
from docker_fakes import DIGEST, LANES, PEM, ROOT, FakeClient, copy_checkout

from repro import __version__
from repro.core.errors import ReproError, UsageError
from repro.lanes.images import container
from repro.lanes.images.build import (
    CA_IN_CONTEXT,
    Built,
    build,
    build_args,
    ca_bundle_from,
    parse_pairs,
    write_context,
)
from repro.lanes.images.digests import resolve_digests
from repro.lanes.images.lock import LOCK_FILE, Lane, Lock, load_lock, select, tag_problem, write_lock

ALL_GPUS = DeviceRequest(count=-1, capabilities=[["gpu"]])


@pytest.fixture
def tmp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the checkout whose lock file a test may rewrite (see docker_fakes.copy_checkout)."""
    return copy_checkout(tmp_path, monkeypatch)


def with_digest(lock: Lock, lane: str, digest: str = DIGEST) -> Lane:
    import dataclasses

    return dataclasses.replace(lock.lanes[lane], digest=digest)


# --------------------------------------------------------------------------- the lock file


def test_lock_pins_each_lane_to_an_exact_tag() -> None:
    lock = load_lock()
    assert list(lock.lanes) == list(LANES)
    assert lock.lanes["cu126-pt26"].base == "pytorch/pytorch:2.6.0-cuda12.6-cudnn9-devel"
    assert lock.lanes["cu128-nightly"].base == "nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04"
    assert lock.lanes["nemo"].base == "nvcr.io/nvidia/nemo:26.08.01"
    assert lock.lanes["cu128-nightly"].build_args["TORCH_NIGHTLY"] == "2.12.0.dev20260407+cu128"
    for lane in lock.lanes.values():
        assert tag_problem(lane.base) is None
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
    got = tag_problem(ref)
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
    raw = json.loads((ROOT / LOCK_FILE).read_text())
    edit(raw)
    path = tmp_path / "images.lock.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(ReproError, match=message) as info:
        load_lock(path)
    assert str(path) in str(info.value)


def test_unknown_lane_names_it_and_the_known_ones() -> None:
    with pytest.raises(UsageError) as info:
        select(load_lock(), ["cu118"])
    assert str(info.value) == "unknown lane 'cu118'; known: cu126-pt26, cu128-nightly, nemo"
    assert [ln.name for ln in select(load_lock(), [])] == list(LANES)


def test_write_lock_keeps_other_fields(tmp_root: Path) -> None:
    lock = load_lock()
    new = write_lock(lock, {"nemo": {"digest": DIGEST, "resolved_utc": "2026-01-01T00:00:00Z"}})
    assert new.lanes["nemo"].digest == DIGEST and new.lanes["cu126-pt26"] == lock.lanes["cu126-pt26"]
    assert new.raw["about"] == lock.raw["about"]
    assert not list((tmp_root / "docker").glob(".images.lock.json.*"))


# --------------------------------------------------------------------------- build


def test_build_uses_digest_when_locked_and_passes_pins_and_provenance(tmp_root: Path) -> None:
    lock = load_lock()
    fake = FakeClient()
    lines: list[str] = []
    lane = with_digest(lock, "cu128-nightly")
    built = build([lane], root=tmp_root, docker_client=fake, log=lines.append)
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
    assert built == [Built("cu128-nightly", "gpu-repro:cu128-nightly", "sha256:" + "1" * 64)]


def test_build_from_tag_without_digest_says_so(tmp_root: Path) -> None:
    fake = FakeClient()
    lines: list[str] = []
    build([load_lock().lanes["nemo"]], root=tmp_root, docker_client=fake, log=lines.append)
    (call,) = fake.called("build")
    assert call["buildargs"]["BASE_IMAGE"] == "nvcr.io/nvidia/nemo:26.08.01"
    assert call["buildargs"]["BASE_DIGEST"] == ""
    assert any("no digest for nvcr.io/nvidia/nemo:26.08.01" in line for line in lines)


def test_build_context_is_only_what_the_image_needs() -> None:
    lock = load_lock()
    for lane in lock.lanes.values():
        buf = io.BytesIO()
        names = write_context(ROOT, lane, buf)
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
    lane = load_lock().lanes["cu128-nightly"]
    with pytest.raises(ReproError) as info:
        build([lane], root=tmp_root, docker_client=fake, log=lines.append)
    assert str(info.value).startswith("building gpu-repro:cu128-nightly failed: The command")
    assert "\n" not in str(info.value)
    assert any("is not available" in line for line in lines)  # the build log reached the user


def test_build_args_override_and_bad_pairs() -> None:
    lane = load_lock().lanes["cu128-nightly"]
    args = build_args(
        lane,
        "c",
        parse_pairs(["TORCH_WHEEL=https://x/t.whl", "TORCH_NIGHTLY=2.8.0.dev20250419+cu128"], "--build-arg"),
    )
    assert args["TORCH_WHEEL"] == "https://x/t.whl" and args["TORCH_NIGHTLY"] == "2.8.0.dev20250419+cu128"
    with pytest.raises(UsageError, match="--build-arg 'NOPE': expected KEY=VALUE"):
        parse_pairs(["NOPE"], "--build-arg")


# --------------------------------------------------------------------------- run


def test_run_passes_gpus_mount_caller_user_and_no_network(tmp_path: Path) -> None:
    lane = load_lock().lanes["nemo"]
    fake = FakeClient(present=[lane.image], exit_code=3)
    out, err = io.BytesIO(), io.BytesIO()
    code = container.run(
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
    assert call["user"] == container.caller_user()
    assert call["network_mode"] == "none"
    assert call["environment"] == {"TORCH_LINALG_PREFER_CUSOLVER": "1"}
    assert call["detach"] is True
    assert (tmp_path / "out").is_dir()
    assert out.getvalue() == b"out\n" and err.getvalue() == b"err\n"
    assert fake.called("remove") == [{"force": True}]


def test_run_without_args_leaves_the_image_cmd(tmp_path: Path) -> None:
    lane = load_lock().lanes["cu126-pt26"]
    fake = FakeClient(present=[lane.image])
    assert container.run(lane, out=tmp_path, args=[], docker_client=fake, stdout=io.BytesIO(), stderr=io.BytesIO()) == 0
    assert fake.called("run")[0]["command"] is None


@pytest.mark.parametrize(
    ("gpus", "want"),
    [("all", [ALL_GPUS]), ("none", []), ("0,1", [DeviceRequest(device_ids=["0", "1"], capabilities=[["gpu"]])])],
)
def test_gpu_device_requests(gpus: str, want: list[Any]) -> None:
    assert container.device_requests(gpus) == want


def test_bad_gpus_is_usage_error() -> None:
    with pytest.raises(UsageError, match="--gpus '0,': expected all, none, or device ids"):
        container.device_requests("0,")


def test_run_missing_image_says_how_to_build(tmp_path: Path) -> None:
    lane = load_lock().lanes["nemo"]
    with pytest.raises(ReproError, match=r"image gpu-repro:nemo not found; build it with `make image-nemo`"):
        container.run(lane, out=tmp_path / "o", args=[], docker_client=FakeClient())
    assert not (tmp_path / "o").exists()


# --------------------------------------------------------------------------- lock


def test_lock_writes_only_digests_the_registry_returned(tmp_root: Path) -> None:
    lock = load_lock()
    fake = FakeClient(
        registry={
            "pytorch/pytorch:2.6.0-cuda12.6-cudnn9-devel": DIGEST,
            "nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04": "not-a-digest",
            "nvcr.io/nvidia/nemo:26.08.01": docker.errors.APIError("unauthorized: authentication required"),
        }
    )
    lines: list[str] = []
    outcome = resolve_digests(lock, list(lock.lanes.values()), docker_client=fake, log=lines.append)
    assert outcome.updated == {"cu126-pt26": DIGEST}
    assert set(outcome.failed) == {"cu128-nightly", "nemo"}
    after = load_lock()
    assert after.lanes["cu126-pt26"].digest == DIGEST and after.lanes["cu126-pt26"].resolved_utc
    assert after.lanes["cu128-nightly"] == lock.lanes["cu128-nightly"]
    assert after.lanes["nemo"] == lock.lanes["nemo"]
    assert any(line.startswith("nemo: could not resolve") and "kept the old entry" in line for line in lines)
    # Resolving again changes nothing and rewrites nothing.
    before = (tmp_root / LOCK_FILE).read_text()
    again = resolve_digests(after, [after.lanes["cu126-pt26"]], docker_client=fake, log=lines.append)
    assert again.unchanged == ["cu126-pt26"] and (tmp_root / LOCK_FILE).read_text() == before


def test_containers_never_run_as_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "getuid", lambda: 0)
    monkeypatch.setattr(os, "getgid", lambda: 0)
    assert container.caller_user() == container.IMAGE_USER == "1000:1000"
    monkeypatch.setattr(os, "getuid", lambda: 1234)
    monkeypatch.setattr(os, "getgid", lambda: 99)
    assert container.caller_user() == "1234:99"


# --------------------------------------------------------------------------- CA bundle, network, root callers


def test_ca_bundle_option_then_pip_cert_then_ssl_cert_file(tmp_path: Path) -> None:
    a, b = tmp_path / "a.crt", tmp_path / "b.crt"
    a.write_bytes(PEM)
    b.write_bytes(PEM)
    env = {"PIP_CERT": str(a), "SSL_CERT_FILE": str(b)}
    assert ca_bundle_from(str(b), env) == (b, "--ca-bundle")
    assert ca_bundle_from(None, env) == (a, "PIP_CERT")
    assert ca_bundle_from(None, {"SSL_CERT_FILE": str(b)}) == (b, "SSL_CERT_FILE")
    assert ca_bundle_from("", env) == (None, "--ca-bundle")  # '' turns it off
    assert ca_bundle_from(None, {}) == (None, "none")


def test_bad_ca_bundle_is_usage_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"--ca-bundle '/nope.crt': cannot read it .*expected a PEM CA bundle"):
        ca_bundle_from("/nope.crt", {})
    junk = tmp_path / "junk.crt"
    junk.write_text("not a certificate")
    with pytest.raises(UsageError, match=r"SSL_CERT_FILE '.*junk.crt': no PEM certificate in it"):
        ca_bundle_from(None, {"SSL_CERT_FILE": str(junk)})


def test_build_sends_the_ca_bundle_and_network_mode(tmp_root: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "corp.pem"
    bundle.write_bytes(PEM)
    (tmp_root / "docker" / "ca").mkdir(exist_ok=True)
    (tmp_root / "docker" / "ca" / "ca-bundle.crt").write_bytes(b"stale")  # the option's file wins
    lane = load_lock().lanes["nemo"]
    buf = io.BytesIO()
    names = write_context(tmp_root, lane, buf, bundle)
    assert names.count(CA_IN_CONTEXT) == 1
    buf.seek(0)
    with tarfile.open(fileobj=buf) as tar:
        member = tar.extractfile(CA_IN_CONTEXT)
        assert member is not None and member.read() == PEM
    fake = FakeClient()
    lines: list[str] = []
    build([lane], root=tmp_root, docker_client=fake, ca_bundle=bundle, network="host", log=lines.append)
    (call,) = fake.called("build")
    assert call["network_mode"] == "host" and CA_IN_CONTEXT in call["context"]
    assert any(str(bundle) in line for line in lines)
    build([lane], root=tmp_root, docker_client=fake, log=lines.append)
    assert "network_mode" not in fake.called("build")[1]  # the engine's default


def test_install_scripts_point_pip_at_the_bundle() -> None:
    # The Dockerfiles copy docker/ca/ next to the scripts; the scripts export PIP_CERT from there.
    for script in ("install-repro.sh", "cu128-nightly/install-torch.sh"):
        text = (ROOT / "docker" / script).read_text()
        assert 'export PIP_CERT="$ca"' in text and '"$(dirname "$0")/ca-bundle.crt"' in text


def test_root_caller_lends_the_folder_and_gets_the_files_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As root the container runs as the image's user; the folder is lent to it and everything comes back to root."""
    calls: list[tuple[str, int, int]] = []
    monkeypatch.setattr(os, "getuid", lambda: 0)
    monkeypatch.setattr(os, "getgid", lambda: 0)
    monkeypatch.setattr(os, "chown", lambda p, u, g: calls.append((str(p), u, g)))
    monkeypatch.setattr(os, "lchown", lambda p, u, g: calls.append((str(p), u, g)))
    monkeypatch.setattr(container, "IMAGE_USER", "4321:4321")  # not the uid that owns tmp_path
    out = tmp_path / "out"
    out.mkdir(mode=0o755)
    (out / "old-run").mkdir()
    owner = (out.stat().st_uid, out.stat().st_gid)
    with container._writable_for_container(out):
        assert calls == [(str(out), 4321, 4321)]
        (out / "new-run").mkdir()
        (out / "new-run" / "a.json").write_text("{}")
    assert calls[1:] == [(str(out), *owner), (str(out / "new-run"), 0, 0), (str(out / "new-run" / "a.json"), 0, 0)]
