set -e
pip install torch==2.11.0
pip install cuda-bindings==13.3.1
pip install './20261202T212118Z-012c9b/harness/gpu_repro-0.1.0+src.538eb969e5d6-py3-none-any.whl[plots]'
repro run 5090-linear
repro run graph-memset
