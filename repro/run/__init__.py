"""Running repros: the measurement context, the catalog, one repro in-process, and the batch runner."""
