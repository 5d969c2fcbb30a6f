set -e
pip install './20261202T040307Z-d149d6/harness/gpu_repro-0.1.0+src.1e73d3d11ea4-py3-none-any.whl[plots]'
repro run 5090-linear --set batch=256 --set tokens=196 --set features=768 --set tf32_variants=true
