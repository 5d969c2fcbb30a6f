"""What a repro's ``run`` gets: the ``Context`` it measures through, the ``Arm`` it hands over, and
the sampling rules. The harness's implementation is ``repro.run.context.RunContext``."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from repro.core.results import VariantResult, Work

# A distribution-free 95% CI on the median exists from n = 6; 20 keeps it a few
# order statistics wide, so one outlier cannot end sampling early.
MIN_SAMPLES = 20
# The CI target the sampling floors are set for (SamplingConfig's default).
FLOOR_TARGET = 0.01


@dataclass(frozen=True)
class SamplingConfig:
    """When to stop sampling: CI target reached, time budget spent, or sample cap."""

    target_rel_ci: float = 0.01
    # Seconds per variant. lora's three arms of 25-95 ms steps under a power cap ran out of 15 s (5 s each)
    # with a 2.0-2.2% headline CI in 2 of 7 default H200 runs (speed/run5 all3, speed/run7 all2); a schedule
    # that reaches its target or is decided stops well before its budget, so only such runs take longer.
    budget_s: float = 8.0
    # Warm-up per arm measured alone; a schedule of paired rounds shares it among its arms
    # (repro.run.schedule), each arm getting at least three calls.
    warmup_s: float = 0.2
    min_samples: int = MIN_SAMPLES
    max_samples: int = 2000
    # One profiled pass per arm after sampling: the kernel table and the report's kernel diff
    # need each kernel once per call, not statistics (those come from the timed samples).
    profile_iters: int = 1
    # Paired rounds: a distribution-free 95% CI of a median needs n >= 6 rounds; 20 keep
    # one odd round from deciding anything, and let the CI reflect between-round spread.
    min_rounds: int = 20
    max_rounds: int = 1000
    samples_per_round: int = 3
    # A comparison whose whole CI is on one side of its threshold may stop before the
    # target, once its CI is at most this wide (half-width over value): the verdict can no
    # longer change and the number is good to two digits.
    decided_rel_ci: float = 0.02
    # ... and the CI at this stricter level must already be on one side: the stop rule looks
    # after every episode, and stopping at the first look where a 95% CI happens to clear the
    # threshold would make a false "reproduced" about twice as likely as 2.5% (simulated with
    # the true ratio at the threshold: 5.1% of 700 runs).
    decided_level: float = 0.995
    # Paired rounds come in episodes separated by an idle gap: on the H200 the ratio of two
    # variants followed the GPU's power state, which held for a whole process (1.5 s of
    # rounds) but differed between processes; an idle gap lets the GPU pick its state
    # again, so the episodes sample states the way separate processes would, and the CI
    # (over episodes) covers them. At least min_episodes of at least episode_s each.
    min_episodes: int = 6
    episode_s: float = 0.3
    # tools/gap-experiment.py on an H200 (artifacts/reference/h200/speed/gap) found no shorter gap
    # (0, 0.05, 0.1, 0.2 s) that kept two headlines inside the 0.5 s run's CI at no more than
    # 1.25x its half-width, so the gap stays 0.5 s.
    episode_gap_s: float = 0.5
    # The floors (min_episodes episodes of at least min_rounds / min_episodes rounds and
    # episode_s seconds, the idle gap between them) are set for the default 1% target. The
    # rounds a median's CI needs grow as 1 / target^2, so under a looser target an episode's
    # floor of rounds shrinks by (0.01 / target)^2 (a 2% target: a quarter), never below two
    # rounds: the episode's seconds are judged from the rounds after the first, which carries
    # one-off costs (repro.run.schedule). Its floor of seconds stays: an episode much shorter than
    # the gap spends the schedule idle, and a noisier median per episode then needs more episodes
    # (on a synthetic clock, a 2% target with 0.075 s episodes took twice as long as 1% with 0.3 s
    # ones). So a looser target shortens the episodes of slow arms (a 100 ms step: 4 rounds become
    # 2); the episodes and their gaps stay, and every comparison still sees at least min_episodes
    # power states. A tighter target keeps the default floors.
    # An arm whose sample takes at least this long is timed once per round, with no untimed
    # call before it: at that length what the previous arm left behind (a launch queue, a
    # cache, a clock ramp) is a small share of the sample, and three samples plus a warm-up
    # call of a 100 ms solve cost 0.4 s every round.
    long_sample_s: float = 0.01

    def episode_floor(self, budget_s: float) -> tuple[int, float]:
        """(rounds, seconds) the first episode takes at least, which fixes every episode's rounds.

        The rounds shrink with a CI target looser than the default by ``floor_scale``. ``budget_s`` is
        the whole schedule's budget: an episode never asks for more than its share of it, so the
        floor of ``min_episodes`` episodes fits the budget but for the gaps.
        """
        scale = self.floor_scale()
        rounds = max(2, math.ceil(self.min_rounds * scale / self.min_episodes - 1e-9))
        return rounds, min(self.episode_s, budget_s / self.min_episodes)

    def floor_scale(self) -> float:
        """How much of the default floor of rounds a run's CI target needs: (0.01 / target)^2, at most 1."""
        return min(1.0, (FLOOR_TARGET / self.target_rel_ci) ** 2)


