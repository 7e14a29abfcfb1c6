"""Checks on waste: lost work is part of the failed work, never more."""

# Dagster inspects these functions' annotations when it builds the definitions, so they stay real
# objects here (no `from __future__ import annotations` in asset and check modules).

import dagster as dg
from dagster import AssetCheckExecutionContext

from dagster_project.defs.common.warehouse import rows
from dagster_project.defs.waste.assets import failure_waste_daily
from dagster_project.defs.waste.partitions import day_bounds
from dagster_project.defs.waste.resources import ClickHouseResource


@dg.asset_check(asset=failure_waste_daily, blocking=True)
def failure_waste_daily_lost_within_failed(context: AssetCheckExecutionContext,
                                           clickhouse: ClickHouseResource) -> dg.AssetCheckResult:
    """No row loses more GPU-seconds than it failed, and none is negative."""
    day, _, _ = day_bounds(context.partition_key)
    with clickhouse.client() as client:
        bad = rows(client, "waste_failure_check", {"day": day})[0]["bad"]
    return dg.AssetCheckResult(passed=int(bad) == 0, metadata={"partition": context.partition_key,
                                                                        "bad_rows": int(bad)})
