"""What evidence30's cold read found shown wrongly or not at all, answered on that run's own artifacts: the
graph-memset run-order shift's ranges as the band's runs have them, the band that mixes a 2-GPU host with
one-GPU hosts, the seed's torch program beside our pairing of the same ops, what "with this repro module file"
compares, how the re-run's installs were met, and TE "not installed" against "not importable"."""

from __future__ import annotations

import copy
import json
import re
import statistics
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from evidence_run import attached_of, with_catalog_prose

from repro.evidence import artifact, band, model
from repro.evidence.lines import module_state
from repro.evidence.model import Artifact
from repro.evidence.report import report
from repro.evidence.report_parts import bare
from repro.evidence.reruns import install_words
from repro.evidence.seedlines import seed_torch_words
from repro.repros import fused_adam
from repro.repros._memset_episodes import TORCH_ROW_MOVED
from repro.repros._memset_seed import SEED_TORCH_WHY
from repro.repros.graph_memset import GraphMemset
from repro.run import scripts

ROOT = Path(__file__).resolve().parents[3]
RUN = ROOT / "artifacts" / "reference" / "h200" / "evidence30" / "all" / "20261203T023025Z-c0f2bc"
# The harness change that reordered graph-memset (the twin before any torch graph): runs before it, and after.
REORDERED = "20261201T134526Z"


def _doc(rid: str) -> dict[str, Any]:
    return artifact.load(RUN / f"{rid}.json")


def _typed(doc: dict[str, Any]) -> Artifact:
    got = model.of(doc)
    assert isinstance(got, Artifact)
    return got


def _memset_runs() -> list[dict[str, Any]]:
    """graph-memset's band runs on one-GPU hosts (machine folder h200), as the shipped band-runs data has them."""
    runs = json.loads(band.RUNS_FILE.read_text())["runs"]
    return [r for r in runs if r["repro"] == "graph-memset" and r["path"].split("/")[2] == "h200"]


def _span(values: list[float], scale: float, places: int) -> str:
    return f"{min(values) * scale:.{places}f}-{max(values) * scale:.{places}f}"


def test_the_run_order_lines_ranges_are_the_band_runs_own() -> None:
    """Each range the Not-tested lines quote is the band's runs' own, before and after the reorder, and the GPUs
    whose twin fill node reads slow since are counted from them, outside the parentheses a short report drops."""
    said = next(u for u in GraphMemset.untested if u.startswith("why the torch graph's row"))
    apart = next(u for u in GraphMemset.untested if u.startswith("what sets apart"))
    runs = _memset_runs()
    rows = []
    for r in runs:
        arms = {v["name"]: v["median_s"] for v in r["variants"]}
        torch = next(b["ratio"] for b in r["verdict"]["breakdown"] if b["comparison"] == "memset/fill (torch graph)")
        rows.append((r["run_id"] >= REORDERED, arms["fill"], torch, arms["twin_fill"], r["verdict"]["value"]))
    before = [x for x in rows if not x[0]]
    after = [x for x in rows if x[0]]
    assert before and after
    assert {r["gpu"]["name"] for r in runs} == {"NVIDIA H200"}  # "on one-GPU H200 hosts": _memset_runs keeps those
    usual = [x for x in after if x[3] < 0.7e-6]  # all but the GPUs whose twin fill node read slow
    slow = [x for x in after if x[3] >= 0.7e-6]
    assert len({r["gpu"]["uuid"] for r in runs if r["run_id"] >= REORDERED and r["variants"]}) > 2
    expected = [
        f"row read {_span([x[2] for x in before], 1, 2)}x on one-GPU H200 hosts before f90ac86",
        f"{_span([x[2] for x in after], 1, 2)}x since, only its zero_() node moving, "
        f"{_span([x[1] for x in before], 1e6, 2)} then {_span([x[1] for x in after], 1e6, 2)} us",
        f"fill node {_span([x[3] for x in before], 1e6, 2)} then {_span([x[3] for x in usual], 1e6, 2)} us on most",
        f"twin {_span([x[4] for x in before], 1, 2)}x then {_span([x[4] for x in usual], 1, 2)}x",
        # The twin's range since, like the torch row's, holds every GPU: the slow-fill ones said apart.
        f"{_span([x[4] for x in usual], 1, 2)}x, or {_span([x[4] for x in slow], 1, 2)}x on three slow-fill GPUs",
    ]
    for words in expected:
        assert words in said, (words, said)
    # "Only its zero_ fill node moving": the torch graph's memset node kept its range across the change.
    memset = [(r["run_id"] >= REORDERED, {v["name"]: v["median_s"] for v in r["variants"]}.get("memset")) for r in runs]
    old_memset = [m for late, m in memset if not late and m]
    new_memset = [m for late, m in memset if late and m]
    assert old_memset and new_memset and abs(statistics.median(new_memset) / statistics.median(old_memset) - 1) < 0.05
    since = {r["gpu"]["uuid"] for r, x in zip(runs, rows, strict=True) if x[0]}
    under = {r["gpu"]["uuid"] for r, x in zip(runs, rows, strict=True) if x[0] and x[2] < 1.0}
    slow_gpus = {r["gpu"]["uuid"] for r, x in zip(runs, rows, strict=True) if x[0] and x[3] >= 0.7e-6}
    # Every run of each slow-fill GPU since the reorder reads its torch row under 1 (a GPU may read under 1 without).
    slow_runs = [x for r, x in zip(runs, rows, strict=True) if x[0] and r["gpu"]["uuid"] in slow_gpus]
    assert slow_runs and all(x[2] < 1.0 for x in slow_runs) and slow_gpus <= under and len(since) > len(slow_gpus)
    assert len(slow_gpus) == 3 and "on three slow-fill GPUs" in bare(said)
    assert apart.startswith(f"what sets apart {len(slow_gpus)} of the band's one-GPU H200s run since") and since
    slow_words = f"{_span([x[3] for x in slow], 1e6, 2)} us, the twin {_span([x[4] for x in slow], 1, 2)}x"
    assert slow_words in apart and "the torch graph's row under 1" in apart
    # Outside parentheses: the short report's last tier drops a not-covered line's parenthesized details.
    assert slow_words in bare(apart)
    assert "2.30-2.34x" in bare(next(u for u in GraphMemset.untested if "2-GPU" in u))


