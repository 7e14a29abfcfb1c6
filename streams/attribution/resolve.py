"""From scheduler placements and sample metadata to core ``Placement`` bindings (pure).

Which GPU a placement holds, in order of preference (docs/ATTRIBUTION.md "Which GPU"):
1. device ids: ``GPU-<uuid>`` (whole GPU), ``MIG-<parent uuid>/<GPU_I_ID>`` (MIG instance),
   ``<GPU uuid>::<replica>`` (time-sliced replica);
2. Slurm GPU indices (``gres_detail``), mapped to UUIDs by the node's samples;
3. dcgm-exporter mapping labels on the samples in the window: ``namespace``/``pod`` for Kubernetes,
   ``hpc_job`` for Slurm;
4. otherwise the GPU equivalents stay unbound (counted exactly, busy unobserved).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from pipelines.events import AllocationData, mig_fraction
from streams.attribution.core import Binding, Owner, Placement

DEFAULT_REPLICAS = 4
_MODEL_IN_COMMENT = re.compile(r"(?:^|[\s,;])model=([^\s,;]+)")


@dataclass
class SlotMeta:
    """What the samples say about one slot in a window."""

    uuid: str
    mig_instance: int | None = None
    mig_profile: str | None = None
    index: int | None = None
    namespaces_pods: set[tuple[str, str]] = field(default_factory=set)
    hpc_jobs: set[str] = field(default_factory=set)

    @property
    def slot(self) -> str:
        return self.uuid if self.mig_instance is None else f"{self.uuid}/mig{self.mig_instance}"


def owner_of(data: AllocationData) -> Owner:
    o = data.owner
    return Owner(
        scheduler=data.scheduler, job_id=data.job_id, attempt=data.attempt,
        logical_job=data.logical_job or data.job_id, namespace=o.namespace or "", account=o.account or "",
        user=o.user or "", queue=o.queue or "", workload_kind=o.workload_kind,
        team_label=o.labels.get("team", ""), model=model_of(data),
    )


def model_of(data: AllocationData) -> str:
    """Pod label ``model``, else Slurm comment ``model=<name>``, else wckey, else ``unknown``."""
    o = data.owner
    if o.labels.get("model"):
        return o.labels["model"]
    if o.comment:
        match = _MODEL_IN_COMMENT.search(o.comment)
        if match:
            return match.group(1)
    return o.wckey or "unknown"


def _replicas(data: AllocationData) -> int:
    for req in data.gpus:
        if req.kind == "shared" and req.replicas:
            return req.replicas
    return DEFAULT_REPLICAS


def _mig_profile(data: AllocationData) -> str | None:
    for req in data.gpus:
        if req.kind == "mig" and req.profile:
            return req.profile
    return None


def _from_device_ids(data: AllocationData, slots: dict[str, SlotMeta]) -> list[Binding]:
    bindings: list[Binding] = []
    for dev in data.device_ids:
        if "::" in dev:
            uuid, _, replica = dev.partition("::")
            share = 1.0 / _replicas(data)
            bindings.append(Binding(uuid, share, uuid, f"{uuid}::{replica}"))
        elif dev.startswith("MIG-") and "/" in dev:
            uuid, _, inst = dev[4:].rpartition("/")
            slot = f"{uuid}/mig{inst}"
            profile = slots[slot].mig_profile if slot in slots else None
            profile = profile or _mig_profile(data)
            if profile is None:
                continue
            bindings.append(Binding(uuid, mig_fraction(profile), slot, slot))
        elif dev.startswith("MIG-"):
            continue  # a MIG instance UUID: no series names it; fall back to labels
        else:
            bindings.append(Binding(dev, 1.0, dev, dev))
    return bindings


def _from_indices(data: AllocationData, slots: dict[str, SlotMeta]) -> list[Binding]:
    by_index = {m.index: m.uuid for m in slots.values() if m.index is not None and m.mig_instance is None}
    return [Binding(by_index[i], 1.0, by_index[i], by_index[i]) for i in data.gpu_indices if i in by_index]


def _from_labels(data: AllocationData, slots: dict[str, SlotMeta]) -> list[Binding]:
    out: list[Binding] = []
    if data.scheduler == "kubernetes":
        ns, _, pod = data.job_id.partition("/")
        matches = [m for m in slots.values() if (ns, pod) in m.namespaces_pods]
    else:
        matches = [m for m in slots.values() if data.job_id in m.hpc_jobs]
    for m in sorted(matches, key=lambda m: m.slot):
        if m.mig_instance is not None:
            if m.mig_profile:
                out.append(Binding(m.uuid, mig_fraction(m.mig_profile), m.slot, m.slot))
        elif any(r.kind == "shared" for r in data.gpus):
            out.append(Binding(m.uuid, 1.0 / _replicas(data), m.uuid, m.uuid + "::?"))
        else:
            out.append(Binding(m.uuid, 1.0, m.uuid, m.uuid))
    return out


def to_placement(data: AllocationData, start: float, end: float | None,
                 slots: dict[str, SlotMeta]) -> Placement:
    """Bind ``data`` to the node's slots; what no source names stays unbound."""
    bindings = _from_device_ids(data, slots)
    if not bindings and data.gpu_indices:
        bindings = _from_indices(data, slots)
    if not bindings:
        bindings = _from_labels(data, slots)
    bound = sum(b.share for b in bindings)
    unbound = max(data.gpu_equivalents - bound, 0.0) if data.gpus else 0.0
    return Placement(owner_of(data), start, end, tuple(_dedupe(bindings)), round(unbound, 9))


def _dedupe(bindings: Sequence[Binding]) -> list[Binding]:
    seen: set[str] = set()
    out = []
    for b in bindings:
        if b.slot not in seen:
            seen.add(b.slot)
            out.append(b)
    return out
