"""Attribute a node over a range of windows from loaded samples and placements (pure).

:func:`compute_range_scalar` is the reference: window by window through the pure core.
``streams/attribution/ranges.py`` chooses it or the vectorised path for each range.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from pipelines.events import AllocationData
from pipelines.times import from_epoch
from streams.attribution import fact_table
from streams.attribution.core import (
    HOLD_INTERVALS,
    Conflict,
    FactRow,
    GpuInfo,
    NodeContext,
    Placement,
    Series,
    attribute_window_full,
)
from streams.attribution.fact_table import fact_id
from streams.attribution.resolve import SlotMeta, to_placement

DEFAULT_INTERVAL_S = 30.0
INVENTORY_HORIZON_S = 24 * 3600.0  # a GPU seen within this before a window is part of the node's capacity
# below this many windows the scalar path is faster (the vectorised one has a fixed cost per range;
# measured with bench/attribution_micro.py: even at 7 windows of 8 GPUs with a 900 s look-back)


@dataclass(frozen=True)
class InventoryGpu:
    """A physical GPU the node reported recently (from the hourly inventory, not the loaded samples)."""

    uuid: str
    index: int | None
    model: str
    first_seen: float
    last_seen: float
    down_since: float | None = None  # its last sample before the loaded samples showed a fatal XID


@dataclass(frozen=True)
class NodeState:
    time: float
    state: str  # up | drained | down
    gpus: int | None = None
    model: str | None = None
    replicas: int | None = None  # replicas per GPU (time-slicing or MPS), when the source states them


@dataclass
class NodeInputs:
    """What a node is, beyond the samples of the range: its recent GPUs and its states over time."""

    inventory: Sequence[InventoryGpu] = ()
    states: Sequence[NodeState] = ()  # ascending by time

    def context(self, w0: float, w1: float) -> NodeContext:
        declared: int | None = None
        model = "unknown"
        down: list[tuple[float, float]] = []
        since: float | None = None
        for st in self.states:
            if st.time < w1 and st.gpus is not None:
                declared, model = st.gpus, st.model or model
            if st.state in ("drained", "down"):
                since = st.time if since is None else since
            elif since is not None:
                down.append((since, st.time))
                since = None
        if since is not None:
            down.append((since, float("inf")))
        down = [(a, b) for a, b in down if a < w1 and b > w0]
        prior = {g.uuid: g.down_since for g in self.inventory if g.down_since is not None}
        return NodeContext(declared, model, tuple(down), prior)

    def replicas(self, w0: float, w1: float) -> list[tuple[float, float, int | None]]:
        """The node's replicas per GPU over [w0, w1) as (from, to, replicas) spans: each state that
        states them is in force from its time until the next one that does (None before the first)."""
        spans: list[tuple[float, float, int | None]] = []
        current: int | None = None
        at = w0
        for st in self.states:
            if st.replicas is None:
                continue
            if st.time <= w0:
                current = st.replicas
            elif st.time < w1:
                if st.replicas != current:
                    spans.append((at, st.time, current))
                    at, current = st.time, st.replicas
            else:
                break
        spans.append((at, w1, current))
        return spans


@dataclass
class RangeResult:
    columns: fact_table.FactColumns  # the fact rows
    windows: dict[float, tuple[float, list[Conflict]]]  # window start → (physical GPUs, conflicts)

    @property
    def facts(self) -> list[dict[str, Any]]:
        """The fact rows as dicts (``fact_dict``'s)."""
        return self.columns.to_dicts()


@dataclass(frozen=True)
class SampleRow:
    time: float  # epoch seconds
    uuid: str
    mig_instance: int | None
    index: int | None
    model: str
    mig_profile: str
    utilization: float | None
    xid: int | None
    namespace: str
    pod: str
    hpc_job: str
    interval_s: float | None
    power_w: float | None = None
    energy_mj: float | None = None


SAMPLE_COLUMNS = (
    "time",
    "uuid",
    "mig_instance",
    "index",
    "model",
    "mig_profile",
    "utilization",
    "xid",
    "namespace",
    "pod",
    "hpc_job",
    "interval_s",
    "power_w",
    "energy_mj",
)


@dataclass
class SampleColumns:
    """One node's samples as columns, in the order of ``SAMPLE_COLUMNS`` (how the warehouse returns them)."""

    columns: tuple[Sequence[Any], ...]

    @classmethod
    def from_rows(cls, rows: Sequence[SampleRow]) -> SampleColumns:
        return cls(tuple([getattr(r, name) for r in rows] for name in SAMPLE_COLUMNS))

    def __len__(self) -> int:
        return len(self.columns[0]) if self.columns else 0


@dataclass
class _SlotData:
    meta: SlotMeta
    model: str
    series: Series
    labels: list[tuple[str, str, str]]  # (namespace, pod, hpc_job) per sample
    has_interval: bool = False


def _build_slots(samples: SampleColumns | Sequence[SampleRow]) -> dict[str, _SlotData]:
    """Per slot: the time-ordered series; a repeated (slot, time) counts once (the first one)."""
    cols = samples if isinstance(samples, SampleColumns) else SampleColumns.from_rows(samples)
    slots: dict[str, _SlotData] = {}
    if not len(cols):
        return slots
    times, uuids, migs, indices, models, profiles, utils, xids, nss, pods, jobs, intervals, *energy = cols.columns
    powers, energies = energy if energy else ((None,) * len(times), (None,) * len(times))
    order: Iterable[int] = range(len(times))
    if any(b < a for a, b in zip(times, times[1:], strict=False)):
        order = sorted(order, key=times.__getitem__)  # stable: equal times keep their input order
    for i in order:
        uuid, mig, t = uuids[i], migs[i], times[i]
        slot = uuid if mig is None else f"{uuid}/mig{mig}"
        data = slots.get(slot)
        if data is None:
            data = slots[slot] = _SlotData(
                SlotMeta(uuid, mig, profiles[i] or None, indices[i]), models[i], Series(), []
            )
        series = data.series
        if series.times and series.times[-1] == t:  # a duplicate not yet merged away by the warehouse
            continue
        series.times.append(t)
        series.utils.append(utils[i])
        series.xids.append(xids[i])
        series.powers.append(powers[i])
        series.energies.append(energies[i])
        data.labels.append((nss[i], pods[i], jobs[i]))
        if intervals[i]:
            series.interval = intervals[i]
            data.has_interval = True
    for data in slots.values():
        times_ = data.series.times
        if not data.has_interval and len(times_) > 1:
            gaps = sorted(b - a for a, b in zip(times_, times_[1:], strict=False) if b > a)
            data.series.interval = gaps[len(gaps) // 2] if gaps else DEFAULT_INTERVAL_S
    return slots


def _window_view(
    slots: dict[str, _SlotData], w0: float, w1: float
) -> tuple[list[GpuInfo], dict[str, SlotMeta], dict[str, list[str]]]:
    """GPUs present in the window, slot metadata (labels seen in it) and the slots of each GPU."""
    gpus: dict[str, GpuInfo] = {}
    metas: dict[str, SlotMeta] = {}
    slots_of: dict[str, list[str]] = {}
    for slot, data in slots.items():
        times = data.series.times
        lo = bisect.bisect_left(times, w0 - HOLD_INTERVALS * data.series.interval)
        hi = bisect.bisect_left(times, w1)
        if lo >= hi:
            continue
        meta = SlotMeta(
            data.meta.uuid, data.meta.mig_instance, data.meta.mig_profile, data.meta.index, model=data.model
        )
        seen = meta.label_times
        for t, (namespace, pod, hpc_job) in zip(times[lo:hi], data.labels[lo:hi], strict=True):
            if namespace and pod:
                key = (namespace, pod)
                meta.namespaces_pods.add(key)
                first = seen.get(key)
                seen[key] = (first[0] if first else t, t)
            if hpc_job:
                meta.hpc_jobs.add(hpc_job)
                first = seen.get(hpc_job)
                seen[hpc_job] = (first[0] if first else t, t)
        metas[slot] = meta
        slots_of.setdefault(meta.uuid, []).append(slot)
        prev = gpus.get(meta.uuid)
        index = meta.index if meta.index is not None else (prev.index if prev else None)
        gpus[meta.uuid] = GpuInfo(meta.uuid, index, data.model)
    return list(gpus.values()), metas, slots_of


def _with_inventory(
    gpus: list[GpuInfo], metas: dict[str, SlotMeta], inventory: Sequence[InventoryGpu], w0: float, w1: float
) -> list[GpuInfo]:
    """The window's GPUs plus those the node reported recently and that stopped reporting (also in
    ``metas``, so a Slurm placement known by GPU index still finds a GPU that went silent)."""
    present = {g.uuid for g in gpus}
    out = list(gpus)
    for g in inventory:
        if g.uuid not in present and g.first_seen < w1 and g.last_seen >= w0 - INVENTORY_HORIZON_S:
            out.append(GpuInfo(g.uuid, g.index, g.model))
            metas.setdefault(g.uuid, SlotMeta(g.uuid, index=g.index, model=g.model))
            present.add(g.uuid)
    return out


def _epoch(t: datetime | None) -> float | None:
    return t.timestamp() if t is not None else None


def compute_range_scalar(
    cluster: str,
    node: str,
    start: float,
    end: float,
    window_s: int,
    samples: SampleColumns | Sequence[SampleRow],
    placements: Sequence[AllocationData],
    inputs: NodeInputs | None = None,
) -> RangeResult:
    """``compute_range_full`` window by window through the pure core (the reference for every case)."""
    inputs = inputs or NodeInputs()
    slots = _build_slots(samples)
    series = {slot: d.series for slot, d in slots.items()}
    facts: list[dict[str, Any]] = []
    windows: dict[float, tuple[float, list[Conflict]]] = {}
    down_cache: dict[str, list[tuple[float, float]]] = {}
    w0 = start
    while w0 < end:
        w1 = w0 + window_s
        gpus, metas, slots_of = _window_view(slots, w0, w1)
        gpus = _with_inventory(gpus, metas, inputs.inventory, w0, w1)
        active = [
            p
            for p in placements
            if p.start_time is not None
            and p.start_time.timestamp() < w1
            and (p.end_time is None or p.end_time.timestamp() > w0)
        ]
        core_placements = _core_placements(active, metas, inputs.replicas(w0, w1), w0)
        window = attribute_window_full(
            node, w0, w1, gpus, core_placements, series, slots_of, down_cache, inputs.context(w0, w1)
        )
        window_start = from_epoch(w0)
        facts.extend(fact_dict(cluster, w0, window_s, r, window_start) for r in window.rows)
        windows[w0] = (window.physical_gpus, window.conflicts)
        w0 = w1
    return RangeResult(fact_table.from_dicts(facts), windows)


def _core_placements(
    active: Sequence[AllocationData],
    metas: dict[str, SlotMeta],
    replicas: Sequence[tuple[float, float, int | None]],
    w0: float,
) -> list[Placement]:
    """The window's placements bound to its slots with the node's replicas in force: a placement
    held while the node's replicas changed is one core placement per span (its facts merge)."""
    out: list[Placement] = []
    for p in active:
        start, end = _epoch(p.start_time) or w0, _epoch(p.end_time)
        if len(replicas) == 1:
            out.append(to_placement(p, start, end, metas, replicas[0][2]))
            continue
        for a, b, n in replicas:
            lo, hi = max(start, a), min(b, end if end is not None else b)
            if hi > lo:
                out.append(replace(to_placement(p, start, end, metas, n), start=lo, end=hi))
    return out


def fact_dict(
    cluster: str, w0: float, window_s: int, r: FactRow, window_start: datetime | None = None
) -> dict[str, Any]:
    o = r.owner
    window_start = window_start or from_epoch(w0)
    scheduler, job_id, attempt = (o.scheduler, o.job_id, o.attempt) if o else ("", "", 0)
    return {
        "fact_id": fact_id(cluster, r.node, w0, r.slot, r.kind, scheduler, job_id, attempt),
        "cluster": cluster,
        "window_start": window_start,
        "window_seconds": window_s,
        "node": r.node,
        "gpu_uuid": r.gpu_uuid,
        "slot": r.slot,
        "gpu_model": r.gpu_model,
        "kind": r.kind,
        "scheduler": scheduler,
        "job_id": job_id,
        "logical_job": o.logical_job if o else "",
        "attempt": attempt,
        "namespace": o.namespace if o else "",
        "account": o.account if o else "",
        "user": o.user if o else "",
        "queue": o.queue if o else "",
        "workload_kind": o.workload_kind if o else "",
        "team_label": o.team_label if o else "",
        "model": o.model if o else "",
        "gpu_seconds": r.gpu_seconds,
        "busy_seconds": r.busy_seconds,
        "unobserved_seconds": r.unobserved_seconds,
        "energy_joules": r.energy_joules,
    }
