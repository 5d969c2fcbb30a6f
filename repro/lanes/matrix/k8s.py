"""The Kubernetes backend: one Indexed Job per lane and GPU selector, built from the ``kubernetes`` client's models.

The plan travels in a ConfigMap; artifacts go to a PersistentVolumeClaim mounted at /artifacts (the
spec's ``k8s.pvc``), so they outlive the pods. Only image lanes can run here.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from repro.core.errors import ReproError, UsageError
from repro.core.redact import REDACTED
from repro.lanes.matrix.launch import CONTAINER_ROOT
from repro.lanes.matrix.plan import PLAN_FILE, Cell, Plan

PLAN_MOUNT = "/etc/gpu-repro"
GPU_RESOURCE = "nvidia.com/gpu"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"  # set by NVIDIA's GPU feature discovery
_SLACK_S = 300
_DNS = re.compile(r"[^a-z0-9-]+")


def _client() -> Any:
    try:
        import kubernetes
    except ImportError:
        raise ReproError("the kubernetes package is not installed; expected `pip install 'gpu-repro[k8s]'`") from None
    return kubernetes


def _dns(name: str, limit: int = 63) -> str:
    return _DNS.sub("-", name.lower()).strip("-")[:limit].rstrip("-")


def groups(cells: Sequence[Cell]) -> list[list[Cell]]:
    """Cells split by (lane, GPU selector): each group is one Indexed Job."""
    out: dict[tuple[str, int], list[Cell]] = {}
    for c in cells:
        if c.lane.image is None:
            raise UsageError(f"lane {c.lane.name!r} is native (no image); expected image lanes only for --backend k8s")
        out.setdefault((c.lane.name, c.group), []).append(c)
    return list(out.values())


# A Job's name is also its pods' ``job-name`` label and their names' prefix: 63 characters, less
# what the Job controller appends to pod names (``-<index>-<5 random>``).
JOB_NAME_MAX = 52
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def job_name(plan: Plan, cells: Sequence[Cell], attempt: str) -> str:
    """``gpu-repro-<matrix>-<lane>[-g<n>]-<hash>-<attempt>``: a DNS-1123 label of at most 52 characters.

    Lane names may hold dots and reach 40 characters, so the readable part is lossy (``cu126.pt26``
    and ``cu126-pt26`` read alike; long names are cut); the hash of the exact matrix, lane and group
    keeps the names apart, and the attempt suffix is never cut.
    """
    c = cells[0]
    group = f"-g{c.group}" if c.group else ""
    tag = hashlib.sha256(f"{plan.name}\0{c.lane.name}\0{c.group}".encode()).hexdigest()[:8]
    tail = f"-{tag}-{_dns(attempt, 12)}".rstrip("-")
    head = _dns(f"gpu-repro-{plan.name}-{c.lane.name}{group}", JOB_NAME_MAX - len(tail))
    name = f"{head}{tail}"
    if not _DNS_LABEL.fullmatch(name) or len(name) > JOB_NAME_MAX:  # cannot happen; a clear error if it does
        raise UsageError(f"k8s Job name {name!r}: expected a DNS-1123 label of at most {JOB_NAME_MAX} characters")
    return name


def config_map(plan: Plan, name: str, plan_doc: dict[str, Any]) -> Any:
    """The ConfigMap carrying the plan file every pod reads."""
    k = _client().client
    return k.V1ConfigMap(
        api_version="v1",
        kind="ConfigMap",
        metadata=k.V1ObjectMeta(
            name=name, labels={"app.kubernetes.io/name": "gpu-repro", "gpu-repro/matrix": plan.name}
        ),
        data={PLAN_FILE: json.dumps(plan_doc, indent=2)},
    )


def secret(plan: Plan, cells: Sequence[Cell], name: str, values: bool = False) -> Any | None:
    """The Secret carrying the lane's secret env (None when it has none).

    Its values are ``<redacted>`` unless ``values``: the manifests written to disk and the dry run
    show the Secret's shape; only the object sent to the API server holds the values.
    """
    carried = cells[0].lane.secret_values()
    if not carried:
        return None
    k = _client().client
    return k.V1Secret(
        api_version="v1",
        kind="Secret",
        type="Opaque",
        metadata=k.V1ObjectMeta(
            name=name, labels={"app.kubernetes.io/name": "gpu-repro", "gpu-repro/matrix": plan.name}
        ),
        string_data=carried if values else dict.fromkeys(carried, REDACTED),
    )


def job(plan: Plan, cells: Sequence[Cell], name: str, plan_map: str) -> Any:
    """One Indexed Job: pod ``i`` runs ``cells[i]`` (``JOB_COMPLETION_INDEX``), one retry per index by default."""
    k = _client().client
    first = cells[0]
    gpus = first.gpus
    root = f"{CONTAINER_ROOT}/{plan.name}"
    args = [
        "matrix", "cell", "--plan", f"{PLAN_MOUNT}/{PLAN_FILE}", "--root", root,
        "--cells", ",".join(str(c.index) for c in cells), "--index-env", "JOB_COMPLETION_INDEX",
    ]  # fmt: skip

    def field_env(name: str, path: str) -> Any:
        return k.V1EnvVar(name=name, value_from=k.V1EnvVarSource(field_ref=k.V1ObjectFieldSelector(field_path=path)))

    resources = (
        k.V1ResourceRequirements(limits={GPU_RESOURCE: str(gpus.count)})
        if gpus.count > 0
        else k.V1ResourceRequirements()
    )
    container = k.V1Container(
        name="repro",
        image=first.lane.ref,
        image_pull_policy="IfNotPresent",
        args=args,  # the images' ENTRYPOINT is `repro`
        env=[
            # The fingerprint records the pod and its node (placement.SCHEDULER_ENV).
            field_env("GPU_REPRO_POD_NAME", "metadata.name"),
            field_env("GPU_REPRO_POD_NAMESPACE", "metadata.namespace"),
            field_env("GPU_REPRO_NODE_NAME", "spec.nodeName"),
            # The lane's secrets, from the Secret of the same name (`repro matrix cell` maps them back).
            *(
                k.V1EnvVar(
                    name=var,
                    value_from=k.V1EnvVarSource(secret_key_ref=k.V1SecretKeySelector(name=name, key=var)),
                )
                for var in first.lane.secret_values()
            ),
        ],
        resources=resources,
        volume_mounts=[
            k.V1VolumeMount(name="plan", mount_path=PLAN_MOUNT, read_only=True),
            k.V1VolumeMount(name="artifacts", mount_path=CONTAINER_ROOT),
        ],
        security_context=k.V1SecurityContext(
            run_as_non_root=True, run_as_user=1000, run_as_group=1000, allow_privilege_escalation=False
        ),
    )
    pvc = plan.k8s.get("pvc")
    volumes = [
        k.V1Volume(name="plan", config_map=k.V1ConfigMapVolumeSource(name=plan_map)),
        k.V1Volume(
            name="artifacts",
            persistent_volume_claim=k.V1PersistentVolumeClaimVolumeSource(claim_name=pvc) if pvc else None,
            # Without a claim the artifacts die with the pod: only good for a dry run's look at the shape.
            empty_dir=None if pvc else k.V1EmptyDirVolumeSource(),
        ),
    ]
    pod = k.V1PodSpec(
        restart_policy="Never",  # required by backoffLimitPerIndex
        containers=[container],
        volumes=volumes,
        node_selector={GPU_PRODUCT_LABEL: gpus.sku} if gpus.sku else None,
        active_deadline_seconds=int(plan.timeout_s + _SLACK_S),
        security_context=k.V1PodSecurityContext(fs_group=1000),
    )
    labels = {"app.kubernetes.io/name": "gpu-repro", "gpu-repro/matrix": plan.name, "gpu-repro/lane": first.lane.name}
    return k.V1Job(
        api_version="batch/v1",
        kind="Job",
        metadata=k.V1ObjectMeta(name=name, labels=labels),
        spec=k.V1JobSpec(
            completion_mode="Indexed",
            completions=len(cells),
            parallelism=min(len(cells), int(plan.k8s.get("parallelism") or len(cells))),
            backoff_limit_per_index=int(plan.k8s.get("backoff_limit_per_index", 1)),
            # backoffLimitPerIndex needs backoffLimit unset or large; a failed index must not fail the Job.
            max_failed_indexes=len(cells),
            template=k.V1PodTemplateSpec(metadata=k.V1ObjectMeta(labels=labels), spec=pod),
        ),
    )


def manifests(
    plan: Plan, cells: Sequence[Cell], plan_doc: dict[str, Any], attempt: str
) -> list[tuple[str, list[Any], list[Cell]]]:
    """(job name, [ConfigMap, Secret (if the lane has secrets, values redacted), Job], its cells) per lane
    and GPU selector."""
    out = []
    seen: dict[str, str] = {}
    for group in groups(cells):
        name = job_name(plan, group, attempt)
        lane = f"lane {group[0].lane.name!r} (GPU selector {group[0].group})"
        if name in seen:  # a hash collision of 32 bits: refuse rather than overwrite one Job with another
            raise UsageError(f"k8s Job name {name} is the same for {seen[name]} and {lane}; expected distinct names")
        seen[name] = lane
        objs = [config_map(plan, name, plan_doc), secret(plan, group, name), job(plan, group, name, name)]
        out.append((name, [o for o in objs if o is not None], group))
    return out


def to_yaml(objects: Sequence[Any]) -> str:
    """YAML documents from the client's models, exactly as the API server would receive them."""
    import yaml

    api = _client().client.ApiClient()
    return str(yaml.safe_dump_all([api.sanitize_for_serialization(o) for o in objects], sort_keys=False))


