"""Docker lanes: the lock file of image pins, and build / run / lock through the docker SDK.

Every docker call goes through a client object that :func:`client` makes (the docker SDK,
imported lazily); tests pass a fake one. Nothing here needs torch.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import socket
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from repro import __version__
from repro.core.errors import ReproError, UsageError
from repro.evidence import artifact
from repro.evidence.artifact import FILE_MODE

LOCK_FILE = Path("docker") / "images.lock.json"
LOCK_ENV = "GPU_REPRO_LOCK"  # another lock file (e.g. docker/standins/images.lock.json) for every command
LOCK_SCHEMA_VERSION = 1
CONTAINER_OUT = "/artifacts"  # where every image writes (ENV GPU_REPRO_OUT, VOLUME)
LANE_LABEL = "dev.gpu-repro.lane"

_DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
# Tags that move by design; a lane pinned to one of them is not pinned.
_FLOATING_TAGS = frozenset({"latest", "nightly", "main", "master", "edge", "stable"})
# Shared by every lane's image (see docker/install-repro.sh); plus docker/<lane>/ itself.
_SHARED_CONTEXT = (
    "pyproject.toml",
    "repro",
    "schemas",
    "docker/requirements.txt",
    "docker/install-repro.sh",
    "docker/ca",
)
# Where a build's CA bundle lies in the context; the install scripts use it for pip when present.
CA_IN_CONTEXT = "docker/ca/ca-bundle.crt"
# Where the CA bundle comes from when --ca-bundle is not given, in this order.
CA_ENV = ("PIP_CERT", "SSL_CERT_FILE")
_SKIP_NAMES = frozenset({"__pycache__", ".DS_Store"})

Log = Callable[[str], None]


def _stderr_log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- lanes and the lock


@dataclass(frozen=True)
class Lane:
    """One pinned stack: its base image (exact tag, digest once resolved) and the image we build."""

    name: str
    base: str
    digest: str | None
    image: str
    build_args: Mapping[str, str] = field(default_factory=dict)
    description: str = ""
    resolved_utc: str | None = None

    @property
    def dockerfile(self) -> str:
        """The Dockerfile's path inside the build context (the repository root)."""
        return f"docker/{self.name}/Dockerfile"

    @property
    def base_ref(self) -> str:
        """What FROM pulls: ``tag@digest`` when the digest is known (the digest wins), else the tag."""
        return f"{self.base}@{self.digest}" if self.digest else self.base


@dataclass(frozen=True)
class Lock:
    """The parsed lock file; ``raw`` keeps keys this code does not know so a rewrite keeps them."""

    path: Path
    raw: dict[str, Any]
    lanes: dict[str, Lane]


def tag_problem(ref: str) -> str | None:
    """Why ``ref`` is not an exact tag (``None`` when it is): no tag, a floating tag, or a digest."""
    if "@" in ref:
        return "carries a digest; the lock keeps the tag in 'base' and the digest in 'digest'"
    name = ref.rsplit("/", 1)[-1]
    if ":" not in name:
        return "has no tag; expected repository:tag"
    tag = name.split(":", 1)[1]
    if not tag or tag.lower() in _FLOATING_TAGS:
        return f"has the floating tag {tag!r}; expected an exact version tag"
    return None


def repo_root() -> Path:
    """The checkout holding docker/images.lock.json: this package's parent, else the working folder."""
    for candidate in (Path(__file__).resolve().parents[2], Path.cwd()):
        if (candidate / LOCK_FILE).is_file():
            return candidate
    raise ReproError(
        f"{LOCK_FILE} not found next to the package or in {Path.cwd()}; run `repro images` from a gpu-repro checkout"
    )


def _bad(path: Path, what: str) -> ReproError:
    return ReproError(f"{path}: {what}")


def _lane_from(path: Path, name: str, entry: Any) -> Lane:
    if not isinstance(entry, Mapping):
        raise _bad(path, f"lane {name!r} is {type(entry).__name__}; expected an object")
    base = entry.get("base")
    if not isinstance(base, str) or tag_problem(base):
        raise _bad(path, f"lane {name!r}: base {base!r} {tag_problem(base) if isinstance(base, str) else 'is missing'}")
    digest = entry.get("digest")
    if digest is not None and (not isinstance(digest, str) or not _DIGEST_RE.match(digest)):
        raise _bad(path, f"lane {name!r}: digest {digest!r}; expected null or sha256:<64 hex>")
    image = entry.get("image")
    if not isinstance(image, str) or not image:
        raise _bad(path, f"lane {name!r}: image {image!r}; expected the tag to build, e.g. gpu-repro:{name}")
    args = entry.get("build_args") or {}
    if not isinstance(args, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in args.items()):
        raise _bad(path, f"lane {name!r}: build_args must map names to strings")
    return Lane(
        name=name,
        base=base,
        digest=digest,
        image=image,
        build_args=dict(args),
        description=str(entry.get("description") or ""),
        resolved_utc=entry.get("resolved_utc"),
    )


