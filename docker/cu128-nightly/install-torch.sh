#!/bin/sh
# Install the date-pinned cu128 PyTorch nightly, or the wheel(s) named by TORCH_WHEEL.
#
# TORCH_NIGHTLY  the exact version, e.g. 2.12.0.dev20260407+cu128; the installed torch must match.
# TORCH_INDEX_URL the nightly index (it keeps only about 60 days of builds).
# TORCH_WHEEL    optional, overrides the index: one or more space-separated wheel URLs, or paths
#                in the build context under docker/cu128-nightly/wheels/ (copied to $WHEELS).
set -eu

WHEELS=${WHEELS:-/tmp/wheels}
: "${TORCH_NIGHTLY:?set the build arg TORCH_NIGHTLY, e.g. 2.12.0.dev20260407+cu128}"
: "${TORCH_INDEX_URL:=https://download.pytorch.org/whl/nightly/cu128}"
TORCH_WHEEL=${TORCH_WHEEL:-}
PY=${PYTHON:-python}

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

how="supply the wheel: put torch-${TORCH_NIGHTLY}-*.whl (and, for an old nightly, its matching"
how="$how pytorch-triton wheel) in docker/cu128-nightly/wheels/ and build with"
how="$how --build-arg TORCH_WHEEL='docker/cu128-nightly/wheels/<file>.whl ...', or pass wheel URLs"
how="$how in TORCH_WHEEL; see docs/docker.md"

fail() {
    echo "error: $1" >&2
    echo "       $how" >&2
    exit 1
}

if [ -n "$TORCH_WHEEL" ]; then
    wheels=""
    for w in $TORCH_WHEEL; do
        case "$w" in
            http://* | https://*) wheels="$wheels $w" ;;
            *)
                f="$WHEELS/$(basename "$w")"
                [ -f "$f" ] || fail "TORCH_WHEEL names $w, which is not in docker/cu128-nightly/wheels/ of the build context"
                wheels="$wheels $f"
                ;;
        esac
    done
    # The wheels' own dependencies (nvidia-*-cu12, pytorch-triton) come from the nightly index
    # or PyPI; an old nightly's pytorch-triton may be gone from both, hence the hint above.
    # shellcheck disable=SC2086
    "$PY" -m pip install --no-cache-dir --extra-index-url "$TORCH_INDEX_URL" $wheels \
        || fail "could not install torch $TORCH_NIGHTLY from TORCH_WHEEL ($TORCH_WHEEL)"
else
    "$PY" -m pip install --no-cache-dir --pre "torch==$TORCH_NIGHTLY" --index-url "$TORCH_INDEX_URL" \
        || fail "torch==$TORCH_NIGHTLY is not available from $TORCH_INDEX_URL (cu128 nightlies stopped after 2.12.0.dev20260407 and the index keeps about 60 days)"
fi

got=$("$PY" -c 'import torch; print(torch.__version__)')
[ "$got" = "$TORCH_NIGHTLY" ] || fail "installed torch is $got; expected $TORCH_NIGHTLY (set TORCH_NIGHTLY to the version of the wheel you supply)"
echo "torch $got installed"
