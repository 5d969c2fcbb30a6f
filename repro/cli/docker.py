"""CLI wiring for the Docker lanes (``repro images build|run|lock|list``).

Registered in ``repro/cli/main.py`` with ``app.add_typer(images_app, name="images")``; the work lives
in the ``repro.lanes.images`` package.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from repro.cli.common import handles_errors, new_typer
from repro.core.errors import ReproError

images_app = new_typer("images", "Build, run and pin the Docker lanes (pins: docker/images.lock.json).")

LockOpt = Annotated[
    Path | None,
    typer.Option(
        "--lock",
        envvar="GPU_REPRO_LOCK",
        help="The lock file to use (default docker/images.lock.json; e.g. docker/standins/images.lock.json).",
        show_default=False,
    ),
]

LanesArg = Annotated[
    list[str] | None,
    typer.Argument(metavar="LANE", help="Lanes to act on (default: every lane in the lock file).", show_default=False),
]


def _log(line: str) -> None:
    typer.echo(line, err=True)


@images_app.command("list")
@handles_errors
def list_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable lanes on stdout.")] = False,
    lock_file: LockOpt = None,
) -> None:
    """Show each lane's pinned base image, digest and image tag (needs no engine)."""
    from repro.evidence.markdown import table
    from repro.lanes.images.lock import describe, load_lock

    lock = load_lock(lock_file)
    if as_json:
        typer.echo(json.dumps(lock.raw["lanes"], indent=2))
        return
    typer.echo(table(describe(lock.lanes.values()), ["lane", "base", "digest", "image"]))


@images_app.command("build")
@handles_errors
def build_cmd(
    lanes: LanesArg = None,
    build_arg: Annotated[
        list[str] | None,
        typer.Option(
            "--build-arg",
            metavar="KEY=VALUE",
            help="KEY=VALUE over the lock's build args, e.g. TORCH_WHEEL=... (repeatable).",
        ),
    ] = None,
    pull: Annotated[bool, typer.Option("--pull", help="Pull the base image even if a copy is present.")] = False,
    ca_bundle: Annotated[
        str | None,
        typer.Option(
            "--ca-bundle",
            help="PEM CA bundle pip trusts inside the build (behind a TLS-intercepting proxy); "
            "default: $PIP_CERT, else $SSL_CERT_FILE; '' for none.",
            show_default=False,
        ),
    ] = None,
    network: Annotated[
        str | None,
        typer.Option(
            "--network",
            envvar="GPU_REPRO_BUILD_NETWORK",
            help="Network mode of the build, e.g. host where the engine gives builds no network.",
            show_default=False,
        ),
    ] = None,
    lock_file: LockOpt = None,
) -> None:
    """Build the lanes' images from docker/<lane>/Dockerfile (the base by digest once locked)."""
    from repro.lanes.images import engine
    from repro.lanes.images.build import build, ca_bundle_from, parse_pairs
    from repro.lanes.images.lock import load_lock, repo_root, select

    lock = load_lock(lock_file)
    chosen = select(lock, lanes or [])
    overrides = parse_pairs(build_arg or [], "--build-arg")
    bundle, source = ca_bundle_from(ca_bundle)
    docker_client = engine.client()
    if bundle is not None and source != "--ca-bundle":
        _log(f"using the CA bundle {bundle} from ${source} for the build (--ca-bundle '' for none)")
    built = build(
        chosen,
        root=repo_root(),
        docker_client=docker_client,
        overrides=overrides,
        pull=pull,
        ca_bundle=bundle,
        network=network or None,
        log=_log,
    )
    for b in built:
        typer.echo(f"{b.lane}\t{b.image}\t{b.image_id or ''}".rstrip())


@images_app.command("run")
@handles_errors
def run_cmd(
    lane: Annotated[
        str,
        typer.Argument(metavar="LANE", show_default=False, help="The lane whose image runs (see `repro images list`)."),
    ],
    repro_args: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="REPRO_ARGS",
            help="What the image's `repro` runs, after `--` (default: all).",
            show_default=False,
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", metavar="DIR", help="Host folder mounted at /artifacts (default artifacts/lanes/<lane>)."
        ),
    ] = None,
    gpus: Annotated[
        str,
        typer.Option("--gpus", metavar="all|none|IDS", help="GPUs to pass through: all, none, or device ids like 0,1."),
    ] = "all",
    env: Annotated[
        list[str] | None,
        typer.Option(
            "--env",
            metavar="KEY=VALUE",
            help="KEY=VALUE set in the container, e.g. TORCH_LINALG_PREFER_CUSOLVER=1 (repeatable).",
        ),
    ] = None,
    lock_file: LockOpt = None,
) -> None:
    """Run `repro <args>` in a lane's image with GPUs, no network, artifacts written to --out.

    Example: repro images run nemo --out artifacts/lanes/nemo -- run fused-adam-capturable
    """
    from repro.lanes.images import container, engine
    from repro.lanes.images.build import parse_pairs
    from repro.lanes.images.lock import load_lock, select

    lock = load_lock(lock_file)
    (chosen,) = select(lock, [lane])
    environment = parse_pairs(env or [], "--env")
    container.device_requests(gpus)  # bad --gpus is a usage error before the engine is asked
    code = container.run(
        chosen,
        out=out if out is not None else Path("artifacts") / "lanes" / chosen.name,
        args=repro_args or [],
        docker_client=engine.client(),
        gpus=gpus,
        env=environment,
    )
    if code:
        raise typer.Exit(code)


@images_app.command("lock")
@handles_errors
def lock_cmd(lanes: LanesArg = None, lock_file: LockOpt = None) -> None:
    """Resolve each lane's base tag to a registry digest and record it in the lock file.

    A base the registry does not answer for is reported with the reason, and its entry is kept.
    """
    from repro.lanes.images import engine
    from repro.lanes.images.digests import resolve_digests
    from repro.lanes.images.lock import load_lock, select

    lock = load_lock(lock_file)
    chosen = select(lock, lanes or [])
    outcome = resolve_digests(lock, chosen, docker_client=engine.client(), log=_log)
    if outcome.failed:
        raise ReproError(
            f"could not resolve {', '.join(outcome.failed)}; their entries in {lock.path.name} are unchanged"
        )
