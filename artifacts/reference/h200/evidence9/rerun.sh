set -e
pip install './20261202T012116Z-0e1f37/harness/gpu_repro-0.1.0+src.0a7c47e9a7f9-py3-none-any.whl[plots]'
repro run 5090-linear --set batch=256 --set tokens=196 --set features=768 --set tf32_variants=true
