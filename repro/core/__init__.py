"""Bottom layer: the repro contract, statistics, verdicts, errors and file and process primitives."""
