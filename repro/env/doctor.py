"""``repro doctor``: this machine's usual causes of cliffs and of bad measurements, each with what to do."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from repro.env import fingerprint, nvml

# Ranked by consequence: "fail" means no repro can measure anything here, "warn" that the GPU
# repros will skip or their numbers will mislead, "info" a setting worth knowing, "ok" a check passed.
Level = Literal["ok", "info", "warn", "fail"]
LEVELS: tuple[str, ...] = ("fail", "warn", "info", "ok")


@dataclass(frozen=True)
class Finding:
    """One check's outcome: what was seen and what to do about it."""

    level: Level
    check: str
    seen: str
    action: str


# Variables that slow every kernel or change which one runs, and what to do about each.
_ENV_CHECKS: dict[str, tuple[Level, str]] = {
    "CUDA_LAUNCH_BLOCKING": ("warn", "unset it: every launch waits for the GPU, so timings include host latency"),
    "PYTORCH_NO_CUDA_MEMORY_CACHING": ("warn", "unset it: every allocation becomes a cudaMalloc/cudaFree"),
    "TORCH_USE_CUDA_DSA": ("warn", "unset it: device-side assertions add checks to kernels"),
    "CUDA_CACHE_DISABLE": ("info", "unset it unless intended: PTX is JIT-compiled again each run"),
    "NVIDIA_TF32_OVERRIDE": ("info", "NVIDIA_TF32_OVERRIDE=0 forces TF32 off in cuBLAS/cuDNN whatever torch asks"),
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": (
        "info",
        "forces TF32 on in cuBLAS whatever torch asks; compare runs with and without",
    ),
    "CUBLAS_WORKSPACE_CONFIG": ("info", "a small deterministic workspace can make cuBLAS choose slower kernels"),
    "PYTORCH_CUDA_ALLOC_CONF": (
        "info",
        "allocator settings change fragmentation and retries; record them with results",
    ),
    "PYTORCH_ALLOC_CONF": ("info", "allocator settings change fragmentation and retries; record them with results"),
    "TORCH_LINALG_PREFER_CUSOLVER": ("info", "changes the linalg backend (see solve-512-cliff)"),
    "TORCH_BLAS_PREFER_CUBLASLT": ("info", "changes the BLAS library torch calls"),
}


def _torch_info() -> dict[str, Any] | None:
    """The torch-side facts the checks need; None without torch. A seam for tests."""
    try:
        import torch
    except Exception:  # missing or broken: the doctor reports torch as absent
        return None

    info: dict[str, Any] = {
        "version": torch.__version__,
        "cuda_built": torch.version.cuda,
        "debug": bool(torch.version.debug),
        "cuda": torch.cuda.is_available(),
        "knobs": fingerprint.knobs(),
    }
    if info["cuda"]:
        props = torch.cuda.get_device_properties(0)
        info["gpu"] = props.name
        info["pci"] = fingerprint.pci_bus_id(props)
    return info


def _nvml_info(pci: str | None) -> dict[str, Any]:
    """Static facts and one snapshot from NVML; errors are returned, not raised. A seam for tests."""
    try:
        nv, h = nvml.handle_for(pci)
        return {"static": nvml.static_info(nv, h), "state": nvml.snapshot(nv, h), "error": None}
    except Exception as exc:  # no NVML: the doctor says so and carries on
        return {"static": {}, "state": {}, "error": f"{type(exc).__name__}: {exc}"}


def _env_findings(environ: Mapping[str, str]) -> list[Finding]:
    out = []
    for name, (level, action) in _ENV_CHECKS.items():
        if name in environ:
            value = environ[name]
            if name == "CUDA_LAUNCH_BLOCKING" and value in ("0", ""):
                continue
            out.append(Finding(level, f"env {name}", f"{name}={value}", action))
    if not out:
        out.append(Finding("ok", "environment", "no debug, allocator or backend variables set", "nothing to do"))
    return out


