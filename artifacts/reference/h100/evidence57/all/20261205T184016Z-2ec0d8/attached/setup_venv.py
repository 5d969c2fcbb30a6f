"""`make setup`: build .venv from the Python you name so that it imports that Python's torch, then install gpu-repro.

Run it with that Python, from the repository root: `python3 tools/setup_venv.py .venv`.

- A system or conda Python: `python3 -m venv --system-site-packages .venv`, which sees its packages.
- A Python that is itself a virtual environment (sys.prefix != sys.base_prefix): --system-site-packages
  would show the *base* interpreter's packages, not the environment's, so .venv gets a .pth file that
  adds that Python's site-packages (site.getsitepackages(), .pth files in them processed) after its own.

Then `pip install -e .` into .venv. pip sees the packages already visible as installed and fetches only
what is missing; it reads PIP_INDEX_URL / PIP_FIND_LINKS / PIP_NO_INDEX from the environment, which this
script passes through untouched. pip's output goes to .venv/pip-install.log; a failure prints one line.
Last, .venv must import torch wherever this Python does; torch itself is never installed.
Exit status: 0 when .venv is ready, 1 with one line on stderr saying why and what to run.
"""

from __future__ import annotations

import json
import os
import re
import site
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PTH_NAME = "gpu_repro_outer_site.pth"
LOG_NAME = "pip-install.log"
# Imported in a subprocess: a CUDA torch takes seconds to import and may print; the last line is ours.
_TORCH_PROBE = """
import json
try:
    import torch
    print(json.dumps({"version": torch.__version__, "file": torch.__file__}))
except Exception as exc:
    print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
"""
# The build backend, when .venv already sees one that can build an editable wheel offline: setuptools
# builds PEP 660 editables from 64 on, and bundles bdist_wheel (no `wheel` package needed) from 70.1 on.
_BUILD_PROBE = """
import importlib.util, setuptools
v = tuple(int(x) for x in setuptools.__version__.split(".")[:2])
print(v >= (70, 1) or (v >= (64, 0) and importlib.util.find_spec("wheel") is not None))
"""


class SetupError(Exception):
    """What went wrong and what to run instead, as one line."""


def say(msg: str) -> None:
    print(f"make setup: {msg}", file=sys.stderr, flush=True)


def in_a_venv() -> bool:
    return sys.prefix != sys.base_prefix


def outer_site_dirs() -> list[str]:
    """The site-packages directories this Python sees (its venv's, and the base's when it sees those)."""
    return [d for d in site.getsitepackages() if os.path.isdir(d)]


