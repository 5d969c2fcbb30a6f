set -e
pip install torch==2.11.0
pip install cuda-bindings==13.3.1
pip install './20261205T184016Z-2ec0d8/harness/gpu_repro-0.1.0+src.e6069ecf06b2-py3-none-any.whl[plots]'
repro run 5090-linear
repro run fused-adam-capturable
repro run graph-memset
repro run lora-batch-scaling
repro run solve-512-cliff
