set -e
pip install './20261202T043420Z-04ed93/harness/gpu_repro-0.1.0+src.b89736a88762-py3-none-any.whl[plots]'
repro run 5090-linear --set batch=256 --set tokens=196 --set features=768 --set tf32_variants=true