def load_lock(path: Path | None = None) -> Lock:
    """Read and check the lock file; a malformed one is an error naming the file and the field."""
    if path is None:
        path = Path(os.environ[LOCK_ENV]) if os.environ.get(LOCK_ENV) else repo_root() / LOCK_FILE
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file; expected an image lock file like docker/images.lock.json") from None
    except json.JSONDecodeError as exc:
        raise _bad(path, f"not valid JSON ({exc})") from None
    if not isinstance(raw, dict) or raw.get("schema_version") != LOCK_SCHEMA_VERSION:
        raise _bad(path, f"expected an object with schema_version {LOCK_SCHEMA_VERSION}")
    lanes = raw.get("lanes")
    if not isinstance(lanes, dict) or not lanes:
        raise _bad(path, "expected a non-empty 'lanes' object")
    return Lock(path=path, raw=raw, lanes={name: _lane_from(path, name, e) for name, e in lanes.items()})


def select(lock: Lock, names: Sequence[str]) -> list[Lane]:
    """The named lanes in the order given (all of them, in lock order, when none are named)."""
    if not names:
        return list(lock.lanes.values())
    out: list[Lane] = []
    for name in names:
        if name not in lock.lanes:
            raise UsageError(f"unknown lane {name!r}; known: {', '.join(lock.lanes)}")
        if lock.lanes[name] not in out:
            out.append(lock.lanes[name])
    return out


def write_lock(lock: Lock, updates: Mapping[str, Mapping[str, Any]]) -> Lock:
    """Merge ``updates`` (lane -> fields) into the lock file, atomically; returns the new lock."""
    raw = json.loads(json.dumps(lock.raw))
    for name, fields in updates.items():
        raw["lanes"][name].update(fields)
    text = json.dumps(raw, indent=2) + "\n"
    fd, tmp = tempfile.mkstemp(dir=lock.path.parent, prefix=f".{lock.path.name}.", suffix=".tmp")
    os.fchmod(fd, FILE_MODE)  # mkstemp makes 0600; the lock file is for everyone to read
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, lock.path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return load_lock(lock.path)


# --------------------------------------------------------------------------- seams


def _docker() -> Any:
    try:
        import docker
    except ImportError:
        raise ReproError(
            "the docker package is not installed; expected `pip install 'gpu-repro[docker]'` "
            "(make images does it for you)"
        ) from None
    return docker


def _transport_errors() -> tuple[type[BaseException], ...]:
    import requests

    return (_docker().errors.DockerException, requests.exceptions.RequestException)


def _one_line(exc: BaseException) -> str:
    text = getattr(exc, "explanation", None) or str(exc) or type(exc).__name__
    return " ".join(str(text).split())[:300]


_DEFAULT_HOST = "unix:///var/run/docker.sock"
# A healthy engine answers /version in milliseconds; a hung one should not hold the CLI for the
# SDK's default 60 s.
_PROBE_TIMEOUT_S = 10


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
    docker = _docker()
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
    except _transport_errors() as exc:
        raise ReproError(
            f"the Docker engine is not reachable at {where} ({_one_line(exc)}); start it, or point DOCKER_HOST at one"
        ) from None
    finally:
        probe.close()
    return docker.from_env(version=server.get("ApiVersion") or docker.constants.DEFAULT_DOCKER_API_VERSION)


def git_commit(root: Path) -> str:
    """HEAD of the checkout, with ``-dirty`` when the tree has changes; ``unknown`` without git."""
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return "unknown"
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


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


# --------------------------------------------------------------------------- build


def context_paths(lane: Lane) -> list[str]:
    """Paths (relative to the repo root) that make up ``lane``'s build context."""
    return [*_SHARED_CONTEXT, f"docker/{lane.name}"]


