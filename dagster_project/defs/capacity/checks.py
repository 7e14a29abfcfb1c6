"""Checks on the capacity plan: every factor is a fraction."""

# Dagster inspects these functions' annotations when it builds the definitions, so they stay real
# objects here (no `from __future__ import annotations` in asset and check modules).

import dagster as dg
from dagster import AssetCheckExecutionContext

from dagster_project.defs.capacity.assets import capacity_plan
from dagster_project.defs.capacity.partitions import month_partition_bounds
from dagster_project.defs.capacity.resources import ClickHouseResource
from dagster_project.defs.common.warehouse import rows

EPS = 1e-9


@dg.asset_check(asset=capacity_plan)
def capacity_plan_ratios_in_range(
    context: AssetCheckExecutionContext, clickhouse: ClickHouseResource
) -> dg.AssetCheckResult:
    """availability, allocation, success and busy are all within [0, 1]."""
    first, _, _ = month_partition_bounds(context.partition_key)
    with clickhouse.client() as client:
        plan = rows(client, "capacity_plan_month", {"month": first})
    bad = [
        r["gpu_model"]
        for r in plan
        if any(not (-EPS <= float(r[k]) <= 1 + EPS) for k in ("availability", "allocation", "success", "busy"))
    ]
    return dg.AssetCheckResult(
        passed=not bad,
        metadata={"partition": context.partition_key, "pools": len(plan), "out_of_range": ", ".join(bad)},
    )
