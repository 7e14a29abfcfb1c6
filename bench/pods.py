"""A Kubernetes pod list (``kubectl get pods -A -o json``) of GPU training pods, for the parse + publish rate.

Pods as the API serves them: a Job owner, requests and limits with ``nvidia.com/gpu: 4``, the node,
conditions and container statuses. A quarter are running, the rest finished: half of those
succeeded (``Completed``, exit 0), half failed (``OOMKilled``, exit 137).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

import orjson

from bench.load import Load
from pipelines.times import utc_text

GPUS_PER_POD = 4


def _state(index: int, started: datetime) -> tuple[str, dict[str, Any]]:
    """(pod phase, container state) of pod ``index``."""
    if index % 4 == 0:
        return "Running", {"running": {"startedAt": utc_text(started)}}
    failed = index % 2 == 1
    finished = started + timedelta(minutes=30 + index % 50)
    terminated = {
        "exitCode": 137 if failed else 0,
        "reason": "OOMKilled" if failed else "Completed",
        "startedAt": utc_text(started),
        "finishedAt": utc_text(finished),
        "containerID": f"containerd://{uuid.uuid5(uuid.NAMESPACE_URL, str(index)).hex}",
    }
    return ("Failed" if failed else "Succeeded"), {"terminated": terminated}


def pod(load: Load, index: int) -> dict[str, Any]:
    node = f"{load.node_prefix}-{index % load.nodes:04d}"
    team = f"team-{index % 6}"
    job = f"train-{index}"
    created = load.start + timedelta(seconds=37 * index)
    started = created + timedelta(seconds=20)
    phase, state = _state(index, started)
    resources = {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": str(GPUS_PER_POD)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{job}-worker-0",
            "namespace": team,
            "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"pod/{index}")),
            "resourceVersion": str(100_000 + index),
            "creationTimestamp": utc_text(created),
            "labels": {"team": team, "job-name": job, "batch.kubernetes.io/job-name": job},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": job,
                    "controller": True,
                    "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"job/{index}")),
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "containers": [
                {
                    "name": "trainer",
                    "image": "registry.local/train:2.4",
                    "resources": {"limits": resources, "requests": resources},
                }
            ],
            "restartPolicy": "Never",
            "schedulerName": "default-scheduler",
            "nodeName": node,
        },
        "status": {
            "phase": phase,
            "qosClass": "Guaranteed",
            "startTime": utc_text(started),
            "hostIP": f"10.0.{index % load.nodes // 250}.{index % load.nodes % 250}",
            "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": utc_text(created)}],
            "containerStatuses": [
                {
                    "name": "trainer",
                    "image": "registry.local/train:2.4",
                    "ready": phase == "Running",
                    "started": phase == "Running",
                    "restartCount": 0,
                    "state": state,
                    "lastState": {},
                }
            ],
        },
    }


def pod_list(load: Load, pods: int) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [pod(load, i) for i in range(pods)],
            "metadata": {"resourceVersion": ""},
        }
    )
