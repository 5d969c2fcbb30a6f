"""What leaves the machine: artifacts, reports, comparisons, bundles, plots, scope and scripts."""
