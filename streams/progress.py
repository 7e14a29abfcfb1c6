"""Is every ingested event reflected in the facts? (`gpuledger ingest --wait`)

True when (1) the stream workers' consumer group has committed offsets at or past the end offsets
the ingest left on every data topic, and (2) every node's attribution is caught up: no activity
newer than its last computation and its windows closed past its newest event. Works with any
number of workers: both conditions are read from Kafka and the warehouse, not from a worker.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition

from pipelines.errors import PipelineError
from pipelines.settings import Settings
from pipelines.topics import DATA_TOPICS, physical_name
from sql import load_query
from sql.client import get_client

CONSUMER_GROUP = "gpuledger-streams"


class NotCaughtUp(PipelineError):
    """The workers did not reflect the ingested events in time."""


@dataclass
class Lag:
    messages: int
    nodes_pending: int


def end_offsets(settings: Settings) -> dict[TopicPartition, int]:
    consumer = KafkaConsumer(**settings.kafka_client_config())
    try:
        tps: list[TopicPartition] = []
        for topic in DATA_TOPICS:
            for name in (physical_name(topic, settings), physical_name(topic, settings, dlq=True)):
                tps.extend(TopicPartition(name, p) for p in consumer.partitions_for_topic(name) or ())
        return dict(consumer.end_offsets(tps))
    finally:
        consumer.close()


def current_lag(settings: Settings, targets: dict[TopicPartition, int]) -> Lag:
    admin = KafkaAdminClient(**settings.kafka_client_config())
    try:
        group = settings.topic_prefix + CONSUMER_GROUP
        committed = admin.list_group_offsets({group: None}).get(group, {})
    finally:
        admin.close()
    behind = 0
    for tp, end in targets.items():
        meta = committed.get(tp)
        done = meta.offset if meta is not None and meta.offset >= 0 else 0
        behind += max(end - done, 0)
    client = get_client(settings)
    try:
        rows = client.query(load_query("attribution_pending")).result_rows
    finally:
        client.close()
    pending = sum(1 for r in rows if r[5] > 0 or r[7] is None or r[7] <= r[3])
    return Lag(behind, pending)


def wait_until_reflected(settings: Settings, targets: dict[TopicPartition, int], timeout_s: float,
                         poll_s: float = 0.5) -> Lag:
    deadline = time.monotonic() + timeout_s
    lag = current_lag(settings, targets)
    while lag.messages or lag.nodes_pending:
        if time.monotonic() > deadline:
            raise NotCaughtUp(
                f"after {timeout_s:.0f}s {lag.messages} messages are unconsumed and {lag.nodes_pending} nodes "
                "not yet attributed: is a stream worker running? (gpuledger up / gpuledger stream)")
        time.sleep(poll_s)
        lag = current_lag(settings, targets)
    return lag
