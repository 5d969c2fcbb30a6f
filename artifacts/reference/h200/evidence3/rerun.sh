set -e
pip install ./20261201T162744Z-bc9a25/harness/gpu_repro-0.1.0+src.2852770b9739-py3-none-any.whl
repro run 5090-linear --set batch=256 --set tokens=196 --set features=768 --set tf32_variants=true
