"""``capacity_plan``: required GPUs per GPU model for the month's target work."""

# Dagster inspects these functions' annotations when it builds the definitions, so they stay real
# objects here (no `from __future__ import annotations` in asset and check modules).

from dataclasses import astuple

import dagster as dg
from dagster import AssetExecutionContext

from dagster_project.defs.capacity.partitions import month_partition_bounds, monthly_partitions
from dagster_project.defs.capacity.resources import CapacityResource, ClickHouseResource
from dagster_project.defs.capacity.sizing import PoolMonth, plan
from dagster_project.defs.common.warehouse import replace_rows, rows
from dagster_project.defs.usage.assets import gpu_usage_daily
from dagster_project.defs.waste.assets import failure_waste_daily

PLAN_COLUMNS = (
    "month",
    "cluster",
    "gpu_model",
    "month_hours",
    "installed_gpus",
    "capacity_gpu_hours",
    "availability",
    "allocation",
    "success",
    "busy",
    "useful_gpu_hours",
    "useful_work_per_gpu_month",
    "target_work",
    "target_source",
    "required_gpus",
    "additional_gpus",
)


@dg.asset(
    partitions_def=monthly_partitions,
    group_name="capacity",
    kinds={"clickhouse"},
    deps=[gpu_usage_daily, failure_waste_daily],
)
def capacity_plan(
    context: AssetExecutionContext, clickhouse: ClickHouseResource, capacity: CapacityResource
) -> dg.MaterializeResult:
    """required_gpu_capacity = target work per month / useful work per GPU-month after failures, idle
    and retries — with availability, allocation, success and busy shown as separate factors."""
    first, start, end = month_partition_bounds(context.partition_key)
    month_hours = (end - start).total_seconds() / 3600
    with clickhouse.client() as client:
        pools = [
            PoolMonth(
                str(r["cluster"]),
                str(r["gpu_model"]),
                int(r["days"]),
                float(r["capacity"]),
                float(r["unavailable"]),
                float(r["allocated"]),
                float(r["busy"]),
                float(r["unobserved"]),
                float(r["lost"]),
            )
            for r in rows(client, "capacity_usage_month", {"start": first, "end": end.date()})
        ]
        lines = [plan(p, month_hours, capacity.targets.get(p.gpu_model), capacity.growth) for p in pools]
        n = replace_rows(
            client, "capacity_plan", "month", first, PLAN_COLUMNS, [(first, *astuple(line)) for line in lines]
        )
    return dg.MaterializeResult(
        metadata={"rows": n, "required_gpus": str({ln.gpu_model: round(ln.required_gpus, 2) for ln in lines})}
    )