def test_the_band_says_which_machine_each_gpu_ran_on() -> None:
    """The older graph-memset band mixes a 2-GPU host's two GPUs with four one-GPU hosts: band.txt splits them."""
    old = [b for b in band.load() if b.repro == "graph-memset" and '"twin_work_replays"' not in b.params]
    assert len(old) == 1
    head, *_ = band.show(old)
    two = sorted(p.value for p in old[0].points if band.machines_of(p) == ("h200x2",))
    one = sorted(p.value for p in old[0].points if band.machines_of(p) == ("h200",))
    assert len(two) == 2 and len(one) == 4
    assert f"h200: 4 GPUs, {one[0]:.4g}-{one[-1]:.4g}; h200x2: 2 GPUs, {two[0]:.4g}-{two[-1]:.4g}" in head
    said = next(u for u in GraphMemset.untested if u.startswith("a 2-GPU host"))
    assert f"twin {two[0]:.2f}-{two[-1]:.2f}x" in said and "machine h200x2" in said
    # "its two runs, before it": each 2-GPU run id's time is before f90ac86's, the reorder the item names.
    runs = [r for p in old[0].points if band.machines_of(p) == ("h200x2",) for r in p.runs]
    assert len(runs) == 2 and all(r[:13] < "20261201T1239" for r in runs)
    assert "its two runs, before it" in said and "f90ac86 changed the order at 12:39 UTC" in said
    # The earlier order's torch-graph range the finding quotes (one-GPU hosts) leaves out the 2-GPU host's runs,
    # whose torch rows lie outside it: so the words must name the one-GPU hosts.
    quoted = re.search(r"read (\d\.\d\d)-(\d\.\d\d)x", TORCH_ROW_MOVED)
    assert quoted is not None and "one-GPU H200 hosts" in TORCH_ROW_MOVED
    torch_rows = [
        b["ratio"]
        for r in json.loads(band.RUNS_FILE.read_text())["runs"]
        if r["repro"] == "graph-memset" and r["run_id"] in runs
        for b in r["verdict"]["breakdown"]
        if b["comparison"] == "memset/fill (torch graph)"
    ]
    assert len(torch_rows) == 2 and all(x > float(quoted[2]) for x in torch_rows)


def test_the_seed_torch_program_stands_beside_our_pairing_of_the_same_ops() -> None:
    doc = copy.deepcopy(_doc("graph-memset"))
    seed = doc["extra"]["seed_torch_program"]
    plain = seed_torch_words(seed, _typed(doc))
    assert plain.endswith("one replay each, no CI).")  # a run that named no pairing: the seed's number alone
    seed.update(ours="(memset+mm)/(fill+mm) (torch graph)", why=SEED_TORCH_WHY)
    said = seed_torch_words(seed, _typed(doc))
    assert "memset/zero\\_() 0.98x" in said
    assert "; ours, the same ops paired: (memset+mm)/(fill+mm) (torch graph) 1.04x (95% CI 1.03-1.04)" in said
    assert "; they differ in method: the seed's: each graph's first replay after capture, one per form, host clock" in (
        said
    )
    assert said.endswith("which difference turns the sign is not tested.")
    seed["ours"] = "no such comparison"
    assert seed_torch_words(seed, _typed(doc)) == plain


