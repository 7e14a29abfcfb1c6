"""``gpu_usage_daily`` and ``queue_time_daily``: one day at a time, computed inside ClickHouse."""

# Dagster inspects these functions' annotations when it builds the definitions, so they stay real
# objects here (no `from __future__ import annotations` in asset and check modules).

import dagster as dg
from dagster import AssetExecutionContext

from dagster_project.defs.common.warehouse import replace_from_query
from dagster_project.defs.usage.partitions import daily_freshness, daily_partitions, day_partition_bounds
from dagster_project.defs.usage.resources import ClickHouseResource

USAGE_COLUMNS = (
    "day",
    "cluster",
    "gpu_model",
    "kind",
    "scheduler",
    "namespace",
    "account",
    "user",
    "queue",
    "workload_kind",
    "team",
    "business_unit",
    "model",
    "job_id",
    "logical_job",
    "attempt",
    "outcome",
    "failure_reason",
    "gpu_seconds",
    "busy_seconds",
    "unobserved_seconds",
    "idle_seconds",
)
QUEUE_COLUMNS = (
    "day",
    "cluster",
    "scheduler",
    "queue",
    "workload_kind",
    "attempts",
    "wait_seconds",
    "p50_wait_seconds",
    "p95_wait_seconds",
    "max_wait_seconds",
    "waited_gpu_seconds",
)


@dg.asset(partitions_def=daily_partitions, group_name="usage", kinds={"clickhouse"}, freshness_policy=daily_freshness)
def gpu_usage_daily(context: AssetExecutionContext, clickhouse: ClickHouseResource) -> dg.MaterializeResult:
    """GPU-seconds per day, cluster, GPU model, kind (allocated / unallocated / unavailable) and every
    owner dimension (scheduler, namespace, account, user, queue, workload kind, team, business unit,
    model, job, attempt, outcome, failure reason), with busy, unobserved and allocated-idle seconds."""
    day, start, end = day_partition_bounds(context.partition_key)
    with clickhouse.client() as client:
        n = replace_from_query(
            client, "gpu_usage_daily", "day", day, USAGE_COLUMNS, "usage_daily_rows", {"start": start, "end": end}
        )
    return dg.MaterializeResult(metadata={"rows": n})


@dg.asset(partitions_def=daily_partitions, group_name="usage", kinds={"clickhouse"}, freshness_policy=daily_freshness)
def queue_time_daily(context: AssetExecutionContext, clickhouse: ClickHouseResource) -> dg.MaterializeResult:
    """Queue time of the attempts that started on the day, per scheduler queue: wait (mean, p50, p95,
    max) and GPU-seconds waited (requested GPUs × wait)."""
    day, start, end = day_partition_bounds(context.partition_key)
    with clickhouse.client() as client:
        n = replace_from_query(
            client, "queue_time_daily", "day", day, QUEUE_COLUMNS, "usage_daily_queue", {"start": start, "end": end}
        )
    return dg.MaterializeResult(metadata={"rows": n})
