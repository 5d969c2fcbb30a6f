set -e
pip install torch==2.11.0
pip install cuda-bindings==13.3.1
pip install './20261202T205154Z-7ae604/harness/gpu_repro-0.1.0+src.dc475e7f796c-py3-none-any.whl[plots]'
repro run 5090-linear
repro run graph-memset