@dataclass(frozen=True)
class Arm:
    """One variant of a paired measurement: what to call and how to describe it.

    ``prepare`` runs untimed before the arm's warm-up, before each of its blocks and
    before profiling: it puts back whatever global state the arm needs (a TF32 flag, the
    preferred linalg library) when arms that need different states are interleaved.
    ``config`` keys are the ones a repro declares in ``Repro.config_keys`` (its plots use them).
    """

    name: str
    fn: Callable[[], Any]
    label: str = ""
    config: Mapping[str, Any] = field(default_factory=dict)
    work: Work | None = None
    graph: bool = False
    calls_per_sample: int | None = None
    before_sample: Callable[[], None] | None = None
    prepare: Callable[[], None] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


# What a monitored run returns (``Context.monitored``).
T = TypeVar("T")


class Context(Protocol):
    """What a repro may use of the harness while it runs: the device, the sampling rules and the
    ways to time calls. Nothing else; the harness keeps the rest to itself."""

    @property
    def device(self) -> str:
        """``"cuda"`` or ``"cpu"``."""

    @property
    def cuda(self) -> bool:
        """Whether the device is a CUDA GPU."""

    @property
    def sampling(self) -> SamplingConfig:
        """The run's sampling rules (a repro may pass a narrowed copy to ``measure_paired``)."""

    @property
    def ceilings(self) -> Mapping[str, Any]:
        """The device's measured ceilings by name (fp32, tf32, bf16, copy): ``{"value": ..., "unit": ...}``."""

    @property
    def log(self) -> Callable[[str], None]:
        """Where a repro reports a slow step it takes besides timing (a build, a download)."""

    def skipped(
        self, name: str, label: str, reason: str, *, extra: Mapping[str, Any] | None = None, **config: Any
    ) -> VariantResult:
        """A variant that could not run here, with the reason (e.g. an optional backend is absent)."""

    def errored(
        self, name: str, label: str, exc: BaseException, *, extra: Mapping[str, Any] | None = None, **config: Any
    ) -> VariantResult:
        """A variant that failed (e.g. ran out of memory) while the repro carries on."""

    def synchronize(self) -> None:
        """Wait for the device's queued work (a no-op on CPU)."""

    def untimed(self, name: str, done: Sequence[VariantResult] = ()) -> str | None:
        """Why this run leaves the arm ``name`` untimed, or None when it times it: a quick run
        times only the arms of headline comparisons (``measure`` and the schedules skip the
        others themselves; a repro that times arms its own way asks here). ``done``: the
        variants the repro has so far; under the ``"first"`` headline rule, once both arms of a
        headline comparison are among them, a quick run leaves the later headlines' arms untimed,
        since none of them can become the headline."""

    def monitored(self, run: Callable[[], T]) -> tuple[T, Mapping[str, Any] | None]:
        """``run()`` (work in a process this run starts, such as a pure CUDA twin) under the GPU
        monitor: its result and the monitor's summary for the variants it timed (None without NVML)."""

    def measure(
        self,
        name: str,
        fn: Callable[[], Any],
        *,
        label: str = "",
        config: Mapping[str, Any] | None = None,
        work: Work | None = None,
        graph: bool = False,
        calls_per_sample: int | None = None,
        before_sample: Callable[[], None] | None = None,
        extra: Mapping[str, Any] | None = None,
        sampling: SamplingConfig | None = None,
    ) -> VariantResult:
        """Time ``fn`` on its own until the CI target or the budget, and capture its kernels."""

    def measure_paired(
        self, arms: Sequence[Arm], *, group: str | None = None, sampling: SamplingConfig | None = None
    ) -> list[VariantResult]:
        """Time ``arms`` in interleaved rounds, so drift hits every arm alike; one result per arm."""

    def measure_groups(
        self, groups: Mapping[str, Sequence[Arm]], *, sampling: SamplingConfig | None = None
    ) -> dict[str, list[VariantResult]]:
        """Time several groups of arms in one schedule of interleaved rounds, sharing its episodes
        and idle gaps; each comparison's two arms must be in one group. Results by group, in the
        order given. An arm whose global state differs from the others' sets it in ``prepare``."""

    def kernel_rounds(
        self,
        fns: Mapping[str, Callable[[], Any]],
        iters: int,
        match: Callable[[str], bool],
        prepare: Mapping[str, Callable[[], None]] | None = None,
        episodes: int = 1,
        pairs: Sequence[tuple[str, str]] = (),
        min_iters: int = 0,
    ) -> dict[str, list[float]]:
        """Per-call device time (seconds) of the kernels whose names ``match``, for each fn, in up
        to ``iters`` interleaved rounds: ``out[name][i]`` is round i's call of ``name``. With
        ``pairs`` ((numerator, denominator) names) the rounds stop at the end of the first episode
        after ``min_iters`` rounds where every pair's paired CI is within the sampling's target."""
