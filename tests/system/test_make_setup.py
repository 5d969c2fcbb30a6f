"""`make setup` from a Python that is itself a venv (the H200's /opt/torch/.venv): .venv imports that venv's torch,
pip adds only the missing small dependencies, and each failure is one line that says what to run.

Offline by construction: the "machine" is an outer venv holding a stub torch plus typer, rich, tabulate and
nvidia-ml-py (copied from the environment running the tests, as the GPU machine has them), and pip gets
PIP_NO_INDEX=1 with PIP_FIND_LINKS pointing at wheels repacked from that same environment.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata as md
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from helpers import ROOT, copy_of_the_repo

pytestmark = [
    pytest.mark.skipif(shutil.which("make") is None or shutil.which("git") is None, reason="needs make and git"),
    pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs a git checkout to copy from"),
]

# What the GPU machine's Python has besides torch (the list); everything else pip must add.
ON_THE_MACHINE = ("typer", "rich", "tabulate", "nvidia-ml-py")
# Just the attributes `repro doctor` reads: a CPU-only torch as far as the doctor can tell.
STUB_TORCH = '''"""A stand-in for torch with the attributes repro doctor reads; no CUDA."""
from types import SimpleNamespace

__version__ = "2.99.0+stub"
version = SimpleNamespace(cuda=None, debug=False, git_version="stub")
cuda = SimpleNamespace(is_available=lambda: False)
backends = SimpleNamespace()


def get_float32_matmul_precision():
    return "highest"


def are_deterministic_algorithms_enabled():
    return False
'''


def _closure(names: list[str]) -> dict[str, md.Distribution]:
    """The installed distributions `names` need, theirs included (extras and absent ones left out)."""
    out: dict[str, md.Distribution] = {}
    todo = list(names)
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name in out:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:  # e.g. colorama, needed on Windows only
            continue
        out[name] = dist
        for req in dist.requires or []:
            if "extra ==" not in req:
                todo.append(re.match(r"[A-Za-z0-9._-]+", req).group(0))  # type: ignore[union-attr]
    return out


def _files(dist: md.Distribution) -> list[tuple[str, Path]]:
    """(path relative to site-packages, source) of an installed distribution, without scripts and caches."""
    out = []
    for f in dist.files or []:
        if f.parts[0] == ".." or "__pycache__" in f.parts or f.name in ("RECORD", "INSTALLER", "REQUESTED"):
            continue
        src = Path(str(dist.locate_file(f)))
        if src.is_file() and f.name != "direct_url.json":
            out.append((f.as_posix(), src))
    return out


def _repack(dist: md.Distribution, folder: Path) -> None:
    """A wheel of an installed distribution, with a fresh RECORD, so pip can install it with no index."""
    files = _files(dist)
    info = next(p.split("/")[0] for p, _ in files if p.split("/")[0].endswith(".dist-info"))
    tags = [t.split("-") for t in re.findall(r"^Tag: (\S+)$", dist.read_text("WHEEL") or "", re.M)]
    tag = "-".join(".".join(dict.fromkeys(part)) for part in zip(*tags, strict=True))  # py2.py3-none-any
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"])
    record = []
    with zipfile.ZipFile(folder / f"{name}-{dist.version}-{tag}.whl", "w") as z:
        for rel, src in files:
            data = src.read_bytes()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{rel},sha256={digest},{len(data)}")
            z.writestr(rel, data)
        z.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")


def _project_dependencies() -> list[str]:
    text = (ROOT / "pyproject.toml").read_text()
    block = re.search(r"^dependencies = \[(.*?)^\]", text, re.M | re.S)
    assert block, "pyproject.toml has no dependencies list"
    return [re.match(r"[A-Za-z0-9._-]+", d).group(0) for d in re.findall(r'"([^"]+)"', block.group(1))]  # type: ignore[union-attr]


def _env(**extra: str) -> dict[str, str]:
    # An outer `make test` would leak its variables; PYTHONPATH would let .venv import the checkout without the install.
    drop = ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "PYTHONPATH", "VIRTUAL_ENV", "PIP_USER")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(sys.prefix))
    env["PIP_NO_INDEX"] = "1"
    env.update(extra)
    return env


def _venv_with_torch(path: Path, source: str) -> Path:
    """A venv without pip (fast) whose site-packages holds torch/__init__.py = source; returns site-packages."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    site = subprocess.run(
        [path / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "torch").mkdir()
    (Path(site) / "torch" / "__init__.py").write_text(source)
    return Path(site)


def _make(clone: Path, env: dict[str, str], *args: str, target: str = "setup") -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", target, *args], cwd=clone, env=env, capture_output=True, text=True, timeout=300)


def _our_lines(r: subprocess.CompletedProcess[str]) -> list[str]:
    return [ln for ln in (r.stdout + r.stderr).splitlines() if ln.startswith("make setup: ")]


