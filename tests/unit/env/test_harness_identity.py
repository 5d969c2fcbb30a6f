"""The harness names itself by a digest of its source; a git commit only when the tree matches it; bundles carry it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import venv
from pathlib import Path

import pytest
from helpers import ROOT

from repro.env import harness


def _copy_package(dest: Path) -> Path:
    """A copy of the package as a wheel would hold it (links resolved), under dest/repro."""
    pkg = dest / "repro"
    shutil.copytree(ROOT / "repro", pkg, symlinks=False, ignore=shutil.ignore_patterns("__pycache__"))
    return pkg


def _git(cwd: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    res = subprocess.run(
        ["git", "-c", "init.defaultBranch=main", *args], cwd=cwd, capture_output=True, text=True, env=env, check=True
    )
    return res.stdout.strip()


def _identity(pythonpath: Path) -> tuple[str | None, str, str]:
    code = (
        "import json; from repro.env import harness as h; "
        "print(json.dumps([str(h.package_root()), *h.git_identity(), h.source_sha256()]))"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(pythonpath)}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=pythonpath)
    assert res.returncode == 0, res.stderr
    where, commit, state, digest = json.loads(res.stdout)
    assert where == str((pythonpath / "repro").resolve())  # the copy, not this checkout
    return commit, state, digest


def test_a_copy_beside_an_unrelated_repository_names_no_commit(tmp_path: Path) -> None:
    repo = tmp_path / "other"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "README").write_text("an unrelated project\n")
    _git(repo, "add", "README")
    _git(repo, "commit", "-qm", "unrelated")
    _copy_package(repo)
    commit, state, digest = _identity(repo)
    assert (commit, state) == (None, "dirty")
    assert digest == harness.source_sha256()


def test_a_stale_git_beside_a_changed_tree_names_no_commit_and_a_matching_one_does(tmp_path: Path) -> None:
    repo = tmp_path / "copy"
    repo.mkdir()
    pkg = _copy_package(repo)
    _git(repo, "init", "-q")
    _git(repo, "add", "repro")
    _git(repo, "commit", "-qm", "the harness")
    head = _git(repo, "rev-parse", "HEAD")
    assert _identity(repo)[:2] == (head, "clean")
    (pkg / "core" / "stats.py").write_text((pkg / "core" / "stats.py").read_text() + "\n# changed after the commit\n")
    commit, state, digest = _identity(repo)
    assert (commit, state) == (None, "dirty")
    assert digest != harness.source_sha256()
    (pkg / "core" / "new_module.py").write_text('"""untracked"""\n')
    _git(repo, "checkout", "-q", "--", "repro/core/stats.py")
    assert _identity(repo)[:2] == (None, "dirty")  # a shipped file HEAD does not track


def test_no_checkout_and_a_declared_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _copy_package(tmp_path)
    assert _identity(tmp_path)[:2] == (None, "not_a_checkout")
    monkeypatch.setenv("GPU_REPRO_GIT_COMMIT", "0123456")
    assert harness.git_identity() == ("0123456", "declared")


def test_the_digest_covers_every_shipped_file_and_nothing_else(tmp_path: Path) -> None:
    pkg = _copy_package(tmp_path)
    before = harness.source_sha256(pkg)
    (pkg / "__pycache__").mkdir(exist_ok=True)
    (pkg / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (pkg / "notes.txt").write_text("not shipped")
    assert harness.source_sha256(pkg) == before
    (pkg / "schemas" / "artifact.schema.json").write_text("{}")
    assert harness.source_sha256(pkg) != before
    names = [rel for rel, _ in harness.package_files(pkg)]
    assert "schemas/artifact.schema.json" in names and "repros/csrc/graph_memset.cu" in names and "py.typed" in names


# slow: it builds a fresh venv with pip and installs the bundle's wheel there (tens of seconds on 2 cores).
@pytest.mark.slow
def test_the_bundle_carries_the_harness_that_ran_and_it_installs_with_the_same_digest(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from repro.cli.main import app

    runner = CliRunner()
    res = runner.invoke(app, ["run", "5090-linear", "--smoke", "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    (run_dir,) = (tmp_path / "out").iterdir()
    doc = json.loads((run_dir / "5090-linear.json").read_text())
    recorded = doc["fingerprint"]["harness"]["source_sha256"]
    assert recorded == harness.source_sha256()
    res = runner.invoke(app, ["bundle", str(run_dir), "--out", str(tmp_path / "b.tar.gz")])
    assert res.exit_code == 0, res.output
    with tarfile.open(tmp_path / "b.tar.gz") as tf:
        manifest = json.loads(tf.extractfile(f"{run_dir.name}/MANIFEST.json").read())  # type: ignore[union-attr]
        wheel_member = f"{run_dir.name}/{manifest['harness']['wheel']}"
        tf.extract(wheel_member, tmp_path / "x", filter="data")
    assert manifest["harness"]["source_sha256"] == recorded
    wheel_path = tmp_path / "x" / wheel_member
    assert wheel_path.name.startswith("gpu_repro-0.1.0+src." + recorded[:12])
    env_dir = tmp_path / "fresh"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--no-index", "--no-deps", str(wheel_path)], check=True, timeout=120
    )
    code = "from repro.env import harness as h; print(h.source_sha256(), *h.git_identity())"
    # Without PYTHONPATH, which may name this checkout: the import must find the installed wheel.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    ran = subprocess.run([str(py), "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, check=True)
    out = ran.stdout.split()
    assert out == [recorded, "None", "not_a_checkout"]
    # The report's re-run line installs the wheel with its plots extra: the wheel must declare it.
    show = "import importlib.metadata as m; print(m.metadata('gpu-repro').get_all('Provides-Extra'))"
    extras = subprocess.run([str(py), "-c", show], capture_output=True, text=True, cwd=tmp_path, env=env, check=True)
    assert "'plots'" in extras.stdout


def test_a_bundle_from_another_harness_says_so_and_carries_none(tmp_path: Path) -> None:
    from repro.evidence import bundle

    run_dir = tmp_path / "20260101T000000Z-abcdef"
    src = next((ROOT / "artifacts" / "reference" / "h200" / "bench" / "all").iterdir())
    run_dir.mkdir()
    shutil.copy(src / "5090-linear.json", run_dir)
    out = bundle.build(run_dir, tmp_path / "b.tar.gz")
    with tarfile.open(out) as tf:
        names = tf.getnames()
        manifest = json.loads(tf.extractfile(f"{run_dir.name}/MANIFEST.json").read())  # type: ignore[union-attr]
    assert not any("/harness/" in n for n in names)
    assert manifest["harness"]["wheel"] is None and "none recorded" in manifest["harness"]["reason"]


class _Dist:
    def __init__(self, site: Path, direct_url: str | None) -> None:
        self.site, self.direct_url = site, direct_url

    def read_text(self, name: str) -> str | None:
        return self.direct_url if name == "direct_url.json" else None

    def locate_file(self, path: str) -> Path:
        return self.site / path


def test_install_mode_reads_each_copy_of_the_metadata(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import importlib.metadata

    from repro.env import harness

    pkg = tmp_path / "venv" / "lib" / "site-packages" / "repro"
    pkg.mkdir(parents=True)
    monkeypatch.setattr(harness, "package_root", lambda: pkg)
    found: list[_Dist] = []
    monkeypatch.setattr(importlib.metadata, "distributions", lambda name: iter(found))
    assert harness.install_mode() == "run from its source tree (not installed)"
    # A build's egg-info in the working folder is no install; a wheel installed into site-packages is.
    found += [_Dist(tmp_path, None), _Dist(pkg.parent, '{"url": "file:///b/gpu_repro-0.1.0-py3-none-any.whl"}')]
    assert harness.install_mode() == "installed from gpu_repro-0.1.0-py3-none-any.whl"
    found[1] = _Dist(pkg.parent, None)  # from an index: no record of where
    assert harness.install_mode() == "installed"
    tree = tmp_path / "src"
    monkeypatch.setattr(harness, "package_root", lambda: tree / "repro")
    editable = '{"url": "file://%s", "dir_info": {"editable": true}}'
    found[:] = [_Dist(pkg.parent, editable % "/elsewhere")]  # another tree's editable install
    assert harness.install_mode() == "run from its source tree (not installed)"
    installed = _Dist(pkg.parent, '{"url": "file:///b/gpu_repro-0.1.0-py3-none-any.whl"}')
    monkeypatch.setenv("PYTHONPATH", str(tree))  # the tree shadows a wheel installed into a venv
    shadowed = f"run from its source tree (not installed), ahead of the copy installed in {pkg.parent.resolve()}"
    found.append(installed)
    assert harness.install_mode() == shadowed + " (PYTHONPATH names its folder)"
    monkeypatch.delenv("PYTHONPATH")
    assert harness.install_mode() == shadowed
    found.pop()
    found.append(_Dist(pkg.parent, editable % tree))
    assert harness.install_mode() == f"editable install of {tree}"
    spaced = tmp_path / "my repo"  # pip writes the URL percent-encoded
    monkeypatch.setattr(harness, "package_root", lambda: spaced / "repro")
    found[:] = [_Dist(pkg.parent, editable % str(spaced).replace(" ", "%20"))]
    assert harness.install_mode() == f"editable install of {spaced}"
