"""``kubernetes/nodes.json`` (modern sharing): the Kubernetes nodes as ``kubectl get nodes -o json``
lists them, with the labels GPU Feature Discovery puts on them.

Every GPU node: ``nvidia.com/gpu.present``, ``nvidia.com/gpu.count`` (the physical GPUs),
``nvidia.com/gpu.product`` (the model name with dashes; ``-SHARED`` appended on a node whose GPUs
are shared, as GFD does), ``nvidia.com/gpu.memory``. A time-slicing or MPS node also
``nvidia.com/gpu.replicas: "<N>"`` and ``nvidia.com/gpu.sharing-strategy``, and advertises
``count × N`` ``nvidia.com/gpu`` in ``capacity`` and ``allocatable``. The DRA node advertises no
``nvidia.com/gpu`` (the DRA driver publishes its GPUs as ResourceSlices instead); a classic node
its whole GPUs and time-sliced replicas as ``nvidia.com/gpu``, the replicas once more as
``nvidia.com/gpu.shared``, and its MIG instances as ``nvidia.com/mig-<profile>``.
Every node is Ready since before the window; the list holds no time of its own, so it is
ingested with the window start as its time (the manifest's ``hints``).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import orjson

from pipelines.simulator import sharing
from pipelines.simulator.config import SimConfig
from pipelines.simulator.model.cluster import Cluster, Node
from pipelines.simulator.writers.common import write_text
from pipelines.times import utc_text

FILE = "kubernetes/nodes.json"
BOOTED = -30 * 86400  # the nodes joined the cluster a month before the window


def node_uid(cfg: SimConfig, name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{cfg.cluster}.{cfg.seed}.{name}"))


def _resources(node: Node) -> dict[str, str]:
    out = {"cpu": "224", "memory": "2113714136Ki", "pods": "110", "ephemeral-storage": "3749851832Ki"}
    replicas = sharing.REPLICAS.get(node.sharing)
    if replicas is not None:
        out["nvidia.com/gpu"] = str(len(node.gpus) * replicas)
    elif node.sharing != sharing.DRA:
        whole = sum(1 for g in node.gpus if g.layout == "whole")
        shared = sum(g.replicas for g in node.gpus if g.layout == "shared")
        out["nvidia.com/gpu"] = str(whole + shared)
        out["nvidia.com/gpu.shared"] = str(shared)
        for gpu in node.gpus:
            for mig in gpu.mig:
                key = f"nvidia.com/mig-{mig.profile}"
                out[key] = str(int(out.get(key, "0")) + 1)
    return dict(sorted(out.items()))


def _labels(node: Node) -> dict[str, str]:
    product = node.model.name.replace(" ", "-")
    labels = {
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": node.name,
        "kubernetes.io/os": "linux",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.count": str(len(node.gpus)),
        "nvidia.com/gpu.memory": str(node.model.fb_mib),
        "nvidia.com/gpu.product": product,
        "nvidia.com/cuda.driver.major": "550",
        "nvidia.com/mig.strategy": "mixed",
    }
    replicas = sharing.REPLICAS.get(node.sharing)
    if replicas is not None:
        labels.update(
            {
                "nvidia.com/gpu.product": f"{product}-SHARED",
                "nvidia.com/gpu.replicas": str(replicas),
                "nvidia.com/gpu.sharing-strategy": node.sharing,
                "nvidia.com/mig.strategy": "none",
            }
        )
    elif node.sharing == sharing.DRA:
        labels.update({"nvidia.com/dra-kubelet-plugin": "true", "nvidia.com/mig.strategy": "none"})
    return dict(sorted(labels.items()))


def node_object(cfg: SimConfig, node: Node) -> dict[str, Any]:
    joined = utc_text(cfg.at(BOOTED))
    resources = _resources(node)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "uid": node_uid(cfg, node.name),
            "creationTimestamp": joined,
            "labels": _labels(node),
        },
        "spec": {"podCIDR": f"10.244.{node.index}.0/24", "providerID": f"baremetal://{node.name}"},
        "status": {
            "addresses": [{"type": "InternalIP", "address": node.ip}, {"type": "Hostname", "address": node.name}],
            "allocatable": resources,
            "capacity": dict(resources),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": utc_text(cfg.at(0)),
                    "lastTransitionTime": joined,
                }
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.34.1",
                "containerRuntimeVersion": "containerd://2.1.4",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def write_nodes(path: Path, cfg: SimConfig, cluster: Cluster) -> None:
    items = [node_object(cfg, n) for n in cluster.by_scheduler("kubernetes")]
    doc = {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}}
    write_text(path, orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