def write_context(root: Path, lane: Lane, fileobj: IO[bytes], ca_bundle: Path | None = None) -> list[str]:
    """Write ``lane``'s build context as a tar to ``fileobj``; returns the member names.

    Sending only these paths (not the checkout with its virtualenvs and artifacts) keeps the
    context small; symlinks stay links (repro/schemas -> ../schemas resolves inside it).
    ``ca_bundle`` goes in as docker/ca/ca-bundle.crt (in place of one lying in the checkout).
    """

    def clean(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        parts = Path(info.name).parts
        if _SKIP_NAMES.intersection(parts) or info.name.endswith(".pyc") or info.name.endswith(".egg-info"):
            return None
        if ca_bundle is not None and info.name == CA_IN_CONTEXT:
            return None
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    with tarfile.open(fileobj=fileobj, mode="w") as tar:
        for rel in context_paths(lane):
            src = root / rel
            if not src.exists() and not src.is_symlink():
                raise ReproError(f"{src}: missing from the checkout; the {lane.name} build context needs it")
            tar.add(src, arcname=rel, filter=clean)
        if ca_bundle is not None:
            data = ca_bundle.read_bytes()
            info = tarfile.TarInfo(CA_IN_CONTEXT)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
        return tar.getnames()


def ca_bundle_from(option: str | None, environ: Mapping[str, str] | None = None) -> tuple[Path | None, str]:
    """The CA bundle a build should trust, and where that choice came from.

    ``option`` (``--ca-bundle``) wins; an empty one means none. Without it, PIP_CERT then
    SSL_CERT_FILE: a host behind a TLS-intercepting proxy usually sets one of them already. A
    bundle that is not a readable PEM file is a UsageError naming it and its source.
    """
    environ = os.environ if environ is None else environ
    if option is not None:
        value, source = option, "--ca-bundle"
    else:
        source = next((name for name in CA_ENV if environ.get(name)), "")
        value = environ.get(source, "") if source else ""
    if not value:
        return None, source or "none"
    path = Path(value)
    try:
        text = path.read_bytes()
    except OSError as exc:
        why = exc.strerror or exc
        raise UsageError(f"{source} {value!r}: cannot read it ({why}); expected a PEM CA bundle") from None
    if b"-----BEGIN CERTIFICATE-----" not in text:
        raise UsageError(
            f"{source} {value!r}: no PEM certificate in it; expected a CA bundle (-----BEGIN CERTIFICATE-----)"
        )
    return path, source


def build_args(lane: Lane, commit: str, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """Build args for ``lane``: the pinned base, the lock's args, provenance; ``overrides`` last."""
    args = {
        "BASE_IMAGE": lane.base_ref,
        "BASE_DIGEST": lane.digest or "",
        "GIT_COMMIT": commit,
        "HARNESS_VERSION": __version__,
        **lane.build_args,
    }
    args.update(overrides or {})
    return args


def parse_pairs(pairs: Iterable[str], option: str) -> dict[str, str]:
    """``KEY=VALUE`` strings to a dict; a malformed one is a UsageError quoting it."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise UsageError(f"{option} {pair!r}: expected KEY=VALUE")
        out[key] = value
    return out


@dataclass(frozen=True)
class Built:
    """One image ``repro images build`` made."""

    lane: str
    image: str
    image_id: str | None


def _follow_build(lane: Lane, stream: Iterable[Any], log: Log) -> str | None:
    image_id = None
    for chunk in stream:
        if not isinstance(chunk, Mapping):
            continue
        if "error" in chunk:
            raise ReproError(
                f"building {lane.image} failed: {' '.join(str(chunk['error']).split())} (the build log above says why)"
            )
        if chunk.get("stream"):
            text = str(chunk["stream"]).rstrip("\n")
            if text.strip():
                log(text)
        elif chunk.get("status") and not chunk.get("progressDetail"):
            log(f"{chunk.get('id', '')} {chunk['status']}".strip())
        aux = chunk.get("aux")
        if isinstance(aux, Mapping) and aux.get("ID"):
            image_id = str(aux["ID"])
    return image_id


def build(
    lanes: Sequence[Lane],
    *,
    root: Path,
    docker_client: Any,
    overrides: Mapping[str, str] | None = None,
    pull: bool = False,
    ca_bundle: Path | None = None,
    network: str | None = None,
    log: Log = _stderr_log,
) -> list[Built]:
    """Build each lane's image from its Dockerfile, streaming the log; stops at the first failure.

    ``ca_bundle``: a PEM file the build's pip trusts (a TLS-intercepting proxy's CA); it is sent
    in the context and so lies in one image layer, which is fine for public certificates only.
    ``network``: the build's network mode (``host`` where the engine gives builds none); ``None``
    leaves the engine's default.
    """
    commit = git_commit(root)
    built = []
    for lane in lanes:
        if not (root / lane.dockerfile).is_file():
            raise ReproError(f"{root / lane.dockerfile}: missing; expected the Dockerfile of lane {lane.name}")
        if not lane.digest:
            log(
                f"{lane.name}: {LOCK_FILE} has no digest for {lane.base}; building from the tag "
                "(run `repro images lock` where a registry is reachable to pin it)"
            )
        args = build_args(lane, commit, overrides)
        log(f"{lane.name}: building {lane.image} from {args['BASE_IMAGE']}")
        if ca_bundle is not None:
            log(f"{lane.name}: the build trusts the CA bundle {ca_bundle}")
        with tempfile.TemporaryFile() as ctx:
            write_context(root, lane, ctx, ca_bundle)
            ctx.seek(0)
            try:
                stream = docker_client.api.build(
                    fileobj=ctx,
                    custom_context=True,
                    dockerfile=lane.dockerfile,
                    tag=lane.image,
                    buildargs=args,
                    labels={"org.opencontainers.image.created": artifact.utc_now(), LANE_LABEL: lane.name},
                    pull=pull,
                    rm=True,
                    forcerm=True,
                    decode=True,
                    timeout=None,  # a silent RUN step (a large pip install) may take minutes
                    **({"network_mode": network} if network else {}),
                )
                image_id = _follow_build(lane, stream, log)
            except _transport_errors() as exc:
                raise ReproError(f"building {lane.image} failed: {_one_line(exc)}") from None
        built.append(Built(lane=lane.name, image=lane.image, image_id=image_id))
        log(f"{lane.name}: built {lane.image}" + (f" ({image_id})" if image_id else ""))
    return built


# --------------------------------------------------------------------------- run


def device_requests(gpus: str) -> list[Any]:
    """Docker device requests for ``--gpus``: ``all``, ``none``, or device ids like ``0,1``."""
    types = _docker().types
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

    docker = _docker()
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
    except _transport_errors() as exc:
        raise ReproError(f"could not look up {lane.image}: {_one_line(exc)}") from None
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
    except _transport_errors() as exc:
        hint = "; is the NVIDIA Container Toolkit installed? (--gpus none runs without GPUs)" if requests_ else ""
        raise ReproError(f"could not start {lane.image}: {_one_line(exc)}{hint}") from None
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
    except _transport_errors() as exc:
        raise ReproError(f"lost the Docker engine while {lane.image} ran: {_one_line(exc)}") from None
    finally:
        try:
            container.remove(force=True)
        except _transport_errors():
            pass  # already gone; nothing to clean up
    code = status.get("StatusCode") if isinstance(status, Mapping) else None
    return int(code) if isinstance(code, int) else 1


# --------------------------------------------------------------------------- lock


@dataclass
class LockOutcome:
    """What ``repro images lock`` did per lane."""

    updated: dict[str, str] = field(default_factory=dict)
    unchanged: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


def resolve_digests(lock: Lock, lanes: Sequence[Lane], *, docker_client: Any, log: Log = _stderr_log) -> LockOutcome:
    """Ask the registry for each lane's base digest and record it; a failure keeps the old entry.

    Only a ``sha256:`` digest the registry actually returned is ever written.
    """
    outcome = LockOutcome()
    updates: dict[str, dict[str, Any]] = {}
    for lane in lanes:
        try:
            digest = docker_client.images.get_registry_data(lane.base).id
        except _transport_errors() as exc:
            outcome.failed[lane.name] = _one_line(exc)
            log(f"{lane.name}: could not resolve {lane.base}: {outcome.failed[lane.name]}; kept the old entry")
            continue
        if not isinstance(digest, str) or not _DIGEST_RE.match(digest):
            outcome.failed[lane.name] = f"the registry answered {digest!r}, not a sha256 digest"
            log(f"{lane.name}: {outcome.failed[lane.name]}; kept the old entry")
            continue
        if digest == lane.digest:
            outcome.unchanged.append(lane.name)
            log(f"{lane.name}: {lane.base} still {digest}")
            continue
        updates[lane.name] = {"digest": digest, "resolved_utc": artifact.utc_now()}
        outcome.updated[lane.name] = digest
        log(f"{lane.name}: {lane.base} -> {digest}" + (f" (was {lane.digest})" if lane.digest else ""))
    if updates:
        write_lock(lock, updates)
    return outcome


def describe(lanes: Iterable[Lane]) -> list[list[str]]:
    """Rows for a table of lanes: name, base, digest, image."""
    return [[ln.name, ln.base, ln.digest or "(not resolved)", ln.image] for ln in lanes]
