"""Checks on waste: lost work is part of the failed work, never more; idle causes add up to the idle
time."""

# Dagster inspects these functions' annotations when it builds the definitions, so they stay real
# objects here (no `from __future__ import annotations` in asset and check modules).

import dagster as dg
from dagster import AssetCheckExecutionContext

from dagster_project.defs.common.warehouse import rows
from dagster_project.defs.waste.assets import failure_waste_daily, idle_causes_daily
from dagster_project.defs.waste.partitions import day_partition_bounds
from dagster_project.defs.waste.resources import ClickHouseResource


@dg.asset_check(asset=failure_waste_daily, blocking=True)
def failure_waste_daily_lost_within_failed(
    context: AssetCheckExecutionContext, clickhouse: ClickHouseResource
) -> dg.AssetCheckResult:
    """No row loses more GPU-seconds than it failed, and none is negative."""
    day, _, _ = day_partition_bounds(context.partition_key)
    with clickhouse.client() as client:
        bad = rows(client, "waste_failure_check", {"day": day})[0]["bad"]
    return dg.AssetCheckResult(
        passed=int(bad) == 0, metadata={"partition": context.partition_key, "bad_rows": int(bad)}
    )


CAUSES_TOLERANCE_S = 0.0036  # 1e-6 GPU-hours per owner


@dg.asset_check(asset=idle_causes_daily, blocking=True)
def idle_causes_daily_sum_to_idle(
    context: AssetCheckExecutionContext, clickhouse: ClickHouseResource
) -> dg.AssetCheckResult:
    """Every owner's causes (unobserved aside) add up to its allocated idle GPU-seconds of the day:
    allocated − busy − unobserved, as report gpu-hours counts them."""
    day, start, end = day_partition_bounds(context.partition_key)
    with clickhouse.client() as client:
        r = rows(
            client,
            "waste_idle_causes_check",
            {"day": day, "start": start, "end": end, "tolerance_s": CAUSES_TOLERANCE_S},
        )[0]
    return dg.AssetCheckResult(
        passed=int(r["bad"]) == 0,
        metadata={
            "partition": context.partition_key,
            "owners_off": int(r["bad"]),
            "worst_seconds": float(r["worst"] or 0.0),
            "facts_idle_gpu_hours": float(r["facts_idle"] or 0.0) / 3600,
            "causes_idle_gpu_hours": float(r["causes_idle"] or 0.0) / 3600,
        },
    )
