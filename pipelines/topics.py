"""The topic registry: names, message keys and partition counts.

``gpu.metrics`` and ``scheduler.allocations`` have the same partition count and are both keyed
by ``cluster/node`` so that a node's samples and its placements land in the same partition
number (co-partitioned): one stream worker sees everything it needs to attribute that node.
Every data topic has a dead-letter twin ``<topic>.dlq`` holding what failed validation.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.settings import Settings

DLQ_SUFFIX = ".dlq"


@dataclass(frozen=True)
class Topic:
    name: str
    partitions: int
    key: str  # human description of the message key
    compacted: bool = False

    @property
    def dlq(self) -> str:
        return self.name + DLQ_SUFFIX


GPU_METRICS = Topic("gpu.metrics", 8, "cluster/node")
SCHEDULER_ALLOCATIONS = Topic("scheduler.allocations", 8, "cluster/node (job-level events: cluster/job/<id>)")
STORAGE_IO = Topic("storage.io", 4, "cluster/node (checkpoints and workload outputs: cluster/job/<id>)")
BENCHMARKS_RUNS = Topic("benchmarks.runs", 1, "cluster/run id")
ORG_MAPPINGS = Topic("org.mappings", 1, "kind/effective_from")
# Markers written by `ingest --wait` and read back by the stream workers' progress reports.
CONTROL = Topic("gpuledger.control", 1, "marker id")

DATA_TOPICS: tuple[Topic, ...] = (GPU_METRICS, SCHEDULER_ALLOCATIONS, STORAGE_IO, BENCHMARKS_RUNS, ORG_MAPPINGS)
ALL_TOPICS: tuple[Topic, ...] = (*DATA_TOPICS, CONTROL)


def node_key(cluster: str, node: str) -> bytes:
    """The co-partitioning key of per-node messages."""
    return f"{cluster}/{node}".encode()


def job_key(cluster: str, job_id: str) -> bytes:
    return f"{cluster}/job/{job_id}".encode()


def physical_name(topic: Topic | str, settings: Settings, dlq: bool = False) -> str:
    """The topic's name on the broker, with the configured prefix."""
    name = topic.name if isinstance(topic, Topic) else topic
    if dlq and not name.endswith(DLQ_SUFFIX):
        name += DLQ_SUFFIX
    return settings.topic_prefix + name


def all_physical_topics(settings: Settings) -> list[tuple[str, int, bool]]:
    """(name, partitions, compacted) of every topic `up` creates, dead letters included."""
    out: list[tuple[str, int, bool]] = []
    for topic in ALL_TOPICS:
        out.append((physical_name(topic, settings), topic.partitions, topic.compacted))
    for topic in DATA_TOPICS:
        out.append((physical_name(topic, settings, dlq=True), 1, False))
    return out
