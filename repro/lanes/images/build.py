"""Image builds: the build context, the CA bundle a build trusts, build args, and the SDK build."""

from __future__ import annotations

import io
import os
import re
import subprocess
import tarfile
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from repro import __version__
from repro.core.errors import ReproError, UsageError
from repro.evidence import artifact
from repro.lanes.images.engine import LANE_LABEL, Log, one_line, stderr_log, transport_errors
from repro.lanes.images.lock import LOCK_FILE, Lane

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
    """``KEY=VALUE`` strings (``--build-arg``, ``--env``) to a dict; a malformed one is a UsageError quoting it."""
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
    log: Log = stderr_log,
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
            except transport_errors() as exc:
                raise ReproError(f"building {lane.image} failed: {one_line(exc)}") from None
        built.append(Built(lane=lane.name, image=lane.image, image_id=image_id))
        log(f"{lane.name}: built {lane.image}" + (f" ({image_id})" if image_id else ""))
    return built
