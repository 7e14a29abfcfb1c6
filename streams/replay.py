"""Rebuild every fact from the log: empty the warehouse's derived tables and rewind the workers.

The raw tables, facts, progress and attempts are all derived from Kafka, so after
``truncate_derived`` and ``rewind`` (with the workers stopped — a consumer group with members
cannot be rewound) a worker started again consumes every topic from offset 0 and writes the same
facts. Reference data and dead letters are rebuilt the same way.
"""

from __future__ import annotations

from kafka import KafkaAdminClient
from kafka.errors import KafkaError

from pipelines.errors import PipelineError
from pipelines.settings import Settings
from sql.client import get_client
from streams.progress import CONSUMER_GROUP

DERIVED_TABLES = (
    "gpu_usage_facts", "fact_windows", "gpu_usage_hourly", "attribution_progress", "node_activity",
    "node_activity_summary", "job_attempts", "gpu_samples", "raw_scheduler_allocations", "storage_samples",
    "checkpoints", "benchmark_runs", "org_mappings", "pricing_rates", "pricing_shared", "dead_letters",
)
FACT_TABLES = ("gpu_usage_facts", "fact_windows", "gpu_usage_hourly", "attribution_progress", "job_attempts")


def truncate(settings: Settings, tables: tuple[str, ...] = DERIVED_TABLES) -> None:
    client = get_client(settings)
    try:
        for table in tables:
            client.command(f"TRUNCATE TABLE IF EXISTS {table}")
    finally:
        client.close()


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