def probe_torch(python: str) -> dict[str, str]:
    try:
        r = subprocess.run([python, "-c", _TORCH_PROBE], capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return {"error": "`import torch` took over 600 s"}
    lines = r.stdout.strip().splitlines()
    if r.returncode != 0 or not lines:
        tail = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
        return {"error": tail}
    result: dict[str, str] = json.loads(lines[-1])
    return result


def make_venv(venv: Path) -> None:
    venv = venv.absolute()
    if Path(sys.prefix).resolve() == venv.resolve():
        raise SetupError(
            f"{sys.executable} is {venv}'s own Python; pass the one whose torch .venv should use: "
            "make setup PYTHON=/path/to/python"
        )
    # pip comes after the torch check (add_pip): ensurepip takes seconds, a failed check none.
    cmd = [sys.executable, "-m", "venv", "--without-pip", str(venv)]
    if not in_a_venv():
        cmd.insert(3, "--system-site-packages")
    run_or_fail(cmd)
    # A .venv made by an earlier setup from a plain Python keeps no stale .pth; one from a venv gets a fresh one.
    purelib = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    pth = Path(purelib) / PTH_NAME
    if not in_a_venv():
        pth.unlink(missing_ok=True)
        return
    dirs = outer_site_dirs()
    # addsitedir, not bare paths: .pth files in those directories (editable installs, a torch built
    # with `setup.py develop`, namespace packages) then work in .venv as they do in $(PYTHON).
    lines = [f"# make setup: {sys.executable}'s packages (sys.prefix {sys.prefix}), after .venv's own."]
    lines += [f"import site; site.addsitedir({d!r})" for d in dirs]
    pth.write_text("\n".join(lines) + "\n")
    say(f"{sys.executable} runs in a venv ({sys.prefix}); .venv sees its site-packages through {pth}")


def run_or_fail(cmd: list[str], hint: str = "") -> None:
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        last = (r.stderr.strip() or r.stdout.strip() or f"exit {r.returncode}").splitlines()[-1]
        raise SetupError(f"`{' '.join(cmd)}` failed: {last}{hint}")


def add_pip(venv: Path) -> None:
    """What `python -m venv` runs itself unless told --without-pip.

    A base Python without ensurepip (Debian's, without python3-venv) still works when .venv sees a
    pip through the .pth file: `python -m pip` then installs into .venv, which is all setup needs.
    """
    hint = "; on Debian/Ubuntu, `apt install python3-venv` provides ensurepip"
    python = str(venv / "bin" / "python")
    try:
        run_or_fail([python, "-m", "ensurepip", "--upgrade", "--default-pip"], hint)
    except SetupError:
        if subprocess.run([python, "-c", "import pip"], capture_output=True).returncode != 0:
            raise
        say(f"ensurepip is not available to {python}; using the pip it sees through {PTH_NAME}")


def check_torch(outer: dict[str, str], venv: Path) -> dict[str, str]:
    """.venv must import torch when this Python does; returns what .venv imports."""
    inner = probe_torch(str(venv / "bin" / "python"))
    if "error" in outer or "error" not in inner:
        return inner
    where = Path(outer["file"]).parent.parent
    raise SetupError(
        f"{venv}/bin/python cannot import torch ({inner['error']}), which {sys.executable} imports from {where}; "
        f"build it from a Python whose torch it can import: `rm -rf {venv} && make setup PYTHON=/path/to/python` "
        "(README, 'On a GPU machine')"
    )


def pip_attempts(venv: Path) -> list[list[str]]:
    """`pip install -e .`, without build isolation first when .venv can build offline, else with it."""
    python = str(venv / "bin" / "python")
    base = [python, "-m", "pip", "install", "-e", str(ROOT)]
    here = subprocess.run([python, "-c", _BUILD_PROBE], capture_output=True, text=True)
    if here.stdout.strip() == "True":
        return [[*base, "--no-build-isolation"], base]
    return [base]


def missing_requirement(log_text: str) -> str | None:
    """The requirement pip gave up on, with what asked for it when that is not gpu-repro itself."""
    found = re.findall(r"No matching distribution found for (\S+)", log_text)
    if not found:
        return None
    by = re.findall(rf"satisfies the requirement {re.escape(found[-1])} \(from ([^)=]+)", log_text)
    return f"{found[-1]} (for {by[-1]})" if by and by[-1] != "gpu-repro" else found[-1]


def install(venv: Path) -> str:
    """Runs pip; returns pip's 'Successfully installed ...' list (gpu-repro and what was missing)."""
    log = venv / LOG_NAME
    log.write_text("")
    say(f"installing gpu-repro and its missing dependencies into {venv} (pip's log: {log})")
    attempt = ""
    for cmd in pip_attempts(venv):
        start = len(log.read_text())  # characters, as sliced below (pip's output is not all ASCII)
        with log.open("a") as f:
            f.write(f"$ {' '.join(cmd)}\n")
            f.flush()
            r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, text=True)
        attempt = log.read_text()[start:]
        if r.returncode == 0:
            done = re.findall(r"^Successfully installed (.+)$", attempt, re.M)
            return done[-1] if done else ""
        need = missing_requirement(attempt)
        if need and not need.startswith(("setuptools", "wheel")):
            break  # a runtime dependency is missing: another build mode finds it no better
    need = missing_requirement(attempt)
    if need:
        what = "gpu-repro's build needs" if need.startswith(("setuptools", "wheel")) else "gpu-repro needs"
        raise SetupError(
            f"{what} {need}, which pip could not find: put its wheel in a folder and set PIP_FIND_LINKS=<folder> "
            "(PIP_NO_INDEX=1 offline), or PIP_INDEX_URL=<a mirror> (README, 'Offline, or only a mirror'); "
            f"pip's log: {log}"
        )
    errors = [ln for ln in attempt.splitlines() if ln.startswith("ERROR:")]
    last = errors[-1] if errors else f"exit {r.returncode}"
    raise SetupError(f"pip install -e . failed: {last}; pip's log: {log}")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(f"usage: {sys.executable} tools/setup_venv.py VENV_DIR", file=sys.stderr)
        return 2
    venv = Path(argv[0])
    try:
        outer = probe_torch(sys.executable)
        make_venv(venv)
        check_torch(outer, venv)  # before pip: a .venv without the torch is not worth installing into
        add_pip(venv)
        installed = install(venv)
        if re.search(r"(^|\s)torch-", installed):
            raise SetupError(f"pip installed a torch into {venv} ({installed}); gpu-repro must never pull one")
        inner = check_torch(outer, venv)
    except SetupError as exc:
        say(str(exc))
        return 1
    if installed:
        say(f"installed {installed}")
    if "error" in inner:
        say(
            f"no torch in {sys.executable} ({outer['error']}) nor in {venv}: every repro will record 'skipped'; "
            f"{venv}/bin/repro doctor says what to do"
        )
    else:
        say(f"{venv}/bin/python imports torch {inner['version']} from {Path(inner['file']).parent.parent}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
