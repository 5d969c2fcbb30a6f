"""Fault suite, bundles and secrets: only the run's own regular files are packed; no secret is written anywhere."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from faults import PLUGINS, kill_marked, start
from helpers import member_bytes

from repro.core import redact

GH = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
OPENAI = "sk-proj-" + "abcDEF123456ghiJKL789012mnoPQR"
SECRETS = {
    "github": GH,
    "github-pat": "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnop",
    "huggingface": "hf_" + "abcdefghijklmnopqrstuvwxyz0123",
    "openai": OPENAI,
    "aws": "AKIA" + "IOSFODNN7EXAMPLE",
    "slack": "xoxb-" + "123456789012-abcdefghijkl",
    "jwt": "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0." + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
}


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_token_shapes_are_redacted_anywhere(kind: str) -> None:
    secret = SECRETS[kind]
    for text in (secret, f"x={secret}", f"--set note={secret} more", f"/out/{secret}/run", f'"{secret}"'):
        assert secret not in redact.scrub_tokens(text)


def test_every_shape_of_every_token_kind_is_found_past_its_marker_check() -> None:
    """scrub_tokens runs a pattern only on text holding one of its literal markers: every form a
    pattern matches must contain one, or the prefilter would let that form through."""
    assert all(markers for _, markers, _ in redact.TOKEN_PATTERNS)  # every pattern has a marker to look for
    forms = [f"gh{c}_" + "A1b2C3d4E5f6G7h8I9j0K1l2" for c in "pousr"]
    forms += [f"xox{c}-" + "123456789012-abcdefghijkl" for c in "baprs"]
    forms += ["ASIA" + "IOSFODNN7EXAMPLE", "sk-" + "abcDEF123456ghiJKL789012", "sk-svcacct-" + "abcDEF123456ghiJKL7890"]
    for token in [*forms, *SECRETS.values()]:
        assert any(p.search(token) for _, _, p in redact.TOKEN_PATTERNS), token  # the form is one a pattern matches
        assert token not in redact.scrub_tokens(f"trace {token} end"), token


def test_url_credentials_are_redacted_whatever_carries_them() -> None:
    for url in ("http://bob:hunter2@proxy.example:3128", "https://x-token:abc123@github.com/o/r.git", "s3://AK:SK@b/k"):
        out = redact.scrub_tokens(f"proxy {url} end")
        assert "hunter2" not in out and "abc123" not in out and ":SK@" not in out
        assert "<redacted>@" in out
    # Ordinary text is left alone: words, hex digests, kernel names, plain URLs.
    for keep in ("task-sk-nothing", "sha 0123456789abcdef" * 3, "https://github.com/pytorch/pytorch/issues/1", "a@b.c"):
        assert redact.scrub_tokens(keep) == keep


def test_line_redactor_catches_a_secret_split_across_reads() -> None:
    lr = redact.LineRedactor(redact.text_redactor(hostname="", home="", secrets=[]))
    half = len(GH) // 2
    out = lr.feed(f"token {GH[:half]}".encode()) + lr.feed(f"{GH[half:]} end\nnext".encode()) + lr.flush()
    assert GH.encode() not in out and b"<redacted>" in out and out.endswith(b"next")


def _run(tmp_path: Path, *args: str) -> tuple[int, str]:
    proc, token = start(list(args))
    _, err = proc.communicate(timeout=300)
    kill_marked(token)
    return proc.returncode, err.decode()


# slow: two CLI runs and a bundle of each, end to end (about 11 s of CPU); the redaction itself is
# checked by the unit tests above in make test.
@pytest.mark.slow
def test_secrets_on_the_command_line_and_in_output_reach_no_file(tmp_path: Path) -> None:
    out = tmp_path / f"out-{GH}"
    # A token in a param, a password in a URL param, a token in the --out path, and a repro printing
    # a Hugging Face token and proxy credentials to stderr before it crashes.
    code, err = _run(
        tmp_path,
        "all",
        "--repro-path",
        str(PLUGINS),
        "--out",
        str(out),
        "--only",
        "test-hostile",
        "--only",
        "test-gap",
        "--budget",
        "0.1",
        "--no-collect-env",
    )
    assert code == 0, err
    code, err = _run(
        tmp_path,
        "run",
        "test-gap",
        "--repro-path",
        str(PLUGINS),
        "--out",
        str(out),
        "--set",
        f"note={OPENAI} http://alice:s3cret@proxy.example:8080",
        "--budget",
        "0.1",
        "--no-collect-env",
    )
    assert code == 0, err
    runs = sorted(p for p in out.iterdir() if p.is_dir())
    for run_dir in runs:
        bundle = tmp_path / f"{run_dir.name}.tar.gz"
        p = subprocess.run([sys.executable, "-m", "repro", "bundle", str(run_dir), "--out", str(bundle)])
        assert p.returncode == 0
    blobs: dict[str, bytes] = {}
    for f in tmp_path.rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            if f.name.endswith(".tar.gz"):
                with tarfile.open(f) as tf:
                    for m in tf.getmembers():
                        inner = member_bytes(tf, m)
                        blobs[f"{f.name}:{m.name}"] = gzip.decompress(inner) if m.name.endswith(".gz") else inner
            elif f.name.endswith(".gz"):
                blobs[str(f)] = gzip.decompress(data)
            else:
                blobs[str(f)] = data
    log = next(k for k in blobs if k.endswith("logs/test-hostile.log") and ":" not in k)
    assert b"injected heading" in blobs[log]  # the log is there, only redacted
    secrets = [*SECRETS.values(), "hunter2", "s3cret"]
    leaks = [(name, s) for name, data in blobs.items() for s in secrets if s.encode() in data]
    assert leaks == []
    (gap,) = [d for d in runs if (d / "test-gap.json").exists() and not (d / "test-hostile.json").exists()]
    doc = json.loads((gap / "test-gap.json").read_text())
    assert "<redacted>" in doc["repro"]["params"]["note"] and "<redacted>" in doc["run"]["rerun"]


# --------------------------------------------------------------------------- bundles


@pytest.fixture(scope="module")
def a_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bundle")
    args = ["all", "--only", "test-fine", "--repro-path", str(PLUGINS), "--out", str(out), "--budget", "0.1"]
    proc, token = start([*args, "--no-collect-env"])
    _, err = proc.communicate(timeout=300)
    kill_marked(token)
    assert proc.returncode == 0, err.decode()
    (run_dir,) = out.iterdir()
    return run_dir


def _bundle(args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "repro", "bundle", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def _names(bundle: Path) -> list[str]:
    with tarfile.open(bundle) as tf:
        assert all(m.isfile() for m in tf.getmembers())
        return [m.name for m in tf.getmembers()]


def test_bundle_packs_only_the_runs_regular_files(a_run: Path, tmp_path: Path) -> None:
    run = tmp_path / a_run.name
    subprocess.run(["cp", "-a", str(a_run), str(run)], check=True)
    (run / "passwd.json").symlink_to("/etc/passwd")  # a link with an artifact-like name
    (run / "x.json").symlink_to("/etc/passwd")
    (run / "logs" / "x.log").symlink_to("/proc/self/environ")
    (run / "traces" / "test-fine" / "evil.trace.json.gz").symlink_to("/etc/shadow")
    (run / "notes.txt").write_text("not something the run wrote")
    assert (run / "logs" / "test-fine.log").is_file()
    (run / "logs" / "test-fine.log").unlink()
    (run / "logs" / "test-fine.log").symlink_to(Path.home() / ".ssh" / "id_rsa")
    with open(run / "huge.json", "wb") as fh:  # sparse, 1 GiB: never packed
        fh.truncate(1 << 30)
    p = _bundle([str(run), "--out", str(tmp_path / "b.tar.gz")])
    assert p.returncode == 0, p.stderr
    names = _names(tmp_path / "b.tar.gz")
    root = run.name
    assert f"{root}/test-fine.json" in names and f"{root}/report.md" in names
    assert not [n for n in names if "passwd" in n or n.endswith(("x.json", "x.log", "evil.trace.json.gz", "notes.txt"))]
    assert f"{root}/logs/test-fine.log" not in names
    assert f"{root}/huge.json" not in names
    with tarfile.open(tmp_path / "b.tar.gz") as tf:
        manifest = json.loads(member_bytes(tf, f"{root}/MANIFEST.json"))
    left_out = {e["name"] for e in manifest["left_out"]}
    assert {"huge.json", "logs/test-fine.log"} <= left_out


def test_bundle_packs_no_hard_linked_file(a_run: Path, tmp_path: Path) -> None:
    # A hard link is a second name of a file that may live anywhere on the filesystem: packing it
    # would carry that file (here, one outside the run folder) off the machine under the run's name.
    run = tmp_path / a_run.name
    subprocess.run(["cp", "-a", str(a_run), str(run)], check=True)
    secret = tmp_path / "private" / "id_rsa"
    secret.parent.mkdir()
    secret.write_text("HARD-LINKED-SECRET\n")
    zipped = tmp_path / "private" / "shadow.gz"
    zipped.write_bytes(gzip.compress(b"HARD-LINKED-SECRET"))
    linked = {
        "stolen.json": secret,
        "report.md": secret,
        "logs/test-fine.log": secret,
        "traces/test-fine/evil.trace.json.gz": zipped,
        "plots/test-fine.x.png": secret,
    }
    for rel, target in linked.items():
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        (run / rel).unlink(missing_ok=True)
        os.link(target, run / rel)
    p = _bundle([str(run), "--out", str(tmp_path / "b.tar.gz")])
    assert p.returncode == 0, p.stderr
    root = run.name
    names = _names(tmp_path / "b.tar.gz")
    assert f"{root}/test-fine.json" in names
    with tarfile.open(tmp_path / "b.tar.gz") as tf:
        for m in tf.getmembers():
            data = member_bytes(tf, m.name)
            assert b"HARD-LINKED-SECRET" not in data and b"HARD-LINKED-SECRET" not in _gunzipped(data), m.name
        manifest = json.loads(member_bytes(tf, f"{root}/MANIFEST.json"))
    left_out = {e["name"]: e["reason"] for e in manifest["left_out"]}
    for rel in linked:
        assert f"{root}/{rel}" not in names
        want = f"a hard link ({linked[rel].stat().st_nlink} names for one file"
        assert left_out[rel].startswith(want), (rel, left_out.get(rel))
    # The run's only artifact hard-linked too: nothing to bundle, said in one line.
    os.link(run / "test-fine.json", tmp_path / "second-name.json")
    p = _bundle([str(run), "--out", str(tmp_path / "c.tar.gz")])
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "no artifact could be packed" in p.stderr


def _gunzipped(data: bytes) -> bytes:
    try:
        return gzip.decompress(data)
    except (OSError, EOFError):
        return b""


def test_bundle_member_names_are_relative_from_dot_and_dotdot(a_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "runs" / a_run.name
    subprocess.run(["mkdir", "-p", str(run.parent)], check=True)
    subprocess.run(["cp", "-a", str(a_run), str(run)], check=True)
    p = _bundle(["."], cwd=run)
    assert p.returncode == 0, p.stderr
    bundle = run.parent / f"{run.name}.bundle.tar.gz"
    assert bundle.is_file() and not list(run.glob("*.tar.gz"))  # beside the run folder, never inside
    names = _names(bundle)
    assert all(n.startswith(f"{run.name}/") and ".." not in n.split("/") for n in names)
    bundle.unlink()
    p = _bundle([".."], cwd=run / "logs")
    assert p.returncode == 0, p.stderr
    assert _names(bundle) == names
    with tarfile.open(bundle) as tf:
        tf.extractall(tmp_path / "x", filter="data")
    assert (tmp_path / "x" / run.name / "test-fine.json").is_file()
    p = _bundle([str(run), "--out", str(run / "inside.tar.gz")])
    assert p.returncode == 2 and "inside the run folder" in p.stderr


def test_bundle_trims_a_huge_log_to_its_tail(a_run: Path, tmp_path: Path) -> None:
    run = tmp_path / a_run.name
    subprocess.run(["cp", "-a", str(a_run), str(run)], check=True)
    with open(run / "logs" / "test-fine.log", "ab") as fh:
        fh.write(b"noise line\n" * 10_000_000)  # ~110 MB
        fh.write(b"THE LAST LINE\n")
    p = _bundle([str(run), "--out", str(tmp_path / "b.tar.gz")])
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "b.tar.gz").stat().st_size < 5_000_000
    with tarfile.open(tmp_path / "b.tar.gz") as tf:
        log = member_bytes(tf, f"{run.name}/logs/test-fine.log")
    assert log.startswith(b"[... repro bundle: the first") and log.endswith(b"THE LAST LINE\n")


@pytest.mark.parametrize("content", [b"not gzip at all", None], ids=["not-gzip", "truncated"])
def test_bad_gzip_trace_is_one_line_exit_2(a_run: Path, tmp_path: Path, content: bytes | None) -> None:
    run = tmp_path / a_run.name
    subprocess.run(["cp", "-a", str(a_run), str(run)], check=True)
    (trace,) = list((run / "traces" / "test-fine").glob("a.trace.json.gz"))
    data = trace.read_bytes()
    trace.unlink()
    trace.write_bytes(content if content is not None else data[: len(data) // 2])
    p = _bundle([str(run), "--out", str(tmp_path / "b.tar.gz")])
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "a.trace.json.gz" in p.stderr
    assert not (tmp_path / "b.tar.gz").exists()


def test_bundle_of_something_else_is_one_line_exit_2(tmp_path: Path) -> None:
    for target in (tmp_path, tmp_path / "missing", Path("/etc/passwd")):
        p = _bundle([str(target), "--out", str(tmp_path / "b.tar.gz")])
        assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
