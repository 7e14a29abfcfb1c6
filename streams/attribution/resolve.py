"""From scheduler placements and sample metadata to core ``Placement`` bindings (pure).

Which GPU a placement holds, in order of preference (docs/ATTRIBUTION.md "Which GPU"):
1. device ids: ``GPU-<uuid>`` (whole GPU), ``MIG-<parent uuid>/<GPU_I_ID>`` (MIG instance),
   ``<GPU uuid>::<replica>`` (a replica: 1/N, N the shared request's replicas, else the node's,
   else 4); devices of a placement holding DRA claims are split among their holders (core);
2. Slurm GPU indices (``gres_detail``), mapped to UUIDs by the node's samples;
3. dcgm-exporter mapping labels on the samples in the window: ``namespace``/``pod`` for Kubernetes,
   ``hpc_job`` (the job id or one of its ``aliases``, e.g. an array task's SLURM_JOB_ID) for Slurm;
   only labels seen while the placement ran count, and never more whole GPUs than it requested;
4. otherwise the GPU equivalents stay unbound (counted exactly, busy unobserved).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from pipelines.events import AllocationData, mig_fraction
from streams.attribution.core import Binding, Owner, Placement

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
    model: str | None = None  # modelName of the GPU (MIG slices per model)
    # first and last sample time of each label in the window ((namespace, pod), or the hpc_job);
    # a label without times counts for any placement (tests build metadata by hand)
    label_times: dict[object, tuple[float, float]] = field(default_factory=dict)

    @property
    def slot(self) -> str:
        return self.uuid if self.mig_instance is None else f"{self.uuid}/mig{self.mig_instance}"


def owner_of(data: AllocationData) -> Owner:
    o = data.owner
    return Owner(
        scheduler=data.scheduler,
        job_id=data.job_id,
        attempt=data.attempt,
        logical_job=data.logical_job or data.job_id,
        namespace=o.namespace or "",
        account=o.account or "",
        user=o.user or "",
        queue=o.queue or "",
        workload_kind=o.workload_kind,
        team_label=o.labels.get("team", ""),
        model=model_of(data),
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


def _mig_profile(data: AllocationData) -> str | None:
    for req in data.gpus:
        if req.kind == "mig" and req.profile:
            return req.profile
    return None


def _from_device_ids(data: AllocationData, slots: dict[str, SlotMeta], node_replicas: int | None) -> list[Binding]:
    bindings: list[Binding] = []
    split = bool(data.claims)  # devices held through DRA claims: split among their holders
    for dev in data.device_ids:
        if "::" in dev:
            uuid, _, replica = dev.partition("::")
            share = 1.0 / data.replicas_on(node_replicas)
            bindings.append(Binding(uuid, share, uuid, f"{uuid}::{replica}", split))
        elif dev.startswith("MIG-") and "/" in dev:
            uuid, _, inst = dev[4:].rpartition("/")
            slot = f"{uuid}/mig{inst}"
            profile = slots[slot].mig_profile if slot in slots else None
            profile = profile or _mig_profile(data)
            if profile is None:
                continue
            model = slots[slot].model if slot in slots else None
            bindings.append(Binding(uuid, mig_fraction(profile, model or _gpu_type(data)), slot, slot, split))
        elif dev.startswith("MIG-"):
            continue  # a MIG instance UUID: no series names it; fall back to labels
        else:
            bindings.append(Binding(dev, 1.0, dev, dev, split))
    return bindings


def _from_indices(data: AllocationData, slots: dict[str, SlotMeta]) -> list[Binding]:
    by_index = {m.index: m.uuid for m in slots.values() if m.index is not None and m.mig_instance is None}
    return [Binding(by_index[i], 1.0, by_index[i], by_index[i]) for i in data.gpu_indices if i in by_index]


def _gpu_type(data: AllocationData) -> str | None:
    return next((r.gpu_type for r in data.gpus if r.gpu_type), None)


def _seen_while_running(m: SlotMeta, key: object, start: float, end: float | None) -> bool:
    times = m.label_times.get(key)
    if times is None:
        return True
    first, last = times
    return last >= start and (end is None or first < end)


def _from_labels(
    data: AllocationData,
    slots: dict[str, SlotMeta],
    start: float = float("-inf"),
    end: float | None = None,
    node_replicas: int | None = None,
) -> list[Binding]:
    """Slots whose mapping labels name the placement while it ran (labels of an earlier holder of the
    same name do not count); at most the requested number of whole GPUs, freshest labels first."""
    out: list[Binding] = []
    matches: list[tuple[SlotMeta, object]] = []
    if data.scheduler == "kubernetes":
        ns, _, pod = data.job_id.partition("/")
        matches = [(m, (ns, pod)) for m in slots.values() if (ns, pod) in m.namespaces_pods]
    else:
        for m in slots.values():
            key = next((j for j in (data.job_id, *data.aliases) if j in m.hpc_jobs), None)
            if key is not None:
                matches.append((m, key))
    matches = sorted(((m, k) for m, k in matches if _seen_while_running(m, k, start, end)), key=lambda mk: mk[0].slot)
    shared = data.holds_replicas(node_replicas) or any(r.kind == "shared" for r in data.gpus)
    capped: set[str] | None = None
    whole = [(m, k) for m, k in matches if m.mig_instance is None]
    wanted = sum(r.count for r in data.gpus if r.kind in ("gpu", "shared"))
    if data.gpus and len(whole) > wanted:
        # labels first seen after the start win over labels that were there when it started
        ranked = sorted(whole, key=lambda mk: (_label_first(mk[0], mk[1], start) < start, mk[0].slot))
        capped = {m.slot for m, _ in ranked[:wanted]}
    for m, _ in matches:
        if m.mig_instance is not None:
            if m.mig_profile:
                out.append(Binding(m.uuid, mig_fraction(m.mig_profile, m.model or _gpu_type(data)), m.slot, m.slot))
        elif capped is not None and m.slot not in capped:
            continue
        elif shared:
            out.append(Binding(m.uuid, 1.0 / data.replicas_on(node_replicas), m.uuid, m.uuid + "::?"))
        else:
            out.append(Binding(m.uuid, 1.0, m.uuid, m.uuid))
    return out


def _label_first(m: SlotMeta, key: object, default: float) -> float:
    return m.label_times.get(key, (default, default))[0]


def to_placement(
    data: AllocationData, start: float, end: float | None, slots: dict[str, SlotMeta], node_replicas: int | None = None
) -> Placement:
    """Bind ``data`` to the node's slots; what no source names stays unbound. ``node_replicas``: the
    replicas per GPU the node states (time-slicing or MPS) while the placement is bound so."""
    bindings = _from_device_ids(data, slots, node_replicas)
    if not bindings and data.gpu_indices:
        bindings = _from_indices(data, slots)
    if not bindings:
        bindings = _from_labels(data, slots, start, end, node_replicas)
    bound = sum(b.share for b in bindings)
    unbound = max(data.gpu_equivalents_on(node_replicas) - bound, 0.0) if data.gpus else 0.0
    return Placement(owner_of(data), start, end, tuple(_dedupe(bindings)), round(unbound, 9))


def _dedupe(bindings: Sequence[Binding]) -> list[Binding]:
    seen: set[str] = set()
    out = []
    for b in bindings:
        if b.slot not in seen:
            seen.add(b.slot)
            out.append(b)
    return out
