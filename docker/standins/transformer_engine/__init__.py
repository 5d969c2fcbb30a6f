"""Not NVIDIA's Transformer Engine: the nemo stand-in base's placeholder (see docker/standins/nemo.Dockerfile).

The real nemo base carries Transformer Engine; this stand-in has no CUDA, so importing TE fails
here the way a missing or broken TE fails: with an ImportError that says why.
"""

raise ImportError(
    "transformer_engine here is the gpu-repro nemo stand-in's placeholder, not NVIDIA's Transformer Engine "
    "(no CUDA in this stand-in base; the real nvcr.io/nvidia/nemo base carries TE)"
)
