"""``idle_waste_daily`` and ``failure_waste_daily``: which idle time and which failures burned GPU-hours."""

# Dagster inspects these functions' annotations when it builds the definitions, so they stay real
# objects here (no `from __future__ import annotations` in asset and check modules).

import dagster as dg
from dagster import AssetExecutionContext

from dagster_project.defs.common.warehouse import replace_from_query, replace_from_select
from dagster_project.defs.usage.assets import gpu_usage_daily
from dagster_project.defs.waste.partitions import daily_freshness, daily_partitions, day_partition_bounds
from dagster_project.defs.waste.resources import ClickHouseResource
from sql import load_query
from sql.idle_causes import IDLE_CAUSE_RULES

IDLE_COLUMNS = (
    "day",
    "cluster",
    "gpu_model",
    "node",
    "kind",
    "team",
    "business_unit",
    "gpu_seconds",
    "idle_seconds",
    "unobserved_seconds",
)
CAUSE_DIMENSIONS = ("cluster", "node", "team", "business_unit", "model")
CAUSE_COLUMNS = ("day", *CAUSE_DIMENSIONS, "cause", "idle_seconds", "cost", "currency")
FAILURE_COLUMNS = (
    "day",
    "cluster",
    "failure_reason",
    "team",
    "business_unit",
    "model",
    "gpu_model",
    "scheduler",
    "logical_job",
    "job_id",
    "attempt",
    "last_checkpoint",
    "failed_gpu_seconds",
    "lost_gpu_seconds",
)


@dg.asset(
    partitions_def=daily_partitions,
    group_name="waste",
    kinds={"clickhouse"},
    deps=[gpu_usage_daily],
    freshness_policy=daily_freshness,
)
def idle_waste_daily(context: AssetExecutionContext, clickhouse: ClickHouseResource) -> dg.MaterializeResult:
    """Idle GPU-seconds by GPU model, node and team: ``allocated_idle`` (allocated − busy − unobserved,
    charged to the team holding the GPUs), ``unallocated`` and ``unavailable`` capacity."""
    day, start, end = day_partition_bounds(context.partition_key)
    with clickhouse.client() as client:
        n = replace_from_query(
            client, "idle_waste_daily", "day", day, IDLE_COLUMNS, "waste_idle_daily", {"start": start, "end": end}
        )
    return dg.MaterializeResult(metadata={"rows": n})


@dg.asset(
    partitions_def=daily_partitions,
    group_name="waste",
    kinds={"clickhouse"},
    deps=[gpu_usage_daily],
    freshness_policy=daily_freshness,
)
def failure_waste_daily(context: AssetExecutionContext, clickhouse: ClickHouseResource) -> dg.MaterializeResult:
    """Failed attempts' GPU-seconds by reason, team, model and job, and the lost work: the part after
    the attempt's last completed checkpoint (all of it without a checkpoint)."""
    day, start, end = day_partition_bounds(context.partition_key)
    with clickhouse.client() as client:
        n = replace_from_query(
            client,
            "failure_waste_daily",
            "day",
            day,
            FAILURE_COLUMNS,
            "waste_failure_daily",
            {"start": start, "end": end},
        )
    return dg.MaterializeResult(metadata={"rows": n})


@dg.asset(
    partitions_def=daily_partitions,
    group_name="waste",
    kinds={"clickhouse"},
    deps=[gpu_usage_daily],
    freshness_policy=daily_freshness,
)
def idle_causes_daily(context: AssetExecutionContext, clickhouse: ClickHouseResource) -> dg.MaterializeResult:
    """Why allocated GPUs sat idle: each owner's idle GPU-seconds of the day split into checkpoint,
    storage_stall, fabric_degraded, startup, teardown and idle (unobserved beside them), by cluster,
    node, team, business unit and model — ``report idle-causes``' rules, kept per day."""
    day, start, end = day_partition_bounds(context.partition_key)
    keys = ", ".join(f"parts[{i + 1}]" for i in range(len(CAUSE_DIMENSIONS)))
    select = (
        f"SELECT {{day:Date}}, {keys}, cause, idle_gpu_hours * 3600, cost, currency\n"
        f"FROM (SELECT *, splitByChar('\\x1F', key) AS parts FROM (\n{load_query('idle_causes')}\n))"
    )
    params = {
        "day": day,
        "start": start,
        "end": end,
        "cluster": "",
        "by": ",".join(CAUSE_DIMENSIONS),
        **dict(IDLE_CAUSE_RULES),
    }
    with clickhouse.client() as client:
        n = replace_from_select(client, "idle_causes_daily", "day", day, CAUSE_COLUMNS, select, params)
    return dg.MaterializeResult(metadata={"rows": n})