def submit_and_wait(
    plan: Plan,
    jobs: Sequence[tuple[str, list[Any], list[Cell]]],
    timeout_s: float,
    *,
    log: Callable[[str], None],
) -> dict[str, dict[str, Any]]:
    """Create the ConfigMaps and Jobs with the local kubeconfig, wait for them, and record each index's pod.

    Untested here (no cluster on the CI machines); the objects it sends are the ones the dry run writes.
    """
    kube = _client()
    try:
        kube.config.load_kube_config()
    except Exception as exc:  # the loader raises several unrelated types for a missing or bad file
        raise ReproError(f"no usable kubeconfig ({exc}); expected ~/.kube/config or $KUBECONFIG") from None
    ns = plan.k8s.get("namespace", "default")
    core, batch = kube.client.CoreV1Api(), kube.client.BatchV1Api()
    cells_by_job = {name: cells for name, _, cells in jobs}
    for name, objs, cells in jobs:
        for obj in objs:
            if obj.kind == "ConfigMap":
                core.create_namespaced_config_map(ns, obj)
            elif obj.kind == "Secret":  # the one object that holds the values, never written to disk
                core.create_namespaced_secret(ns, secret(plan, cells, name, values=True))
            else:
                batch.create_namespaced_job(ns, obj)
        log(f"k8s: created job {name} in {ns}")
    start = time.monotonic()
    pending = {name for name, _, _ in jobs}
    try:
        while pending:
            for name in sorted(pending):
                st = batch.read_namespaced_job_status(name, ns).status
                done = (st.succeeded or 0) + (st.failed or 0)
                if done >= len(cells_by_job[name]) or any(
                    c.type in ("Complete", "Failed") for c in st.conditions or []
                ):
                    pending.discard(name)
            if pending and time.monotonic() - start > timeout_s:
                for name in pending:
                    batch.delete_namespaced_job(name, ns, propagation_policy="Foreground")
                log(f"k8s: deleted {', '.join(sorted(pending))} after the {timeout_s:g} s timeout")
                break
            time.sleep(5)
    except KeyboardInterrupt:
        for name in pending:
            batch.delete_namespaced_job(name, ns, propagation_policy="Foreground")
        raise
    records: dict[str, dict[str, Any]] = {}
    for name, cells in cells_by_job.items():
        pods = core.list_namespaced_pod(ns, label_selector=f"job-name={name}").items
        for pod in pods:
            index = int((pod.metadata.annotations or {}).get("batch.kubernetes.io/job-completion-index", -1))
            if not 0 <= index < len(cells):
                continue
            term = next(
                (s.state.terminated for s in pod.status.container_statuses or [] if s.state and s.state.terminated),
                None,
            )
            records[cells[index].id] = {
                "backend": "k8s",
                "task": f"{name}/{index}",
                "pod": pod.metadata.name,
                "node": pod.spec.node_name or "",
                "state": pod.status.phase,
                "reason": (term.reason if term else pod.status.reason) or "",
                "exit_code": str(term.exit_code) if term else "",
            }
    return records


def write_manifests(folder: Path, jobs: Sequence[tuple[str, list[Any], list[Cell]]]) -> list[Path]:
    """One YAML file per Job (ConfigMap first), under ``folder``; never overwrites."""
    from repro.core import fsio

    paths = []
    for name, objs, _ in jobs:
        try:
            paths.append(fsio.write_new(folder / f"{name}.yaml", to_yaml(objs).encode()))
        except FileExistsError:
            raise UsageError(
                f"{folder / name}.yaml exists; expected a new k8s attempt (rerun `repro matrix run`)"
            ) from None
    return paths
