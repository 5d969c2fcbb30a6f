"""The environment fingerprint: exact software, hardware and knobs, probed defensively."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import json
import locale
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from repro import __version__
from repro.core import procs
from repro.env import placement

FINGERPRINT_SCHEMA_VERSION = "1.0"

# Only these variables are ever recorded: each one changes kernel/backend choice,
# memory behaviour or measurement. The environment as a whole holds secrets.
ENV_ALLOWLIST = (
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
    "NVIDIA_TF32_OVERRIDE",
    "TORCH_LINALG_PREFER_CUSOLVER",
    "TORCH_BLAS_PREFER_CUBLASLT",
    "PYTORCH_CUDA_ALLOC_CONF",
    "PYTORCH_ALLOC_CONF",
    "PYTORCH_NO_CUDA_MEMORY_CACHING",
    "CUBLAS_WORKSPACE_CONFIG",
    "CUBLASLT_WORKSPACE_SIZE",
    "CUDA_LAUNCH_BLOCKING",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "CUDA_MODULE_LOADING",
    "CUDA_DEVICE_MAX_CONNECTIONS",
    "CUDA_CACHE_DISABLE",
    "TORCH_CUDNN_V8_API_LRU_CACHE_LIMIT",
    "TORCH_USE_CUDA_DSA",
    "TORCH_SHOW_CPP_STACKTRACES",
    "PYTORCH_NVML_BASED_CUDA_CHECK",
    "NCCL_DEBUG",
    "NCCL_ALGO",
    "NCCL_PROTO",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NVTE_FUSED_ATTN",
    "NVTE_FLASH_ATTN",
    "TORCHINDUCTOR_MAX_AUTOTUNE",
)
# (key, soname stem, how to ask the library its version)
_LIBRARIES = (
    ("cudart", "libcudart.so", "cudaRuntimeGetVersion"),
    ("cublas", "libcublas.so", "property:cublasGetProperty"),
    ("cublasLt", "libcublasLt.so", "size_t:cublasLtGetVersion"),
    ("cusolver", "libcusolver.so", "property:cusolverGetProperty"),
    ("cudnn", "libcudnn.so", "size_t:cudnnGetVersion"),
    ("nccl", "libnccl.so", "ncclGetVersion"),
)


class Probes:
    """Runs probes, keeping a null and an error string for each that fails."""

    def __init__(self) -> None:
        self.errors: dict[str, str] = {}

    def __call__(self, name: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as exc:  # a probe never takes the fingerprint down
            self.errors[name] = f"{type(exc).__name__}: {exc}"[:300]
            return None


# --------------------------------------------------------------------------- collect_env


def collect_env_in_process() -> dict[str, Any]:
    """``torch.utils.collect_env`` run in this process, once torch is imported.

    No second interpreter that imports torch again (seconds on a GPU machine), and it
    runs after the measurement, never beside it: concurrent work was one of the
    harness's own sources of variance on the H200.

    collect_env runs its probes (pip list, nvidia-smi, ...) one after another through its own
    ``run`` (2.2-2.9 s on an H200): a first pass starts every probe it asks for at once and answers
    each "failed" straight away, the second pass, whose report is kept, reads their answers (a
    probe the first pass did not ask for runs then). Each probe goes under a guard, so a killed
    harness leaves none of them behind.
    """
    try:
        from torch.utils import collect_env as ce
    except Exception as exc:  # torch without collect_env: record it, do not crash the run
        return {"output": None, "error": f"collect_env failed: {type(exc).__name__}: {exc}".splitlines()[0]}
    saved = ce.run
    probes = _Probes()
    try:
        ce.run = probes.start
        with contextlib.suppress(Exception):  # answers of "failed" may take it down paths that raise
            ce.get_pretty_env_info()
        ce.run = probes.answer
        return {"output": ce.get_pretty_env_info(), "error": None}
    except Exception as exc:  # a probe inside collect_env failed: record it, do not crash the run
        return {"output": None, "error": f"collect_env failed: {type(exc).__name__}: {exc}".splitlines()[0]}
    finally:
        ce.run = saved
        probes.close()


class _Probes:
    """collect_env's probes started at once (``start``), each answered later from its own run (``answer``)."""

    def __init__(self) -> None:
        from concurrent.futures import Future, ThreadPoolExecutor

        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="collect-env")
        self._started: dict[str, Future[tuple[int, str, str]]] = {}
        self._trees: list[procs.Tree] = []
        self._closed = False

    def start(self, command: str | Sequence[str]) -> tuple[int, str, str]:
        key = json.dumps(command)
        if key not in self._started:
            self._started[key] = self._pool.submit(self._run, command)
        return 1, "", ""

    def _run(self, command: str | Sequence[str]) -> tuple[int, str, str]:
        if self._closed:  # queued behind others when the reading ended: never started
            return 1, "", "not run"
        return _guarded_run(command, self._trees)

    def answer(self, command: str | Sequence[str]) -> tuple[int, str, str]:
        got = self._started.pop(json.dumps(command), None)
        return got.result() if got is not None else _guarded_run(command)

    def close(self) -> None:
        """Stop every probe still running (none outlives the reading, a Ctrl-C's included) and drop the rest."""
        self._closed = True
        self._pool.shutdown(wait=False, cancel_futures=True)
        for tree in list(self._trees):
            if tree.poll() is None:
                tree.stop(grace_s=0.5)