@pytest.fixture(scope="module")
def machine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A fresh copy of the repo, an outer venv shaped like the H200's python3, and a folder of wheels."""
    tmp = tmp_path_factory.mktemp("setup")
    clone = copy_of_the_repo(tmp / "gpu-repro")
    outer = tmp / "outer"
    site = _venv_with_torch(outer, STUB_TORCH)
    for dist in _closure(list(ON_THE_MACHINE)).values():
        for rel, src in _files(dist):
            (site / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, site / rel)
    wheels = tmp / "wheels"
    wheels.mkdir()
    # Every dependency (those on the machine too: pip must still leave them alone) and the build backend.
    for dist in _closure([*_project_dependencies(), "setuptools"]).values():
        _repack(dist, wheels)
    return {"clone": clone, "outer": outer / "bin" / "python", "site": site, "wheels": wheels}


# slow: two `make setup` runs, each a real .venv built with pip (about a minute on 2 cores).
@pytest.mark.slow
def test_setup_from_a_venv_python_uses_its_torch_and_adds_only_what_is_missing(machine: dict[str, Path]) -> None:
    clone, python = machine["clone"], f"PYTHON={machine['outer']}"
    # First without one small dependency's wheel: one line naming it, pip's own words only in the log.
    short = machine["wheels"].parent / "wheels-short"
    shutil.copytree(machine["wheels"], short)
    for whl in short.glob("rfc3986_validator-*.whl"):
        whl.unlink()
    r = _make(clone, _env(PIP_FIND_LINKS=str(short)), python)
    assert r.returncode != 0
    last = _our_lines(r)[-1]
    assert "gpu-repro needs rfc3986-validator>=0.1.1, which pip could not find" in last, last
    assert "PIP_FIND_LINKS" in last and ".venv/pip-install.log" in last
    assert "No matching distribution" not in r.stdout + r.stderr
    assert not (clone / ".venv" / ".installed").exists()

    # The same command with the wheel there: .venv is rebuilt in place and ready.
    r = _make(clone, _env(PIP_FIND_LINKS=str(machine["wheels"])), python)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (clone / ".venv" / ".installed").exists()
    assert "Requirement already satisfied" not in r.stdout + r.stderr
    assert "Requirement already satisfied: typer" in (clone / ".venv" / "pip-install.log").read_text()

    py = clone / ".venv" / "bin" / "python"
    where = subprocess.run(
        [py, "-c", "import torch, sysconfig; print(torch.__file__); print(sysconfig.get_paths()['purelib'])"],
        env=_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert where[0] == str(machine["site"] / "torch" / "__init__.py")
    own = {p.name.split("-")[0].lower() for p in Path(where[1]).glob("*.dist-info")}
    assert "torch" not in own and not (Path(where[1]) / "torch").exists()  # pip never installs one
    assert not own & {"typer", "rich", "tabulate", "nvidia_ml_py"}, own  # satisfied by the outer venv
    assert {"jsonschema", "referencing", "rfc3339_validator", "rfc3986_validator", "gpu_repro"} <= own, own

    doctor = subprocess.run(
        [clone / ".venv" / "bin" / "repro", "doctor"], cwd=clone, env=_env(), capture_output=True, text=True
    )
    assert doctor.returncode == 0, doctor.stderr
    assert "FAIL" not in doctor.stdout and "torch 2.99.0+stub" in doctor.stdout, doctor.stdout


def test_a_venv_that_cannot_import_the_torch_python_imports_stops_setup(
    machine: dict[str, Path], tmp_path: Path
) -> None:
    # A torch that loads only in its own environment, as a CUDA build does whose libraries only that
    # environment's loader path finds: PYTHON imports it, .venv (seeing the same files) cannot.
    outer = tmp_path / "outer"
    own_only = f"import sys\nif sys.prefix != {str(outer)!r}:\n    raise ImportError('libtorch_cuda.so: cannot open')\n"
    _venv_with_torch(outer, own_only + STUB_TORCH)
    clone = machine["clone"]
    # The first command: setup stops it before any repro runs.
    out = tmp_path / "artifacts"
    r = _make(
        clone,
        _env(),
        f"PYTHON={outer / 'bin' / 'python'}",
        "VENV=.venv-broken",
        f"OUT={out}",
        target="repro-5090-linear",
    )
    assert r.returncode != 0
    ours = _our_lines(r)
    assert "cannot import torch (ImportError: libtorch_cuda.so" in ours[-1], r.stdout + r.stderr
    assert "make setup PYTHON=" in ours[-1] and sum("torch" in ln for ln in ours) == 1
    # It stopped before pip, and without the stamp the next `make repro-<id>` stops here again.
    venv = clone / ".venv-broken"
    assert not (venv / ".installed").exists() and not (venv / "pip-install.log").exists()
    assert "bin/repro run" not in r.stdout and not out.exists()


def test_the_makefile_leaves_pips_settings_to_the_environment() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert not re.search(r"^\s*(export\s+|override\s+)?PIP_\w+\s*[:?+!]?=", makefile, re.M)
    setup = makefile.split("$(VENV)/.installed:", 1)[1].split("\n\n", 1)[0]
    assert "--index-url" not in setup and "--no-index" not in setup and "--find-links" not in setup
