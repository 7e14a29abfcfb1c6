"""dcgm-exporter metrics → ``gpu.sample`` events (source ``dcgm``, topic ``gpu.metrics``).

One event per (node, sample time) carries every GPU and MIG instance of that node, as columns
(``gpu.sample`` schema version 2, :mod:`pipelines.gpu_columns`; ``data.gpus`` reads them as
:class:`~pipelines.events.GpuSample` rows). Id: ``event_id("gpu.sample", cluster, node, time)``;
event time: the sample time (UTC).

Inputs: dcgm-exporter exposition text (one scrape, or many concatenated scrapes with
millisecond timestamps) and Prometheus ``query_range`` / ``query`` answers of its series (see
:mod:`pipelines.parsers.prom`). Metrics read (everything else is ignored)::

    DCGM_FI_PROF_GR_ENGINE_ACTIVE  gr_engine_active   ratio 0–1
    DCGM_FI_DEV_GPU_UTIL           gpu_util           percent, divided by 100 (absent on MIG)
    DCGM_FI_PROF_SM_ACTIVE         sm_active          ratio
    DCGM_FI_PROF_PIPE_TENSOR_ACTIVE tensor_active     ratio
    DCGM_FI_PROF_DRAM_ACTIVE       dram_active        ratio
    DCGM_FI_DEV_FB_USED / _FB_FREE fb_used_mib / fb_free_mib
    DCGM_FI_DEV_POWER_USAGE        power_w
    DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION energy_mj    counter
    DCGM_FI_DEV_GPU_TEMP           temperature_c
    DCGM_FI_DEV_XID_ERRORS         xid                last XID (0 = none)

Version differences accepted:

* Host and Kubernetes mapping: :mod:`pipelines.parsers.dcgm_labels` (``Hostname``/``hostname``,
  ``node``/``kubernetes_node``, ``instance``, the ``node`` hint; a host label that is the exporter's
  own pod never names a node). Slurm mapping: ``hpc_job``. Empty label values are absent.
* MIG instances: ``GPU_I_ID`` and ``GPU_I_PROFILE`` beside the parent ``UUID``; the parent GPU's
  own series (power, temperature, energy) carry no ``GPU_I_*`` labels and give the whole-GPU
  entry. A profile that is not ``<g>g.<mem>gb`` is a bad record.
* ``err_code``/``err_msg`` on XID series are ignored (the value is the XID).

Rules where the formats are silent:

* Blank sentinels are missing values (``None``), not errors: anything ≥ 9223372036854775792
  (DCGM_INT64_BLANK and its NOT_FOUND/NOT_SUPPORTED/NOT_PERMISSIONED codes), 2**47 … 2**47+3
  (DCGM_FP64_BLANK family) and, except on the energy counter, 0x7ffffff0 … 0x7fffffff
  (DCGM_INT32_BLANK family). ``NaN`` is missing too.
* Out-of-range values (a ratio outside 0–1, a percent outside 0–100, negative power, memory or
  energy, a temperature outside −50…200 °C, a non-integral XID) dead-letter that one sample with
  a reason; the GPU stays in its event with that field ``None``. So does a series without UUID,
  without any host, or with a non-integer ``GPU_I_ID`` (those cannot be placed at all).
* The same GPU appears under different label sets over time; samples merge by
  (node, time, UUID, GPU_I_ID), never by label set. When two series give the same field at the
  same time, the first in input order wins; labels merge first-non-empty.
* A device shared by several pods (time slicing, a DRA claim with several pods: labels
  ``dra_claim_name``, ``dra_claim_namespace``, …) is repeated once per pod: the copies are the same
  device's values, merged as above (not errors), and every ``<namespace>/<pod>`` they name is kept
  in ``holders`` (when more than one).
* Exposition lines without a timestamp need ``scrape_time``: the parser never reads the clock
  (re-parsing must give the same ids), so without it those lines are dead-lettered.
* An input with DCGM series but none of the fields above gives no event and a note naming what it
  holds.
* ``interval_s``: the hint, else the smallest gap between distinct sample times of the node
  (the scrape or query step), else ``None``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, overload

from pipelines.events import InvalidEvent, event_id, mig_fraction
from pipelines.gpu_columns import FIELDS as FIELD_NAMES
from pipelines.gpu_columns import GpuColumns, columns_event
from pipelines.parsers import dcgm_matrix, dcgm_text, prom
from pipelines.parsers.base import NotThisFormat, ParseResult
from pipelines.parsers.dcgm_labels import k8s_mapping, node_of
from pipelines.times import time_hint
from pipelines.topics import GPU_METRICS

if TYPE_CHECKING:
    from pipelines.parsers.dcgm_matrix import Array

SOURCE = "dcgm"
TOPIC = GPU_METRICS.name

FIELDS: dict[str, tuple[str, str]] = {
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gr_engine_active", "ratio"),
    "DCGM_FI_DEV_GPU_UTIL": ("gpu_util", "percent"),
    "DCGM_FI_PROF_SM_ACTIVE": ("sm_active", "ratio"),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("tensor_active", "ratio"),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("dram_active", "ratio"),
    "DCGM_FI_DEV_FB_USED": ("fb_used_mib", "nonneg"),
    "DCGM_FI_DEV_FB_FREE": ("fb_free_mib", "nonneg"),
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", "nonneg"),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("energy_mj", "counter"),
    "DCGM_FI_DEV_GPU_TEMP": ("temperature_c", "temp"),
    "DCGM_FI_DEV_XID_ERRORS": ("xid", "xid"),
}
INT64_BLANK = 9223372036854775792.0
FP64_BLANK = 140737488355328.0
INT32_BLANK = 2147483632.0
_DCGM_TEXT = re.compile(r"^[ \t]*(?:#[ \t]*(?:TYPE|HELP)[ \t]+)?DCGM_FI_", re.M)
_DCGM_NAME = re.compile(r"^[ \t]*(DCGM_FI_[A-Za-z0-9_]+)", re.M)


def parse(data: bytes | str, *, cluster: str, origin: str | None = None, **hints: Any) -> ParseResult:
    """Auto-detect exposition text or a Prometheus API answer. Hints: ``scrape_time`` (or
    ``time``), ``node``, ``interval_s``."""
    text = prom.as_text(data)
    if prom.looks_like_json(text):
        return parse_query_range(
            text, cluster=cluster, interval_s=hints.get("interval_s"), origin=origin, node=hints.get("node")
        )
    return parse_exposition(
        text,
        cluster=cluster,
        scrape_time=hints.get("scrape_time") or hints.get("time"),
        node=hints.get("node"),
        interval_s=hints.get("interval_s"),
        origin=origin,
    )


def parse_exposition(
    text: bytes | str,
    *,
    cluster: str,
    scrape_time: object = None,
    node: str | None = None,
    interval_s: float | None = None,
    origin: str | None = None,
) -> ParseResult:
    """dcgm-exporter exposition text; ``scrape_time`` stamps the lines that carry no timestamp."""
    text = prom.as_text(text)
    if not _DCGM_TEXT.search(text):
        raise NotThisFormat("no DCGM_FI_* metric in the text: not dcgm-exporter output")
    fast = dcgm_text.read(
        text,
        cluster=cluster,
        scrape_time=time_hint(scrape_time),
        node=node,
        interval_s=_interval(interval_s),
        fields=FIELDS,
        describe=_series,
        blank=_is_blank,
        convert=convert,
    )
    if fast is not None:  # plain text in the form exporters write: columns (pipelines.parsers.dcgm_text)
        return fast
    reading = prom.read_exposition(text, wanted=FIELDS)
    result = _build(
        reading,
        cluster=cluster,
        default_time=time_hint(scrape_time),
        node=node,
        interval_s=_interval(interval_s),
        origin=origin,
    )
    if not reading.samples and not reading.bad:
        _note_unread(result, _DCGM_NAME.findall(text))
    return result


def parse_query_range(
    answer: object, *, cluster: str, interval_s: float | None = None, origin: str | None = None, node: str | None = None
) -> ParseResult:
    """A Prometheus ``query_range`` (matrix) or ``query`` (vector) answer of dcgm-exporter series.

    A clean matrix answer in bytes or text takes the columnar path (:mod:`pipelines.parsers.dcgm_matrix`);
    any other answer, or one with a record that needs a reason, is read record by record."""
    if isinstance(answer, bytes | str):
        fast = dcgm_matrix.read(
            answer,
            cluster=cluster,
            node=node,
            interval_s=_interval(interval_s),
            fields=FIELDS,
            describe=_series,
            blank=_is_blank,
        )
        if fast is not None:
            return fast
        split = dcgm_matrix.read_by_node(
            answer,
            cluster=cluster,
            node=node,
            interval_s=_interval(interval_s),
            fields=FIELDS,
            describe=_series,
            blank=_is_blank,
        )
        if split is not None and split[0].events:  # the clean nodes as columns, the others record by record
            done, rest = split
            slow = _by_record(
                {"status": "success", "data": {"resultType": "matrix", "result": rest}},
                cluster=cluster,
                interval_s=interval_s,
                origin=origin,
                node=node,
                whole=False,
            )
            slow.events = sorted([*done.events, *slow.events], key=lambda e: (e.data.node, e.time))
            return slow
    return _by_record(answer, cluster=cluster, interval_s=interval_s, origin=origin, node=node, whole=True)


def _by_record(
    answer: object, *, cluster: str, interval_s: float | None, origin: str | None, node: str | None, whole: bool
) -> ParseResult:
    """The record-by-record path; ``whole``: the answer is all of the input (not the part of it
    the columnar path left), so it says when the input is not dcgm's at all."""
    reading = prom.read_api_answer(answer)
    ours = [s for s in reading.samples if s.name in FIELDS]
    if whole and reading.samples and not any(s.name.startswith("DCGM_FI_") for s in reading.samples):
        raise NotThisFormat("Prometheus answer holds no DCGM_FI_* series")
    result = _build(
        prom.Reading(ours, reading.bad),
        cluster=cluster,
        default_time=None,
        node=node,
        interval_s=_interval(interval_s),
        origin=origin,
    )
    if whole and reading.samples and not ours:
        _note_unread(result, [s.name for s in reading.samples])
    return result


