# gpu-repro driver. Every recipe is a command you could type yourself; `make help` lists them.
.DEFAULT_GOAL := help
SHELL := /bin/bash

PYTHON ?= python3
# Runtime env: sees PYTHON's torch (your CUDA build), adds only our small deps (see setup below).
VENV ?= .venv
# Test env: isolated, with the pinned CPU torch from requirements-test.txt.
TEST_VENV ?= .venv-test
REPRO := $(VENV)/bin/repro
OUT ?= artifacts
ARGS ?=
LANE ?= cu126-pt26
# GPUs the docker targets pass through: all, none (a machine without GPUs, e.g. CI), or ids like 0,1.
GPUS ?= all
LANES := cu126-pt26 cu128-nightly nemo
REPROS := 5090-linear fused-adam-capturable lora-batch-scaling solve-512-cliff graph-memset

.PHONY: help setup test test-slow lint smoke repro-all images matrix docker-repro-all $(addprefix repro-,$(REPROS)) \
        $(addprefix image-,$(LANES)) $(addprefix docker-repro-,$(REPROS))

help: ## List the targets
	@grep -hE '^[a-zA-Z0-9_%-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 26
	@echo "repro-<id>                run one repro: $(REPROS)"
	@echo "variables                 OUT=$(OUT) (output folder), ARGS='...' (extra CLI arguments), LANE=$(LANE)"
	@echo "docker-repro-<id>         run one repro in LANE=<lane> ($(LANES))"

# tools/setup_venv.py, run by PYTHON: .venv sees PYTHON's packages (a venv's own through a .pth file, since
# --system-site-packages would show its base interpreter's), pip adds only the missing small dependencies
# (PIP_INDEX_URL / PIP_FIND_LINKS / PIP_NO_INDEX pass through from the environment; log in .venv/pip-install.log),
# and .venv must import torch wherever PYTHON does, or setup stops with one line. It never installs torch.
$(VENV)/.installed: pyproject.toml tools/setup_venv.py
	$(PYTHON) tools/setup_venv.py $(VENV)
	touch $@

setup: $(VENV)/.installed ## Create .venv (uses PYTHON's torch, venv or not) with gpu-repro installed

# torch's CPU build (+cpu) is only on PyTorch's CPU index or in a local wheel folder. pip's wheel
# folder goes first, so an offline machine with the wheel never waits on that index (an unreachable
# index costs retries per package); a machine with only PyPI fails that attempt fast (PyPI has no
# +cpu) and then installs with the CPU index added.
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
# uv reads no pip configuration, so pip's wheel folder is passed on: PIP_FIND_LINKS from the
# environment, else find-links from pip's configuration files (empty where neither has one).
TEST_FIND_LINKS ?= $(or $(PIP_FIND_LINKS),$(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null))
UV := $(TEST_VENV)/bin/uv pip install --python $(TEST_VENV)/bin/python

# The test env is installed by uv (from PyPI, put into the env by pip): on the 2-core machine, pip took
# 45 s of CPU for requirements-test.txt and 8 s for the editable install, uv 16 s for both with
# an empty cache and 4 s with a warm one (uv links files from its cache instead of unpacking every
# wheel). uv does not byte-compile: `make test` lets Python compile the modules the tests import,
# once, as they are first imported (below). A Python without pip gets it from ensurepip first.
# --index-strategy unsafe-best-match: take each package's best version from any index, as pip does,
# rather than only from the first index that has the package (PyTorch's index has numpy, sympy...).
$(TEST_VENV)/.installed: pyproject.toml requirements-test.txt
	$(PYTHON) -m venv --without-pip $(TEST_VENV)
	$(PYTHON) -m pip --python $(TEST_VENV)/bin/python install -q --no-compile uv \
	    || { $(TEST_VENV)/bin/python -m ensurepip && $(TEST_VENV)/bin/python -m pip install -q --no-compile uv; }
	$(UV) $(addprefix --find-links ,$(TEST_FIND_LINKS)) -r requirements-test.txt -e . \
	    || $(UV) $(addprefix --find-links ,$(TEST_FIND_LINKS)) --extra-index-url $(TORCH_CPU_INDEX) --index-strategy unsafe-best-match -r requirements-test.txt -e .
	touch $@

# pytest-xdist workers for `make test`; 0 runs every test in one process. Three on the 2-core machine:
# many tests wait (on a hang's timeout, a subprocess's torch import), and a third worker runs CPU
# work meanwhile. --dist worksteal hands each worker a run of consecutive tests and lets an idle one
# take the back half of a busy one's queue, so no worker idles while a slow file finishes on another
# (--dist loadfile, one file per worker, ended each run on one small slow file alone). A module's
# fixtures are built again only where a steal splits its file. The engine and Slurm tests take a
# lock (tests/conftest.py), so they never run beside each other.
TEST_WORKERS ?= 3

# PYTHONDONTWRITEBYTECODE= : the test env has no bytecode (--no-compile above), so each module is
# compiled when a test first imports it and kept; with the variable set, as some shells set it,
# every process that imports torch would compile it again (about 3 s of CPU each).
test: $(TEST_VENV)/.installed ## Set up the pinned CPU test env and run the tests but the slow ones (GPU tests skip without CUDA)
	PYTHONDONTWRITEBYTECODE= $(TEST_VENV)/bin/pytest -n $(TEST_WORKERS) --dist worksteal -m 'not slow' $(ARGS)

