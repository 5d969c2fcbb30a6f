"""The H200 run an outside maintainer read cold (artifacts/reference/h200/evidence3, their list in
cold-reader-questions.md): what each repro names as untested, the cuda-bindings pin, and the install
block's words (where to run it, the plots extra, a module the seed's subject lacked)."""

from __future__ import annotations

import copy
import importlib.metadata
from typing import Any

import pytest
from evidence_run import by_id, section
from helpers import ROOT

from repro.core.errors import UsageError
from repro.core.spec import check_declarations
from repro.evidence import artifact
from repro.evidence.lines import PLOTS_EXTRA, install_block, missing_module
from repro.evidence.model import of, run_of
from repro.evidence.report import PASTE_LIMIT, PASTE_LINES, report
from repro.repros import graph_memset
from repro.repros.solve_cliff import Solve512Cliff
from repro.run import catalog, scripts
from repro.run.execute import story

RUN = ROOT / "artifacts" / "reference" / "h200" / "evidence3" / "all" / "20261201T162744Z-bc9a25"
WHEEL = "./20261201T162744Z-bc9a25/harness/gpu_repro-0.1.0+src.2852770b9739-py3-none-any.whl"


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return [artifact.load(p) for p in artifact.expand([RUN])]


def scope(text: str) -> str:
    return text.split("## Not tested here", 1)[1].split("\n\n**Re-run**", 1)[0]


def test_each_repro_names_what_its_module_says_matters_and_this_run_did_not_cover() -> None:
    said = {rid: " ".join(cls.untested) for rid, cls in catalog.load().items()}
    assert "PyTorch 2.13 or later" in said["solve-512-cliff"] and "without MAGMA" in said["solve-512-cliff"]
    assert "other drivers" in said["graph-memset"] and "GPUs (Ada, Blackwell, H100, A100)" in said["graph-memset"]
    flux = "the real FLUX pipeline (diffusers/peft or the article's trainer) on a 32 GB card"
    assert flux in said["lora-batch-scaling"]
    assert "other cuBLAS versions" in said["5090-linear"]
    assert said["fused-adam-capturable"] == (
        "the GB300's Grace (aarch64) host and the TE version the issue used (the seed document names none; the issue's "
        "text was not read here) apex's FusedAdam(capturable=True), of the same multi-tensor kernel lineage (apex is "
        "not installed) whether TE #3777 is open or fixed"
    )


def test_untested_is_recorded_in_the_artifact_and_fits_the_schema(docs: list[dict[str, Any]]) -> None:
    doc = by_id(docs, "solve-512-cliff")
    recorded = story(Solve512Cliff, Solve512Cliff.Params())["untested"]
    assert recorded == list(Solve512Cliff.untested)
    doc["repro"]["untested"] = recorded
    assert artifact.validation_errors(doc) == []
    assert of(doc).repro.untested == Solve512Cliff.untested and "untested" in of(doc).repro.recorded


def test_not_tested_here_lists_them_from_the_artifact_else_the_catalog(docs: list[dict[str, Any]]) -> None:
    # The committed run predates repro.untested: the catalog's declarations fill in.
    rendered = report(docs, declared=scripts.declared(docs))
    lines = scope(rendered)
    assert "- solve-512-cliff, not covered: the headline on the seed's plain randn matrices" in lines
    assert "- graph-memset, not covered: why the torch graph's row read 1.29-1.35x" in lines  # most telling first
    assert "- lora-batch-scaling, not covered: the real FLUX pipeline" in lines
    assert "- fused-adam-capturable, not covered: the GB300's Grace (aarch64) host and the TE version" in lines
    assert len(rendered) <= PASTE_LIMIT and rendered.count("\n") + 1 <= PASTE_LINES
    # The artifact's own list comes first, an empty one included; without either, nothing is said.
    doc = by_id(docs, "solve-512-cliff")
    doc["repro"]["untested"] = ["a build with the cutoff at 1024"]
    own = scope(report([doc], declared=scripts.declared([doc])))
    assert "- solve-512-cliff, not covered: a build with the cutoff at 1024." in own and "2.13" not in own
    doc["repro"]["untested"] = []
    assert "not covered" not in scope(report([doc], declared=scripts.declared([doc])))
    assert "not covered" not in scope(report([by_id(docs, "solve-512-cliff")]))


def test_a_repro_that_declares_untested_as_a_string_is_refused() -> None:
    bad = type("Bad", (Solve512Cliff,), {"untested": "PyTorch 2.13"})
    with pytest.raises(UsageError, match=r"untested 'PyTorch 2.13'; expected a tuple of non-empty strings"):
        check_declarations(bad)


def test_graph_memset_records_the_cuda_bindings_version(monkeypatch: pytest.MonkeyPatch) -> None:
    def version(name: str) -> str:
        if name != "cuda-bindings":
            raise AssertionError(name)
        return "13.0.3"

    monkeypatch.setattr(importlib.metadata, "version", version)
    assert graph_memset.cuda_bindings_version() == "13.0.3"

    def absent(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", absent)
    assert graph_memset.cuda_bindings_version() is None


def test_the_install_block_pins_the_cuda_bindings_that_ran(docs: list[dict[str, Any]]) -> None:
    doc = by_id(docs, "graph-memset")
    assert "pip install 'cuda-bindings==13.*'" in str(install_block([run_of(doc)]))  # not recorded: the major
    doc["extra"]["cuda_bindings"] = "13.0.3"
    assert "\npip install cuda-bindings==13.0.3\n" in str(install_block([run_of(doc)]))
    doc["extra"]["cuda_bindings"] = "13.0.3; rm -rf /"  # the extra block is open: only a version is pinned
    assert "pip install 'cuda-bindings==13.*'" in str(install_block([run_of(doc)]))


def test_the_install_block_says_where_to_run_it_and_how_to_draw_the_plots(docs: list[dict[str, Any]]) -> None:
    block = str(install_block([run_of(d) for d in docs]))
    assert block.startswith("**Re-run**, from the folder holding the unpacked `20261201T162744Z-bc9a25/`: ")
    assert "in the folder the bundle unpacks to" not in block and f"\npip install '{WHEEL}[plots]'\n" in block
    assert "The `plots` extra: matplotlib, for `repro report`'s plots." in block
    assert f'\n{PLOTS_EXTRA} = ["matplotlib' in (ROOT / "pyproject.toml").read_text()  # the wheel's extra


def test_a_repro_whose_seed_subject_lacked_a_module_says_the_rerun_needs_it(docs: list[dict[str, Any]]) -> None:
    rendered = report(docs, declared=scripts.declared(docs))
    adam = section(rendered, "fused-adam-capturable").split("<details>", 1)[0]
    needs = "- To test the seed's claim, the re-run needs `transformer_engine` installed.\n```bash\nrepro run fused"
    assert needs in adam
    assert rendered.count("the re-run needs") == 1  # the other repros' subjects ran (or need a GPU, not a module)
    doc = by_id(docs, "fused-adam-capturable")
    assert missing_module(run_of(doc)) == "transformer_engine"
    tested = copy.deepcopy(doc)
    tested["verdict"]["claim"] = {"tested": True, "reason": None}
    assert missing_module(run_of(tested)) is None
    skipped = copy.deepcopy(doc)
    del skipped["verdict"]["claim"]
    skipped["verdict"]["status"] = "skipped"
    skipped["verdict"]["finding"] = "Not measured: cuda.bindings is not importable"
    assert missing_module(run_of(skipped)) == "cuda"
