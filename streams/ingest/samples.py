"""``gpu.metrics`` events → one Arrow block of ``gpu_samples`` rows, built column by column.

Version 1 messages (a ``GpuSample`` per GPU) are turned into columns first
(:meth:`pipelines.gpu_columns.GpuColumns.from_samples`), and a version 3 message's rows take
their scrape's time and id, so every form of a scrape gives the same rows. Per message: the
envelope values (cluster, node, interval) once, repeated over its GPUs by an Arrow ``take``; per
GPU: no Python object, only list concatenation and vectorised conversion (numpy for times and
utilisation, Arrow for the rest).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipelines import events as ev
from pipelines.gpu_columns import GpuColumns, GpuColumnsEvent, scrape_id
from pipelines.gpu_models import model_key
from pipelines.times import EPOCH, MICROSECOND

# what the message carries → the gpu_samples columns it fills (SAMPLE_COLUMNS in streams.ingest.rows)
_READ = (
    "uuid",
    "mig_instance",
    "index",
    "model",
    "mig_profile",
    "gr_engine_active",
    "gpu_util",
    "fb_used_mib",
    "power_w",
    "energy_mj",
    "xid",
    "namespace",
    "pod",
    "hpc_job",
)
_TIME = pa.timestamp("us", tz="UTC")


def columns_of(event: ev.GpuMetricsEvent) -> GpuColumns:
    return event.data if isinstance(event, GpuColumnsEvent) else GpuColumns.from_samples(event.data)


def samples_table(events: Sequence[ev.GpuMetricsEvent]) -> pa.Table:
    """The ``gpu_samples`` rows of ``events`` (in order, one per GPU or MIG instance)."""
    data: dict[str, list[Any]] = {name: [] for name in _READ}
    counts: list[int] = []
    offsets: list[int] = []  # each row's time after its event's (µs; version 3), 0 otherwise
    ids: list[str] = []  # each row's scrape id
    for e in events:
        cols = columns_of(e)
        n = cols.n
        for name in _READ:
            data[name] += cols.columns.get(name) or [None] * n
        counts.append(n)
        if isinstance(e, GpuColumnsEvent) and cols.offset_us is not None:
            offsets += cols.offset_us
            scrape = {o: scrape_id(e.cluster, cols.node, e.scrape_time(o)) for o in set(cols.offset_us)}
            ids += [scrape[o] for o in cols.offset_us]
        else:
            offsets += [0] * n
            ids += [e.id] * n
    take = pa.array(np.repeat(np.arange(len(events), dtype=np.int64), counts))
    times = np.repeat(np.array([_epoch_us(e.time) for e in events], dtype=np.int64), counts) + np.array(
        offsets, dtype=np.int64
    )

    def each(values: list[Any], kind: pa.DataType) -> pa.Array:
        return pa.array(values, kind).take(take)

    def text(name: str) -> pa.Array:
        return pc.fill_null(pa.array(data[name], pa.string()), "")

    gr = _floats(data["gr_engine_active"])
    util = np.where(np.isnan(gr), _floats(data["gpu_util"]), gr)
    models = {m: _model_key(m) for m in set(data["model"])}
    columns = {
        "event_id": pa.array(ids, pa.string()),
        "time": pa.array(times, _TIME),
        "cluster": each([e.cluster for e in events], pa.string()),
        "node": each([e.data.node for e in events], pa.string()),
        "uuid": pa.array(data["uuid"], pa.string()),
        "mig_instance": pa.array(data["mig_instance"], pa.uint8()),
        "gpu_index": pa.array(data["index"], pa.uint16()),
        "gpu_model": pa.array([models[m] for m in data["model"]], pa.string()),
        "mig_profile": text("mig_profile"),
        "utilization": _nullable(util),
        "gr_engine_active": _nullable(gr),
        "gpu_util": _nullable(_floats(data["gpu_util"])),
        "fb_used_mib": _nullable(_floats(data["fb_used_mib"])),
        "power_w": _nullable(_floats(data["power_w"])),
        "energy_mj": _nullable(_floats(data["energy_mj"])),
        "xid": pa.array(data["xid"], pa.uint16()),
        "namespace": text("namespace"),
        "pod": text("pod"),
        "hpc_job": text("hpc_job"),
        "interval_s": each([e.data.interval_s for e in events], pa.float64()),
    }
    return pa.table(columns)


def _epoch_us(t: datetime) -> int:
    return (t - EPOCH) // MICROSECOND


def _floats(values: list[float | None]) -> np.ndarray[Any, np.dtype[np.float64]]:
    return np.array(values, dtype=np.float64)  # None → NaN (the wire carries no NaN)


def _nullable(values: np.ndarray[Any, np.dtype[np.float64]]) -> pa.Array:
    return pa.array(values, pa.float64(), mask=np.isnan(values))


@functools.lru_cache(maxsize=1024)
def _model_key(name: str | None) -> str:
    return model_key(name)
