"""Checks on fabric health: a warning (not blocking) when a node set runs below its baseline."""

# Dagster inspects these functions' annotations when it builds the definitions, so they stay real
# objects here (no `from __future__ import annotations` in asset and check modules).

import dagster as dg
from dagster import AssetCheckExecutionContext

from dagster_project.defs.common.warehouse import rows
from dagster_project.defs.fabric.assets import fabric_health
from dagster_project.defs.fabric.partitions import day_partition_bounds
from dagster_project.defs.fabric.resources import ClickHouseResource


@dg.asset_check(asset=fabric_health)
def fabric_health_no_node_set_below_baseline(
    context: AssetCheckExecutionContext, clickhouse: ClickHouseResource
) -> dg.AssetCheckResult:
    """No node set ran below its NCCL bandwidth baseline on the day."""
    day, _, _ = day_partition_bounds(context.partition_key)
    with clickhouse.client() as client:
        below = rows(client, "fabric_below_baseline", {"day": day})
    return dg.AssetCheckResult(
        passed=not below,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"partition": context.partition_key, "node_sets": "\n".join(str(r["node_set"]) for r in below)},
    )
