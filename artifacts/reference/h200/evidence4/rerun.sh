set -e
pip install './20261201T194653Z-d9caf1/harness/gpu_repro-0.1.0+src.b063f9b8da79-py3-none-any.whl[plots]'
repro run 5090-linear --set batch=256 --set tokens=196 --set features=768 --set tf32_variants=true
