"""``fabric_health``: a day's NCCL runs per node set against their baseline."""

# Dagster inspects these functions' annotations when it builds the definitions, so they stay real
# objects here (no `from __future__ import annotations` in asset and check modules).

from dataclasses import astuple
from datetime import timedelta

import dagster as dg
from dagster import AssetExecutionContext

from dagster_project.defs.common.warehouse import replace_rows, rows
from dagster_project.defs.fabric.baselines import Run, flagged_nodes, health
from dagster_project.defs.fabric.partitions import daily_freshness, daily_partitions, day_partition_bounds
from dagster_project.defs.fabric.resources import ClickHouseResource, FabricConfig
from pipelines.times import as_utc

FABRIC_COLUMNS = (
    "day",
    "cluster",
    "collective",
    "node_set",
    "hosts",
    "runs",
    "failed_runs",
    "avg_busbw_gbps",
    "baseline_gbps",
    "baseline_runs",
    "baseline_scope",
    "ratio",
    "below_baseline",
)


@dg.asset(partitions_def=daily_partitions, group_name="fabric", kinds={"clickhouse"}, freshness_policy=daily_freshness)
def fabric_health(
    context: AssetExecutionContext, config: FabricConfig, clickhouse: ClickHouseResource
) -> dg.MaterializeResult:
    """Per day, cluster, collective and node set: runs, failed runs, mean bus bandwidth, the baseline
    it is compared with (node set's own history, else the cluster's peers of the same size) and
    whether it is below it."""
    day, start, end = day_partition_bounds(context.partition_key)
    with clickhouse.client() as client:
        runs = [
            Run(
                str(r["cluster"]),
                str(r["collective"]),
                str(r["run_id"]),
                as_utc(r["time"]),
                tuple(r["hosts"]),
                None if r["avg_busbw_gbps"] is None else float(r["avg_busbw_gbps"]),
                bool(r["ok"]),
            )
            for r in rows(client, "fabric_runs", {"start": start - timedelta(days=config.lookback_days), "end": end})
        ]
        today = [r for r in runs if r.time >= start]
        out = health(today, [r for r in runs if r.time < start], config.tolerance, config.min_runs)
        n = replace_rows(client, "fabric_health", "day", day, FABRIC_COLUMNS, [(day, *astuple(r)) for r in out])
    flagged = flagged_nodes(out)
    if flagged:
        context.log.warning(f"nodes below their NCCL baseline: {', '.join(flagged)}")
    return dg.MaterializeResult(metadata={"rows": n, "flagged_nodes": ", ".join(flagged)})
