"""Rebuild the facts — from the warehouse's raw tables (the default) or from the Kafka log.

**From the raw tables** (``rebuild_facts``): the facts, windows, hourly rollup, owner keys
(``owner_keys``, refilled as the facts are written again), progress, conflicts, quarantine and
attempt records are derived from the raw tables alone. Emptying those derived tables and
recomputing the attempt records from the stored scheduler events makes the next attribution step
recompute every node from its first event. Kafka is not needed and no raw
row is touched: nothing can be lost, whatever the topics still hold.

**From the Kafka log** (``check_log_whole``, then ``truncate`` and ``rewind``): also rebuilds the
raw tables, so it needs the whole log. It is refused — before anything is emptied — unless every
partition of every data topic still starts at offset 0 (retention or deleted records have not
removed its beginning) and the workers' consumer group has no member left (a member would keep
consuming from its old offsets, and a group with members cannot be rewound).
"""

from __future__ import annotations

from collections.abc import Sequence

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.errors import KafkaError

from pipelines.errors import PipelineError
from pipelines.settings import Settings
from pipelines.topics import DATA_TOPICS, physical_name
from sql.client import get_client
from streams.attribution.warehouse import AttributionWarehouse
from streams.progress import CONSUMER_GROUP, group_members

RAW_TABLES = (
    "gpu_samples",
    "raw_scheduler_allocations",
    "storage_samples",
    "checkpoints",
    "workload_outputs",
    "benchmark_runs",
    "org_mappings",
    "pricing_rates",
    "pricing_shared",
    "dead_letters",
    "node_activity",
    "node_activity_summary",
)
FACT_TABLES = (
    "gpu_usage_facts",
    "fact_windows",
    "gpu_usage_hourly",
    "owner_keys",
    "attribution_progress",
    "attribution_conflicts",
    "attribution_quarantine",
    "job_attempts",
)
DERIVED_TABLES = FACT_TABLES + RAW_TABLES
JOBS_PER_REFRESH = 500


class ReplayRefused(PipelineError):
    """A replay from Kafka would lose history; nothing was changed."""


def truncate(settings: Settings, tables: Sequence[str] = DERIVED_TABLES) -> None:
    client = get_client(settings)
    try:
        for table in tables:
            client.command(f"TRUNCATE TABLE IF EXISTS {table}")
    finally:
        client.close()


def rebuild_facts(settings: Settings) -> int:
    """Empty the fact tables and recompute the attempt records from the raw tables; returns the
    number of jobs. The workers recompute every node's facts on their next step."""
    from streams.ingest.sink import refresh_attempts

    truncate(settings, FACT_TABLES)
    wh = AttributionWarehouse(settings)
    try:
        jobs = wh.client.query(
            "SELECT DISTINCT cluster, job_id FROM raw_scheduler_allocations WHERE job_id != '' ORDER BY cluster, job_id"
        ).result_rows
        by_cluster: dict[str, list[str]] = {}
        for cluster, job in jobs:
            by_cluster.setdefault(str(cluster), []).append(str(job))
        for cluster, job_ids in by_cluster.items():
            for i in range(0, len(job_ids), JOBS_PER_REFRESH):
                refresh_attempts(wh, cluster, job_ids[i : i + JOBS_PER_REFRESH])
    finally:
        wh.close()
    return len(jobs)


def check_log_whole(settings: Settings, members_allowed: bool = False) -> None:
    """Raise ``ReplayRefused`` unless a replay from offset 0 would see every event ever written
    (and, unless ``members_allowed``, no worker is left in the group)."""
    consumer = KafkaConsumer(**settings.kafka_client_config())
    try:
        parts = [
            TopicPartition(name, p)
            for topic in DATA_TOPICS
            for name in (physical_name(topic, settings), physical_name(topic, settings, dlq=True))
            for p in sorted(consumer.partitions_for_topic(name) or ())
        ]
        starts = consumer.beginning_offsets(parts)
    except KafkaError as exc:
        raise ReplayRefused(f"cannot read the topics' start offsets: {exc}") from exc
    finally:
        consumer.close()
    moved = sorted(f"{tp.topic}[{tp.partition}] starts at {offset}" for tp, offset in starts.items() if offset > 0)
    if moved:
        raise ReplayRefused(
            f"refused: the log no longer starts at offset 0 ({', '.join(moved[:3])}"
            f"{' …' if len(moved) > 3 else ''}); retention removed history — rebuild from the "
            "raw tables instead (`gpuledger replay --yes`)"
        )
    members = 0 if members_allowed else group_members(settings)
    if members is None:
        raise ReplayRefused("refused: the broker's group coordinator is still starting; try again in a minute")
    if members:
        raise ReplayRefused(
            f"refused: stream workers still consume in group "
            f"{settings.topic_prefix + CONSUMER_GROUP}; stop every worker first"
        )


def rewind(settings: Settings) -> None:
    """Forget the workers' committed offsets so the next worker starts from offset 0."""
    admin = KafkaAdminClient(**settings.kafka_client_config())
    try:
        results = admin.delete_groups([settings.topic_prefix + CONSUMER_GROUP])
    except KafkaError as exc:
        raise PipelineError(f"cannot rewind the stream workers' group: {exc}") from exc
    finally:
        admin.close()
    for group, outcome in dict(results).items():
        if outcome not in ("OK", "GroupIdNotFoundError"):
            raise PipelineError(f"cannot rewind group {group}: {outcome} (stop the stream workers first)")
