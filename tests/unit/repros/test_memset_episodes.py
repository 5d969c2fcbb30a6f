"""graph-memset's twin by episode: per-episode medians in run order and the episodes off the rest."""

from __future__ import annotations

import dataclasses

from helpers import timing_for

from repro.api import VariantResult
from repro.repros._memset_episodes import episode_lines, episode_medians


def _variant(name: str, per_episode_ns: list[float], k: int = 5) -> VariantResult:
    rounds = tuple(ns * 1e-9 for ns in per_episode_ns for _ in range(k))
    timing = dataclasses.replace(timing_for(rounds), rounds=rounds, episode_rounds=k)
    return VariantResult(name=name, label=name, config={}, status="ok", timing=timing)


def _have(**per_episode: list[float]) -> dict[str, VariantResult]:
    return {name: _variant(name, ns) for name, ns in per_episode.items()}


def test_without_episodes_nothing_is_said() -> None:
    rounds = (1e-6,) * 10
    flat = VariantResult(name="twin_memset", label="", config={}, status="ok", timing=timing_for(rounds))
    assert episode_medians(flat) == [] and episode_lines({"twin_memset": flat, "twin_fill": flat}) == []


def test_a_memset_episode_off_the_rest_is_named_with_its_offset() -> None:
    have = _have(
        twin_memset=[910, 912, 830, 915],
        twin_fill=[612, 612, 613, 612],
        twin_seed_memset=[880, 884, 935, 882],
        twin_seed_fill=[615, 614, 618, 616],
    )
    spread, listed = episode_lines(have)
    assert spread.startswith("Twin episode medians (4 episodes): memset 830.0-915.0 ns (10.24% apart)")
    assert listed.startswith("Per episode, in run order (ns): memset 910, 912, 830, 915; fill 612, 612, 613, 612; ")
    assert "memset episode 3 (830 ns, -8.9%)" in listed
    assert "the seed's form's memset episode 3 (935 ns, +5.9%)" in listed
    assert "Only memset nodes moved, both forms in episode 3; the kernel forms measured held" in listed


def test_a_kernel_that_moves_is_named_and_no_memset_only_claim_is_made() -> None:
    have = _have(twin_memset=[910, 912, 830, 915], twin_fill=[612, 612, 700, 612])
    _, listed = episode_lines(have)
    assert "fill episode 3 (700 ns, +14.4%)" in listed and "Only memset nodes moved" not in listed


def test_steady_episodes_say_so() -> None:
    _, listed = episode_lines(_have(twin_memset=[910, 912, 905, 915], twin_fill=[612, 612, 613, 612]))
    assert listed.endswith("No episode is over 2% from its form's median.")


def test_the_torch_graphs_forms_are_listed_where_one_moved_and_both_programs_memset_only_is_said() -> None:
    twin: dict[str, list[float]] = {"twin_memset": [910, 912, 830, 915], "twin_fill": [612, 612, 613, 612]}
    have = _have(**twin, memset=[912, 1575, 918, 908, 900], fill=[1003, 1000, 995, 1001, 998])
    *_, torch = episode_lines(have)
    assert torch.startswith(
        "The torch graph per episode, in run order (ns): memset 912, 1575, 918, 908, 900; zero_() 1003, 1000, 995, "
        "1001, 998; over 2%: memset episode 2 (1575 ns, +72.7%)"
    )
    assert torch.endswith(" Of the forms listed, in both programs only memset nodes moved, in episodes of their own.")
    # The torch graph's zero_() moved too: no memset-only sentence; steady torch forms: no line at all.
    moved = _have(**twin, memset=[912, 1575, 918, 908, 900], fill=[1003, 1300, 995, 1001, 998])
    assert "only memset nodes" not in episode_lines(moved)[-1] and "zero_() episode 2" in episode_lines(moved)[-1]
    steady = _have(**twin, memset=[912, 910, 918, 908, 900], fill=[1003, 1000, 995, 1001, 998])
    assert len(episode_lines(steady)) == 2
