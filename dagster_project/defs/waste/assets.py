"""``idle_waste_daily`` and ``failure_waste_daily``: which idle time and which failures burned GPU-hours."""

# Dagster inspects these functions' annotations when it builds the definitions, so they stay real
# objects here (no `from __future__ import annotations` in asset and check modules).

import dagster as dg
from dagster import AssetExecutionContext

from dagster_project.defs.common.warehouse import replace_from_query
from dagster_project.defs.usage.assets import gpu_usage_daily
from dagster_project.defs.waste.partitions import daily_freshness, daily_partitions, day_bounds
from dagster_project.defs.waste.resources import ClickHouseResource

IDLE_COLUMNS = ("day", "cluster", "gpu_model", "node", "kind", "team", "business_unit", "gpu_seconds",
                "idle_seconds", "unobserved_seconds")
FAILURE_COLUMNS = ("day", "cluster", "failure_reason", "team", "business_unit", "model", "gpu_model", "scheduler",
                   "logical_job", "job_id", "attempt", "last_checkpoint", "failed_gpu_seconds", "lost_gpu_seconds")


@dg.asset(partitions_def=daily_partitions, group_name="waste", kinds={"clickhouse"}, deps=[gpu_usage_daily],
          freshness_policy=daily_freshness)
def idle_waste_daily(context: AssetExecutionContext, clickhouse: ClickHouseResource) -> dg.MaterializeResult:
    """Idle GPU-seconds by GPU model, node and team: ``allocated_idle`` (allocated − busy − unobserved,
    charged to the team holding the GPUs), ``unallocated`` and ``unavailable`` capacity."""
    day, start, end = day_bounds(context.partition_key)
    with clickhouse.client() as client:
        n = replace_from_query(client, "idle_waste_daily", "day", day, IDLE_COLUMNS, "waste_idle_daily",
                               {"start": start, "end": end})
    return dg.MaterializeResult(metadata={"rows": n})


@dg.asset(partitions_def=daily_partitions, group_name="waste", kinds={"clickhouse"}, deps=[gpu_usage_daily],
          freshness_policy=daily_freshness)
def failure_waste_daily(context: AssetExecutionContext, clickhouse: ClickHouseResource) -> dg.MaterializeResult:
    """Failed attempts' GPU-seconds by reason, team, model and job, and the lost work: the part after
    the attempt's last completed checkpoint (all of it without a checkpoint)."""
    day, start, end = day_bounds(context.partition_key)
    with clickhouse.client() as client:
        n = replace_from_query(client, "failure_waste_daily", "day", day, FAILURE_COLUMNS, "waste_failure_daily",
                               {"start": start, "end": end})
    return dg.MaterializeResult(metadata={"rows": n})
