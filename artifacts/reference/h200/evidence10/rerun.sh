set -e
pip install './20261202T033230Z-af3bb9/harness/gpu_repro-0.1.0+src.993480e8dd32-py3-none-any.whl[plots]'
repro run 5090-linear --set batch=256 --set tokens=196 --set features=768 --set tf32_variants=true
