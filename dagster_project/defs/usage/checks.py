"""Checks on usage: every GPU-second of capacity is in exactly one usage row."""

# Dagster inspects these functions' annotations when it builds the definitions, so they stay real
# objects here (no `from __future__ import annotations` in asset and check modules).

import dagster as dg
from dagster import AssetCheckExecutionContext

from dagster_project.defs.common.partitions import partition_of
from dagster_project.defs.common.warehouse import rows
from dagster_project.defs.usage.assets import gpu_usage_daily
from dagster_project.defs.usage.partitions import day_bounds
from dagster_project.defs.usage.resources import ClickHouseResource

TOLERANCE_S = 1e-3


@dg.asset_check(asset=gpu_usage_daily, blocking=True)
def gpu_usage_daily_gpu_seconds_conserved(context: AssetCheckExecutionContext,
                                          clickhouse: ClickHouseResource) -> dg.AssetCheckResult:
    """The day's usage rows hold exactly the capacity GPU-seconds of the day's latest fact windows."""
    day, start, end = day_bounds(partition_of(context))
    with clickhouse.client() as client:
        capacity = {r["cluster"]: float(r["capacity_seconds"])
                    for r in rows(client, "usage_daily_capacity", {"start": start, "end": end})}
        usage = {r["cluster"]: float(r["gpu_seconds"]) for r in rows(client, "usage_daily_totals", {"day": day})}
    gaps = {c: usage.get(c, 0.0) - capacity.get(c, 0.0) for c in sorted(set(capacity) | set(usage))}
    bad = {c: g for c, g in gaps.items() if abs(g) > TOLERANCE_S}
    return dg.AssetCheckResult(passed=not bad, metadata={"capacity_seconds": sum(capacity.values()),
                                                         "usage_seconds": sum(usage.values()),
                                                         "clusters_off": str(bad)})
