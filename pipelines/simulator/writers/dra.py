"""``kubernetes/resourceclaims.json`` and ``kubernetes/resourceslices.json`` (modern sharing): the
DRA objects of the node whose GPUs the NVIDIA DRA driver (``gpu.nvidia.com``) hands out, shaped as
``kubectl get resourceclaims -A -o json`` and ``kubectl get resourceslices -o json`` print them
(``resource.k8s.io/v1``).

* One ResourceSlice per DRA node: pool = the node's name, one device ``gpu-<minor>`` per GPU with
  its ``uuid`` (``GPU-…``, what dcgm-exporter's ``UUID`` label says), ``index``, ``minor``,
  ``productName``, ``pcieBusID``, … attributes.
* A ResourceClaim per pod that held whole GPUs or a MIG instance there, generated from the pod's
  claim template (``<pod>-gpu-<5 chars>``, owned by the pod), allocated ``count`` devices (device
  class ``gpu.nvidia.com``, or ``mig.nvidia.com`` for a MIG device ``gpu-<minor>-mig-…``, whose
  attributes give its ``parentUUID``, ``profile`` and placement); and the standalone
  claim of the shared device (``<deployment>-gpu``), reserved for the pods holding it.

The claims are every claim that existed in the window, each as it was last listed while its pod
(or, for the shared claim, any pod) held it — what a collector that lists claims at every poll has
seen; a claim is deleted with its pod, so a single listing at the end would lack the earlier ones.
The pods name their claims (``spec.resourceClaims``, ``status.resourceClaimStatuses``); these files
say which device, so they are ingested together with the pods (the manifest's ``with``).
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson

from pipelines.simulator import sharing
from pipelines.simulator.config import SimConfig
from pipelines.simulator.model.cluster import Cluster, Node, Slot
from pipelines.simulator.model.jobs import Attempt, SimState
from pipelines.simulator.writers.common import write_text
from pipelines.simulator.writers.dcgm import DRIVER
from pipelines.simulator.writers.k8s_nodes import node_uid
from pipelines.times import utc_text

CLAIMS_FILE = "kubernetes/resourceclaims.json"
SLICES_FILE = "kubernetes/resourceslices.json"
API = "resource.k8s.io/v1"
DEVICE_CLASS = "gpu.nvidia.com"  # the driver's DeviceClass of whole GPUs (MIG instances: mig.nvidia.com)
ARCHITECTURE = {"H100": ("Hopper", "9.0.0"), "H200": ("Hopper", "9.0.0"), "A100": ("Ampere", "8.0.0")}


def _uid(*parts: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "/".join(parts)))


def _list(items: list[dict[str, Any]]) -> str:
    doc = {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}}
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n"


def _device(node: Node, slot: Slot) -> dict[str, Any]:
    """The slice's device of a whole GPU or of a MIG instance, with the driver's attributes."""
    gpu = slot.gpu
    arch, capability = ARCHITECTURE.get(node.model.short, ("Hopper", "9.0.0"))
    attributes: dict[str, dict[str, Any]] = {
        "architecture": {"string": arch},
        "brand": {"string": "Nvidia"},
        "cudaComputeCapability": {"version": capability},
        "driverVersion": {"version": DRIVER.replace(".07", ".7")},
        "index": {"int": gpu.index},
        "minor": {"int": gpu.index},
        "pcieBusID": {"string": gpu.pci_bus_id.lower()},
        "productName": {"string": node.model.name},
        "type": {"string": "gpu"},
        "uuid": {"string": gpu.uuid},
    }
    memory = f"{node.model.fb_mib}Mi"
    if slot.mig is not None:
        start, size = sharing.mig_placement(slot)
        attributes.update(
            {
                "type": {"string": "mig"},
                "uuid": {"string": sharing.mig_uuid(slot)},
                "parentUUID": {"string": gpu.uuid},
                "profile": {"string": slot.mig.profile},
                "parentIndex": {"int": gpu.index},
                "parentMinor": {"int": gpu.index},
                "placementStart": {"int": start},
                "placementSize": {"int": size},
            }
        )
        memory = f"{int(slot.mig.profile.split('.')[1].removesuffix('gb'))}Gi"
    return {"name": sharing.device_name(slot), "attributes": attributes, "capacity": {"memory": {"value": memory}}}


def resource_slice(cfg: SimConfig, node: Node) -> dict[str, Any]:
    """The node's ResourceSlice: one device per GPU, or per MIG instance of a partitioned GPU."""
    firsts: dict[str, Slot] = {}
    for slot in node.slots:  # a claim GPU's seats are one device
        firsts.setdefault(slot.key if slot.mig is not None else slot.gpu.uuid, slot)
    devices = [_device(node, slot) for slot in firsts.values()]
    name = f"{node.name}-{sharing.DRA_DRIVER}-{sharing.suffix(node.name)}"
    return {
        "apiVersion": API,
        "kind": "ResourceSlice",
        "metadata": {
            "name": name,
            "generateName": f"{node.name}-{sharing.DRA_DRIVER}-",
            "uid": _uid(cfg.cluster, name),
            "creationTimestamp": utc_text(cfg.at(-86400)),
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "name": node.name,
                    "uid": node_uid(cfg, node.name),
                    "controller": True,
                }
            ],
        },
        "spec": {
            "driver": sharing.DRA_DRIVER,
            "nodeName": node.name,
            "devices": devices,
            "pool": {"name": node.name, "generation": 1, "resourceSliceCount": 1},
        },
    }