def _gpu_findings(nv: Mapping[str, Any], own_pid: int) -> list[Finding]:
    if nv.get("error"):
        return [
            Finding(
                "warn",
                "nvml",
                nv["error"],
                "install nvidia-ml-py and check the driver; clocks and throttling cannot be watched",
            )
        ]
    s, st = nv["static"], nv["state"]
    out: list[Finding] = []
    if s.get("mig_mode"):
        out.append(
            Finding(
                "warn",
                "MIG",
                "MIG mode is enabled",
                "a MIG slice has a fraction of the SMs and bandwidth; compare against a full GPU",
            )
        )
    gen, gen_max, w, w_max = s.get("pcie_gen"), s.get("pcie_gen_max"), s.get("pcie_width"), s.get("pcie_width_max")
    if gen and gen_max and w and w_max:
        if gen < gen_max or w < w_max:
            out.append(
                Finding(
                    "info",
                    "PCIe link",
                    f"gen {gen} x{w} now, gen {gen_max} x{w_max} possible",
                    "an idle GPU lowers its link speed; if it stays low under load, reseat the card or check BIOS",
                )
            )
        else:
            out.append(Finding("ok", "PCIe link", f"gen {gen} x{w} (its maximum)", "nothing to do"))
    throttled = sorted(set(st.get("clocks_event_reasons") or ()) & nvml.THROTTLING)
    if throttled:
        out.append(
            Finding(
                "warn", "throttling", ", ".join(throttled), "cool the GPU or raise its power limit before measuring"
            )
        )
    else:
        out.append(Finding("ok", "throttling", "no throttle reason set now", "nothing to do"))
    others = [p for p in (st.get("compute_pids") or []) if p != own_pid]
    if others:
        out.append(
            Finding(
                "warn",
                "other GPU processes",
                f"pids {', '.join(map(str, others))}",
                "stop them: they share SMs and memory bandwidth with the measurement",
            )
        )
    if s.get("persistence_mode") is False:
        out.append(
            Finding(
                "info",
                "persistence mode",
                "off",
                "`nvidia-smi -pm 1` avoids driver re-initialisation between runs (needs root)",
            )
        )
    limit, default = s.get("power_limit_w"), s.get("power_default_limit_w")
    if limit and default and limit < 0.95 * default:
        out.append(
            Finding(
                "warn",
                "power limit",
                f"{limit:.0f} W of a {default:.0f} W default",
                "restore the default power limit for representative numbers",
            )
        )
    if st.get("ecc_volatile_uncorrected"):
        out.append(
            Finding(
                "warn",
                "ECC",
                f"{st['ecc_volatile_uncorrected']} uncorrected errors since boot",
                "check the GPU's health (nvidia-smi -q -d ECC)",
            )
        )
    return out


def diagnose(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """All findings plus a one-line headline; never raises."""
    environ = os.environ if environ is None else environ
    findings: list[Finding] = []
    t = _torch_info()
    if t is None:
        findings.append(
            Finding(
                "fail",
                "torch",
                f"torch is not importable by this Python ({sys.executable})",
                "every repro will skip, --smoke too. For a CPU trial run `make smoke` (its test env has a CPU "
                "torch); to measure a GPU, install a CUDA build of torch where this Python sees it "
                "(see the README, 'Your first run')",
            )
        )
    else:
        if t["debug"]:
            findings.append(
                Finding("warn", "torch build", f"{t['version']} is a debug build", "use a release build for timing")
            )
        k = t["knobs"]
        if not k.get("cuda_matmul_allow_tf32") and k.get("float32_matmul_precision") == "highest":
            findings.append(
                Finding(
                    "info",
                    "TF32",
                    "off for matmuls (float32_matmul_precision='highest')",
                    "fp32 matmuls skip tensor cores; torch.set_float32_matmul_precision('high') "
                    "enables TF32 if its precision is acceptable",
                )
            )
        else:
            findings.append(
                Finding("ok", "TF32", f"matmul precision '{k.get('float32_matmul_precision')}'", "nothing to do")
            )
        if k.get("deterministic_algorithms"):
            findings.append(
                Finding(
                    "info",
                    "determinism",
                    "torch.use_deterministic_algorithms(True)",
                    "deterministic kernels can be slower",
                )
            )
    findings += _env_findings(environ)
    cuda = bool(t and t["cuda"])
    if t is not None and not cuda:
        findings.insert(0, _no_cuda_finding(t, environ))
    if cuda:
        findings += _gpu_findings(_nvml_info(t.get("pci") if t else None), os.getpid())
        headline = f"GPU: {t['gpu']} (torch {t['version']})"  # type: ignore[index]
    else:
        headline = (
            "No CUDA GPU is visible here: GPU checks skipped, and every GPU repro will record 'skipped'."
            if t is not None
            else "torch is not installed here: every repro will record 'skipped'."
        )
    findings.sort(key=lambda f: LEVELS.index(f.level))  # the most consequential first; stable otherwise
    return {"headline": headline, "cuda": cuda, "findings": [f.__dict__ for f in findings]}


def _no_cuda_finding(t: Mapping[str, Any], environ: Mapping[str, str]) -> Finding:
    """Why torch sees no GPU (a CPU-only build, hidden devices, or no driver), and what to do."""
    if not t.get("cuda_built"):
        seen = f"torch {t['version']} is a CPU-only build"
        action = (
            "every GPU repro will skip (`make smoke` runs them on CPU as a pipeline trial). To measure a GPU, "
            "install a CUDA build of torch (https://pytorch.org/get-started/locally/) or use an image "
            "(`make docker-repro-all LANE=cu126-pt26`)"
        )
    else:
        hidden = environ.get("CUDA_VISIBLE_DEVICES")
        seen = f"torch {t['version']} (CUDA {t['cuda_built']}) sees no CUDA device"
        if hidden is not None and hidden.strip() in ("", "-1", "none", "NoDevFiles"):
            seen += f" (CUDA_VISIBLE_DEVICES={hidden!r})"
        action = (
            "every GPU repro will skip. Check `nvidia-smi` (driver loaded, GPU listed) and CUDA_VISIBLE_DEVICES; "
            "in a container, pass the GPUs (`docker run --gpus all`)"
        )
    return Finding("warn", "CUDA", seen, action)