def _note_unread(result: ParseResult, names: list[str]) -> None:
    held = sorted(set(names))
    shown = ", ".join(held[:5]) + (f" and {len(held) - 5} more" if len(held) > 5 else "")
    result.note(f"no metric gpuledger reads: the input holds {shown}; gpuledger reads {', '.join(FIELDS)}")


@dataclass
class _Gpu:
    values: dict[str, Any] = field(default_factory=dict)
    described_by: set[int] = field(default_factory=set)  # ids of the series whose labels were put
    holders: list[str] = field(default_factory=list)  # every namespace/pod the copies of the device name

    def put(self, key: str, value: Any) -> None:
        if value is not None and self.values.get(key) is None:
            self.values[key] = value


@dataclass
class _Group:
    gpus: dict[tuple[str, int | None], _Gpu] = field(default_factory=dict)
    raw: list[str] = field(default_factory=list)


def _build(
    reading: prom.Reading,
    *,
    cluster: str,
    default_time: datetime | None,
    node: str | None,
    interval_s: float | None,
    origin: str | None,
) -> ParseResult:
    result = ParseResult()
    for raw, why in reading.bad:
        result.reject(topic=TOPIC, source=SOURCE, reason=why, raw=raw, origin=origin)
    groups: dict[tuple[str, datetime], _Group] = {}
    series: dict[int, _Series | str] = {}  # per label dict (samples hold their dicts alive meanwhile)
    # one object per distinct label set: a GPU's fields are series with the same labels, so its
    # labels are put once per sample time, not once per field (``_place``)
    distinct: dict[tuple[tuple[str, str], ...], _Series | str] = {}
    for sample in reading.samples:
        info = series.get(id(sample.labels))
        if info is None:
            labels = tuple(sorted(sample.labels.items()))
            if labels not in distinct:
                distinct[labels] = _series(sample.labels, node)
            info = series[id(sample.labels)] = distinct[labels]
        reason = info if isinstance(info, str) else _place(sample, info, groups, default_time)
        if reason:
            result.reject(topic=TOPIC, source=SOURCE, reason=f"{sample.name}: {reason}", raw=sample.raw, origin=origin)
    times: dict[str, list[datetime]] = {}
    for host, time in groups:
        times.setdefault(host, []).append(time)
    steps = {host: interval_s or prom.min_step(ts) for host, ts in times.items()}
    for (host, time), group in sorted(groups.items()):
        step = steps[host]
        gpus = sorted(group.gpus.values(), key=_gpu_order)
        columns = {name: [g.values.get(name) for g in gpus] for name in COLUMNS}
        if any(len(g.holders) > 1 for g in gpus):
            columns["holders"] = [g.holders if len(g.holders) > 1 else [] for g in gpus]
        try:
            result.events.append(
                columns_event(
                    id=event_id("gpu.sample", cluster, host, time),
                    source=SOURCE,
                    time=time,
                    cluster=cluster,
                    data=GpuColumns(host, step, columns),
                )
            )
        except InvalidEvent as exc:
            result.reject(topic=TOPIC, source=SOURCE, reason=str(exc), raw="\n".join(group.raw), origin=origin)
    return result


