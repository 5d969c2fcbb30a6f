set -e
pip install './20261202T005730Z-2ef92c/harness/gpu_repro-0.1.0+src.9ab0a4a2ac29-py3-none-any.whl[plots]'
repro run 5090-linear --set batch=256 --set tokens=196 --set features=768 --set tf32_variants=true