# The tests marked slow, and why each is not in `make test` (CI runs both targets):
#   tests/system/test_faults_signals_slow.py::test_repro_all_under_random_signals: repetition trials
#     (`repro all` under SIGINT, SIGTERM and SIGKILL at random moments, 30 trials each; minutes)
#   tests/unit/lanes/test_matrix.py::test_local_run_crash_collect_resume: a matrix run, a crash and a
#     resume of it, for real on the local backend
#   tests/system/test_first_run.py::test_cpu_walkthrough_runs_as_written: `make setup` builds a real
#     .venv (venv + pip install)
#   tests/system/test_make_setup.py::test_setup_from_a_venv_python_uses_its_torch_and_adds_only_what_is_missing:
#     two `make setup` runs, each a real .venv built with pip
#   tests/unit/env/test_harness_identity.py::test_the_bundle_carries_the_harness_that_ran_and_it_installs_with_the_same_digest:
#     a fresh venv (ensurepip) and a pip install of the bundle's wheel into it
#   tests/unit/repros/test_repro_graph_memset.py::test_twin_compiles_with_nvcc_and_the_cache_reuses_it:
#     a real nvcc build of graph-memset's twin
#   tests/system/test_faults_bundle_secrets.py::test_secrets_on_the_command_line_and_in_output_reach_no_file:
#     secrets through two CLI runs and their bundles, end to end
test-slow: $(TEST_VENV)/.installed ## The slow tests: random-signal trials, the matrix resume, venv + pip builds (minutes)
	PYTHONDONTWRITEBYTECODE= $(TEST_VENV)/bin/pytest -m slow $(ARGS)

lint: $(TEST_VENV)/.installed ## ruff, mypy --strict, the import layers (lint-imports), hadolint on every Dockerfile
	$(TEST_VENV)/bin/ruff check repro tests
	$(TEST_VENV)/bin/mypy --strict repro tests
	$(TEST_VENV)/bin/lint-imports
	$(TEST_VENV)/bin/hadolint docker/*/Dockerfile docker/standins/*.Dockerfile

smoke: $(TEST_VENV)/.installed ## CPU trial: every repro at smoke sizes in the test env (CPU torch), no GPU verdicts
	$(TEST_VENV)/bin/repro all --smoke --out $(OUT) $(ARGS)

repro-all: setup ## Run every repro with .venv's torch; artifacts and report.md land in OUT/<run-id>/
	$(REPRO) all --out $(OUT) $(ARGS)

$(addprefix repro-,$(REPROS)): repro-%: setup
	$(REPRO) run $* --out $(OUT) $(ARGS)

# --- docker lanes (see docs/docker.md) ------------------------------------------------
# Pins (base tag, digest, nightly version) live in docker/images.lock.json only. Each target
# wraps `repro images ...`, which talks to the engine through the docker SDK.
MATRIX := $(OUT)/matrix
.PHONY: lock

$(VENV)/.docker: $(VENV)/.installed
	# `python -m pip`: .venv may have no pip of its own (setup's ensurepip finds the outer pip
	# already there); as in setup, a fresh venv has no wheel package for --no-build-isolation.
	$(VENV)/bin/python -m pip install -e '.[docker]' || $(VENV)/bin/python -m pip install --no-build-isolation -e '.[docker]'
	touch $@

images: $(VENV)/.docker ## Build the three pinned images (image-<lane> builds one)
	$(REPRO) images build $(LANES)

$(addprefix image-,$(LANES)): image-%: $(VENV)/.docker
	$(REPRO) images build $*

docker-repro-all: $(VENV)/.docker ## Run `repro all` in LANE=<lane> with GPUs passed through
	$(REPRO) images run $(LANE) --gpus $(GPUS) --out $(OUT)/lanes/$(LANE) -- all $(ARGS)

$(addprefix docker-repro-,$(REPROS)): docker-repro-%: $(VENV)/.docker
	$(REPRO) images run $(LANE) --gpus $(GPUS) --out $(OUT)/lanes/$(LANE) -- run $* $(ARGS)

# One lane after another (never in parallel: they would share the GPUs); stops at the first failure.
matrix: $(VENV)/.docker ## Every repro in every lane, then `repro compare` across the lanes
	$(foreach lane,$(LANES),$(REPRO) images run $(lane) --gpus $(GPUS) --out $(MATRIX)/$(lane) -- all $(ARGS) && ) true
	$(REPRO) compare $(addprefix $(MATRIX)/,$(LANES)) --out $(MATRIX)/compare-$$(date -u +%Y%m%dT%H%M%SZ).md

lock: $(VENV)/.docker ## Resolve base-image digests into docker/images.lock.json (needs an engine and a registry)
	$(REPRO) images lock

# Where no registry serves the real bases: build stand-ins, then the lanes against them with
# GPU_REPRO_LOCK=docker/standins/images.lock.json (see docs/docker.md, "Stand-in bases").
.PHONY: standins
standins: ## Build the stand-in base images (debootstrap + CPU torch; needs root and an engine)
	tools/standins.sh
