"""The GPU monitor's per-arm readings: polls taken after an arm's block are that arm's, in the
monitor's summary and in the variants a paired schedule returns (fake NVML, synthetic clock)."""

from __future__ import annotations

from typing import Any

from repro.core.context import Arm, SamplingConfig
from repro.core.results import Comparison
from repro.env.nvml import Monitor
from repro.run.context import RunContext


class FakeNvml:
    """The NVML calls the monitor makes, reading from ``state``: the SM clock, power (mW) and the
    clocks-event mask of whatever arm last ran."""

    NVML_CLOCK_SM = 0
    NVML_CLOCK_MEM = 1

    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state

    def nvmlDeviceGetClockInfo(self, h: Any, kind: int) -> int:  # noqa: N802 (NVML's name)
        return int(self.state["clock"]) if kind == self.NVML_CLOCK_SM else 3201

    def nvmlDeviceGetPowerUsage(self, h: Any) -> int:  # noqa: N802
        return int(self.state["power_mw"])

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: Any) -> int:  # noqa: N802
        return int(self.state["mask"])


def test_summary_of_an_arm_keeps_only_the_polls_after_its_blocks() -> None:
    state: dict[str, Any] = {"clock": 1980, "power_mw": 300_000, "mask": 0}
    mon = Monitor(FakeNvml(state), None, own_pid=1, period_s=None)
    with mon:
        for clock, watts, mask, arm in [
            (1980, 400, 0, "bs1"),
            (1900, 420, 0, "bs1"),
            (1400, 690, 0x4, "bs2"),
            (1500, 680, 0x4, "bs2"),
            (1600, 670, 0x4, "bs2"),
        ]:
            state.update(clock=clock, power_mw=watts * 1000, mask=mask)
            mon.poll(arm)
        state.update(clock=1300, mask=0x4)  # the after-snapshot: it belongs to no arm
    bs1, bs2, whole = mon.summary("bs1"), mon.summary("bs2"), mon.summary()
    assert (bs1["polls"], bs1["sm_clock_min_mhz"], bs1["sm_clock_max_mhz"]) == (2, 1900, 1980)
    assert bs1["sm_clock_during_mhz"] == 1980 and bs1["power_during_w"] == 420.0 and bs1["power_max_w"] == 420.0
    assert bs1["throttled"] == [] and bs1["arm"] == "bs1"
    assert (bs2["polls"], bs2["sm_clock_min_mhz"], bs2["sm_clock_max_mhz"]) == (3, 1400, 1600)
    assert bs2["sm_clock_during_mhz"] == 1500 and bs2["power_during_w"] == 680.0 and bs2["power_max_w"] == 690.0
    assert bs2["throttled"] == ["sw_power_cap"]
    # The whole span still includes the ends (the after-snapshot's 1300 MHz).
    assert whole["polls"] == 5 and whole["sm_clock_min_mhz"] == 1300 and "arm" not in whole


def test_an_arm_without_polls_falls_back_to_the_span_ends() -> None:
    state: dict[str, Any] = {"clock": 1700, "power_mw": 500_000, "mask": 0}
    mon = Monitor(FakeNvml(state), None, own_pid=1, period_s=None)
    with mon:
        mon.poll("other")
    alone = mon.summary("never")
    assert alone["polls"] == 0 and alone["sm_clock_min_mhz"] == 1700 and alone["power_during_w"] is None


class _Clocked(RunContext):
    """A "CUDA" context whose arm X costs ``cost[X]`` seconds and leaves the GPU at ``clock[X]`` MHz."""

    cost: dict[str, float]
    mhz: dict[str, int]
    state: dict[str, Any]

    def synchronize(self) -> None:
        pass

    def _monitor(self, period_s: float | None = 0.05) -> Any:
        return Monitor(FakeNvml(self.state), None, own_pid=1, period_s=None)

    def _setup_arm(self, arm: Arm, cfg: SamplingConfig) -> tuple[Any, Any, int, int]:
        def take() -> float:
            self.state.update(clock=self.mhz[arm.name], power_mw=600_000, mask=0x4 * (self.mhz[arm.name] < 1800))
            return self.cost[arm.name]

        return (lambda: None), take, 1, 3


def test_paired_rounds_give_each_variant_its_own_monitor(monkeypatch: Any) -> None:
    from repro.run import schedule

    monkeypatch.setattr(schedule, "_profile_all", lambda ctx, arms, cfg, name: {a.arm.name: ([], 0, 0.0) for a in arms})
    ctx = _Clocked(device="cuda", smoke=False, sampling=SamplingConfig(), sleep=lambda s: None)
    ctx.cost, ctx.mhz = {"bs1": 0.01, "bs2": 0.02}, {"bs1": 1980, "bs2": 1400}
    ctx.state = {"clock": 1980, "power_mw": 300_000, "mask": 0}
    ctx.comparisons = (Comparison("bs2/bs1", "bs2", "bs1", 1.3, scale=0.5),)
    out = ctx.measure_paired([Arm("bs1", lambda: None), Arm("bs2", lambda: None)], group="batches")
    by = {v.name: v.gpu_monitor for v in out}
    one, two = by["bs1"], by["bs2"]
    assert one is not None and two is not None
    rounds = len(out[0].timing.rounds or ()) if out[0].timing else 0
    assert one["polls"] == two["polls"] == rounds > 0  # one poll after each arm's block of a round
    assert (one["sm_clock_min_mhz"], one["sm_clock_max_mhz"], one["throttled"]) == (1980, 1980, [])
    assert (two["sm_clock_min_mhz"], two["sm_clock_max_mhz"], two["throttled"]) == (1400, 1400, ["sw_power_cap"])


def test_the_summary_keeps_every_poll_with_its_time_clock_power_and_reasons() -> None:
    state: dict[str, Any] = {"clock": 1980, "power_mw": 300_000, "mask": 0}
    mon = Monitor(FakeNvml(state), None, own_pid=1, period_s=None)
    with mon:
        for clock, watts, mask, arm in [(1980, 400, 0, "bs1"), (1400, 690, 0x4, "bs2"), (1500, 680, 0x4, "bs2")]:
            state.update(clock=clock, power_mw=watts * 1000, mask=mask)
            mon.poll(arm)
    series = mon.summary("bs2")["series"]
    # Each of the arm's polls in order: its i-th follows the arm's i-th round.
    assert [row[1:] for row in series] == [[1400, 690.0, "sw_power_cap"], [1500, 680.0, "sw_power_cap"]]
    assert all(isinstance(row[0], float) and row[0] >= 0 for row in series) and series[0][0] <= series[1][0]
    assert [row[1] for row in mon.summary()["series"]] == [1980, 1400, 1500]
