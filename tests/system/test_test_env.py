"""The test env's torch is PyTorch's CPU build on every machine, never PyPI's CUDA build."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import pytest
from helpers import ROOT


def test_requirements_pin_the_cpu_build_and_make_adds_the_cpu_index() -> None:
    pins = [ln for ln in (ROOT / "requirements-test.txt").read_text().splitlines() if ln.startswith("torch")]
    assert len(pins) == 1 and pins[0].startswith("torch==") and pins[0].endswith("+cpu"), pins
    makefile = (ROOT / "Makefile").read_text()
    assert "TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu" in makefile
    recipe = makefile.split("$(TEST_VENV)/.installed:", 1)[1].split("\n\n", 1)[0]
    # uv reads no pip.conf: pip's wheel folder is passed on, in both attempts.
    find_links = "$(or $(PIP_FIND_LINKS),$(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null))"
    assert f"TEST_FIND_LINKS ?= {find_links}" in makefile
    wheels = "$(UV) $(addprefix --find-links ,$(TEST_FIND_LINKS))"
    # pip's wheel folder (e.g. an offline one) first, the CPU index only as the fallback.
    assert f"\t{wheels} -r requirements-test.txt -e . \\\n" in recipe
    cpu_index = "--extra-index-url $(TORCH_CPU_INDEX) --index-strategy unsafe-best-match"
    fallback = f"|| {wheels} {cpu_index} -r requirements-test.txt -e ."
    assert fallback in recipe


@pytest.mark.skipif(Path(sys.prefix).name != ".venv-test", reason="checks the env `make test` builds (.venv-test)")
def test_the_test_env_has_the_cpu_build_and_no_cuda_wheels() -> None:
    torch = pytest.importorskip("torch")
    assert torch.version.cuda is None and torch.__version__.endswith("+cpu"), torch.__version__
    names = [d.metadata["Name"].lower() for d in importlib.metadata.distributions()]
    assert not [n for n in names if n.startswith("nvidia-") and "cu1" in n]