def test_the_band_cell_says_it_compares_the_repro_module_file_only() -> None:
    docs = [artifact.load(p) for p in artifact.expand([RUN])]
    pasted = report(docs, declared=scripts.declared(docs))
    row = next(ln for ln in pasted.splitlines() if ln.startswith("| 5090-linear |"))
    assert re.search(r"\d+ of \d+ runs with this repro module file\)", row), row
    assert "with this code" not in pasted


def test_the_rerun_says_it_ran_offline_and_what_the_machine_already_had() -> None:
    log = (RUN / "attached" / "rerun.log").read_text()
    again = _typed(artifact.load(RUN / "attached" / "rerun-5090-linear.json"))
    prefix = str(again.machine.host.python_env["prefix"])
    said = install_words(log, prefix)
    assert said == (
        "from a local wheelhouse; torch and cuda-bindings already in `/opt/torch/.venv`, outside the venv; the "
        "harness's own requirements (typer, tabulate, rich, nvidia-ml-py, matplotlib) already outside it too"
    )
    pasted = report(
        [artifact.load(p) for p in artifact.expand([RUN])], limit=sys.maxsize, max_lines=None, **attached_of(RUN)
    )
    assert f"in a fresh venv ({said}; the bundled wheel; this run's harness digest" in pasted
    # Installed into the venv itself, from an index: nothing to say beyond the installs' own log.
    online = (
        "Looking in indexes: https://pypi.org/simple\nCollecting torch==2.11.0\nSuccessfully installed torch-2.11.0\n"
    )
    assert install_words(online, prefix) == ""
    inside = log.replace("/opt/torch/.venv/lib/python3.12", f"{prefix}/lib/python3.12")
    assert install_words(inside, prefix) == "from a local wheelhouse"
    # Online, but with torch already met outside the venv: the install lines did not install it.
    met = online + "Requirement already satisfied: torch==2.11.0 in /opt/x/site-packages\n"
    assert install_words(met, prefix) == (
        "torch already in `/opt/x/site-packages`, outside the venv; so the install lines were not tried against PyPI"
    )
    assert install_words(None, prefix) == ""


def _fake_te(monkeypatch: pytest.MonkeyPatch, optimizers: types.ModuleType) -> None:
    for name in ("transformer_engine", "transformer_engine.pytorch"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "transformer_engine.pytorch.optimizers", optimizers)


def test_te_absent_reads_not_installed_and_te_broken_not_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "transformer_engine", None)  # import finds no such package
    cls, why = fused_adam._te_fused_adam()
    assert cls is None and why is not None
    assert why.startswith("transformer_engine.pytorch is not installed: ModuleNotFoundError: ")
    _fake_te(monkeypatch, types.ModuleType("transformer_engine.pytorch.optimizers"))  # present, no FusedAdam
    cls, broken = fused_adam._te_fused_adam()
    assert cls is None and broken is not None
    assert broken.startswith("transformer_engine.pytorch is not importable: ImportError: cannot import name")
    doc = copy.deepcopy(_doc("fused-adam-capturable"))
    for reason, state in ((why, "not installed"), (broken, "not importable")):
        doc["verdict"]["claim"]["reason"] = f"TE FusedAdam: variant te_capturable was skipped: {reason}"
        for x in doc["verdict"]["not_run"]:
            x["reason"] = doc["verdict"]["claim"]["reason"]
        assert module_state(_typed(doc)) == state
        row = next(ln for ln in report([doc]).splitlines() if ln.startswith("| fused-adam-capturable |"))
        assert f"not run (`transformer_engine` {state})" in row


def test_a_long_not_tested_section_sheds_its_parentheses_before_a_section_is_cut() -> None:
    """This run's numbers with today's untested items and seed pairing: the pasted report keeps every section."""
    from repro.evidence.report_parts import bare

    docs = with_catalog_prose([artifact.load(p) for p in artifact.expand([RUN])])
    for d in docs:
        if d["repro"]["id"] == "graph-memset":
            d["extra"]["seed_torch_program"].update(ours="(memset+mm)/(fill+mm) (torch graph)", why=SEED_TORCH_WHY)
    pasted = report(docs, declared=scripts.declared(docs), **attached_of(RUN))
    full = report(docs, declared=scripts.declared(docs), limit=sys.maxsize, max_lines=None, **attached_of(RUN))
    assert "Report cut at the size limit" not in pasted and len(pasted) <= 20_000
    assert all(f"## `{d['repro']['id']}`" in pasted for d in docs)
    shed = "the parentheses of the Not-tested not-covered and not-recordable lines" in pasted
    for ln in (x for x in full.splitlines() if ", not covered: " in x):
        assert (bare(ln) if shed else ln) in pasted  # each item named; where shed, its details in report-full
    assert bare("a (b (c) d) e zero_() f (g)") == "a e zero_() f"
