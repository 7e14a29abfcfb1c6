"""Kubernetes Node objects (``kubectl get nodes -o json``, the API's NodeList) -> ``node.state`` events.

State: the ``Ready`` condition ``False`` or ``Unknown`` (NotReady) -> ``down``; else cordoned
(``spec.unschedulable``, or the ``node.kubernetes.io/unschedulable`` taint) -> ``drained``; else
``up``. While a node is down or drained, its GPUs that no pod holds are unavailable
(docs/ATTRIBUTION.md "Unavailable").

GPUs (the node's physical inventory): the GPU feature discovery label ``nvidia.com/gpu.count``,
else ``status.capacity["nvidia.com/gpu"]`` divided by the time-slicing replicas
(``nvidia.com/gpu.replicas`` label; with the GPU Operator's ``renameByDefault: false`` a time-sliced
GPU is advertised once per replica). GPU model: the ``nvidia.com/gpu.product`` label.

Sharing (effective from the state's time; docs/ATTRIBUTION.md "Time-slicing and MPS"): GPU feature
discovery's ``nvidia.com/gpu.replicas`` (replicas per physical GPU) and
``nvidia.com/gpu.sharing-strategy`` (``time-slicing``, ``mps`` or ``none``). Replicas above 1
without the strategy label (feature discovery before MPS support) are time-slicing; the strategy
label with 1 or no replicas is ``none`` (1 replica). Neither label: nothing is stated.

Time: the ``observed_at`` hint (the live collector's poll time); without it, the NotReady
condition's ``lastTransitionTime`` for a down node, or the unschedulable taint's ``timeAdded``.
A node with neither carries no dated fact and is skipped.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pipelines.parsers.sched_events import as_dict, node_state_envelope
from pipelines.times import optional_time

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
SHARING_LABEL = "nvidia.com/gpu.sharing-strategy"


def is_node(item: Any) -> bool:
    return isinstance(item, dict) and item.get("kind") == "Node" and isinstance(item.get("metadata"), dict)


def node_state(node: dict[str, Any], *, cluster: str, observed_at: datetime | None) -> dict[str, Any] | None:
    """The node's ``node.state`` envelope (unvalidated), or None when nothing dates it."""
    meta, spec, status = as_dict(node.get("metadata")), as_dict(node.get("spec")), as_dict(node.get("status"))
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("node without a name")
    ready = next((c for c in status.get("conditions") or [] if isinstance(c, dict) and c.get("type") == "Ready"), {})
    taint = next(
        (t for t in spec.get("taints") or [] if isinstance(t, dict) and t.get("key") == UNSCHEDULABLE_TAINT), None
    )
    if ready and ready.get("status") != "True":
        state, reason, since = "down", str(ready.get("reason") or "NotReady"), ready.get("lastTransitionTime")
    elif spec.get("unschedulable") or taint is not None:
        state, reason, since = "drained", "cordoned", (taint or {}).get("timeAdded")
    else:
        state, reason, since = "up", None, None
    time = observed_at or optional_time(since)
    if time is None:
        return None
    gpus, model = node_gpus(meta, status)
    envelope = node_state_envelope(
        source="kubernetes",
        cluster=cluster,
        node=name,
        state=state,
        time=time,
        reason=reason,
        gpus=gpus,
        gpu_model=model,
    )
    replicas, sharing = node_sharing(as_dict(meta.get("labels")))
    if replicas is not None:
        envelope["data"].update(gpu_replicas=replicas, sharing=sharing)
    return envelope


def node_sharing(labels: dict[str, Any]) -> tuple[int | None, str | None]:
    """(replicas per physical GPU, sharing strategy) from the feature discovery labels, or (None, None)."""
    replicas = _integer(labels.get("nvidia.com/gpu.replicas"))
    replicas = replicas if replicas is not None and replicas >= 1 else None
    strategy = labels.get(SHARING_LABEL)
    if replicas is not None and replicas > 1:
        return replicas, strategy if strategy in ("time-slicing", "mps") else "time-slicing"
    if replicas == 1 or strategy is not None:
        return 1, "none"
    return None, None


def node_gpus(meta: dict[str, Any], status: dict[str, Any]) -> tuple[int | None, str | None]:
    labels = as_dict(meta.get("labels"))
    model = labels.get("nvidia.com/gpu.product") or None
    count = _integer(labels.get("nvidia.com/gpu.count"))
    if count is None:
        advertised = _integer(as_dict(status.get("capacity")).get("nvidia.com/gpu"))
        replicas = _integer(labels.get("nvidia.com/gpu.replicas")) or 1
        count = advertised // replicas if advertised is not None else None
    return count, model


def _integer(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().isdecimal():
        return int(value)
    return None
