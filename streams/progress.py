"""Is every ingested event reflected in the facts? (`gpuledger ingest --wait`)

True when (1) the stream workers' consumer group has committed offsets at or past the end offsets
the ingest left on every data topic, and (2) every node's attribution is caught up: no activity
newer than its last computation and its windows closed past its newest event. Works with any
number of workers: both conditions are read from Kafka and the warehouse, not from a worker.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    KafkaError,
    NotCoordinatorError,
)

from pipelines.errors import PipelineError
from pipelines.settings import Settings
from pipelines.topics import DATA_TOPICS, physical_name
from sql import load_query
from sql.client import get_client
from streams.attribution.warehouse import PendingNode

CONSUMER_GROUP = "gpuledger-streams"
COORDINATOR_STARTING = (CoordinatorNotAvailableError, CoordinatorLoadInProgressError, NotCoordinatorError)
NO_WORKER_GRACE_S = 20.0  # a worker just started takes a few seconds to join its group


class NotCaughtUp(PipelineError):
    """The workers did not reflect the ingested events in time."""


@dataclass
class Lag:
    messages: int
    nodes_pending: int
    quarantined: int = 0  # nodes whose attribution stopped on their own input: not waited for
    rebuilds: int = 0  # org versions whose hours are not rebuilt yet


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


def consumer_lag(settings: Settings) -> dict[tuple[str, int], int]:
    """Per data (and dead-letter) topic partition: messages the stream workers have not committed."""
    ends = end_offsets(settings)
    committed = _committed(settings)
    return {(tp.topic, tp.partition): max(end - _done(committed, tp), 0) for tp, end in ends.items()}


def committed_offsets(settings: Settings) -> dict[tuple[str, int], int]:
    """The stream workers' committed offsets by (topic, partition)."""
    committed = _committed(settings)
    return {(tp.topic, tp.partition): _done(committed, tp) for tp in committed}


def _committed(settings: Settings) -> dict[TopicPartition, Any]:
    admin = KafkaAdminClient(**settings.kafka_client_config())
    try:
        group = settings.topic_prefix + CONSUMER_GROUP
        try:
            return dict(admin.list_group_offsets({group: None}).get(group, {}))
        except COORDINATOR_STARTING:  # a new broker creates its offsets topic on first use: nothing committed
            return {}
    finally:
        admin.close()


def _done(committed: dict[TopicPartition, Any], tp: TopicPartition) -> int:
    meta = committed.get(tp)
    return int(meta.offset) if meta is not None and meta.offset >= 0 else 0


def current_lag(settings: Settings, targets: dict[TopicPartition, int], known: Lag | None = None) -> Lag:
    """How far the workers are behind ``targets``. With ``known`` (the previous poll's lag), the
    warehouse is read only once every message is committed: before that nothing can be reflected
    yet, and a waiting poller would only load the warehouse the workers are writing to."""
    committed = _committed(settings)
    behind = sum(max(end - _done(committed, tp), 0) for tp, end in targets.items())
    if behind and known is not None:
        return replace(known, messages=behind)
    client = get_client(settings)
    try:
        rows = client.query(load_query("attribution_pending")).result_rows
        held = {(c, n) for c, n, *_ in client.query(load_query("attribution_quarantine")).result_rows}
        rebuilds = len(client.query(load_query("rollup_rebuilds_pending")).result_rows)
    finally:
        client.close()
    due = [PendingNode.from_row(r) for r in rows]
    pending = sum(1 for r in due if waiting(r) and (r.cluster, r.node) not in held)
    return Lag(behind, pending, len(held), rebuilds)


def waiting(row: PendingNode | tuple[Any, ...]) -> bool:
    """An ``attribution_pending`` row whose input is not attributed yet: activity newer than its
    last computation, or windows not closed past its newest event (the window holding it closes
    once it has ended on the wall clock, see ``streams.attribution.step``)."""
    r = row if isinstance(row, PendingNode) else PendingNode.from_row(row)
    return bool(r.pending) or r.closed_until is None or r.closed_until <= r.max_time


def group_members(settings: Settings) -> int | None:
    """Whether stream workers are members of the workers' consumer group right now: 0 when none
    (the group is unknown, empty or dead), 1 when some are, None when the broker cannot say yet.
    From the broker's group listing, which needs no group coordinator."""
    group = settings.topic_prefix + CONSUMER_GROUP
    admin = KafkaAdminClient(**settings.kafka_client_config())
    try:
        listed = {g.get("group_id"): g.get("group_state") for g in admin.list_groups()}
    except COORDINATOR_STARTING:
        return None
    except KafkaError as exc:
        raise PipelineError(f"cannot list consumer groups: {exc}") from exc
    finally:
        admin.close()
    state = listed.get(group)
    return 0 if state in (None, "Empty", "Dead") else 1


def wait_until_reflected(
    settings: Settings, targets: dict[TopicPartition, int], timeout_s: float, poll_s: float = 0.5
) -> Lag:
    """Wait until the ingested events are reflected in the facts; fails early, naming the cause,
    when no stream worker has been a member of the group for ``NO_WORKER_GRACE_S``."""
    started = time.monotonic()
    deadline = started + timeout_s
    lag = current_lag(settings, targets)
    last_member = started
    while lag.messages or lag.nodes_pending or lag.rebuilds:
        now = time.monotonic()
        if group_members(settings) != 0:  # a member, or a coordinator still starting: not known to be none
            last_member = now
        elif now - last_member > NO_WORKER_GRACE_S:
            raise NotCaughtUp(
                f"no stream worker consumes the topics (consumer group {settings.topic_prefix + CONSUMER_GROUP} "
                f"has no member); {lag.messages} messages unconsumed, {lag.nodes_pending} nodes not attributed: "
                "start workers with `gpuledger up` or `gpuledger stream` (same database and topic prefix)"
            )
        if now > deadline:
            raise NotCaughtUp(
                f"after {timeout_s:.0f}s {lag.messages} messages are unconsumed and {lag.nodes_pending} nodes "
                "not yet attributed; the stream workers' logs say why"
            )
        time.sleep(poll_s)
        lag = current_lag(settings, targets, known=lag)
    return lag
