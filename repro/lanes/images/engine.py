"""The docker SDK and the engine behind small seams: import, client, transport errors.

Every docker call goes through a client object that :func:`client` makes (the docker SDK,
imported lazily); tests pass a fake one or replace :func:`client`.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable
from typing import Any

from repro.core.errors import ReproError

# The label naming the lane on every image and container made here.
LANE_LABEL = "dev.gpu-repro.lane"

_DEFAULT_HOST = "unix:///var/run/docker.sock"
# A healthy engine answers /version in milliseconds; a hung one should not hold the CLI for the
# SDK's default 60 s.
_PROBE_TIMEOUT_S = 10

Log = Callable[[str], None]


def stderr_log(line: str) -> None:
    """The default progress log: one line to stderr."""
    print(line, file=sys.stderr, flush=True)


def sdk() -> Any:
    """The docker SDK module; without it, a ReproError naming the extra that installs it."""
    try:
        import docker
    except ImportError:
        raise ReproError(
            "the docker package is not installed; expected `pip install 'gpu-repro[docker]'` "
            "(make images does it for you)"
        ) from None
    return docker


def transport_errors() -> tuple[type[BaseException], ...]:
    """What a call to the engine raises when the engine or the connection fails."""
    import requests

    return (sdk().errors.DockerException, requests.exceptions.RequestException)


def one_line(exc: BaseException) -> str:
    """An SDK error as one short line (its explanation when it has one)."""
    text = getattr(exc, "explanation", None) or str(exc) or type(exc).__name__
    return " ".join(str(text).split())[:300]


def _unix_socket_problem(host: str) -> str | None:
    """Why a ``unix://`` engine socket cannot be used, or None (also for other transports).

    Checked here because the SDK's unix transport leaks its socket when the connect fails.
    """
    if not host.startswith(("unix://", "http+unix://")):
        return None
    path = host.split("://", 1)[1]
    if not os.path.exists(path):
        return f"no socket at {path}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        try:
            sock.connect(path)
        except OSError as exc:
            return f"cannot connect to {path}: {exc.strerror or exc}"
    return None


def client() -> Any:
    """A docker SDK client for an engine that has answered; no engine is a one-line ReproError."""
    docker = sdk()
    where = os.environ.get("DOCKER_HOST") or _DEFAULT_HOST
    problem = _unix_socket_problem(where)
    if problem:
        raise ReproError(
            f"the Docker engine is not reachable at {where} ({problem}); start it, or point DOCKER_HOST at one"
        )
    # A fixed version makes no request at construction (auto-detection would, and would leak its
    # socket when it fails); the unversioned /version call is the same probe auto-detection makes.
    probe = docker.from_env(version=docker.constants.DEFAULT_DOCKER_API_VERSION, timeout=_PROBE_TIMEOUT_S)
    try:
        server = probe.api.version(api_version=False)
    except transport_errors() as exc:
        raise ReproError(
            f"the Docker engine is not reachable at {where} ({one_line(exc)}); start it, or point DOCKER_HOST at one"
        ) from None
    finally:
        probe.close()
    return docker.from_env(version=server.get("ApiVersion") or docker.constants.DEFAULT_DOCKER_API_VERSION)
