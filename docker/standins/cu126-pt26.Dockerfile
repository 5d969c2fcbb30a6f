# Stand-in for pytorch/pytorch:2.6.0-cuda12.6-cudnn9-devel (lane cu126-pt26) where no registry
# serves it. It gives docker/cu126-pt26/Dockerfile what the real base gives it: Python 3.11 in
# /opt/conda, first on PATH as `python` and `pip`, torch preinstalled, LANG=C.UTF-8, no user 1000.
# torch is the CPU build (no CUDA here), so an image built on this proves the build and the
# run-time contract, never a GPU result. Built by tools/standins.sh; the context holds wheels/.
ARG DEBIAN_PY=gpu-repro-standin/debian-py:bookworm
FROM ${DEBIAN_PY}
ARG TORCH_VERSION=2.13.0+cpu
LABEL dev.gpu-repro.standin-for="pytorch/pytorch:2.6.0-cuda12.6-cudnn9-devel" \
      dev.gpu-repro.standin-torch="${TORCH_VERSION}"
# Metadata first: under the vfs storage driver every step after the big one would copy it whole.
ENV PATH=/opt/conda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8
COPY . /tmp/standin/
RUN python3 -m venv /opt/conda \
    && /opt/conda/bin/pip install --no-cache-dir --no-index --find-links /tmp/standin/wheels "torch==${TORCH_VERSION}" \
    && rm -rf /tmp/standin
