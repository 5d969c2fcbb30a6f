"""When a measured variant is flagged ``suspect``: the rules the harness applies (repro.run.execute)
and the words a report uses to state them."""

from __future__ import annotations

# A variant whose SM clock, while it ran, sat below this share of the card's
# maximum was not measured at full speed.
CLOCK_FLOOR = 0.75
# The power-management cap ("sw_power_cap") is raised whenever the GPU runs at its
# power limit, which heavy kernels on an H200 do at ~98% of its top clock. Only
# when the clock actually sagged under this share does it make a measurement suspect.
POWER_CAP_FLOOR = 0.90
# These reasons always mean the chip was slowed for heat or by the board.
HARD_THROTTLE = ("hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")

RULE_WORDS = (
    f"suspect: in NVML's polls right after each timed block, the median SM clock read under {POWER_CAP_FLOOR:.0%} of "
    "max under the power cap "
    f"({CLOCK_FLOOR:.0%} otherwise), or a hard throttle, another process or new ECC errors showed, or the "
    "headline's rounds split by the arms' order"
)
