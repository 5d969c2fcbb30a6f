#!/usr/bin/env bash
# Build the stand-in base images that the lanes' own Dockerfiles are built against where no
# registry serves the real bases (pytorch/pytorch, nvidia/cuda, nvcr.io nemo), e.g. in CI.
#
#   tools/standins.sh [--push] [LANE...]      (default: every lane in docker/standins/images.lock.json)
#
# 1. gpu-repro-standin/debian-py:bookworm: a Debian 12 rootfs (debootstrap, about 2 minutes once)
#    with python3, venv and pip, imported with `docker import`; reused while the tag exists.
# 2. Per lane, docker/standins/<lane>.Dockerfile on top of it, tagged with the lane's `base` from
#    docker/standins/images.lock.json. The build has no network: the CPU torch wheel
#    (torch==<requirements-test.txt's pin>) and its dependencies are downloaded on the host first,
#    from the wheel folder pip is configured with, else PyPI plus PyTorch's CPU index.
#    The builder's cache makes a rebuild with unchanged inputs take seconds. The torch wheel also
#    goes to docker/cu128-nightly/wheels/, for that lane's stand-in build (TORCH_WHEEL).
# 3. --push: push each stand-in to its registry (localhost:5000 in CI), so `repro images lock`
#    can resolve real digests for them.
# Needs root (debootstrap), a Docker engine, and python3 with pip on the host.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
TORCH_CPU_INDEX=${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
BASE=gpu-repro-standin/debian-py:bookworm
LOCK=docker/standins/images.lock.json
CACHE=${GPU_REPRO_CI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-repro-ci}

log() { printf '[standins] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

push=0
lanes=()
for arg in "$@"; do
    case "$arg" in
        --push) push=1 ;;
        -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
        -*) die "unknown option $arg; expected --push or lane names" ;;
        *) lanes+=("$arg") ;;
    esac
done

lane_base() {  # the stand-in tag of lane $1, from the stand-in lock
    "$PYTHON" - "$LOCK" "$1" <<'PY'
import json, sys
lanes = json.load(open(sys.argv[1]))["lanes"]
if sys.argv[2] not in lanes:
    sys.exit(f"unknown lane {sys.argv[2]!r}; known: {', '.join(lanes)}")
print(lanes[sys.argv[2]]["base"])
PY
}
[ ${#lanes[@]} -gt 0 ] || mapfile -t lanes < <("$PYTHON" -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["lanes"]))' "$LOCK")
for lane in "${lanes[@]}"; do
    [ -f "docker/standins/$lane.Dockerfile" ] || die "no docker/standins/$lane.Dockerfile for lane $lane"
    lane_base "$lane" >/dev/null
done
docker info >/dev/null 2>&1 || die "no Docker engine answers (docker info failed); start dockerd first"

# --- 1. the Debian base ------------------------------------------------------------------
if docker image inspect "$BASE" >/dev/null 2>&1; then
    log "reusing $BASE"
else
    command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    log "debootstrap bookworm (minbase + python3, python3-venv, python3-pip) from $DEBIAN_MIRROR"
    SECONDS=0
    debootstrap --variant=minbase --include=python3,python3-venv,python3-pip bookworm "$tmp/rootfs" "$DEBIAN_MIRROR" \
        >"$tmp/debootstrap.log" 2>&1 || { tail -20 "$tmp/debootstrap.log" >&2; die "debootstrap failed"; }
    rm -rf "$tmp/rootfs/var/cache/apt/archives/"*.deb "$tmp/rootfs/var/lib/apt/lists/"*
    tar -C "$tmp/rootfs" -c . | docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["/bin/bash"]' - "$BASE" >/dev/null
    rm -rf "$tmp"
    trap - EXIT
    log "built $BASE in ${SECONDS}s"
fi

# --- 2. the CPU torch wheel and its dependencies -------------------------------------------
torch=$(sed -n 's/^torch==\([^ ;#]*\).*/\1/p' requirements-test.txt)
[ -n "$torch" ] || die "requirements-test.txt pins no torch==VERSION"
py_tag=$(docker run --rm --network none "$BASE" python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
wheels="$CACHE/wheels-torch-$torch-py$py_tag"
if ! compgen -G "$wheels/torch-$torch-*.whl" >/dev/null; then
    mkdir -p "$wheels"
    fetch=("$PYTHON" -m pip download --quiet --dest "$wheels" --only-binary=:all: --python-version "$py_tag"
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
        --platform linux_x86_64 "torch==$torch")
    # What pip is configured with first (here: a local wheel folder); then PyTorch's CPU index,
    # the only index with +cpu builds.
    log "downloading torch==$torch (CPU) and its dependencies for Python $py_tag into $wheels"
    "${fetch[@]}" 2>/dev/null || "${fetch[@]}" --extra-index-url "$TORCH_CPU_INDEX" \
        || die "could not download torch==$torch; expected it in pip's find-links or on $TORCH_CPU_INDEX"
fi

# The cu128 lane installs torch itself: its stand-in build args (TORCH_WHEEL in the stand-in
# lock) name this wheel in docker/cu128-nightly/wheels/ (git ignores wheels there).
for whl in "$wheels"/torch-"$torch"-*.whl; do
    [ -e "docker/cu128-nightly/wheels/$(basename "$whl")" ] || cp "$whl" docker/cu128-nightly/wheels/
done

# --- 3. one stand-in per lane ---------------------------------------------------------------
for lane in "${lanes[@]}"; do
    tag=$(lane_base "$lane")
    ctx=$(mktemp -d)
    mkdir "$ctx/wheels"
    case "$lane" in
        cu126-pt26 | nemo) cp "$wheels"/*.whl "$ctx/wheels/" ;;
    esac
    [ "$lane" = nemo ] && cp -r docker/standins/transformer_engine "$ctx/"
    SECONDS=0
    log "building $tag from docker/standins/$lane.Dockerfile"
    DOCKER_BUILDKIT=0 docker build --network none -q -f "docker/standins/$lane.Dockerfile" --build-arg "TORCH_VERSION=$torch" \
        --build-arg "DEBIAN_PY=$BASE" -t "$tag" "$ctx" >/dev/null
    rm -rf "$ctx"
    log "built $tag in ${SECONDS}s"
    if [ "$push" = 1 ]; then
        SECONDS=0
        docker push -q "$tag" >/dev/null || die "could not push $tag; is its registry running?"
        log "pushed $tag in ${SECONDS}s: $(docker image inspect -f '{{join .RepoDigests " "}}' "$tag")"
    fi
done
