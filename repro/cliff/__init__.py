"""``repro cliff``: where a cliff starts, found by a grid and bisection."""
