set -e
pip install torch==2.11.0
pip install cuda-bindings==13.3.1
pip install './20261203T215407Z-bda9ea/harness/gpu_repro-0.1.0+src.6d43d28ad381-py3-none-any.whl[plots]'
repro run 5090-linear
repro run graph-memset
