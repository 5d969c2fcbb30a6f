set -e
pip install torch==2.11.0
pip install cuda-bindings==13.3.1
pip install './20261204T204758Z-64a588/harness/gpu_repro-0.1.0+src.afeba542c430-py3-none-any.whl[plots]'
repro run 5090-linear
repro run graph-memset
repro run solve-512-cliff
