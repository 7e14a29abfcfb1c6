"""Events → warehouse rows (pure): the raw tables are a queryable copy of the log.

Each function returns rows as dicts keyed by column; GPU samples come as one Arrow block
(:mod:`streams.ingest.samples`). Per-node time ranges
touched by a batch (``Activity``) tell the attribution timer which windows to (re)compute.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeAlias

import orjson
import pyarrow as pa

from pipelines import events as ev
from pipelines.times import parse_iso
from streams.ingest.samples import samples_table

Row = dict[str, Any]
Table: TypeAlias = "list[Row] | dict[str, list[Any]] | pa.Table"  # rows, columns (name -> values), or an Arrow block


@dataclass
class Activity:
    """Earliest and latest event time a batch touched on one node, and the kind of data."""

    min_time: datetime
    max_time: datetime
    allocations: bool = False

    def add(self, start: datetime, end: datetime, allocations: bool) -> None:
        self.min_time = min(self.min_time, start)
        self.max_time = max(self.max_time, end)
        self.allocations = self.allocations or allocations


SAMPLE_COLUMNS = (
    "event_id",
    "time",
    "cluster",
    "node",
    "uuid",
    "mig_instance",
    "gpu_index",
    "gpu_model",
    "mig_profile",
    "utilization",
    "gr_engine_active",
    "gpu_util",
    "fb_used_mib",
    "power_w",
    "energy_mj",
    "xid",
    "namespace",
    "pod",
    "hpc_job",
    "interval_s",
)


def as_rows(columns: dict[str, list[Any]] | pa.Table) -> list[Row]:
    """Columns back to row dicts (for tests and small tables)."""
    if isinstance(columns, pa.Table):
        rows: list[Row] = columns.to_pylist()
        return rows
    names = list(columns)
    return [dict(zip(names, values, strict=True)) for values in zip(*columns.values(), strict=True)]


def _allocation_row(e: ev.AllocationEvent | ev.NodeStateEvent) -> Row:
    data = e.data
    if isinstance(data, ev.NodeStateData):
        return {
            "event_id": e.id,
            "type": e.type,
            "source": e.source,
            "schema_version": e.schema_version,
            "time": e.time,
            "cluster": e.cluster,
            "scheduler": "",
            "job_id": "",
            "attempt": 0,
            "node": data.node,
            "state": data.state,
            "start_time": None,
            "end_time": None,
            "payload": orjson.dumps(data.model_dump(mode="json")).decode(),
        }
    return {
        "event_id": e.id,
        "type": e.type,
        "source": e.source,
        "schema_version": e.schema_version,
        "time": e.time,
        "cluster": e.cluster,
        "scheduler": data.scheduler,
        "job_id": data.job_id,
        "attempt": data.attempt,
        "node": data.node or "",
        "state": data.state,
        "start_time": data.start_time,
        "end_time": data.end_time,
        "payload": orjson.dumps(data.model_dump(mode="json")).decode(),
    }


def _storage_rows(e: ev.StorageEvent) -> list[Row]:
    return [
        {
            "event_id": e.id,
            "time": e.time,
            "cluster": e.cluster,
            "node": e.data.node,
            "fs_type": s.fs_type,
            "device": s.device,
            "job_id": s.job_id or "",
            "read_bytes": s.read_bytes,
            "write_bytes": s.write_bytes,
        }
        for s in e.data.samples
    ]


def _checkpoint_row(e: ev.CheckpointEvent) -> Row:
    d = e.data
    return {
        "event_id": e.id,
        "cluster": e.cluster,
        "job_id": d.job_id,
        "attempt": d.attempt,
        "kind": d.kind,
        "path": d.path,
        "bytes": d.bytes,
        "started": d.started,
        "finished": d.finished,
        "node": d.node or "",
    }


def _output_row(e: ev.OutputEvent) -> Row:
    d = e.data
    return {
        "event_id": e.id,
        "cluster": e.cluster,
        "scheduler": d.scheduler,
        "time": d.end,
        "started": d.start,
        "job_id": d.job_id,
        "unit": d.unit,
        "quantity": d.quantity,
        "model_name": d.model_name or "",
    }


def _benchmark_row(e: ev.BenchmarkRunEvent) -> Row:
    d = e.data
    busbws = [r.out_of_place_busbw_gbps for r in d.results if r.out_of_place_busbw_gbps is not None]
    return {
        "event_id": e.id,
        "time": e.time,
        "cluster": e.cluster,
        "run_id": d.run_id,
        "collective": d.collective,
        "hosts": d.hosts,
        "ranks": d.ranks,
        "nccl_version": d.nccl_version or "",
        "avg_busbw_gbps": d.avg_busbw_gbps,
        "max_busbw_gbps": max(busbws) if busbws else None,
        "wrong_total": d.wrong_total,
        "out_of_bounds": d.out_of_bounds,
        "ok": d.ok,
        "payload": orjson.dumps(d.model_dump(mode="json")).decode(),
    }


def _org_rows(e: ev.OrgMappingEvent) -> list[Row]:
    d = e.data
    rows: list[Row] = []
    for kind, mapping in (
        ("team_business_unit", d.teams),
        ("namespace_team", d.namespaces),
        ("account_team", d.accounts),
    ):
        rows.extend(
            {
                "event_id": e.id,
                "cluster": e.cluster,
                "effective_from": d.effective_from,
                "kind": kind,
                "key": k,
                "value": v,
            }
            for k, v in mapping.items()
        )
    return rows


def _pricing_rows(e: ev.PricingEvent) -> tuple[list[Row], Row]:
    d = e.data
    rates = [
        {
            "event_id": e.id,
            "cluster": e.cluster,
            "effective_from": d.effective_from,
            "currency": d.currency,
            "gpu_model": model,
            "hourly_rate": rate,
        }
        for model, rate in d.gpu_hourly.items()
    ]
    shared = {
        "event_id": e.id,
        "cluster": e.cluster,
        "effective_from": d.effective_from,
        "currency": d.currency,
        "network": d.monthly.network,
        "storage": d.monthly.storage,
        "support": d.monthly.support,
        "operations": d.monthly.operations,
        "idle_policy": d.idle_policy,
        "energy_per_kwh": d.energy_per_kwh,
        "carbon_g_per_kwh": d.carbon_g_per_kwh,
    }
    return rates, shared


def dead_letter_row(letter: ev.DeadLetter) -> Row:
    return {
        "id": letter.id,
        "topic": letter.topic,
        "source": letter.source,
        "reason": letter.reason,
        "raw": letter.raw,
        "origin": letter.origin or "",
        "time": letter.time,
    }


Changed = Callable[[ev.AllocationEvent], tuple[datetime, datetime] | None]


def _whole(e: ev.AllocationEvent | ev.NodeStateEvent) -> tuple[datetime, datetime]:
    start = getattr(e.data, "start_time", None) or e.time
    end = getattr(e.data, "end_time", None) or e.time
    return min(start, e.time), max(end, e.time)


# what an end record adds to a running snapshot: none of it changes a window before the end
END_FIELDS = frozenset({"state", "end_time", "outcome", "failure_reason", "exit_code", "signal", "scheduler_state"})
Snapshot = tuple[tuple[int, datetime], dict[str, Any]]  # (rank: ended 2 / running 1, event time), payload


def allocation_change(previous: Snapshot | None, e: ev.AllocationEvent) -> tuple[datetime, datetime] | None:
    """The time range whose attribution ``e`` changes on its node, given the placement's snapshot in
    force (``previous``); None when nothing changes.

    * the stored snapshot stays in force (it ranks higher: ended beats running, then the later
      event) or ``e`` repeats it (a re-published ``running`` snapshot) → nothing;
    * ``e`` only ends the placement (or moves its end) → from the earlier of the two ends on: a
      window before it was computed with the placement running, exactly as it ran;
    * anything else (owner, GPUs, devices, start) → the placement's whole range.
    """
    whole = _whole(e)
    if previous is None:
        return whole
    rank, before = previous
    mine = (2 if e.data.state == "ended" else 1, e.time)
    if mine < rank:
        return None
    after = e.data.model_dump(mode="json")
    if {k: v for k, v in after.items() if k not in END_FIELDS} != {
        k: v for k, v in before.items() if k not in END_FIELDS
    }:
        return whole
    if after.get("end_time") == before.get("end_time"):
        return None
    ends = [parse_iso(t) for t in (after.get("end_time"), before.get("end_time")) if t]
    since = min(ends)
    return since, max(since, whole[1])


def rows_for(
    events: list[ev.Envelope], changed: Changed | None = None
) -> tuple[dict[str, Table], dict[tuple[str, str], Activity]]:
    """Rows per table, and per (cluster, node) activity, for a batch of validated events.

    ``gpu_samples`` (the bulk: one row per GPU per scrape) comes as columns, the others as rows.
    ``changed`` gives the time range an allocation event changes on its node (None: nothing);
    without it, the whole range of the placement counts as changed.
    """
    tables: dict[str, list[Row]] = defaultdict(list)
    samples: list[ev.GpuMetricsEvent] = []
    activity: dict[tuple[str, str], Activity] = {}

    def touch(cluster: str, node: str, start: datetime, end: datetime, allocations: bool) -> None:
        key = (cluster, node)
        if key in activity:
            activity[key].add(start, end, allocations)
        else:
            activity[key] = Activity(start, end, allocations)

    for e in events:
        if isinstance(e, ev.GpuMetricsEvent):
            samples.append(e)
            touch(e.cluster, e.data.node, e.time, e.last_time, False)
        elif isinstance(e, ev.AllocationEvent | ev.NodeStateEvent):
            tables["raw_scheduler_allocations"].append(_allocation_row(e))
            node = e.data.node
            if node:
                span = changed(e) if changed is not None and isinstance(e, ev.AllocationEvent) else _whole(e)
                if span is not None:
                    touch(e.cluster, node, span[0], span[1], True)
        elif isinstance(e, ev.StorageEvent):
            tables["storage_samples"].extend(_storage_rows(e))
        elif isinstance(e, ev.CheckpointEvent):
            tables["checkpoints"].append(_checkpoint_row(e))
        elif isinstance(e, ev.OutputEvent):
            tables["workload_outputs"].append(_output_row(e))
        elif isinstance(e, ev.BenchmarkRunEvent):
            tables["benchmark_runs"].append(_benchmark_row(e))
        elif isinstance(e, ev.OrgMappingEvent):
            tables["org_mappings"].extend(_org_rows(e))
        elif isinstance(e, ev.PricingEvent):
            rates, shared = _pricing_rows(e)
            tables["pricing_rates"].extend(rates)
            tables["pricing_shared"].append(shared)
    out: dict[str, Table] = dict(tables)
    if samples:
        out["gpu_samples"] = samples_table(samples)
    return out, activity
