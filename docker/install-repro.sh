#!/bin/sh
# Install gpu-repro into an image's Python without touching its torch; shared by every lane.
#
# Run as root from the Dockerfile with the project copied to $SRC (default: this script's
# parent folder). Creates the non-root user `repro` (uid/gid 1000), installs the pinned small
# dependencies and the project with --no-deps, and fails if torch's version changed.
set -eu

SRC=${SRC:-$(cd "$(dirname "$0")/.." && pwd)}
PY=${PYTHON:-python}
RUN_UID=1000

# A CA bundle sent with the build (`repro images build --ca-bundle`, or docker/ca/ca-bundle.crt for
# a plain docker build; the Dockerfile copies it next to this script): pip trusts it, for builds
# behind a TLS-intercepting proxy. CA_BUNDLE names another file.
for ca in "${CA_BUNDLE:-}" "$(dirname "$0")/ca-bundle.crt" "$(dirname "$0")/ca/ca-bundle.crt"; do
    if [ -n "$ca" ] && [ -s "$ca" ]; then
        export PIP_CERT="$ca"
        echo "pip trusts the build's CA bundle ($ca)"
        break
    fi
done

# Ubuntu 24.04 images (nvidia/cuda, NGC) ship a user `ubuntu` with uid 1000. Take the uid
# over so files written to a mounted /artifacts belong to the usual first desktop user.
existing=$(getent passwd "$RUN_UID" | cut -d: -f1 || true)
if [ -n "$existing" ] && [ "$existing" != repro ]; then
    userdel --remove "$existing" 2>/dev/null || true  # a missing mail spool is not an error
fi
group=$(getent group "$RUN_UID" | cut -d: -f1 || true)
if [ -n "$group" ] && [ "$group" != repro ]; then
    groupdel "$group"
fi
getent group repro >/dev/null || groupadd --gid "$RUN_UID" repro
getent passwd repro >/dev/null || useradd --uid "$RUN_UID" --gid "$RUN_UID" --create-home --shell /bin/bash repro
# `repro images run` runs as the caller's uid, which may have no home here: one for everyone.
chmod 1777 /home/repro
mkdir -p /artifacts
chown repro:repro /artifacts

torch_before=$("$PY" -c 'import torch; print(torch.__version__)')
if ! "$PY" -m pip install --no-cache-dir -r "$SRC/docker/requirements.txt"; then
    # NGC images pin their own packages through pip constraints (PIP_CONSTRAINT,
    # /etc/pip/constraint.txt); where our exact pins clash, take the ranges pyproject.toml
    # accepts and let the image's constraints choose.
    echo "warning: the pinned small dependencies clash with this image; installing pyproject's ranges" >&2
    "$PY" -m pip install --no-cache-dir "$SRC"
fi
"$PY" -m pip install --no-cache-dir --no-deps "$SRC"
# graph-memset records cudaMemsetAsync nodes through cuda-bindings; an image that lacks it
# gets the version for its CUDA major (CUDA_BINDINGS, a build arg; empty skips this).
if [ -n "${CUDA_BINDINGS:-}" ] && ! "$PY" -c 'import cuda.bindings.runtime' 2>/dev/null; then
    "$PY" -m pip install --no-cache-dir "$CUDA_BINDINGS"
fi
torch_after=$("$PY" -c 'import torch; print(torch.__version__)')
if [ "$torch_before" != "$torch_after" ]; then
    echo "error: installing gpu-repro changed torch from $torch_before to $torch_after;" \
        "expected the image's torch untouched (check docker/requirements.txt)" >&2
    exit 1
fi

# The installed package must carry its JSON schemas (repro/schemas is a symlink in the repo).
"$PY" -c 'from repro.evidence.artifact import SCHEMA_DIR, SCHEMA_FILES; [(SCHEMA_DIR / n).read_text() for n in SCHEMA_FILES]'
repro --version
echo "gpu-repro installed; torch $torch_after"
