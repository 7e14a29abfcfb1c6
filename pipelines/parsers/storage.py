"""Storage throughput counters → ``storage.counters`` events (source ``storage``, topic ``storage.io``).

One event per (node, time) with one :class:`~pipelines.events.StorageSample` per
(filesystem type, device, job id): cumulative read and write bytes. Id:
``event_id("storage.counters", cluster, node, time)``. Inputs (exposition text or Prometheus
``query_range``/``query`` answers, see :mod:`pipelines.parsers.prom`):

=====================================================  ======  ==================  =========
metric (read / write)                                  fs      device label        job
=====================================================  ======  ==================  =========
``node_disk_read_bytes_total`` / ``_written_bytes_``   disk    ``device``
``node_mountstats_nfs_read_bytes_total`` / ``write``   nfs     ``export``
``lustre_read_bytes_total`` / ``write``                lustre  ``target``
``lustre_job_read_bytes_total`` / ``write``            lustre  ``target``          ``jobid``
``gpfs_perf_read_bytes_total`` / ``write`` (also the   gpfs    ``fs``/``filesystem``
pre-1.0 ``gpfs_perf_read_bytes`` and ``gpfs_fs_*``)
=====================================================  ======  ==================  =========

plus raw ``/proc/self/mountstats`` text (:func:`parse_mountstats`: NFS mounts only, read = normal
+ direct read bytes, write = normal + direct write bytes of the ``bytes:`` line; the device is the
export ``server:/path``; two mounts of the same export are summed) and checkpoint JSON lines,
which :func:`parse` hands to :mod:`pipelines.parsers.checkpoint`.

Node: ``Hostname``, ``hostname``, ``nodename``, the host part of ``instance``, else the ``node``
hint. Time: the sample's own, else the ``scrape_time``/``time`` hint (required then; the parser
never reads the clock).

Pairing read and write: a device's read and write counters are one sample. When one half is
missing for a device, the other metric decides: if it appears nowhere in the whole input, the
exporter does not report it at all and the half is 0; if it appears anywhere else (another
device, another node, another time of the same series — a point printed as a non-number), the
device's report is incomplete and is dead-lettered, so a rate is never computed from a counter
that seemed to fall to 0.
Negative or infinite counters are dead letters; ``NaN`` counts as not reported.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pipelines.events import event_id
from pipelines.parsers import checkpoint, prom
from pipelines.parsers.base import NotThisFormat, ParseResult
from pipelines.times import time_hint
from pipelines.topics import STORAGE_IO

SOURCE = "storage"
TOPIC = STORAGE_IO.name
_GPFS_DEVICE = ("fs", "filesystem")


@dataclass(frozen=True)
class _Metric:
    fs_type: str
    direction: str  # "read" | "write"
    counterpart: str
    device_keys: tuple[str, ...]
    job_key: str | None = None


def _pair(read: str, write: str, fs_type: str, keys: tuple[str, ...], job: str | None = None) -> dict[str, _Metric]:
    return {read: _Metric(fs_type, "read", write, keys, job), write: _Metric(fs_type, "write", read, keys, job)}


METRICS: dict[str, _Metric] = {
    **_pair("node_disk_read_bytes_total", "node_disk_written_bytes_total", "disk", ("device",)),
    **_pair("node_mountstats_nfs_read_bytes_total", "node_mountstats_nfs_write_bytes_total", "nfs", ("export",)),
    **_pair("lustre_read_bytes_total", "lustre_write_bytes_total", "lustre", ("target",)),
    **_pair("lustre_job_read_bytes_total", "lustre_job_write_bytes_total", "lustre", ("target",), "jobid"),
    **_pair("gpfs_perf_read_bytes_total", "gpfs_perf_write_bytes_total", "gpfs", _GPFS_DEVICE),
    **_pair("gpfs_perf_read_bytes", "gpfs_perf_write_bytes", "gpfs", _GPFS_DEVICE),
    **_pair("gpfs_fs_read_bytes_total", "gpfs_fs_write_bytes_total", "gpfs", _GPFS_DEVICE),
}
_HOST_KEYS = ("Hostname", "hostname", "nodename")
_OURS = re.compile(r"^[ \t]*(?:#[ \t]*(?:TYPE|HELP)[ \t]+)?(" + "|".join(METRICS) + r")[{ \t]", re.M)
_GIVE_NODE = "give the node with `gpuledger ingest storage --node <name>`"
_GIVE_TIME = "give the scrape time with `gpuledger ingest storage --time <RFC 3339>`"
_MOUNT = re.compile(r"^device (\S+) mounted on (\S+) with fstype (\S+)", re.M)


def parse(data: bytes | str, *, cluster: str, origin: str | None = None, **hints: Any) -> ParseResult:
    """Auto-detect checkpoint JSON lines, a Prometheus answer, mountstats or exposition text.
    Hints: ``node``, ``scrape_time`` or ``time``."""
    text = prom.as_text(data)
    node, when = hints.get("node"), time_hint(hints.get("scrape_time") or hints.get("time"))
    if checkpoint.looks_like(text):
        return checkpoint.parse(text, cluster=cluster, origin=origin)
    if prom.looks_like_json(text):
        return parse_query_range(text, cluster=cluster, origin=origin, node=node)
    if _MOUNT.search(text):
        return parse_mountstats(text, cluster=cluster, node=node, time=when, origin=origin)
    return parse_exposition(text, cluster=cluster, scrape_time=when, node=node, origin=origin)


def parse_exposition(
    text: bytes | str, *, cluster: str, scrape_time: object = None, node: str | None = None, origin: str | None = None
) -> ParseResult:
    text = prom.as_text(text)
    if not _OURS.search(text):
        raise NotThisFormat("no node_disk/mountstats/lustre/gpfs byte counters in the text")
    reading = prom.read_exposition(text, wanted=METRICS)
    return _build(reading, cluster=cluster, default_time=time_hint(scrape_time), node=node, origin=origin)


def parse_query_range(
    answer: object, *, cluster: str, origin: str | None = None, node: str | None = None
) -> ParseResult:
    reading = prom.read_api_answer(answer)
    ours = [s for s in reading.samples if s.name in METRICS]
    if reading.samples and not ours:
        raise NotThisFormat("Prometheus answer holds no storage byte counters")
    return _build(prom.Reading(ours, reading.bad), cluster=cluster, default_time=None, node=node, origin=origin)


@dataclass
class _Node:
    halves: dict[tuple[str, str, str | None], dict[str, tuple[float, str]]] = field(default_factory=dict)


def _build(
    reading: prom.Reading, *, cluster: str, default_time: datetime | None, node: str | None, origin: str | None
) -> ParseResult:
    result = ParseResult()
    for raw, why in reading.bad:
        result.reject(topic=TOPIC, source=SOURCE, reason=why, raw=raw, origin=origin)
    groups: dict[tuple[str, datetime], _Node] = {}
    reported = {sample.name for sample in reading.samples}
    for sample in reading.samples:
        reason = _place(sample, groups, default_time, node)
        if reason:
            result.reject(topic=TOPIC, source=SOURCE, reason=f"{sample.name}: {reason}", raw=sample.raw, origin=origin)
    for (host, time), group in sorted(groups.items()):
        samples, raws = [], []
        for (fs_type, device, job), halves in sorted(group.halves.items(), key=lambda kv: _order(kv[0])):
            row, reason = _row(fs_type, device, job, halves, reported)
            raw = "\n".join(r for _, r in halves.values())
            if row is None:
                result.reject(topic=TOPIC, source=SOURCE, reason=reason, raw=raw, origin=origin)
                continue
            samples.append(row)
            raws.append(raw)
        if samples:
            result.add(
                _event(cluster, host, time, samples), topic=TOPIC, source=SOURCE, raw="\n".join(raws), origin=origin
            )
    return result


def _place(
    sample: prom.Sample, groups: dict[tuple[str, datetime], _Node], default_time: datetime | None, node_hint: str | None
) -> str | None:
    metric = METRICS[sample.name]
    time = sample.time or default_time
    if time is None:
        return f"sample without a timestamp: {_GIVE_TIME}"
    host = prom.host_of(sample.labels, _HOST_KEYS) or node_hint
    if not host:
        return f"no Hostname/hostname/nodename/instance label: {_GIVE_NODE}"
    device = next((sample.labels[k] for k in metric.device_keys if sample.labels.get(k)), None)
    if device is None:
        return f"series without a {'/'.join(metric.device_keys)} label"
    job = (sample.labels.get(metric.job_key, "").strip() or None) if metric.job_key else None
    if metric.job_key and job is None:
        return f"per-job series without a {metric.job_key} label"
    if math.isnan(sample.value):
        return None
    if not math.isfinite(sample.value) or sample.value < 0:
        return f"counter {sample.value:g} is not a non-negative number"
    group = groups.setdefault((host, time), _Node())
    halves = group.halves.setdefault((metric.fs_type, device, job), {})
    halves.setdefault(sample.name, (sample.value, sample.raw))
    return None


def _row(
    fs_type: str, device: str, job: str | None, halves: dict[str, tuple[float, str]], names: set[str]
) -> tuple[dict[str, Any] | None, str]:
    values: dict[str, float] = {}
    for name, (value, _) in halves.items():
        values[METRICS[name].direction] = value
    if len(values) == 1:
        (present,) = halves
        missing = METRICS[present].counterpart
        if missing in names:
            return None, f"{present} without its {missing} for {fs_type} device {device!r}"
    row: dict[str, Any] = {
        "fs_type": fs_type,
        "device": device,
        "read_bytes": values.get("read", 0.0),
        "write_bytes": values.get("write", 0.0),
    }
    if job is not None:
        row["job_id"] = job
    return row, ""


def _order(key: tuple[str, str, str | None]) -> tuple[str, str, str]:
    return key[0], key[1], key[2] or ""


def _event(cluster: str, node: str, time: datetime, samples: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": event_id("storage.counters", cluster, node, time),
        "source": SOURCE,
        "type": "storage.counters",
        "time": time,
        "cluster": cluster,
        "data": {"node": node, "samples": samples},
    }


# ------------------------------------------------------------------------------------------
# /proc/self/mountstats
# ------------------------------------------------------------------------------------------
def parse_mountstats(
    text: bytes | str, *, cluster: str, node: str | None, time: object, origin: str | None = None
) -> ParseResult:
    """Raw ``/proc/self/mountstats``: it names no host and no time, so ``node`` and ``time`` are
    required (without them the whole input is one dead letter)."""
    text = prom.as_text(text)
    if not _MOUNT.search(text):
        raise NotThisFormat("no 'device … mounted on … with fstype' line: not mountstats")
    result = ParseResult()
    when = time_hint(time)
    if not node or when is None:
        missing = [give for given, give in ((node, _GIVE_NODE), (when, _GIVE_TIME)) if not given]
        result.reject(
            topic=TOPIC,
            source=SOURCE,
            raw=text,
            origin=origin,
            reason=f"mountstats names no host and no time: {'; '.join(missing)}",
        )
        return result
    totals: dict[str, list[float]] = {}
    raws: list[str] = []
    for export, block in _nfs_blocks(text):
        counters, reason = _bytes_line(block)
        if counters is None:
            result.reject(topic=TOPIC, source=SOURCE, reason=f"NFS mount {export}: {reason}", raw=block, origin=origin)
            continue
        total = totals.setdefault(export, [0.0, 0.0])
        total[0] += counters[0] + counters[2]  # normal + direct read bytes
        total[1] += counters[1] + counters[3]  # normal + direct write bytes
        raws.append(block)
    samples = [
        {"fs_type": "nfs", "device": export, "read_bytes": r, "write_bytes": w}
        for export, (r, w) in sorted(totals.items())
    ]
    if samples:
        result.add(_event(cluster, node, when, samples), topic=TOPIC, source=SOURCE, raw="\n".join(raws), origin=origin)
    return result


def _nfs_blocks(text: str) -> list[tuple[str, str]]:
    """(export, block text) of every nfs/nfs4 mount; a block runs to the next ``device`` line."""
    starts = list(_MOUNT.finditer(text))
    blocks = []
    for i, m in enumerate(starts):
        if m.group(3) in ("nfs", "nfs4"):
            end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
            blocks.append((m.group(1), text[m.start() : end].rstrip("\n")))
    return blocks


def _bytes_line(block: str) -> tuple[list[int] | None, str]:
    for line in block.split("\n")[1:]:
        head, _, rest = line.strip().partition(":")
        if head == "bytes":
            fields = rest.split()
            numbers = [prom.small_int(f) for f in fields]
            if len(numbers) != 8 or any(n is None or n < 0 for n in numbers):
                return None, "bytes: line needs 8 unsigned integers"
            return [n for n in numbers if n is not None], ""
    return None, "no bytes: line"
