set -e
pip install ./20261201T140815Z-ef07ad/harness/gpu_repro-0.1.0+src.f32ef45a72b7-py3-none-any.whl
repro run 5090-linear --set batch=256 --set tokens=196 --set features=768 --set tf32_variants=true
