"""Container runs of a lane's image: GPU device requests, the /artifacts mount, the user it runs as."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from repro.core.errors import ReproError, UsageError
from repro.lanes.images.engine import LANE_LABEL, one_line, sdk, transport_errors
from repro.lanes.images.lock import Lane

CONTAINER_OUT = "/artifacts"  # where every image writes (ENV GPU_REPRO_OUT, VOLUME)
# The images' own non-root user (docker/install-repro.sh creates it).
IMAGE_USER = "1000:1000"


def caller_user() -> str:
    """``uid:gid`` of this process, so files the container writes belong to the caller.

    A root caller (common on GPU hosts and in CI) gets the image's non-root user
    instead: the containers never run as root.
    """
    if os.getuid() == 0:
        return IMAGE_USER
    return f"{os.getuid()}:{os.getgid()}"


def device_requests(gpus: str) -> list[Any]:
    """Docker device requests for ``--gpus``: ``all``, ``none``, or device ids like ``0,1``."""
    types = sdk().types
    if gpus == "all":
        return [types.DeviceRequest(count=-1, capabilities=[["gpu"]])]
    if gpus == "none":
        return []
    ids = [g.strip() for g in gpus.split(",")]
    if not all(ids):
        raise UsageError(f"--gpus {gpus!r}: expected all, none, or device ids like 0,1")
    return [types.DeviceRequest(device_ids=ids, capabilities=[["gpu"]])]


def run(
    lane: Lane,
    *,
    out: Path,
    args: Sequence[str],
    docker_client: Any,
    gpus: str = "all",
    env: Mapping[str, str] | None = None,
    stdout: IO[bytes] | None = None,
    stderr: IO[bytes] | None = None,
) -> int:
    """Run ``repro <args>`` in ``lane``'s image; returns the container's exit code.

    ``out`` is mounted read-write at /artifacts; the container runs as the caller's uid:gid
    (a root caller: the image's user, and the files are handed to root afterwards) with GPUs
    passed through and no network (nothing is fetched at run time), and is removed afterwards.
    Its stdout and stderr go to ours.
    """
    from repro.evidence.artifact import ensure_writable_dir

    docker = sdk()
    requests_ = device_requests(gpus)
    stdout = stdout if stdout is not None else sys.stdout.buffer
    stderr = stderr if stderr is not None else sys.stderr.buffer
    try:
        docker_client.images.get(lane.image)
    except docker.errors.ImageNotFound:
        raise ReproError(
            f"image {lane.image} not found; build it with `make image-{lane.name}` "
            f"(or `repro images build {lane.name}`)"
        ) from None
    except transport_errors() as exc:
        raise ReproError(f"could not look up {lane.image}: {one_line(exc)}") from None
    host_out = ensure_writable_dir(Path(out)).resolve()
    with _writable_for_container(host_out):
        return _run_container(lane, host_out, args, docker_client, requests_, env or {}, stdout=stdout, stderr=stderr)


@contextlib.contextmanager
def _writable_for_container(folder: Path) -> Iterator[None]:
    """For a root caller: let the container's non-root user write ``folder``, then give it back.

    The container runs as IMAGE_USER when the caller is root (never as root), so a root-owned
    folder is lent to that user for the run; afterwards the folder gets its owner back and every
    new entry belongs to the caller, as after a run under the caller's own uid.
    """
    if os.getuid() != 0:
        yield
        return
    st = folder.stat()
    before = set(os.listdir(folder))
    uid, gid = (int(x) for x in IMAGE_USER.split(":"))
    lent = st.st_uid != uid and not st.st_mode & 0o002
    if lent:
        os.chown(folder, uid, gid)
    try:
        yield
    finally:
        if lent:
            os.chown(folder, st.st_uid, st.st_gid)
        for name in set(os.listdir(folder)) - before:
            top = folder / name
            os.lchown(top, os.getuid(), os.getgid())
            if top.is_dir() and not top.is_symlink():
                for base, dirs, files in os.walk(top):
                    for entry in (*dirs, *files):
                        os.lchown(os.path.join(base, entry), os.getuid(), os.getgid())


def _close_stream(stream: Any) -> None:
    """Close an attach stream and its HTTP response: the SDK leaves the socket open after EOF."""
    close = getattr(stream, "close", None)
    if callable(close):
        close()
    response = getattr(stream, "_response", None)
    if response is not None:
        response.close()


def _run_container(
    lane: Lane,
    host_out: Path,
    args: Sequence[str],
    docker_client: Any,
    requests_: list[Any],
    env: Mapping[str, str],
    *,
    stdout: IO[bytes],
    stderr: IO[bytes],
) -> int:
    try:
        container = docker_client.containers.run(
            lane.image,
            command=list(args) or None,  # None: the image's CMD ["all"]
            detach=True,
            device_requests=requests_,
            volumes={str(host_out): {"bind": CONTAINER_OUT, "mode": "rw"}},
            user=caller_user(),
            network_mode="none",
            environment=dict(env),
            init=True,  # PID 1 forwards signals and reaps the runner's children
            labels={LANE_LABEL: lane.name},
        )
    except transport_errors() as exc:
        hint = "; is the NVIDIA Container Toolkit installed? (--gpus none runs without GPUs)" if requests_ else ""
        raise ReproError(f"could not start {lane.image}: {one_line(exc)}{hint}") from None
    try:
        stream = container.attach(stdout=True, stderr=True, stream=True, logs=True, demux=True)
        try:
            for out_chunk, err_chunk in stream:
                for sink, chunk in ((stdout, out_chunk), (stderr, err_chunk)):
                    if chunk:
                        sink.write(chunk)
                        sink.flush()
        finally:
            _close_stream(stream)
        status = container.wait()
    except KeyboardInterrupt:
        container.stop(timeout=10)
        raise
    except transport_errors() as exc:
        raise ReproError(f"lost the Docker engine while {lane.image} ran: {one_line(exc)}") from None
    finally:
        try:
            container.remove(force=True)
        except transport_errors():
            pass  # already gone; nothing to clean up
    code = status.get("StatusCode") if isinstance(status, Mapping) else None
    return int(code) if isinstance(code, int) else 1
