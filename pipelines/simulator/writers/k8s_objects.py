"""Pod objects at each stage of their life, as ``kubectl get pod -o json`` would show them."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from pipelines.simulator import sharing
from pipelines.simulator.config import SHARED_REPLICAS, SimConfig
from pipelines.simulator.dcgm_view import container_name
from pipelines.simulator.model.cluster import Cluster
from pipelines.simulator.model.jobs import Attempt, JobSpec, Pod
from pipelines.times import utc_text

IMAGES = {
    "training": "nvcr.io/nvidia/pytorch:24.08-py3",
    "inference": "vllm/vllm-openai:v0.6.3",
    "notebook": "quay.io/jupyter/pytorch-notebook:cuda12-2024-11-04",
    "batch": "registry.local/batch/worker:1.4",
}
TERMINATED = {
    None: ("Completed", 0),
    "oom": ("OOMKilled", 137),
    "app_error": ("Error", 1),
    "timeout": ("Error", 137),
    "preempted": ("Error", 143),
}


def renamed(uid: str) -> bool:
    """Whether a time-sliced pod asks for ``nvidia.com/gpu.shared`` (the device plugin's
    ``renameByDefault: true``) or, as the GPU Operator ships it (``renameByDefault: false``), for plain
    ``nvidia.com/gpu`` — half of the pods each, by their uid. Either way it holds a replica
    ``GPU-<uuid>::<k>``, 1/4 of the GPU."""
    return hashlib.sha256(uid.encode()).digest()[0] % 2 == 0


def _limits(spec: JobSpec, slots_profile: str | None, uid: str, role: str = "") -> dict[str, str]:
    """The container's limits; ``role``: the sharing of the pod's node (modern sharing). On a DRA
    node the GPUs come through claims, not resources; on a time-slicing or MPS node a replica is
    plain ``nvidia.com/gpu`` (the node's labels say how many replicas a GPU has)."""
    limits = {"cpu": str(8 * spec.count if spec.request == "gpu" else 4), "memory": "64Gi"}
    if role == sharing.DRA or spec.request == "claim":
        return limits
    if spec.request == "shared" and role in sharing.REPLICAS:
        limits["nvidia.com/gpu"] = "1"
    elif spec.request == "gpu":
        limits["nvidia.com/gpu"] = str(spec.count)
    elif spec.request == "mig":
        limits[f"nvidia.com/mig-{slots_profile}"] = "1"
    elif renamed(uid):
        limits["nvidia.com/gpu.shared"] = "1"
    else:
        limits["nvidia.com/gpu"] = "1"
    return limits


@dataclass
class PodView:
    spec: JobSpec
    pod: Pod
    attempts: list[Attempt]
    cfg: SimConfig | None = None
    cluster: Cluster | None = None
    profile: str | None = field(default=None)

    def t(self, offset: int) -> str:
        assert self.cfg is not None
        return utc_text(self.cfg.at(offset))

    def _metadata(self, stage: str) -> dict[str, Any]:
        spec, pod = self.spec, self.pod
        labels = {"gpuledger.io/kind": spec.kind}
        if spec.owner_kind == "Job":
            labels.update(
                {
                    "batch.kubernetes.io/controller-uid": spec.owner_uid or "",
                    "batch.kubernetes.io/job-name": spec.owner_name or "",
                    "controller-uid": spec.owner_uid or "",
                    "job-name": spec.owner_name or "",
                }
            )
        elif spec.owner_kind == "ReplicaSet":
            deploy, _, template = (spec.owner_name or "").rpartition("-")
            labels.update({"app": deploy, "pod-template-hash": template})
        else:
            labels.update(
                {"app": "jupyterhub", "component": "singleuser-server", "hub.jupyter.org/username": spec.user}
            )
        if spec.model and spec.model_via == "label":
            labels["model"] = spec.model
        if spec.team_label:
            labels["team"] = spec.team_label
        meta: dict[str, Any] = {
            "name": pod.name,
            "namespace": spec.namespace,
            "uid": pod.uid,
            "creationTimestamp": self.t(pod.created),
            "labels": labels,
        }
        if spec.owner_kind:
            meta["ownerReferences"] = [
                {
                    "apiVersion": "batch/v1" if spec.owner_kind == "Job" else "apps/v1",
                    "kind": spec.owner_kind,
                    "name": spec.owner_name,
                    "uid": spec.owner_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ]
        role = self.role()
        if stage not in ("created", "scheduled") and self.attempts and role != sharing.DRA:
            meta["annotations"] = {"gpuledger.io/devices": ",".join(s.device_id for s in self.attempts[0].slots)}
            if spec.request == "shared" and renamed(pod.uid) and role not in sharing.REPLICAS:
                meta["annotations"]["gpuledger.io/replicas"] = str(SHARED_REPLICAS)
        return meta

    def role(self) -> str:
        """The modern-sharing role of the pod's node ("" when unplaced or classic); a pod of a shared
        claim is a DRA pod wherever it waits."""
        if self.spec.request == "claim":
            return sharing.DRA
        if self.cluster is None or self.pod.node is None:
            return ""
        return self.cluster.node(self.pod.node).sharing

    def _template(self) -> str:
        spec = self.spec
        return f"mig-{spec.mig_profile}" if spec.request == "mig" else f"gpu-x{spec.count}"

    def claim(self) -> tuple[dict[str, str], dict[str, str] | None]:
        """A DRA pod's ``spec.resourceClaims`` entry, and its ``status.resourceClaimStatuses`` entry
        (a claim generated from a template: the generated claim's name)."""
        if self.spec.request == "claim":
            return {"name": "gpu", "resourceClaimName": sharing.shared_claim(self.spec)}, None
        generated = sharing.pod_claim(self.pod)
        return (
            {"name": "gpu", "resourceClaimTemplateName": self._template()},
            {"name": "gpu", "resourceClaimName": generated},
        )

    def _spec(self, stage: str) -> dict[str, Any]:
        spec, pod = self.spec, self.pod
        role = self.role()
        limits = _limits(spec, spec.mig_profile, pod.uid, role)
        body: dict[str, Any] = {
            "restartPolicy": pod.restart_policy,
            "schedulerName": "default-scheduler",
            "terminationGracePeriodSeconds": 30,
            "containers": [
                {
                    "name": container_name(spec),
                    "image": IMAGES.get(spec.kind, IMAGES["batch"]),
                    "resources": {"limits": limits, "requests": dict(limits)},
                }
            ],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        }
        if role == sharing.DRA:
            body["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
            body["resourceClaims"] = [self.claim()[0]]
        if pod.active_deadline is not None:
            body["activeDeadlineSeconds"] = pod.active_deadline
        if stage != "created" and pod.node:
            body["nodeName"] = pod.node
        return body

    def _container_id(self, i: int) -> str:
        return "containerd://" + hashlib.sha256(f"{self.pod.uid}/{i}".encode()).hexdigest()

    def _terminated(self, i: int, reason: str | None) -> dict[str, Any]:
        attempt = self.attempts[i]
        assert attempt.end is not None
        word, code = TERMINATED[reason]
        return {
            "terminated": {
                "exitCode": code,
                "reason": word,
                "startedAt": self.t(attempt.run_start),
                "finishedAt": self.t(attempt.end),
                "containerID": self._container_id(i),
            }
        }

    def _container_status(self, stage: str, i: int) -> dict[str, Any]:
        name = container_name(self.spec)
        status: dict[str, Any] = {
            "name": name,
            "image": IMAGES.get(self.spec.kind, IMAGES["batch"]),
            "ready": False,
            "restartCount": i,
            "started": False,
        }
        if i > 0:
            status["lastState"] = self._terminated(i - 1, self.attempts[i - 1].reason)
        ended = stage in ("ended", "deleted") and self.pod.phase_reason != "NodeLost"
        if stage == "admitted":
            status["state"] = {"waiting": {"reason": "ContainerCreating"}}
        elif stage == "backoff":
            back = self.attempts[i].run_start - self.attempts[i].start
            status["state"] = {
                "waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": (
                        f"back-off {back}s restarting failed container={name} pod={self.pod.name}_"
                        f"{self.spec.namespace}({self.pod.uid})"
                    ),
                }
            }
        elif ended:
            status["state"] = self._terminated(i, self.attempts[i].reason)
        else:
            status.update(
                ready=True,
                started=True,
                containerID=self._container_id(i),
                state={"running": {"startedAt": self.t(self.attempts[i].run_start)}},
            )
        return status

    def render(self, at: int, stage: str, i: int = 0) -> dict[str, Any]:
        from pipelines.simulator.writers.k8s_status import status_of

        obj: dict[str, Any] = {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": self._metadata(stage),
            "spec": self._spec(stage),
            "status": status_of(self, at, stage, i),
        }
        pod = self.pod
        deletion = None
        disrupted = pod.disruption is not None and stage in ("disrupted", "ended", "deleted")
        if disrupted or (pod.phase_reason == "NodeLost" and stage in ("ended", "deleted")):
            deletion = pod.deletion_ts
        elif stage == "deleted":
            deletion = pod.deletion_ts or pod.deleted
        if deletion is not None:
            obj["metadata"]["deletionTimestamp"] = self.t(deletion)
            obj["metadata"]["deletionGracePeriodSeconds"] = 30 if pod.disruption is not None else 0
        return obj
