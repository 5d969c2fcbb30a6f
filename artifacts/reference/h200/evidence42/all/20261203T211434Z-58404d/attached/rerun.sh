set -e
pip install torch==2.11.0
pip install cuda-bindings==13.3.1
pip install './20261203T211434Z-58404d/harness/gpu_repro-0.1.0+src.1774e195f0e9-py3-none-any.whl[plots]'
repro run 5090-linear
repro run graph-memset
