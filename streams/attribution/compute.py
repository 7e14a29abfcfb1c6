"""Attribute a node over a range of windows from loaded samples and placements (pure).

``compute_range`` is what the stream workers run for every node and every (re)computed range; it
is a pure function of the raw rows, so any worker, after any crash, replaying in any order,
writes the same facts.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from pipelines.events import AllocationData, event_id
from streams.attribution.core import HOLD_INTERVALS, FactRow, GpuInfo, Series, attribute_window
from streams.attribution.resolve import SlotMeta, to_placement

DEFAULT_INTERVAL_S = 30.0


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

    @property
    def slot(self) -> str:
        return self.uuid if self.mig_instance is None else f"{self.uuid}/mig{self.mig_instance}"


@dataclass
class _SlotData:
    meta: SlotMeta
    model: str
    series: Series
    rows: list[SampleRow]


def _build_slots(samples: Sequence[SampleRow]) -> dict[str, _SlotData]:
    slots: dict[str, _SlotData] = {}
    seen: set[tuple[str, float]] = set()
    for s in sorted(samples, key=lambda r: (r.slot, r.time)):
        if (s.slot, s.time) in seen:  # a duplicate not yet merged away by the warehouse
            continue
        seen.add((s.slot, s.time))
        data = slots.get(s.slot)
        if data is None:
            meta = SlotMeta(s.uuid, s.mig_instance, s.mig_profile or None, s.index)
            data = slots[s.slot] = _SlotData(meta, s.model, Series(), [])
        data.series.times.append(s.time)
        data.series.utils.append(s.utilization)
        data.series.xids.append(s.xid)
        data.rows.append(s)
        if s.interval_s:
            data.series.interval = s.interval_s
    for data in slots.values():
        if not any(r.interval_s for r in data.rows) and len(data.series.times) > 1:
            gaps = sorted(b - a for a, b in zip(data.series.times, data.series.times[1:], strict=False) if b > a)
            data.series.interval = gaps[len(gaps) // 2] if gaps else DEFAULT_INTERVAL_S
    return slots


def _window_view(slots: dict[str, _SlotData], w0: float, w1: float) -> tuple[list[GpuInfo], dict[str, SlotMeta],
                                                                              dict[str, list[str]]]:
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
        meta = SlotMeta(data.meta.uuid, data.meta.mig_instance, data.meta.mig_profile, data.meta.index)
        for r in data.rows[lo:hi]:
            if r.namespace and r.pod:
                meta.namespaces_pods.add((r.namespace, r.pod))
            if r.hpc_job:
                meta.hpc_jobs.add(r.hpc_job)
        metas[slot] = meta
        slots_of.setdefault(meta.uuid, []).append(slot)
        prev = gpus.get(meta.uuid)
        index = meta.index if meta.index is not None else (prev.index if prev else None)
        gpus[meta.uuid] = GpuInfo(meta.uuid, index, data.model)
    return list(gpus.values()), metas, slots_of


def _epoch(t: datetime | None) -> float | None:
    return t.timestamp() if t is not None else None


def compute_range(cluster: str, node: str, start: float, end: float, window_s: int,
                  samples: Sequence[SampleRow], placements: Sequence[AllocationData]) -> list[dict[str, object]]:
    """Fact rows (as warehouse dicts) for every window of [start, end) on ``node``."""
    slots = _build_slots(samples)
    series = {slot: d.series for slot, d in slots.items()}
    out: list[dict[str, object]] = []
    w0 = start
    while w0 < end:
        w1 = w0 + window_s
        gpus, metas, slots_of = _window_view(slots, w0, w1)
        active = [p for p in placements
                  if p.start_time is not None and _epoch(p.start_time) < w1  # type: ignore[operator]
                  and (p.end_time is None or _epoch(p.end_time) > w0)]  # type: ignore[operator]
        core_placements = [to_placement(p, _epoch(p.start_time) or w0, _epoch(p.end_time), metas) for p in active]
        rows = attribute_window(node, w0, w1, gpus, core_placements, series, slots_of)
        out.extend(fact_dict(cluster, w0, window_s, r) for r in rows)
        w0 = w1
    return out


def fact_dict(cluster: str, w0: float, window_s: int, r: FactRow) -> dict[str, object]:
    o = r.owner
    window_start = datetime.fromtimestamp(w0, tz=UTC)
    owner_key = (o.scheduler, o.job_id, o.attempt) if o else ("", "", 0)
    return {
        "fact_id": event_id("fact", cluster, r.node, w0, r.slot, r.kind, *owner_key),
        "cluster": cluster, "window_start": window_start, "window_seconds": window_s, "node": r.node,
        "gpu_uuid": r.gpu_uuid, "slot": r.slot, "gpu_model": r.gpu_model, "kind": r.kind,
        "scheduler": o.scheduler if o else "", "job_id": o.job_id if o else "",
        "logical_job": o.logical_job if o else "", "attempt": o.attempt if o else 0,
        "namespace": o.namespace if o else "", "account": o.account if o else "", "user": o.user if o else "",
        "queue": o.queue if o else "", "workload_kind": o.workload_kind if o else "",
        "team_label": o.team_label if o else "", "model": o.model if o else "",
        "gpu_seconds": r.gpu_seconds, "busy_seconds": r.busy_seconds,
        "unobserved_seconds": r.unobserved_seconds, "energy_joules": 0.0,
    }
