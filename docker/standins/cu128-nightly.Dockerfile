# Stand-in for nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04 (lane cu128-nightly) where no registry
# serves it. Like the real base: apt works, no torch, and a user `ubuntu` with uid/gid 1000
# (install-repro.sh takes that uid over). Unlike it: Debian 12, and python3 (3.11, not Ubuntu
# 24.04's 3.12) is already there, so the lane's apt step finds it installed; the lane installs
# torch itself (the CPU wheel through TORCH_WHEEL, see docker/standins/images.lock.json).
ARG DEBIAN_PY=gpu-repro-standin/debian-py:bookworm
FROM ${DEBIAN_PY}
LABEL dev.gpu-repro.standin-for="nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04"
RUN groupadd --gid 1000 ubuntu && useradd --uid 1000 --gid 1000 --create-home --shell /bin/bash ubuntu