# collect_env's report is the same for every repro of a run (versions, drivers, libraries), and
# costs seconds (2.3 s in-process on an H200): the first repro of a run writes it here, the rest read it.
COLLECT_ENV_FILE = ".cache/collect_env.json"  # beside the ceilings (repro.env.ceilings.CEILINGS_FILE)


def collect_env_for_run(run_dir: Path) -> dict[str, Any]:
    """``collect_env_in_process`` once per run folder; a failed one is not kept, so the next repro tries again."""
    from repro.core.fsio import once_per_run

    return once_per_run(
        run_dir / COLLECT_ENV_FILE,
        collect_env_in_process,
        keep=lambda env: bool(env.get("output")) and env.get("error") is None,
    )


RUN_START_FILE = ".cache/gpu-at-run-start.json"  # every GPU's state before the run's first repro


RUN_START_TIMEOUT_S = 10.0  # NVML on a GPU that fell off the bus can block: the run does not wait on it


def _run_start_bounded(timeout_s: float = RUN_START_TIMEOUT_S) -> dict[str, Any]:
    """``nvml.run_start()`` on a daemon thread, or an error reading when it does not answer in time."""
    from repro.env import nvml

    got: list[dict[str, Any]] = []
    worker = threading.Thread(target=lambda: got.append(nvml.run_start()), daemon=True)
    worker.start()
    worker.join(timeout_s)
    return got[0] if got else {"error": f"NVML did not answer in {timeout_s:g} s"}


def record_run_start(run_dir: Path) -> None:
    """Every GPU's state before the run's first repro, once per run folder: the first caller's reading,
    kept even when it failed, so a later call never records a GPU some repro already heated as the
    run's start. Never raises: a run goes on without it."""
    from repro.core.fsio import once_per_run

    with contextlib.suppress(Exception):
        once_per_run(run_dir / RUN_START_FILE, _run_start_bounded)
    record_packages(run_dir)


PACKAGES_FILE = "packages.txt"  # the run folder's list of installed distributions, bundled with it


def packages_text() -> str:
    """Every distribution this interpreter can import, as ``name==version  # its folder`` lines, sorted
    by name: a freeze that also says which site-packages each came from (layered environments)."""
    from importlib.metadata import distributions

    from repro.env import harness

    seen: dict[str, str] = {}  # lower-case name -> its line
    for d in distributions():  # the first on sys.path wins, as an import would
        name = d.metadata["Name"]
        if name and name.lower() not in seen:
            seen[name.lower()] = f"{name}=={d.version}  # {d.locate_file('')}"
    head = (
        f"# installed distributions importable by {sys.executable} (importlib.metadata over sys.path) when the run "
        "started; each line's comment is the folder it came from\n"
        f"# sys.path, in import order: {os.pathsep.join(p for p in sys.path if p)}\n"
        f"# gpu-repro's own source: sha256 {harness.source_sha256()} (the artifacts' harness.source_sha256)\n"
    )
    return head + "".join(f"{seen[k]}\n" for k in sorted(seen))


def record_packages(run_dir: Path) -> None:
    """``packages.txt`` in the run folder, once (the first caller's); never raises."""
    from repro.core.fsio import write_new

    path = run_dir / PACKAGES_FILE
    if path.exists():
        return
    from repro.core.redact import text_redactor

    with contextlib.suppress(Exception):  # redacted as the bundle packs it, so packages_sha256 matches its copy
        write_new(path, text_redactor()(packages_text()).encode())


