set -e
pip install torch==2.11.0
pip install cuda-bindings==13.3.1
pip install './20261203T234336Z-104ee6/harness/gpu_repro-0.1.0+src.074a329e6ccc-py3-none-any.whl[plots]'
repro run 5090-linear