def _claim(
    cfg: SimConfig,
    name: str,
    namespace: str,
    created: int,
    devices: list[tuple[str, str]],
    holders: list[Attempt],
    owner: Attempt | None,
) -> dict[str, Any]:
    """A claim allocated ``devices`` ((pool, device) pairs), reserved for the ``holders``' pods."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": _uid(cfg.cluster, namespace, name),
        "creationTimestamp": utc_text(cfg.at(created)),
    }
    if owner is not None and owner.pod is not None:
        meta["annotations"] = {"resource.kubernetes.io/pod-claim-name": "gpu"}
        meta["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": owner.pod.name,
                "uid": owner.pod.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    nodes = sorted({pool for pool, _ in devices})
    return {
        "apiVersion": API,
        "kind": "ResourceClaim",
        "metadata": meta,
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "mig.nvidia.com" if "-mig-" in devices[0][1] else DEVICE_CLASS,
                            "allocationMode": "ExactCount",
                            "count": len(devices),
                        },
                    }
                ]
            }
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": sharing.DRA_DRIVER, "pool": pool, "device": dev}
                        for pool, dev in devices
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": nodes}]}
                    ]
                },
            },
            "reservedFor": [
                {"resource": "pods", "name": a.pod.name, "uid": a.pod.uid} for a in holders if a.pod is not None
            ],
        },
    }


def _holding(attempts: list[Attempt], horizon: int) -> list[Attempt]:
    """The attempts holding a shared claim at the last instant any of them did (one per pod)."""
    last = max(min(a.end if a.end is not None else horizon, horizon) for a in attempts) - 1
    out: dict[str, Attempt] = {}
    for a in attempts:
        if a.start <= last < (a.end if a.end is not None else horizon) and a.pod is not None:
            out.setdefault(a.pod.uid, a)
    return list(out.values())


def claims(cfg: SimConfig, cluster: Cluster, state: SimState) -> list[dict[str, Any]]:
    by_pod: dict[str, list[Attempt]] = defaultdict(list)
    shared: dict[str, list[Attempt]] = defaultdict(list)
    for attempt in state.attempts:
        if attempt.pod is None or cluster.node(attempt.slots[0].gpu.node).sharing != sharing.DRA:
            continue
        if attempt.spec.request == "claim":
            shared[sharing.claim_name(attempt)].append(attempt)
        else:
            by_pod[attempt.pod.uid].append(attempt)
    out = []
    for name, holders in sorted(shared.items()):
        slot = holders[0].slots[0]
        out.append(
            _claim(
                cfg,
                name,
                holders[0].spec.namespace or "",
                -3600,
                [(slot.gpu.node, sharing.device_name(slot))],
                _holding(holders, cfg.horizon),
                None,
            )
        )
    for attempts in by_pod.values():
        first = attempts[0]
        assert first.pod is not None
        devices = [(s.gpu.node, sharing.device_name(s)) for s in first.slots]
        out.append(
            _claim(
                cfg, sharing.claim_name(first), first.spec.namespace or "", first.pod.created, devices, [first], first
            )
        )
    return out


def write_dra(out_dir: Path, cfg: SimConfig, cluster: Cluster, state: SimState) -> None:
    slices = [resource_slice(cfg, n) for n in cluster.nodes if n.sharing == sharing.DRA]
    write_text(out_dir / SLICES_FILE, _list(slices))
    write_text(out_dir / CLAIMS_FILE, _list(claims(cfg, cluster, state)))
