"""evidence44's cold read: a run with no script output says in its bundle line that its scripts were not run; the
band's version count names the GPUs whose runs recorded no digest; gpu-final.sh's attached README names only what
the run has, and the tree as found (a checkout with .git, or the archive)."""

from __future__ import annotations

import shutil
from pathlib import Path

from evidence_run import pasted, typed
from helpers import ROOT

from repro.evidence import band, lines

RUN = ROOT / "artifacts" / "reference" / "h200" / "evidence44" / "all" / "20261203T234336Z-104ee6"
WITH_SCRIPTS = ROOT / "artifacts" / "reference" / "h200" / "evidence43" / "all" / "20261203T215407Z-bda9ea"


def test_a_run_without_script_output_says_its_scripts_were_not_run(tmp_path: Path) -> None:
    # In the head's bundle line, which no size tier cuts.
    said = pasted(RUN)
    assert "Report cut" not in said and len(said) <= 20_000
    assert "standalone scripts (`scripts/<id>`; none run with this run)" in said
    assert "none run with this run" not in pasted(WITH_SCRIPTS)  # its scripts' output is attached
    # The same run with its script output taken away says it too.
    run = tmp_path / WITH_SCRIPTS.name
    shutil.copytree(WITH_SCRIPTS, run)
    for p in (run / "attached").glob("script-*.out"):
        p.unlink()
    assert "none run with this run" in pasted(run)


def test_the_version_count_names_the_gpus_whose_runs_recorded_no_digest() -> None:
    doc = typed(RUN, "5090-linear")
    b = band.lookup(doc, band.load())
    assert b is not None
    bare = sum(not p.harness for p in b.points)
    assert bare > 0  # the H200 runs from before the digest was recorded
    said = lines.band_line(doc, band.load()) or ""
    assert f"{len(band.versions(b))} harness versions and the runs of {bare} GPUs that recorded none;" in said
    memset = lines.band_line(typed(RUN, "graph-memset"), band.load()) or ""
    assert "recorded none" not in memset  # every run behind its band recorded a digest


def test_gpu_finals_readme_names_only_what_the_run_has_and_the_tree_as_found() -> None:
    tool = (ROOT / "tools" / "gpu-final.sh").read_text()
    assert "seeds_raw.json, steps.txt" not in tool  # named only where the seeds' raw scripts ran
    assert '[ -f "$out/seeds_raw.json" ] && later="$later, seeds_raw.json"' in tool
    checkout = tool.index('if [ -e "$tree/.git" ]; then')
    assert checkout < tool.index("the source tree was a git archive of gpu-repro commit")
    assert "the source tree was a git checkout" in tool[checkout:]
