"""Modern GPU sharing (``SimConfig.modern_sharing``): which Kubernetes nodes share their GPUs and
how, and the names the DRA objects and dcgm-exporter give them.

Roles go to the Kubernetes nodes from the last one backwards (the first keeps the classic layout
of :mod:`pipelines.simulator.model.cluster`; with fewer nodes the later roles are left out):

* ``time-slicing``: the GPU Operator's time-slicing config with 10 replicas on every GPU; GPU
  Feature Discovery labels the node ``nvidia.com/gpu.replicas: "10"``,
  ``nvidia.com/gpu.sharing-strategy: "time-slicing"``, and the device plugin advertises 80
  ``nvidia.com/gpu``. Pods ask for plain ``nvidia.com/gpu: 1`` and hold a replica
  ``GPU-<uuid>::<k>``: 1/10 of the GPU.
* ``dra``: the NVIDIA DRA driver (``gpu.nvidia.com``) publishes the node's GPUs as devices
  ``gpu-<minor>`` of a ResourceSlice (pool = node name). GPUs 0–5 are whole devices, each allocated
  to one pod's ResourceClaim (generated from the pod's claim template, named
  ``<pod>-gpu-<5 chars>``); GPU 6 is MIG-partitioned as on the other nodes, its instances devices
  ``gpu-6-mig-<profile id>-<start>-<size>`` claimed the same way; GPU 7 is allocated to one
  standalone claim reserved for up to ``CLAIM_SEATS`` pods at once, split equally among the pods
  holding it at each instant.
* ``mps``: as time-slicing, with 2 replicas and sharing strategy ``mps``.

The dcgm-exporter of the first Kubernetes node runs without ``NODE_NAME``: its ``Hostname`` label
is its own pod's name (``dcgm-exporter-<5 chars>``); Prometheus adds the node as the target label
``kubernetes_node``.
"""

from __future__ import annotations

import hashlib
import itertools
import uuid
from collections import defaultdict
from typing import TYPE_CHECKING

from pipelines.simulator.config import UNIT
from pipelines.simulator.intervals import Interval, clip

if TYPE_CHECKING:
    from pipelines.simulator.model.cluster import Slot
    from pipelines.simulator.model.jobs import Attempt, JobSpec, Pod

TIME_SLICING, MPS, DRA = "time-slicing", "mps", "dra"
ROLES = (TIME_SLICING, DRA, MPS)
REPLICAS = {TIME_SLICING: 10, MPS: 2}
CLAIM_SEATS = 3
MIG_PROFILE_IDS = {1: 19, 2: 14, 3: 9}  # NVML GPU instance profile ids of 1g, 2g, 3g on 7-slice GPUs
DRA_DRIVER = "gpu.nvidia.com"
NODE_LABEL = "kubernetes_node"  # the target label Prometheus' Kubernetes discovery adds
ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes' random name suffixes


def roles(kubernetes_nodes: list[str]) -> dict[str, str]:
    """The sharing role of each Kubernetes node that has one."""
    return dict(zip(reversed(kubernetes_nodes[1:]), ROLES, strict=False))


def suffix(seed: str, n: int = 5) -> str:
    """A Kubernetes-style random suffix, derived from ``seed`` (so no random stream moves)."""
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(ALPHABET[b % len(ALPHABET)] for b in digest[:n])


def exporter_pod(node: str, seed: int) -> str:
    """The name of the dcgm-exporter pod (a DaemonSet's) on ``node``."""
    return f"dcgm-exporter-{suffix(f'{seed}/{node}')}"


def device_name(slot: Slot) -> str:
    """The DRA driver's name of the slot's device: ``gpu-<minor>``, or for a MIG instance
    ``gpu-<parent minor>-mig-<GPU instance profile id>-<placement start>-<placement size>``."""
    if slot.mig is None:
        return f"gpu-{slot.gpu.index}"
    start, size = mig_placement(slot)
    return f"gpu-{slot.gpu.index}-mig-{MIG_PROFILE_IDS[slot.mig.slices]}-{start}-{size}"


def mig_placement(slot: Slot) -> tuple[int, int]:
    """(start, size) of the slot's MIG instance in its GPU's 8 memory slices: a 3g instance takes the
    upper half, the 2g the first two, the 1g ones the next in turn."""
    assert slot.mig is not None
    if slot.mig.slices == 3:
        return 4, 4
    if slot.mig.slices == 2:
        return 0, 2
    ones = [m for m in slot.gpu.mig if m.slices == 1]
    return 2 + ones.index(slot.mig), 1


def mig_uuid(slot: Slot) -> str:
    """The ``MIG-<uuid>`` NVML gives the instance (dcgm-exporter names it by parent and GPU_I_ID)."""
    assert slot.mig is not None
    return f"MIG-{uuid.uuid5(uuid.NAMESPACE_OID, f'{slot.gpu.uuid}/{slot.mig.gi}')}"


def shared_claim(spec: JobSpec) -> str:
    """The standalone claim of the shared device: one per ReplicaSet sharing it."""
    deploy, _, _ = (spec.owner_name or spec.name).rpartition("-")
    return f"{deploy}-gpu"


def pod_claim(pod: Pod) -> str:
    """The claim generated for a pod from its claim template: ``<pod>-<claim>-<5 chars>``."""
    return f"{pod.name}-gpu-{suffix(pod.uid)}"


def claim_name(attempt: Attempt) -> str:
    """The ResourceClaim the attempt's pod holds its GPUs through."""
    if attempt.spec.request == "claim":
        return shared_claim(attempt.spec)
    assert attempt.pod is not None
    return pod_claim(attempt.pod)


def dra_labels(attempt: Attempt, slot: Slot) -> dict[str, str]:
    """What dcgm-exporter adds to the series of a device a pod holds through a DRA claim."""
    return {
        "dra_claim_name": claim_name(attempt),
        "dra_claim_namespace": attempt.spec.namespace or "",
        "dra_driver_name": DRA_DRIVER,
        "dra_pool_name": slot.gpu.node,
        "dra_device_name": device_name(slot),
    }


class ClaimShares:
    """How the pods holding a shared DRA claim's device split it: equally among the pods holding it
    at each instant (the truth's, the idle causes' and the costs' one rule)."""

    def __init__(self, attempts: list[Attempt], horizon: int) -> None:
        self.spans: dict[str, list[Interval]] = defaultdict(list)  # GPU uuid -> every holding of it
        for attempt in attempts:
            span = clip(attempt.start, attempt.end if attempt.end is not None else horizon, 0, horizon)
            for slot in attempt.slots:
                if slot.kind == "claim" and span is not None:
                    self.spans[slot.gpu.uuid].append(span)

    def pieces(self, slot: Slot, a: int, b: int) -> list[tuple[int, int, int]]:
        """``(from, to, GPU fraction in 1/UNIT)`` of the slot over ``[a, b)``, a part of its holder's
        allocation: one piece of the slot's weight, or for a claim seat a piece per holder count."""
        if slot.kind != "claim":
            return [(a, b, slot.weight)]
        spans = self.spans[slot.gpu.uuid]
        cuts = sorted({a, b} | {t for span in spans for t in span if a < t < b})
        out = []
        for lo, hi in itertools.pairwise(cuts):
            holders = sum(1 for s0, s1 in spans if s0 <= lo and hi <= s1)
            out.append((lo, hi, UNIT // max(holders, 1)))
        return out
