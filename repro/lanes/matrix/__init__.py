"""``repro matrix``: lanes x repros x GPUs as numbered cells, run by a scheduler (local, Slurm, Kubernetes)."""
