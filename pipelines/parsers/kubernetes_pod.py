"""Read one Kubernetes Pod object into the plain values allocation events need (pure).

GPU resources, from each container's ``resources.limits`` (``requests`` when no limits):

* ``nvidia.com/gpu`` -> ``{"kind": "gpu", "count": n}``
* ``nvidia.com/mig-<g>g.<mem>gb`` -> ``{"kind": "mig", "profile": "<g>g.<mem>gb", "count": n}``
* ``nvidia.com/gpu.shared`` -> ``{"kind": "shared", "count": n, "replicas": N}``; N (replicas per
  GPU of the time-slicing config) from the pod annotation ``gpuledger.io/replicas``, else the
  ``replicas`` hint, else none: the node's ``nvidia.com/gpu.replicas`` in force decides, 4 when no
  source states it (docs/ATTRIBUTION.md "Device ids on pods").

The pod's GPUs are the sum over its containers, or the largest init container's when larger
(init containers run before the app containers and reuse the same devices). A pod without any
GPU resource is not read (``read_pod`` returns ``None``): it holds no GPU-seconds.

``gpu_type`` comes from the node selector ``nvidia.com/gpu.product`` when the pod sets one.
Device ids come from the pod annotation ``gpuledger.io/devices`` (comma-separated kubelet
PodResources ids: ``GPU-<uuid>``, ``MIG-<uuid>``, ``<id>::<replica>``) unless the caller knows
them from the PodResources API (:func:`pipelines.parsers.kubernetes.parse_pod_resources`).

Owner labels: which pod labels name the team and the model is configurable; the pod's ``team`` and
``model`` labels are set from them as it is read (:mod:`pipelines.parsers.kubernetes_labels`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pipelines.events import mig_fraction
from pipelines.parsers.base import json_list, json_object
from pipelines.parsers.kubernetes_dra import DraInventory, Held
from pipelines.parsers.kubernetes_labels import OwnerKeys, configured_owner_keys, owner_labels
from pipelines.times import optional_time

GPU = "nvidia.com/gpu"
SHARED = "nvidia.com/gpu.shared"
MIG_PREFIX = "nvidia.com/mig-"
DEVICES_ANNOTATION = "gpuledger.io/devices"
REPLICAS_ANNOTATION = "gpuledger.io/replicas"
PRODUCT_SELECTOR = "nvidia.com/gpu.product"


@dataclass(frozen=True)
class Run:
    """One terminated container run (``state.terminated`` or ``lastState.terminated``)."""

    started: datetime | None
    finished: datetime | None
    reason: str | None
    exit_code: int | None
    signal: int | None
    message: str | None = None


@dataclass(frozen=True)
class GpuContainer:
    name: str
    restart_count: int
    terminated: Run | None  # current state
    last_terminated: Run | None  # previous run
    running_since: datetime | None


@dataclass(frozen=True)
class PodView:
    namespace: str
    name: str
    uid: str | None
    created: datetime | None
    start: datetime | None
    node: str | None
    deletion: datetime | None  # metadata.deletionTimestamp (request time + grace period)
    deletion_requested: datetime | None  # deletionTimestamp - deletionGracePeriodSeconds
    phase: str | None
    reason: str | None
    message: str | None
    restart_policy: str
    labels: dict[str, str]
    annotations: dict[str, str]
    owner_kind: str | None
    owner_name: str | None
    completion_index: str | None
    priority_class: str | None
    containers: list[GpuContainer]  # containers holding GPUs (all app containers if none does)
    gpus: list[dict[str, Any]]
    conditions: list[dict[str, Any]] = field(default_factory=list)
    latest_time: datetime | None = None  # the latest timestamp anywhere in the status
    held: Held = field(default_factory=Held)  # through DRA ResourceClaims (claims, device ids, notes)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def restarts(self) -> int:
        return sum(c.restart_count for c in self.containers)


def read_pod(
    pod: dict[str, Any],
    *,
    replicas: int | None = None,
    dra: DraInventory | None = None,
    owner_keys: OwnerKeys | None = None,
) -> PodView | None:
    """The pod's values, or None when it holds no GPU (by resources, or by a ResourceClaim ``dra``
    resolves). Raises ValueError on a malformed pod or a claim that cannot be resolved.
    ``owner_keys``: which labels name the team and the model (default: the settings')."""
    meta, spec, status = json_object(pod, "metadata"), json_object(pod, "spec"), json_object(pod, "status")
    annotations = _str_map(meta.get("annotations"), "annotations")
    gpus, gpu_names = pod_gpus(spec, annotations, replicas)
    held = Held()
    if dra is not None and spec.get("resourceClaims"):
        placed = bool(status.get("startTime")) and bool(spec.get("nodeName"))
        where = str(meta.get("namespace") or "default")
        held = dra.held(where, spec, status, placed=placed, pod=f"{where}/{meta.get('name')}/{meta.get('uid')}")
        gpus, gpu_names = gpus + held.gpus, gpu_names | held.containers
    if not gpus:
        return None
    name, namespace = _required(meta, "name"), _required(meta, "namespace")
    statuses = {s.get("name"): s for s in json_list(status.get("containerStatuses")) if isinstance(s, dict)}
    app = [c.get("name") for c in json_list(spec.get("containers")) if isinstance(c, dict)]
    watched = [n for n in app if n in gpu_names] or app
    containers = [_container(str(n), statuses.get(n) or {}) for n in watched]
    owner = next(
        (
            ref
            for ref in json_list(meta.get("ownerReferences"))
            if isinstance(ref, dict) and ref.get("controller", True)
        ),
        {},
    )
    labels = owner_labels(_str_map(meta.get("labels"), "labels"), owner_keys or configured_owner_keys())
    deletion = optional_time(meta.get("deletionTimestamp"))
    grace = meta.get("deletionGracePeriodSeconds")
    requested = deletion - timedelta(seconds=grace) if deletion and isinstance(grace, int) else deletion
    return PodView(
        namespace=namespace,
        name=name,
        uid=meta.get("uid") if isinstance(meta.get("uid"), str) else None,
        created=optional_time(meta.get("creationTimestamp")),
        start=optional_time(status.get("startTime")),
        node=_opt_str(spec.get("nodeName")),
        deletion=deletion,
        deletion_requested=requested,
        phase=_opt_str(status.get("phase")),
        reason=_opt_str(status.get("reason")),
        message=_opt_str(status.get("message")),
        restart_policy=_opt_str(spec.get("restartPolicy")) or "Always",
        labels=labels,
        annotations=annotations,
        owner_kind=_opt_str(owner.get("kind")),
        owner_name=_opt_str(owner.get("name")),
        completion_index=annotations.get("batch.kubernetes.io/job-completion-index")
        or labels.get("batch.kubernetes.io/job-completion-index"),
        priority_class=_opt_str(spec.get("priorityClassName")),
        containers=containers,
        gpus=gpus,
        conditions=[c for c in json_list(status.get("conditions")) if isinstance(c, dict)],
        latest_time=_latest_time(status),
        held=held,
    )


def pod_gpus(
    spec: dict[str, Any], annotations: dict[str, str], replicas: int | None
) -> tuple[list[dict[str, Any]], set[str]]:
    """The pod's GpuRequest dicts and the names of the app containers that hold GPUs."""
    replicas = _replicas(annotations.get(REPLICAS_ANNOTATION), replicas)
    product = json_object(spec, "nodeSelector").get(PRODUCT_SELECTOR)
    app: dict[tuple[str, str | None], int] = {}
    init: dict[tuple[str, str | None], int] = {}
    holders: set[str] = set()
    for container in json_list(spec.get("containers")):
        for key, count in container_gpus(container).items():
            app[key] = app.get(key, 0) + count
            holders.add(str(container.get("name")))
    for container in json_list(spec.get("initContainers")):
        for key, count in container_gpus(container).items():
            init[key] = max(init.get(key, 0), count)
    merged = {key: max(app.get(key, 0), init.get(key, 0)) for key in sorted({*app, *init}, key=str)}
    gpus = [
        {
            "kind": kind,
            "count": count,
            "profile": profile,
            "replicas": replicas if kind == "shared" else None,
            "gpu_type": product if isinstance(product, str) else None,
        }
        for (kind, profile), count in merged.items()
        if count > 0
    ]
    return gpus, holders


def container_gpus(container: Any) -> dict[tuple[str, str | None], int]:
    """``{(kind, profile): count}`` of one container spec's GPU resources."""
    if not isinstance(container, dict):
        raise ValueError("container spec is not an object")
    resources = json_object(container, "resources")
    amounts = resources.get("limits") or resources.get("requests") or {}
    if not isinstance(amounts, dict):
        raise ValueError("resources.limits is not an object")
    out: dict[tuple[str, str | None], int] = {}
    for resource, quantity in amounts.items():
        if resource == GPU:
            key: tuple[str, str | None] = ("gpu", None)
        elif resource == SHARED:
            key = ("shared", None)
        elif isinstance(resource, str) and resource.startswith(MIG_PREFIX):
            profile = resource[len(MIG_PREFIX) :]
            mig_fraction(profile)  # raises ValueError for a malformed profile
            key = ("mig", profile)
        else:
            continue
        out[key] = out.get(key, 0) + _quantity(quantity, resource)
    return out


def _quantity(value: Any, resource: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and value.strip().isdecimal() and value.strip().isascii():
        return int(value)
    raise ValueError(f"{resource} quantity must be a whole number, got {str(value)[:20]!r}")


def _replicas(annotation: str | None, hint: int | None) -> int | None:
    """The pod's annotation, else the collector's hint, else None: the node's replicas in force
    decide (``nvidia.com/gpu.replicas``; docs/ATTRIBUTION.md "Time-slicing and MPS per node")."""
    if annotation is not None:
        if not annotation.strip().isdecimal() or int(annotation) < 1:
            raise ValueError(f"{REPLICAS_ANNOTATION} must be a positive integer, got {annotation[:20]!r}")
        return int(annotation)
    return hint


def _container(name: str, status: dict[str, Any]) -> GpuContainer:
    running = _state(status, "running")
    restarts = status.get("restartCount", 0)
    if not _is_int(restarts) or restarts < 0:
        raise ValueError(f"container {name}: bad restartCount {restarts!r}")
    return GpuContainer(
        name=name,
        restart_count=restarts,
        terminated=_run(_state(status, "terminated")),
        last_terminated=_run(json_object(status, "lastState").get("terminated")),
        running_since=optional_time(running.get("startedAt")) if running else None,
    )


def _run(terminated: Any) -> Run | None:
    if not isinstance(terminated, dict) or not terminated:
        return None
    code, signal = terminated.get("exitCode"), terminated.get("signal")
    if (code is not None and not _is_int(code)) or (signal is not None and not _is_int(signal)):
        raise ValueError("terminated state with a non-integer exitCode/signal")
    return Run(
        started=optional_time(terminated.get("startedAt")),
        finished=optional_time(terminated.get("finishedAt")),
        reason=_opt_str(terminated.get("reason")),
        exit_code=code,
        signal=signal or None,
        message=_opt_str(terminated.get("message")),
    )


def _latest_time(status: dict[str, Any]) -> datetime | None:
    times = [
        optional_time(c.get("lastTransitionTime")) for c in json_list(status.get("conditions")) if isinstance(c, dict)
    ]
    for container in json_list(status.get("containerStatuses")):
        if isinstance(container, dict):
            run = _run(_state(container, "terminated"))
            times.append(run.finished if run else None)
    known = [t for t in times if t is not None]
    return max(known) if known else None


def _state(status: dict[str, Any], which: str) -> dict[str, Any]:
    state = status.get("state")
    inner = state.get(which) if isinstance(state, dict) else None
    return inner if isinstance(inner, dict) else {}


def _str_map(value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValueError(f"{what} must map strings to strings")
    return dict(value)


def _required(meta: dict[str, Any], key: str) -> str:
    value = meta.get(key)
    if not isinstance(value, str) or not value:
        raise ValueError(f"pod without metadata.{key}")
    return value


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
