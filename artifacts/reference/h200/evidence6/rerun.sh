set -e
pip install './20261201T224458Z-c483c0/harness/gpu_repro-0.1.0+src.5e6bc98327a5-py3-none-any.whl[plots]'
repro run 5090-linear --set batch=256 --set tokens=196 --set features=768 --set tf32_variants=true
