"""The re-run band between GPUs of one model: computed from the committed runs, shipped, and read back."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from helpers import ROOT

from repro.evidence import agreement, band


def _doc(uuid: str, value: float, *, paired: bool = True, smoke: bool = False, run: str = "r") -> dict[str, object]:
    return {
        "kind": "gpu-repro.artifact",
        "repro": {"id": "x", "params": {"n": 1}},
        "run": {"run_id": run, "smoke": smoke},
        "verdict": {"status": "reproduced", "value": value, "paired": paired},
        "fingerprint": {"gpu": {"name": "NVIDIA H200", "uuid": uuid}},
    }


def test_the_shipped_band_is_what_the_committed_runs_give(tmp_path: Path) -> None:
    shipped = json.loads(band.DATA_FILE.read_text())
    found = list(band._walk([ROOT / "artifacts" / "reference"]))
    paths = {f"{d['run']['run_id']}/{d['repro']['id']}": str(p.relative_to(ROOT)) for p, d in found}
    bands = band.compute((d for _, d in found), paths=paths)
    again = json.loads(band.to_json(bands, shipped["sources"]))
    assert again == shipped, "run: python -m repro.evidence.band artifacts/reference"
    # The compact copy of every run behind the bands, as the bundle ships it.
    runs = band.runs_json(bands, {str(p.relative_to(ROOT)): d for p, d in found})
    assert runs == band.RUNS_FILE.read_text(), "run: python -m repro.evidence.band artifacts/reference"
    copied = {r["path"]: r for r in json.loads(runs)["runs"]}
    assert {path for b in bands for p in b.points for path in p.run_paths} == set(copied)
    for path, r in copied.items():
        doc = json.loads((ROOT / path).read_text())
        assert (
            r["verdict"]["value"] == doc["verdict"]["value"] and r["gpu"]["uuid"] == doc["fingerprint"]["gpu"]["uuid"]
        )
        assert [v["rounds"] for v in r["variants"]] == [(v.get("timing") or {}).get("rounds") for v in doc["variants"]]
    # Each run's per-round ratios, where recorded, give its headline; its path names its artifact.
    for b in band.load():
        for p in b.points:
            for value, rounds, path in zip(p.run_values, p.run_rounds, p.run_paths, strict=True):
                assert (ROOT / path).is_file()
                assert not rounds or abs(statistics.median(rounds) / value - 1) < 1e-9
    solves = [b for b in band.load() if b.repro == "solve-512-cliff"]
    assert max(len(b.points) for b in solves) >= 3
    for solve in solves:
        assert len({p.uuid for p in solve.points}) == len(solve.points)
        assert all(p.runs for p in solve.points)  # provenance: the run ids behind each GPU's value


def test_one_gpu_is_no_band_and_runs_on_one_gpu_give_one_point() -> None:
    assert band.compute([_doc("a", 1.0), _doc("a", 1.2)]) == []
    (b,) = band.compute([_doc("a", 1.0), _doc("a", 1.2, run="s"), _doc("b", 1.3)])
    assert [(p.uuid, p.value) for p in b.points] == [("a", 1.1), ("b", 1.3)]
    # Each run's own headline is kept beside its id, so a GPU's median can be checked.
    assert [(p.runs, p.run_values) for p in b.points] == [(("r", "s"), (1.0, 1.2)), (("r",), (1.3,))]
    assert "GPU a: 1.1 (runs r=1, s=1.2;" in "\n".join(band.show([b]))
    old = band.Band(b.repro, b.gpu, b.params, tuple(band.Point(p.uuid, p.value, p.runs) for p in b.points))
    assert "GPU a: 1.1 (runs r, s;" in "\n".join(band.show([old]))  # data from before run values
    assert abs(b.center - 1.2) < 1e-12 and abs(b.half_width - 0.1 / 1.2) < 1e-12


def test_smoke_unpaired_and_unmeasured_runs_stay_out() -> None:
    skipped = _doc("c", 5.0)
    skipped["verdict"] = {"status": "skipped", "value": None, "paired": True}
    docs = [_doc("a", 1.0), _doc("b", 1.0), _doc("c", 9.0, smoke=True), _doc("d", 9.0, paired=False), skipped]
    (b,) = band.compute(docs)
    assert {p.uuid for p in b.points} == {"a", "b"}


def test_a_fleet_adds_its_gpus_to_the_shipped_points() -> None:
    base = band.compute([_doc("a", 1.0), _doc("b", 1.02)])
    (b,) = band.compute([_doc("c", 1.1), _doc("b", 1.04)], base=base)
    assert [(p.uuid, p.value) for p in b.points] == [("a", 1.0), ("b", 1.04), ("c", 1.1)]


def test_agreement_uses_the_band_and_says_when_there_is_none() -> None:
    (b,) = band.compute([_doc("a", 1.0), _doc("b", 1.02)])
    assert agreement.agree(1.0, 1.01, b) == "consistent"
    assert agreement.agree(1.0, 1.2, b) == "differs beyond the band"
    assert agreement.agree(1.0, 1.2, None) == "no cross-GPU data"
    assert band.lookup(_doc("z", 1.0), [b]) is b


def test_a_band_with_other_params_is_named_with_the_params_that_differ() -> None:
    (b,) = band.compute([_doc("a", 1.0), _doc("b", 1.02)])
    other = _doc("z", 1.0)
    other["repro"] = {"id": "x", "params": {"n": 2, "m": 3}}
    assert band.lookup(other, [b]) is None
    assert band.other_params(other, [b]) == ["m", "n"]
    assert band.other_params(_doc("z", 1.0), [b]) == []  # the same params: the band itself applies


def test_an_inconclusive_run_with_a_headline_still_gets_its_band_line() -> None:
    from repro.evidence import model
    from repro.evidence.lines import band_line

    (b,) = band.compute([_doc("a", 1.0), _doc("b", 1.02)])
    doc = _doc("z", 1.01)
    doc["verdict"] = {"status": "inconclusive", "value": 1.01, "paired": True}
    line = band_line(model.run_of(doc), [b])
    assert line is not None and "2 NVIDIA H200 GPUs read 1.000-1.020" in line and "consistent" in line
    doc["verdict"] = {"status": "skipped", "value": None, "paired": True}
    assert band_line(model.run_of(doc), [b]) is None


def test_different_headline_comparisons_never_pool() -> None:
    te = [_doc("a", 1.9), _doc("b", 1.95)]
    torch = [_doc("c", 1.0), _doc("d", 1.01)]
    for d in te:
        d["verdict"]["headline"] = "te"  # type: ignore[index]
    for d in torch:
        d["verdict"]["headline"] = "torch_fused"  # type: ignore[index]
    bands = band.compute(te + torch)
    assert sorted((b.headline, len(b.points)) for b in bands) == [("te", 2), ("torch_fused", 2)]
    assert band.lookup(torch[0], bands) is next(b for b in bands if b.headline == "torch_fused")


def test_each_point_says_which_torch_driver_and_harness_ran_it() -> None:
    a, b = _doc("a", 1.0), _doc("b", 1.02)
    for d, uuid, sha in ((a, "a", "1" * 64), (b, "b", "2" * 64)):
        d["fingerprint"] = {
            "gpu": {"name": "NVIDIA H200", "uuid": uuid, "nvml": {"driver_version": "580.1"}},
            "software": {"torch": {"version": "2.11.0+cu130"}},
            "harness": {"source_sha256": sha},
        }
    (got,) = band.compute([a, b])
    assert [p.harness for p in got.points] == [("1" * 12,), ("2" * 12,)]
    assert band.versions(got) == ("1" * 12, "2" * 12)
    again = band.load_text(band.to_json([got], ["x"]))
    assert again == [got]
    shown = "\n".join(band.show([got]))
    assert f"harness {'1' * 12}" in shown and "headline comparison" in shown


def test_a_band_narrower_than_the_runs_ci_is_widened_to_it() -> None:
    (b,) = band.compute([_doc("a", 1.0000), _doc("b", 1.0002)])
    assert agreement.agree(1.0001, 1.003, b) == "differs beyond the band"
    # Two runs differ by up to the band's width (0.02%) and each run's own CI (0.2% each): 0.3% < 0.42%.
    assert agreement.agree(1.0001, 1.003, b, floor=0.002) == "consistent"


def test_a_suspect_run_is_never_called_consistent_without_saying_it_is_suspect() -> None:
    from repro.evidence import model
    from repro.evidence.lines import band_line

    (b,) = band.compute([_doc("a", 1.0), _doc("b", 1.02)])
    doc = _doc("z", 1.01)
    plain = band_line(model.run_of(doc), [b])
    assert plain is not None and plain.endswith("within the band's range (-0.99%/+0.99% of 1.010): consistent.")
    doc["validity"] = {"flag": "suspect", "reasons": ["bs2: power cap, SM clock 1335-1980 MHz"]}
    line = band_line(model.run_of(doc), [b])
    assert line is not None
    assert line.endswith("(-0.99%/+0.99% of 1.010): consistent, but this run is suspect.")


def test_each_run_keeps_its_validity_flag_and_repro_source() -> None:
    a, b, c = _doc("a", 1.0, run="r1"), _doc("b", 1.02, run="r2"), _doc("b", 1.01, run="r3")
    for d, flag, src in ((a, "suspect", "a" * 64), (b, "valid", "b" * 64), (c, "suspect", "a" * 64)):
        d["validity"] = {"flag": flag, "reasons": []}
        d["repro"] = {**d["repro"], "source_sha256": src}  # type: ignore[dict-item]
    (got,) = band.compute([a, b, c])
    assert [p.run_flags for p in got.points] == [("suspect",), ("valid", "suspect")]
    assert got.suspect == (2, 3) and got.same_source("a" * 64) == (2, 3) and got.same_source("c" * 64) == (0, 3)
    assert band.load_text(band.to_json([got], ["x"])) == [got]
    old = band.load_text(band.to_json([got], ["x"]).replace('"run_flags"', '"x_flags"'))
    assert old[0].suspect == (0, 0)  # data written before the flags were kept: none known, none said


def test_without_drops_the_named_runs_and_takes_each_gpus_median_again() -> None:
    def point(uuid: str, runs: tuple[str, ...], values: tuple[float, ...]) -> band.Point:
        return band.Point(
            uuid,
            statistics.median(values),
            runs,
            run_values=values,
            run_flags=("valid",) * len(runs),
            run_sources=("s",) * len(runs),
        )

    b = band.Band(
        "r",
        "G",
        "{}",
        (point("a", ("x", "y", "z"), (1.0, 2.0, 6.0)), point("b", ("w",), (3.0,)), point("c", ("v",), (4.0,))),
    )
    # A GPU keeps the median of its other runs, with each per-run record cut to match.
    got = band.without([b], ["z"])[0]
    a = got.points[0]
    assert (a.value, a.runs, a.run_values, a.run_flags) == (1.5, ("x", "y"), (1.0, 2.0), ("valid", "valid"))
    assert got.points[1:] == b.points[1:]
    # A GPU left with no run goes; a band left with fewer than MIN_GPUS goes too.
    assert [p.uuid for p in band.without([b], ["w"])[0].points] == ["a", "c"]
    assert band.without([b], ["w", "v"]) == []
    assert band.without([b], []) == [b]


def test_a_committed_run_bundled_again_ships_the_band_without_itself(tmp_path: Path) -> None:
    """evidence53's runs are in the shipped band; its bundle (and report) leave them and its attached runs out."""
    import shutil
    import tarfile

    from repro.evidence import artifact, bundle

    src = next((ROOT / "artifacts" / "reference" / "h200" / "evidence53" / "all").iterdir())
    run = tmp_path / src.name
    shutil.copytree(src, run, ignore=shutil.ignore_patterns("traces"))
    ours = {artifact.load(p)["run"]["run_id"] for p in artifact.expand([run])}
    ours |= {json.loads(p.read_text())["run"]["run_id"] for p in (run / "attached").glob("*-*.json")}
    shipped = {r for b in band.load() for p in b.points for r in p.runs}
    assert ours & shipped  # committed: the shipped band holds this run
    with tarfile.open(bundle.build(run, tmp_path / "b.tar.gz")) as tf:
        data = json.loads(tf.extractfile(f"{src.name}/band.json").read())  # type: ignore[union-attr]
        said = tf.extractfile(f"{src.name}/band.txt").read().decode()  # type: ignore[union-attr]
        copies = json.loads(tf.extractfile(f"{src.name}/band-runs.json").read())  # type: ignore[union-attr]
    packed = {r for b in data["bands"] for p in b["points"] for r in p["runs"]}
    assert packed and not ours & packed
    # The compact copies of the band's runs leave out the same runs.
    assert {r["run_id"] for r in copies["runs"]} == packed
    # Its GPU ran earlier runs (speed/run10, the same session) that stay in.
    assert "This run's GPU: 7e5317ee (among them)." in said