def packages_digest(run_dir: Path) -> str | None:
    """sha256 of the run folder's ``packages.txt``; None without one."""
    try:
        return hashlib.sha256((run_dir / PACKAGES_FILE).read_bytes()).hexdigest()
    except OSError:
        return None


def run_start_state(run_dir: Path, uuid: str | None) -> dict[str, Any] | None:
    """The state ``record_run_start`` read for the GPU ``uuid``, with when it was read; None without one."""
    try:
        got = json.loads((run_dir / RUN_START_FILE).read_text())
        state = got["gpus"][str(uuid).removeprefix("GPU-")]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return {"taken_utc": got.get("taken_utc"), **state} if isinstance(state, dict) else None


def _guarded_run(command: str | Sequence[str], trees: list[procs.Tree] | None = None) -> tuple[int, str, str]:
    """collect_env's ``run(command)`` (return code, stdout, stderr), each command under a guard; its tree is also
    put in ``trees``, where given, so that the caller can stop it."""
    argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
    try:
        tree = procs.spawn(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        return 127, "", str(exc)
    if trees is not None:
        trees.append(tree)
    try:
        out, err = tree.proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        tree.stop()
        out, err = tree.proc.communicate()
    finally:
        tree.finish()
    enc = locale.getpreferredencoding()
    return tree.proc.returncode, out.decode(enc, "replace").strip(), err.decode(enc, "replace").strip()


# --------------------------------------------------------------------------- loaded libraries


def loaded_libraries(maps: str | None = None) -> dict[str, str]:
    """Paths of the CUDA libraries this process has mapped (from /proc/self/maps)."""
    if maps is None:
        maps = Path("/proc/self/maps").read_text()
    found: dict[str, str] = {}
    for line in maps.splitlines():
        path = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
        base = os.path.basename(path)
        for key, stem, _ in _LIBRARIES:
            if key not in found and (base == stem or base.startswith(stem + ".")):
                found[key] = path
    return found


def _library_version(path: str, how: str) -> str:
    lib = ctypes.CDLL(path)
    if how.startswith("size_t:"):
        fn = getattr(lib, how.split(":", 1)[1])
        fn.restype = ctypes.c_size_t
        return str(fn())
    if how.startswith("property:"):
        fn = getattr(lib, how.split(":", 1)[1])
        parts = []
        for prop in (0, 1, 2):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
            v = ctypes.c_int()
            if fn(prop, ctypes.byref(v)) != 0:
                raise OSError(f"{how} returned an error")
            parts.append(str(v.value))
        return ".".join(parts)
    v = ctypes.c_int()
    if getattr(lib, how)(ctypes.byref(v)) != 0:
        raise OSError(f"{how} returned an error")
    return str(v.value)


def library_versions(probe: Probes) -> dict[str, Any]:
    paths = probe("libraries.maps", loaded_libraries) or {}
    out: dict[str, Any] = {}
    for key, _, how in _LIBRARIES:
        path = paths.get(key)
        if path is None:
            out[key] = {"path": None, "version": None, "loaded": False}
            continue
        out[key] = {
            "path": path,
            "version": probe(f"libraries.{key}", functools.partial(_library_version, path, how)),
            "loaded": True,
        }
    return out


# --------------------------------------------------------------------------- sections


def _torch_section(probe: Probes) -> dict[str, Any]:
    import torch

    return {
        "version": torch.__version__,
        "git_version": probe("torch.git_version", lambda: torch.version.git_version),
        "cuda_built": torch.version.cuda,
        "cudnn_reported": probe("torch.cudnn", lambda: torch.backends.cudnn.version()),
        "nccl_reported": probe(
            "torch.nccl", lambda: ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None
        ),
        "has_magma": probe("torch.has_magma", lambda: bool(torch.cuda.has_magma)),
        "debug_build": probe("torch.debug", lambda: bool(torch.version.debug)),
        "arch_list": probe("torch.arch_list", lambda: torch.cuda.get_arch_list() if torch.cuda.is_available() else []),
        "cuda_available": torch.cuda.is_available(),
        "install": probe("torch.install", lambda: install_record("torch")),
    }


def install_record(dist_name: str) -> dict[str, Any] | None:
    """How a distribution got here, from its installed metadata: the installer (pip's ``INSTALLER``),
    ``direct_url.json``'s url when it was installed from a URL or a path, the wheel's tags and builder
    (``WHEEL``), the folder it sits in, the metadata's version and the sha256 of its ``RECORD``. None
    when the distribution is not installed."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        dist = distribution(dist_name)
    except PackageNotFoundError:
        return None
    installer = (dist.read_text("INSTALLER") or "").strip() or None
    direct: Any = None
    with contextlib.suppress(ValueError):
        direct = json.loads(dist.read_text("direct_url.json") or "null")
    record = dist.read_text("RECORD")
    wheel = dist.read_text("WHEEL") or ""
    tags = [ln.split(":", 1)[1].strip() for ln in wheel.splitlines() if ln.startswith("Tag:")]
    builder = next((ln.split(":", 1)[1].strip() for ln in wheel.splitlines() if ln.startswith("Generator:")), None)
    return {
        "installer": installer,
        "direct_url": direct.get("url") if isinstance(direct, dict) and isinstance(direct.get("url"), str) else None,
        "wheel_tags": tags,
        "wheel_generator": builder,
        "location": str(dist.locate_file("")),
        # The metadata's version: PyPI takes no local tag (+cu130), so a CUDA wheel without one came
        # from PyPI, where torch.__version__ still reads 2.11.0+cu130.
        "version": dist.version,
        # RECORD lists every installed file with its sha256; its digest names this install (the same wheel
        # installed by another installer, or with bytecode compiled, lists other files).
        "record_sha256": hashlib.sha256(record.encode()).hexdigest() if record else None,
    }


def knobs() -> dict[str, Any]:
    """Every switch that changes kernel or backend choice, read before a repro touches them."""
    probe = Probes()
    try:
        import torch
    except ImportError as exc:
        return {"error": f"torch not importable: {exc}"}
    b = torch.backends
    out = {
        "cuda_matmul_allow_tf32": probe("knobs.tf32", lambda: b.cuda.matmul.allow_tf32),
        "cudnn_allow_tf32": probe("knobs.cudnn_tf32", lambda: b.cudnn.allow_tf32),
        "float32_matmul_precision": probe("knobs.precision", torch.get_float32_matmul_precision),
        "fp16_reduced_precision_reduction": probe(
            "knobs.fp16_rpr", lambda: b.cuda.matmul.allow_fp16_reduced_precision_reduction
        ),
        "bf16_reduced_precision_reduction": probe(
            "knobs.bf16_rpr", lambda: b.cuda.matmul.allow_bf16_reduced_precision_reduction
        ),
        "preferred_linalg_library": probe("knobs.linalg", lambda: str(b.cuda.preferred_linalg_library())),
        "preferred_blas_library": probe("knobs.blas", lambda: str(b.cuda.preferred_blas_library())),
        "cudnn_benchmark": probe("knobs.cudnn_benchmark", lambda: b.cudnn.benchmark),
        "deterministic_algorithms": probe("knobs.deterministic", torch.are_deterministic_algorithms_enabled),
    }
    out["errors"] = probe.errors
    return out


def _gpu_section(probe: Probes) -> dict[str, Any] | None:
    import torch

    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(0)
    pci = probe(
        "gpu.pci",
        lambda: pci_bus_id(props),
    )
    out: dict[str, Any] = {
        "name": props.name,
        "compute_capability": f"{props.major}.{props.minor}",
        "sm_count": props.multi_processor_count,
        "memory_total_bytes": props.total_memory,
        "l2_cache_bytes": probe("gpu.l2", lambda: props.L2_cache_size),
        "uuid": probe("gpu.uuid", lambda: str(props.uuid)),
        "pci_bus_id": pci,
        "device_count": torch.cuda.device_count(),
    }
    handle = probe("nvml.init", lambda: nvml_handle(pci))
    if handle is not None:
        from repro.env import nvml

        out["nvml"] = probe("nvml.static", lambda: nvml.static_info(*handle))
        out["state"] = probe("nvml.state", lambda: nvml.snapshot(*handle))
    else:
        out["nvml"] = None
        out["state"] = None
    return out


def pci_bus_id(props: Any) -> str:
    """NVML's form of a torch device's PCI address (domain:bus:device.function)."""
    return f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"


def nvml_handle(pci: str | None) -> tuple[Any, Any]:
    from repro.env import nvml

    return nvml.handle_for(pci)


def _harness_section(probe: Probes) -> dict[str, Any]:
    from repro.env import harness

    identity = probe("harness.git", harness.git_identity)
    commit, state = identity if identity is not None else (None, None)
    return {
        "name": "gpu-repro",
        "version": __version__,
        "git_commit": commit,
        "git_state": state,
        "source_sha256": probe("harness.source", harness.source_sha256),
        "libraries": probe("harness.libraries", _harness_libraries),
    }


# The distributions the harness itself runs on: its wheel's requirements (pyproject's dependencies: the CLI,
# validation, tables, NVML readings), then what it uses where installed: matplotlib (the plots extra) and
# cuda-bindings (graph-memset's memset variants; no requirement of the wheel).
HARNESS_REQUIRES = (
    "typer",
    "jsonschema",
    "referencing",
    "rfc3339-validator",
    "rfc3986-validator",
    "tabulate",
    "rich",
    "nvidia-ml-py",
)
HARNESS_OPTIONAL = {
    "matplotlib": "the plots extra",
    "cuda-bindings": "graph-memset's torch-graph memset variants, skipped without it",
}
HARNESS_LIBRARIES = HARNESS_REQUIRES + tuple(HARNESS_OPTIONAL)


def _installed_version(dist: str) -> str | None:
    """The installed version of distribution ``dist``, None where it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def _harness_libraries() -> dict[str, str | None]:
    """Each of HARNESS_LIBRARIES' installed version, None where it is not installed."""
    return {dist: _installed_version(dist) for dist in HARNESS_LIBRARIES}


def _te_version() -> str | None:
    names = ("transformer_engine", "transformer-engine", "transformer_engine_torch")
    return next((v for dist in names if (v := _installed_version(dist)) is not None), None)


def collect(
    *,
    knobs_at_start: Mapping[str, Any] | None = None,
    collect_env: Mapping[str, Any] | None = None,
    ceilings: Mapping[str, Any] | None = None,
    with_torch: bool = True,
) -> dict[str, Any]:
    """The fingerprint of this process and machine. Never raises.

    ``with_torch=False`` is for processes that must not import torch (the batch
    runner writing an error artifact for a child that died).
    """
    probe = Probes()
    torch_info = probe("torch", lambda: _torch_section(probe)) if with_torch else None
    fp: dict[str, Any] = {
        "schema_version": FINGERPRINT_SCHEMA_VERSION,
        "harness": _harness_section(probe),
        "software": {
            "torch": torch_info,
            "libraries": library_versions(probe),
            "transformer_engine": probe("te", _te_version),
        },
        "gpu": probe("gpu", lambda: _gpu_section(probe)) if torch_info else None,
        "knobs": dict(knobs_at_start) if knobs_at_start is not None else (knobs() if with_torch else {}),
        "env": {k: os.environ[k] for k in ENV_ALLOWLIST if k in os.environ},
        "container": placement.container_section(),
        "scheduler": placement.scheduler_section(),
        "host": placement.host_section(probe),
        "ceilings": dict(ceilings) if ceilings is not None else None,
        "collect_env": dict(collect_env) if collect_env is not None else {"output": None, "error": "not collected"},
    }
    fp["errors"] = probe.errors
    return fp


def _where(fp: Mapping[str, Any]) -> str:
    """``container`` when any container marker (/.dockerenv, /run/.containerenv) was seen, else ``host``."""
    markers = fp.get("container") or {}
    return "container" if markers.get("dockerenv") or markers.get("containerenv") else "host"


def essentials(fp: Mapping[str, Any]) -> dict[str, Any]:
    """The handful of fields a reader wants inline: GPU, driver, torch, CUDA, stack."""
    gpu = fp.get("gpu") or {}
    torch_info = (fp.get("software") or {}).get("torch") or {}
    nvml_info = gpu.get("nvml") or {}
    container = (fp.get("container") or {}).get("env") or {}
    libs = (fp.get("software") or {}).get("libraries") or {}
    return {
        "gpu": gpu.get("name") or "no CUDA GPU",
        "cc": gpu.get("compute_capability"),
        "driver": nvml_info.get("driver_version"),
        "torch": torch_info.get("version"),
        "cuda": torch_info.get("cuda_built"),
        "cublas": (libs.get("cublas") or {}).get("version"),
        "lane": container.get("GPU_REPRO_LANE") or container.get("GPU_REPRO_IMAGE") or _where(fp),
    }
