"""Benchmark load: synthetic but valid gpu.metrics and scheduler events, pre-encoded as bytes.

One ``gpu.sample`` message (schema version 2: columns) per (node, scrape) carrying all 8 GPUs of
the node, as dcgm-exporter's collector publishes it (or, with ``Load.scrapes_per_message``, a
node's scrapes several to a message in version 3, as the ``query_range`` collector sends
history), plus one Kubernetes pod per node and period holding half of the node's GPUs, so
attribution writes allocated, idle and unallocated facts. The pod is published when it has ended
(at the period's last scrape), or with ``announce_start`` as the Kubernetes collector follows it
live: ``allocation.running`` at the period's first scrape, ``allocation.ended`` at the first
scrape after its end. Messages are built with orjson from plain dicts (the same wire form as
``Envelope.to_bytes``) and keyed like the producer keys them (``cluster/node``), so a node's
samples and placements share a partition.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import orjson

from pipelines import events as ev
from pipelines.gpu_columns import scrape_id, scrapes_id
from pipelines.producer import EventProducer
from pipelines.settings import Settings
from pipelines.topics import GPU_METRICS, SCHEDULER_ALLOCATIONS, node_key, physical_name

CLUSTER = "bench"
GPUS_PER_NODE = 8
MODEL = "NVIDIA H100 80GB HBM3"
START = datetime(2026, 10, 5, tzinfo=UTC)


@dataclass(frozen=True)
class Load:
    """``nodes`` nodes scraped every ``interval_s`` seconds from ``start`` for ``rounds`` scrapes."""

    nodes: int
    interval_s: int
    start: datetime = START
    node_prefix: str = "node"
    alloc_period_s: int = 7200
    announce_start: bool = False  # a pod's start published when it starts (see the module docstring)
    scrapes_per_message: int = 1  # > 1: a node's scrapes go out this many to a message (version 3)

    def round_time(self, index: int) -> datetime:
        return self.start + timedelta(seconds=self.interval_s * index)

    def rounds_for(self, hours: float) -> int:
        return int(hours * 3600 / self.interval_s)

    @property
    def samples_per_round(self) -> int:
        return self.nodes * GPUS_PER_NODE

    @property
    def rounds_per_period(self) -> int:
        return max(self.alloc_period_s // self.interval_s, 1)

    @property
    def pod_seconds(self) -> int:
        return self.alloc_period_s * 3 // 4

    def alloc_rounds(self, index: int) -> list[tuple[int, bool]]:
        """The pods published with scrape ``index``: (period, True for its start / False for its end)."""
        period, offset = divmod(index, self.rounds_per_period)
        if not self.announce_start:
            return [(period, False)] if offset == self.rounds_per_period - 1 else []
        ends_at = min(-(-self.pod_seconds // self.interval_s), self.rounds_per_period - 1)  # ceil
        pods = []
        if offset == 0:
            pods.append((period, True))
        if offset == ends_at:
            pods.append((period, False))
        return pods


Message = tuple[str, bytes, bytes]  # (logical topic, key, value)


def sample_message(load: Load, node: int, index: int, count: int = 1) -> bytes:
    """Scrapes ``index`` to ``index + count`` of one node in the collectors' wire form: one scrape
    in ``gpu.sample`` schema version 2 (columns), several in version 3 (as the ``query_range``
    collector sends a node's history)."""
    t = load.round_time(index)
    last = load.round_time(index + count - 1)
    name = f"{load.node_prefix}-{node:04d}"
    gpus = range(GPUS_PER_NODE)
    scrapes = range(index, index + count)
    data: dict[str, object] = {
        "node": name,
        "interval_s": load.interval_s,
        "uuid": [f"GPU-{name}-{g}" for g in gpus] * count,
        "index": list(gpus) * count,
        "model": [MODEL] * GPUS_PER_NODE * count,
        "gr_engine_active": [round(((i * 7 + node * 3 + g * 11) % 100) / 100, 2) for i in scrapes for g in gpus],
        "fb_used_mib": [1024.0 * g for g in gpus] * count,
        "power_w": [300.0 + g for g in gpus] * count,
    }
    if count > 1:
        data["offset_us"] = [(i - index) * load.interval_s * 1_000_000 for i in scrapes for _ in gpus]
    return orjson.dumps(
        {
            "id": scrapes_id(CLUSTER, name, t, last, count) if count > 1 else scrape_id(CLUSTER, name, t),
            "source": "dcgm",
            "type": "gpu.sample",
            "schema_version": 3 if count > 1 else 2,
            "time": t.isoformat(),
            "cluster": CLUSTER,
            "data": data,
        }
    )


def allocation_message(load: Load, node: int, period: int, running: bool = False) -> bytes:
    name = f"{load.node_prefix}-{node:04d}"
    begin = load.start + timedelta(seconds=load.alloc_period_s * period)
    end = begin + timedelta(seconds=load.pod_seconds)
    job = f"team-{node % 6}/train-{node}-{period}"
    failed = (node + period) % 5 == 0 and not running
    kind = "running" if running else "ended"
    return orjson.dumps(
        {
            "id": ev.event_id("bench-alloc", CLUSTER, name, period, *(["running"] if running else [])),
            "source": "kubernetes",
            "type": f"allocation.{kind}",
            "time": (begin if running else end).isoformat(),
            "cluster": CLUSTER,
            "data": {
                "scheduler": "kubernetes",
                "job_id": job,
                "node": name,
                "state": kind,
                "start_time": begin.isoformat(),
                "end_time": None if running else end.isoformat(),
                "outcome": None if running else ("failure" if failed else "success"),
                "failure_reason": "oom" if failed else None,
                "device_ids": [f"GPU-{name}-{g}" for g in range(GPUS_PER_NODE // 2)],
                "gpus": [{"kind": "gpu", "count": GPUS_PER_NODE // 2}],
                "owner": {"namespace": f"team-{node % 6}", "labels": {"team": f"team-{node % 6}"}},
            },
        }
    )


def messages(load: Load, first_round: int, rounds: int) -> Iterator[Message]:
    """Samples of rounds [first_round, first_round + rounds) in time order, each with its node's pods
    (``Load.alloc_rounds``); with ``Load.scrapes_per_message`` a node's scrapes go out when the
    last of their message is due."""
    per = load.scrapes_per_message
    end = first_round + rounds
    for index in range(first_round, end):
        pods = load.alloc_rounds(index)
        begin = index - (index - first_round) % per
        count = min(begin + per, end) - begin
        for node in range(load.nodes):
            key = node_key(CLUSTER, f"{load.node_prefix}-{node:04d}")
            if index == begin + count - 1:
                yield GPU_METRICS.name, key, sample_message(load, node, begin, count)
            for period, running in pods:
                yield SCHEDULER_ALLOCATIONS.name, key, allocation_message(load, node, period, running)


def encode(load: Load, first_round: int, rounds: int) -> list[Message]:
    return list(messages(load, first_round, rounds))


def gpu_samples_in(batch: list[Message]) -> int:
    return sum(len(orjson.loads(value)["data"]["uuid"]) for topic, _, value in batch if topic == GPU_METRICS.name)


def gpu_messages_in(batch: list[Message]) -> int:
    return sum(topic == GPU_METRICS.name for topic, _, _ in batch)


def publish(settings: Settings, batch: list[Message]) -> float:
    """Publish pre-encoded messages and wait for the acknowledgements; returns the seconds taken."""
    began = time.perf_counter()
    with EventProducer(settings) as producer:
        for topic, key, value in batch:
            producer.send_raw(physical_name(topic, settings), key, value)
    return time.perf_counter() - began


def publish_paced(
    settings: Settings, load: Load, rate: float, seconds: float, first_round: int = 0
) -> dict[int, float]:
    """Publish rounds from ``first_round`` on at ``rate`` GPU-samples/s for ``seconds``; returns
    round → wall time acknowledged."""
    acked: dict[int, float] = {}
    rounds = max(int(rate * seconds / load.samples_per_round + 1e-9), 1)
    gap = load.samples_per_round / rate
    with EventProducer(settings, {"linger.ms": 0}) as producer:
        began = time.monotonic()
        for offset in range(rounds):
            due = began + offset * gap
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            index = first_round + offset
            for topic, key, value in messages(load, index, 1):
                producer.send_raw(physical_name(topic, settings), key, value)
            producer.flush()
            acked[index] = time.time()
    return acked
