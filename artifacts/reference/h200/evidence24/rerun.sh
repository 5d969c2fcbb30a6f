set -e
pip install torch==2.11.0
pip install cuda-bindings==13.3.1
pip install './20261202T165335Z-e84ba9/harness/gpu_repro-0.1.0+src.b9a3f8d30b4f-py3-none-any.whl[plots]'
repro run 5090-linear --set batch=256 --set tokens=196 --set features=768 --set tf32_variants=true
repro run graph-memset --set ops=1000 --set matmul_dtype=fp32 --set mm_m=512 --set mm_k=1024 --set mm_n=1024 --set twin=true --set twin_replays=500 --set twin_work_replays=100 --set twin_rounds=50 --set twin_warmup=20 --set twin_episodes=10 --set twin_work_iters=128 --set twin_timeout_s=300.0
