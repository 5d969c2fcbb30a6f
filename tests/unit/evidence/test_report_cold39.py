"""evidence39's cold read: solve's matrices named beside the seed's; evidence40's: the re-run's install words
(evidence39's other answers are pinned where their words are made: test_report_cold30.py, the twin's range with
every GPU; test_repro_linear.py, the seed's block run in this process; test_repro_lora.py, the bridge to the timed
medians' ratio)."""

from __future__ import annotations

import inspect

import pytest

from repro.repros import _solve_seed, solve_cliff
from repro.repros.solve_cliff import Solve512Cliff


def test_solve_says_its_matrices_differ_from_the_seeds() -> None:
    said = Solve512Cliff.seed_experiment
    assert "float32 randn batch of 64" in said and "Ours: randn + n*I (no row swaps)" in said
    # As the code builds them: ours diagonally shifted, the seed's snippet plain randn.
    ours = inspect.getsource(solve_cliff)
    assert "torch.randn(batch, n, n, device=dev, generator=gen) + n * torch.eye(n, device=dev)" in ours
    seed = inspect.getsource(_solve_seed.seed_snippet)
    assert 'a = torch.randn(batch, n, n, device="cuda")\n' in seed and "eye" not in seed


def test_randn_plus_n_identity_pivots_no_rows_and_randn_does() -> None:
    torch = pytest.importorskip("torch")
    gen = torch.Generator().manual_seed(0)
    for n in (511, 512):
        a = torch.randn(2, n, n, generator=gen)
        identity = torch.arange(1, n + 1, dtype=torch.int32).expand(2, n)
        _, pivots = torch.linalg.lu_factor(a + n * torch.eye(n))
        assert torch.equal(pivots, identity)  # column diagonally dominant: partial pivoting swaps nothing
        _, pivots = torch.linalg.lu_factor(a)
        assert not torch.equal(pivots, identity)


def test_the_rerun_names_the_harness_requirements_met_outside_its_venv() -> None:
    from repro.evidence.reruns import install_words

    line = (
        "Requirement already satisfied: typer>=0.12 in {}/lib/python3.12/site-packages (from gpu-repro==0.1.0) (0.27)\n"
    )
    log = "Looking in links: /w\n" + line.format("/opt/torch/.venv")
    assert install_words(log, "/tmp/v").endswith("the harness's own requirements (typer) already outside it too")
    assert "own requirements" not in install_words("Looking in links: /w\n" + line.format("/tmp/v"), "/tmp/v")
