"""Blocking checks on the month's chargeback, upstream of the FOCUS files."""

# Dagster inspects these functions' annotations when it builds the definitions, so they stay real
# objects here (no `from __future__ import annotations` in asset and check modules).

from collections import defaultdict
from decimal import Decimal

import dagster as dg
from dagster import AssetCheckExecutionContext

from dagster_project.defs.common.warehouse import rows
from dagster_project.defs.costs.month_cents import to_cents
from dagster_project.defs.exports.assets import chargeback_monthly
from dagster_project.defs.exports.focus import focus_rows
from dagster_project.defs.exports.focus_rules import check_rows
from dagster_project.defs.exports.focus_spec import HEADER
from dagster_project.defs.exports.partitions import month_partition_bounds
from dagster_project.defs.exports.resources import ClickHouseResource, ExportResource, focus_config


@dg.asset_check(asset=chargeback_monthly, blocking=True)
def chargeback_monthly_money_conserved(
    context: AssetCheckExecutionContext, clickhouse: ClickHouseResource
) -> dg.AssetCheckResult:
    """Business units' lines plus the platform's remainder equal the period's total cost, to the cent
    (the total: each term's daily cost lines summed exactly and rounded once)."""
    first, _, end = month_partition_bounds(context.partition_key)
    with clickhouse.client() as client:
        lines = rows(client, "chargeback_lines", {"month": first})
        daily = rows(client, "cost_allocation_month", {"start": first, "end": end.date()})
    exact: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    for r in daily:
        exact[(str(r["cluster"]), str(r["term"]))] += Decimal(r["cost"])
    expected = sum((to_cents(v) for v in exact.values()), Decimal("0.00"))
    charged = sum((Decimal(r["cost"]) for r in lines), Decimal("0.00"))
    units = sum((Decimal(r["cost"]) for r in lines if r["business_unit"] != "__platform__"), Decimal("0.00"))
    return dg.AssetCheckResult(
        passed=charged == expected,
        metadata={
            "partition": context.partition_key,
            "period_total": float(expected),
            "business_units": float(units),
            "platform_remainder": float(charged - units),
            "difference": float(charged - expected),
        },
    )


@dg.asset_check(asset=chargeback_monthly, blocking=True)
def chargeback_monthly_no_negative_cost(
    context: AssetCheckExecutionContext, clickhouse: ClickHouseResource
) -> dg.AssetCheckResult:
    """No chargeback line is negative."""
    first, _, _ = month_partition_bounds(context.partition_key)
    with clickhouse.client() as client:
        lines = rows(client, "chargeback_lines", {"month": first})
    bad = [r for r in lines if Decimal(r["cost"]) < 0]
    return dg.AssetCheckResult(
        passed=not bad, metadata={"partition": context.partition_key, "lines": len(lines), "negative_lines": len(bad)}
    )


@dg.asset_check(asset=chargeback_monthly, blocking=True)
def chargeback_monthly_focus_rules_hold(
    context: AssetCheckExecutionContext, clickhouse: ClickHouseResource, exports: ExportResource
) -> dg.AssetCheckResult:
    """The month's FOCUS rows have every mandatory column, allowed values, correct nulls, UTC times,
    flat prefixed tags, x_-prefixed custom columns, and unit price × quantity matching cost."""
    first, start, end = month_partition_bounds(context.partition_key)
    with clickhouse.client() as client:
        lines = rows(client, "chargeback_lines", {"month": first})
    currency = {str(r["cluster"]): str(r["currency"]) for r in lines}
    problems = check_rows(HEADER, focus_rows(lines, currency, (start, end), focus_config(exports)))
    return dg.AssetCheckResult(
        passed=not problems,
        metadata={
            "partition": context.partition_key,
            "rows": len(lines),
            "problems": len(problems),
            "first_problems": "\n".join(problems[:20]),
        },
    )