COLUMNS = tuple(name for name in FIELD_NAMES if name != "holders")


@dataclass(frozen=True)
class _Series:
    host: str
    uuid: str
    gi: int | None
    meta: dict[str, Any]  # index, model, MIG profile, pod mapping, hpc_job: None when absent


def _series(labels: dict[str, str], node_hint: str | None) -> _Series | str:
    """What a label set says about its GPU, or why its samples cannot be placed."""
    host, why = node_of(labels, node_hint)
    if host is None:
        return why
    uuid = (labels.get("UUID") or labels.get("uuid") or "").strip()
    if not uuid:
        return "series without UUID"
    gi_text = labels.get("GPU_I_ID", "").strip()
    gi = prom.small_int(gi_text) if gi_text else None
    if gi_text and (gi is None or gi < 0):
        return f"GPU_I_ID is not an integer: {gi_text[:40]!r}"
    profile = (labels.get("GPU_I_PROFILE", "").strip() or None) if gi is not None else None
    if profile is not None:
        try:
            mig_fraction(profile)
        except ValueError as exc:
            return str(exc)
    index = prom.small_int(labels.get("gpu", "").strip())
    namespace, pod, container = k8s_mapping(labels)
    meta = {
        "index": index if index is not None and index >= 0 else None,
        "model": labels.get("modelName", "").strip() or None,
        "mig_profile": profile,
        "namespace": namespace,
        "pod": pod,
        "container": container,
        "hpc_job": labels.get("hpc_job", "").strip() or None,
    }
    return _Series(host, uuid, gi, meta)


