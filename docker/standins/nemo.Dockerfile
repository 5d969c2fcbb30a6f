# Stand-in for nvcr.io/nvidia/nemo:26.08.01 (lane nemo) where no registry serves it. Like the
# real base: the system Python as `python` (3.11 here, 3.12 there) with torch preinstalled in
# /usr/local/lib/python3.*/dist-packages, the system marked externally managed, pip constraints
# (PIP_CONSTRAINT) that pin torch, a user `ubuntu` with uid/gid 1000, and a `transformer_engine`
# package. That package is not NVIDIA's Transformer Engine: its import fails with an ImportError
# saying so, so fused-adam-capturable records the TE backend as unavailable instead of crashing.
ARG DEBIAN_PY=gpu-repro-standin/debian-py:bookworm
FROM ${DEBIAN_PY}
ARG TORCH_VERSION=2.13.0+cpu
LABEL dev.gpu-repro.standin-for="nvcr.io/nvidia/nemo:26.08.01" \
      dev.gpu-repro.standin-torch="${TORCH_VERSION}"
# Metadata first: under the vfs storage driver every step after the big one would copy it whole.
ENV PIP_CONSTRAINT=/etc/pip/constraint.txt
COPY . /tmp/standin/
RUN ln -s /usr/bin/python3 /usr/local/bin/python \
    && mkdir -p /etc/pip && echo "torch==${TORCH_VERSION}" > /etc/pip/constraint.txt \
    && groupadd --gid 1000 ubuntu && useradd --uid 1000 --gid 1000 --create-home --shell /bin/bash ubuntu \
    && python3 -m pip install --no-cache-dir --break-system-packages --no-index --find-links /tmp/standin/wheels \
        "torch==${TORCH_VERSION}" \
    && cp -r /tmp/standin/transformer_engine "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/" \
    && rm -rf /tmp/standin
