"""The global torch switches a repro may set around a measurement: read them, and set them again."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

__all__ = ["apply_knobs", "knob_state"]


def knob_state() -> dict[str, Any]:
    """The global torch switches a repro may set around a measurement (read, not changed)."""
    import torch

    b = torch.backends
    state: dict[str, Any] = {
        "grad": torch.is_grad_enabled(),
        "tf32": b.cuda.matmul.allow_tf32,
        "cudnn_tf32": b.cudnn.allow_tf32,
        "precision": torch.get_float32_matmul_precision(),
    }
    if torch.cuda.is_available():
        state["linalg"] = b.cuda.preferred_linalg_library()
    return state


def apply_knobs(state: Mapping[str, Any]) -> None:
    """Set the switches ``knob_state`` read; precision first, since it also moves the TF32 flag."""
    import torch

    b = torch.backends
    torch.set_float32_matmul_precision(state["precision"])
    b.cuda.matmul.allow_tf32 = state["tf32"]
    b.cudnn.allow_tf32 = state["cudnn_tf32"]
    torch.set_grad_enabled(state["grad"])
    if "linalg" in state:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the preference warns once that it is experimental
            b.cuda.preferred_linalg_library(state["linalg"])
