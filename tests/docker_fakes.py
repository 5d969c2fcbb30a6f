"""A fake docker SDK client and a copied checkout, for the Docker lanes' tests without an engine."""

from __future__ import annotations

import shutil
import tarfile
from collections.abc import Callable, Iterable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import docker
from repro.lanes.images.lock import LOCK_FILE

ROOT = Path(__file__).resolve().parent.parent
LANES = ("cu126-pt26", "cu128-nightly", "nemo")
DIGEST = "sha256:" + "ab" * 32
PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


class FakeContainer:
    """What the fake client's containers.run returns: attach replays the client's output."""

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


def copy_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout whose lock file a test may rewrite: the real docker/ and sources, a copied lock."""
    root = tmp_path / "checkout"
    (root / "docker").mkdir(parents=True)
    shutil.copy(ROOT / LOCK_FILE, root / LOCK_FILE)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "*.whl")
    for rel in ("repro", "schemas", "docker/ca", *[f"docker/{lane}" for lane in LANES]):
        shutil.copytree(ROOT / rel, root / rel, symlinks=True, ignore=skip)
    for rel in ("pyproject.toml", "docker/requirements.txt", "docker/install-repro.sh"):
        shutil.copy(ROOT / rel, root / rel)
    monkeypatch.setattr("repro.lanes.images.lock.repo_root", lambda: root)
    monkeypatch.setattr("repro.lanes.images.build.git_commit", lambda root: "0123abc")
    return root
