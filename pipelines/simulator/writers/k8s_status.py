"""The ``status`` of a pod object at each stage (phase, conditions, times, container status)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipelines.simulator.writers.k8s_objects import PodView


def _condition(kind: str, ok: bool, at: str, reason: str | None = None, message: str | None = None) -> dict[str, Any]:
    cond: dict[str, Any] = {
        "type": kind,
        "status": "True" if ok else "False",
        "lastProbeTime": None,
        "lastTransitionTime": at,
    }
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def _phase(view: PodView, stage: str, i: int) -> str:
    if stage in ("created", "scheduled", "admitted"):
        return "Pending"
    if stage in ("ended", "deleted"):
        reason = view.attempts[i].reason
        return "Succeeded" if reason is None else "Failed"
    return "Running"


def status_of(view: PodView, at: int, stage: str, i: int) -> dict[str, Any]:
    pod, t = view.pod, view.t
    status: dict[str, Any] = {"phase": _phase(view, stage, i), "qosClass": "Guaranteed"}
    if view.role() == "dra":  # the claim generated from the pod's template, from its creation on
        generated = view.claim()[1]
        if generated is not None:
            status["resourceClaimStatuses"] = [generated]
    if stage == "created":
        return status
    conditions = [_condition("PodScheduled", True, t(pod.scheduled))]  # type: ignore[arg-type]
    if stage != "scheduled":
        first = view.attempts[0]
        ready = stage in ("running", "disrupted")
        conditions = [
            _condition("PodReadyToStartContainers", True, t(first.start)),
            _condition("Initialized", True, t(first.start)),
            _condition("Ready", ready, t(at), None if ready else "ContainersNotReady"),
            _condition("ContainersReady", ready, t(at), None if ready else "ContainersNotReady"),
            *conditions,
        ]
        if pod.disruption is not None and at >= pod.disruption:
            conditions.append(
                _condition(
                    "DisruptionTarget",
                    True,
                    t(pod.disruption),
                    "PreemptionByScheduler",
                    "default-scheduler: preempting to accommodate a higher priority pod",
                )
            )
        node = view.cluster.node(pod.node) if view.cluster and pod.node else None
        status.update(
            hostIP=node.ip if node else None,
            podIP=_pod_ip(view),
            startTime=t(first.start),
            containerStatuses=[view._container_status(stage, i)],
        )
    status["conditions"] = conditions
    if stage in ("ended", "deleted"):
        if pod.phase_reason == "NodeLost":
            status["reason"] = "NodeLost"
            status["message"] = f"Node {pod.node} which was running pod {pod.name} is unresponsive"
        elif pod.phase_reason == "DeadlineExceeded":
            status["reason"] = "DeadlineExceeded"
            status["message"] = "Pod was active on the node longer than the specified deadline"
    return status


def _pod_ip(view: PodView) -> str:
    node = view.cluster.node(view.pod.node) if view.cluster and view.pod.node else None
    octet = int(view.pod.uid[:4], 16) % 250 + 2
    return f"10.244.{node.index if node else 0}.{octet}"
