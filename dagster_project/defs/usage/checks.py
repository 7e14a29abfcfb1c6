"""Checks on usage: every GPU-second of the physical GPUs is in exactly one usage row."""

# Dagster inspects these functions' annotations when it builds the definitions, so they stay real
# objects here (no `from __future__ import annotations` in asset and check modules).

import dagster as dg
from dagster import AssetCheckExecutionContext

from dagster_project.defs.common.warehouse import rows
from dagster_project.defs.usage.assets import gpu_usage_daily
from dagster_project.defs.usage.partitions import day_partition_bounds
from dagster_project.defs.usage.resources import ClickHouseResource

TOLERANCE_S = 1e-3


@dg.asset_check(asset=gpu_usage_daily, blocking=True)
def gpu_usage_daily_gpu_seconds_conserved(
    context: AssetCheckExecutionContext, clickhouse: ClickHouseResource
) -> dg.AssetCheckResult:
    """The day's usage rows hold exactly the physical GPUs' capacity: per cluster, their GPU-seconds
    equal Σ inventory GPUs × window over the day's written windows (the GPUs the node's states declare
    or its samples reported, not what the attribution wrote: over-allocation fails here), every written
    window's node has an inventory, and per node and window the current facts (allocated +
    unallocated + unavailable) equal its physical GPUs × window."""
    day, start, end = day_partition_bounds(context.partition_key)
    params = {"start": start, "end": end}
    with clickhouse.client() as client:
        inventory = rows(client, "usage_daily_capacity", params)
        usage = {r["cluster"]: float(r["gpu_seconds"]) for r in rows(client, "usage_daily_totals", {"day": day})}
        gaps = rows(client, "usage_inventory_gaps", {**params, "limit": 5})
    capacity = {r["cluster"]: float(r["capacity_seconds"]) for r in inventory}
    unknown = {
        r["cluster"]: list(r["nodes_without_inventory"]) for r in inventory if int(r["windows_without_inventory"])
    }
    diffs = {c: usage.get(c, 0.0) - capacity.get(c, 0.0) for c in sorted(set(capacity) | set(usage))}
    bad = {c: g for c, g in diffs.items() if abs(g) > TOLERANCE_S}
    first = (
        f"{gaps[0]['cluster']}/{gaps[0]['node']} at {gaps[0]['window_start']}: facts "
        f"{float(gaps[0]['fact_seconds'] or 0):.3f} s, physical GPUs {float(gaps[0]['physical_seconds']):.3f} s"
        if gaps
        else ""
    )
    lines = [first] if first else []
    lines += [f"{c}: usage {usage.get(c, 0.0):.3f} s, inventory {capacity.get(c, 0.0):.3f} s" for c in bad]
    lines += [
        f"{c}: no inventory (no node state declaring its GPUs, no GPU reported) for node(s) {', '.join(nodes[:10])}"
        for c, nodes in unknown.items()
    ]
    return dg.AssetCheckResult(
        passed=not bad and not gaps and not unknown,
        description="; ".join(lines) or None,
        metadata={
            "partition": context.partition_key,
            "physical_capacity_seconds": sum(capacity.values()),
            "usage_seconds": sum(usage.values()),
            "clusters_off": str(bad),
            "first_windows_off": first,
            "nodes_without_inventory": str(unknown),
        },
    )