def _place(
    sample: prom.Sample, series: _Series, groups: dict[tuple[str, datetime], _Group], default_time: datetime | None
) -> str | None:
    """Put one sample into its (node, time) group; a reason when it has no time or a bad value
    (the GPU is still recorded as present then)."""
    time = sample.time or default_time
    if time is None:
        return (
            "sample without a timestamp: give the scrape time with `gpuledger ingest dcgm --time <RFC 3339>` "
            "(e.g. the file's modification time)"
        )
    group = groups.setdefault((series.host, time), _Group())
    group.raw.append(sample.raw)
    gpu = group.gpus.get((series.uuid, series.gi))
    if gpu is None:
        gpu = group.gpus[(series.uuid, series.gi)] = _Gpu({"uuid": series.uuid, "mig_instance": series.gi})
    if id(series) not in gpu.described_by:  # the same labels put again change nothing
        gpu.described_by.add(id(series))
        for key, value in series.meta.items():
            gpu.put(key, value)
        pod = series.meta["pod"]
        holder = f"{series.meta['namespace'] or ''}/{pod}" if pod else None
        if holder and holder not in gpu.holders:
            gpu.holders.append(holder)
    key, kind = FIELDS[sample.name]
    value, reason = convert(kind, sample.value)
    if reason:
        return reason
    gpu.put(key, value)
    return None


def convert(kind: str, value: float) -> tuple[float | int | None, str | None]:
    """``(converted value or None, reason when out of range)`` for one DCGM field value."""
    if math.isnan(value):
        return None, None
    if math.isinf(value):
        return None, f"value {value} is not finite"
    if _is_blank(kind, value):
        return None, None
    if kind in ("ratio", "percent"):
        top = 1.0 if kind == "ratio" else 100.0
        if not -1e-9 <= value <= top * (1 + 1e-9):
            return None, f"{kind} {value:g} outside 0–{top:g}"
        return min(max(value / top, 0.0), 1.0), None
    if kind in ("nonneg", "counter"):
        return (value, None) if value >= 0 else (None, f"negative value {value:g}")
    if kind == "temp":
        return (value, None) if -50.0 <= value <= 200.0 else (None, f"temperature {value:g} °C out of range")
    if value != int(value) or not 0 <= value < 2**31:
        return None, f"XID {value:g} is not a non-negative integer"
    return int(value), None


@overload
def _is_blank(kind: str, value: float) -> bool: ...
@overload
def _is_blank(kind: str, value: Array) -> Array: ...
def _is_blank(kind: str, value: Any) -> Any:
    """A blank sentinel: one value, or elementwise an array of them (the columnar paths)."""
    blank = (value >= INT64_BLANK) | ((value >= FP64_BLANK) & (value <= FP64_BLANK + 3))
    return blank if kind == "counter" else blank | ((value >= INT32_BLANK) & (value <= 2147483647.0))


def _gpu_order(gpu: _Gpu) -> tuple[int, str, int]:
    index = gpu.values.get("index")
    gi = gpu.values.get("mig_instance")
    return (index if index is not None else 1 << 30, gpu.values["uuid"], -1 if gi is None else gi)


def _interval(value: float | None) -> float | None:
    if value is None:
        return None
    interval = float(value)
    if not interval > 0 or not math.isfinite(interval):
        raise ValueError(f"interval_s must be a positive number, got {value!r}")
    return interval
