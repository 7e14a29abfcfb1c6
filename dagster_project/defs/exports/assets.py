"""``chargeback_monthly`` (a month's lines in cents) and ``chargeback_files`` (FOCUS 1.2 files)."""

# Dagster inspects these functions' annotations when it builds the definitions, so they stay real
# objects here (no `from __future__ import annotations` in asset and check modules).

from decimal import Decimal
from pathlib import Path

import dagster as dg
from dagster import AssetExecutionContext

from dagster_project.defs.common.warehouse import replace_rows
from dagster_project.defs.costs.assets import cost_allocation_daily
from dagster_project.defs.costs.month_cents import term_totals
from dagster_project.defs.costs.month_rollup import CHARGEBACK_COLUMNS, chargeback_rows, month_from_daily
from dagster_project.defs.costs.resources import default_cluster, price_books, share_policy
from dagster_project.defs.exports.export import load_chargeback, write_files
from dagster_project.defs.exports.on_demand import record_export
from dagster_project.defs.exports.partitions import month_partition_bounds, monthly_partitions
from dagster_project.defs.exports.resources import (
    ClickHouseResource,
    ExportResource,
    OrgResource,
    PricingResource,
    business_units,
    focus_config,
)


@dg.asset(partitions_def=monthly_partitions, group_name="exports", kinds={"clickhouse"}, deps=[cost_allocation_daily])
def chargeback_monthly(context: AssetExecutionContext, clickhouse: ClickHouseResource) -> dg.MaterializeResult:
    """The month's chargeback lines per cluster, business unit, term, team, model and GPU model, in
    cents: each term's month total rounded once, its cents handed out by largest remainder, so the
    business units' lines plus the platform's remainder equal the period's total cost exactly."""
    first, _, end = month_partition_bounds(context.partition_key)
    with clickhouse.client() as client:
        month = month_from_daily(client, first, end.date())
        n = replace_rows(
            client, "chargeback_monthly", "month", first, CHARGEBACK_COLUMNS, chargeback_rows(month, first)
        )
    total = sum(term_totals(month.lines).values())
    return dg.MaterializeResult(metadata={"rows": n, "total_cost": float(total)})


@dg.asset(partitions_def=monthly_partitions, group_name="exports", kinds={"csv", "parquet"}, deps=[chargeback_monthly])
def chargeback_files(
    context: AssetExecutionContext,
    clickhouse: ClickHouseResource,
    pricing: PricingResource,
    org: OrgResource,
    exports: ExportResource,
) -> dg.MaterializeResult:
    """FinOps FOCUS 1.2 files of the month: all rows, and one file per business unit with only its rows."""
    first, start, end = month_partition_bounds(context.partition_key)
    with clickhouse.client() as client:
        books = price_books(pricing, client, default_cluster())
        cb = load_chargeback(client, first.isoformat(), books, share_policy(pricing), default_cluster())
        units = business_units(org, client, start, end)
    paths: list[Path] = []
    for fmt in exports.formats:
        if fmt not in ("csv", "parquet"):
            raise dg.Failure(f"unknown export format {fmt!r}")
        paths += write_files(cb, exports.directory(), fmt, focus_config(exports), None, units)  # type: ignore[arg-type]
    with clickhouse.client() as client:
        total = sum((Decimal(ln["cost"]) for ln in cb.lines), Decimal("0.00"))
        changed = record_export(client, cb.period, cb.start, cb.end, total, paths)
    if changed is not None:
        context.log.warning(f"{cb.period} changed after its export of {changed}: these files replace it")
    return dg.MaterializeResult(
        metadata={
            "files": "\n".join(str(p) for p in paths),
            "source": cb.source,
            "dagster/uri": str(exports.directory()),
            "changed_after_export_of": str(changed or ""),
        }
    )
