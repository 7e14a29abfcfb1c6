"""Blocking checks on the daily cost allocation (upstream of every monthly roll-up and export)."""

# Dagster inspects these functions' annotations when it builds the definitions, so they stay real
# objects here (no `from __future__ import annotations` in asset and check modules).

from collections import defaultdict
from decimal import Decimal

import dagster as dg
from dagster import AssetCheckExecutionContext

from dagster_project.defs.common.warehouse import rows
from dagster_project.defs.costs.allocation import GPU_HOURS
from dagster_project.defs.costs.assets import cost_allocation_daily
from dagster_project.defs.costs.day_lines import shared_total
from dagster_project.defs.costs.partitions import day_partition_bounds
from dagster_project.defs.costs.price_books import book_for
from dagster_project.defs.costs.resources import ClickHouseResource, PricingResource, default_cluster, price_books

GPU_TERMS = ("compute", "retries", "idle")
TOLERANCE_H = 1e-6
TOLERANCE_MONEY = Decimal("0.000001")


@dg.asset_check(asset=cost_allocation_daily, blocking=True)
def cost_allocation_daily_gpu_seconds_conserved(
    context: AssetCheckExecutionContext, clickhouse: ClickHouseResource
) -> dg.AssetCheckResult:
    """Every GPU-second of the day's usage is priced exactly once (compute + retries + idle lines)."""
    day, _, _ = day_partition_bounds(context.partition_key)
    with clickhouse.client() as client:
        usage = {r["cluster"]: float(r["gpu_seconds"]) / 3600 for r in rows(client, "usage_daily_totals", {"day": day})}
        priced: dict[str, float] = defaultdict(float)
        for r in rows(client, "cost_allocation_day_lines", {"day": day}):
            if r["term"] in GPU_TERMS:
                priced[r["cluster"]] += float(r["gpu_hours"])
    off = {c: priced.get(c, 0.0) - usage.get(c, 0.0) for c in sorted(set(usage) | set(priced))}
    bad = {c: v for c, v in off.items() if abs(v) > TOLERANCE_H * max(1.0, usage.get(c, 0.0))}
    return dg.AssetCheckResult(
        passed=not bad,
        metadata={
            "partition": context.partition_key,
            "usage_gpu_hours": sum(usage.values()),
            "priced_gpu_hours": sum(priced.values()),
            "clusters_off": str(bad),
        },
    )


@dg.asset_check(asset=cost_allocation_daily, blocking=True)
def cost_allocation_daily_money_conserved(
    context: AssetCheckExecutionContext, clickhouse: ClickHouseResource, pricing: PricingResource
) -> dg.AssetCheckResult:
    """The day's lines add up to its cluster cost: GPU-hours × their rate plus the shared costs of the day."""
    day, start, end = day_partition_bounds(context.partition_key)
    with clickhouse.client() as client:
        books = price_books(pricing, client, default_cluster())
        lines = rows(client, "cost_allocation_day_lines", {"day": day})
    charged: dict[str, Decimal] = defaultdict(Decimal)
    expected: dict[str, Decimal] = defaultdict(Decimal)
    for r in lines:
        charged[r["cluster"]] += Decimal(r["cost"])
        if r["pricing_unit"] == GPU_HOURS:
            expected[r["cluster"]] += Decimal(r["unit_price"]) * Decimal(repr(float(r["quantity"])))
    for cluster in charged:
        expected[cluster] += shared_total(book_for(books, cluster, default_cluster()), start, end)
    off = {c: charged[c] - expected[c] for c in sorted(charged)}
    bad = {c: str(v) for c, v in off.items() if abs(v) > TOLERANCE_MONEY}
    return dg.AssetCheckResult(
        passed=not bad,
        metadata={
            "partition": context.partition_key,
            "charged": float(sum(charged.values())),
            "expected": float(sum(expected.values())),
            "clusters_off": str(bad),
        },
    )


@dg.asset_check(asset=cost_allocation_daily, blocking=True)
def cost_allocation_daily_no_negative_cost(
    context: AssetCheckExecutionContext, clickhouse: ClickHouseResource
) -> dg.AssetCheckResult:
    """No line of the day has a negative cost or quantity."""
    day, _, _ = day_partition_bounds(context.partition_key)
    with clickhouse.client() as client:
        lines = rows(client, "cost_allocation_day_lines", {"day": day})
    bad = [r for r in lines if Decimal(r["cost"]) < 0 or float(r["quantity"]) < -TOLERANCE_H]
    return dg.AssetCheckResult(
        passed=not bad, metadata={"partition": context.partition_key, "lines": len(lines), "negative_lines": len(bad)}
    )
