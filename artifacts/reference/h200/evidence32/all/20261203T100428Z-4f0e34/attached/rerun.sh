set -e
pip install torch==2.11.0
pip install cuda-bindings==13.3.1
pip install './20261203T100428Z-4f0e34/harness/gpu_repro-0.1.0+src.208fd7d8e47b-py3-none-any.whl[plots]'
repro run 5090-linear
repro run graph-memset
