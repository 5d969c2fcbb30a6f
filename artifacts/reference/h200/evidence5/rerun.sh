set -e
pip install './20261201T220623Z-3c7c3e/harness/gpu_repro-0.1.0+src.09d14e22d53f-py3-none-any.whl[plots]'
repro run 5090-linear --set batch=256 --set tokens=196 --set features=768 --set tf32_variants=true
