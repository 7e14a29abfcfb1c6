"""``cost_allocation_daily`` (who pays for every cost of a day) and ``effective_cluster_unit_cost_monthly``."""

# Dagster inspects these functions' annotations when it builds the definitions, so they stay real
# objects here (no `from __future__ import annotations` in asset and check modules).

import dagster as dg
from dagster import AssetExecutionContext

from dagster_project.defs.common.warehouse import replace_rows
from dagster_project.defs.costs.day_lines import COST_COLUMNS, cost_day, cost_rows
from dagster_project.defs.costs.month_rollup import UNIT_COLUMNS, accepted_units, month_from_daily, unit_cost_rows
from dagster_project.defs.costs.partitions import (
    daily_freshness,
    daily_partitions,
    day_partition_bounds,
    month_partition_bounds,
    monthly_partitions,
)
from dagster_project.defs.costs.resources import (
    ClickHouseResource,
    PricingResource,
    default_cluster,
    price_books,
    share_policy,
)
from dagster_project.defs.usage.assets import gpu_usage_daily
from dagster_project.defs.waste.assets import failure_waste_daily


@dg.asset(
    partitions_def=daily_partitions,
    group_name="costs_daily",
    kinds={"clickhouse"},
    deps=[gpu_usage_daily, failure_waste_daily],
    freshness_policy=daily_freshness,
)
def cost_allocation_daily(
    context: AssetExecutionContext, clickhouse: ClickHouseResource, pricing: PricingResource
) -> dg.MaterializeResult:
    """Every cost of the day as lines per term (compute, retries, idle, network, storage, support,
    operations) and owner: direct GPU cost at the effective-dated rate of each GPU model, idle
    capacity by the idle policy, shared costs by the configured basis (storage by bytes moved where
    the counters name the job). The platform's unshared remainder is business unit ``__platform__``."""
    day, start, _ = day_partition_bounds(context.partition_key)
    with clickhouse.client() as client:
        books = price_books(pricing, client, default_cluster())
        days = cost_day(client, start, books, share_policy(pricing), default_cluster())
        n = replace_rows(client, "cost_allocation_daily", "day", day, COST_COLUMNS, cost_rows(day, days))
    notes = [note for d in days for note in d.allocation.notes]
    for note in notes:
        context.log.warning(note)
    return dg.MaterializeResult(
        metadata={
            "rows": n,
            "total_cost": float(sum(d.allocation.total for d in days)),
            "unpriced_gpu_hours": sum(d.allocation.unpriced_gpu_seconds for d in days) / 3600,
        }
    )


@dg.asset(
    partitions_def=monthly_partitions, group_name="costs_monthly", kinds={"clickhouse"}, deps=[cost_allocation_daily]
)
def effective_cluster_unit_cost_monthly(
    context: AssetExecutionContext, clickhouse: ClickHouseResource, pricing: PricingResource
) -> dg.MaterializeResult:
    """(compute + network + storage + support + operations + idle + retries) / accepted workload units,
    per cluster and month, every term in cents in its own column; units are successful runs, or
    reported output units when present."""
    first, start, end = month_partition_bounds(context.partition_key)
    with clickhouse.client() as client:
        month = month_from_daily(client, first, end.date())
        units = accepted_units(client, start, end, pricing.accepted_units)
        out = unit_cost_rows(month, first, units)
        n = replace_rows(client, "effective_cluster_unit_cost_monthly", "month", first, UNIT_COLUMNS, out)
    return dg.MaterializeResult(metadata={"rows": n, "clusters": ", ".join(r[1] for r in out)})
