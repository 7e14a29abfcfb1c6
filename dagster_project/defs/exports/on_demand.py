"""What ``gpuledger export chargeback`` and ``report unit-cost`` do, given a warehouse client.

Reads the months the assets materialized, or computes them on the spot (nothing is written to the
warehouse); files are checked against the FOCUS rules before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from clickhouse_connect.driver.client import Client

from dagster_project.defs.common.partitions import month_partition_bounds
from dagster_project.defs.common.warehouse import rows
from dagster_project.defs.costs.allocation import PLATFORM, SharePolicy
from dagster_project.defs.costs.day_lines import line_from_row
from dagster_project.defs.costs.month_cents import ChargeLine, scaled_unit_cost
from dagster_project.defs.costs.month_rollup import Month, accepted_units, unit_cost_rows
from dagster_project.defs.costs.price_books import books_from_warehouse
from dagster_project.defs.exports.export import Chargeback, load_chargeback, write_files
from dagster_project.defs.exports.files import FileFormat
from dagster_project.defs.exports.focus import FocusConfig, focus_rows
from dagster_project.defs.exports.focus_rules import check_rows
from dagster_project.defs.exports.focus_spec import HEADER
from pipelines.clusters import EVERY_CLUSTER, ClusterScope
from pipelines.cost_terms import TERMS

UNIT_COST_COLUMNS = ("cluster", "currency", *TERMS, "total", "accepted_units", "unit_kind", "unit_cost")
# the unit cost as it reads on screen (per 1M tokens, per 1k outputs, per run): monthly.scaled_unit_cost
SCALED_COLUMNS = ("unit_cost_scaled", "unit_cost_per")


class ExportRefused(ValueError):
    """The export would be wrong (an unknown business unit, FOCUS rules that do not hold)."""


@dataclass
class ExportResult:
    paths: list[Path]
    total: Decimal
    platform: Decimal
    currency: str
    lines: int
    source: str
    changed_since: datetime | None = None  # an earlier export of this month was made from older inputs


def record_export(
    client: Client, period: str, start: datetime, end: datetime, total: Decimal, paths: list[Path]
) -> datetime | None:
    """Record an export of ``period``; return the time of an earlier export made from older inputs
    (the closed month changed after it was exported), else None."""
    [row] = rows(client, "chargeback_input_version", {"start": start, "end": end, "period": period})
    latest, exported = int(row["latest"] or 0), int(row["exported"] or 0)
    changed = row["exported_at"] if exported and latest > exported else None
    client.insert(
        "chargeback_exports",
        [[period, datetime.now(UTC), latest, str(total), [str(p) for p in paths]]],
        column_names=["period", "exported_at", "input_version", "total", "paths"],
    )
    return changed


def export_chargeback(
    client: Client,
    period: str,
    out: Path,
    fmt: FileFormat,
    business_unit: str | None,
    default_cluster: str,
    cfg: FocusConfig | None = None,
    record: bool = True,
    cluster: ClusterScope = EVERY_CLUSTER,
) -> ExportResult:
    """The month's FOCUS files into ``out``, of ``cluster``'s lines (every cluster's by default);
    ``record`` notes the export (the read-only API does not; nor is one cluster's part recorded)."""
    cfg = cfg or FocusConfig()
    cb = load_chargeback(client, period, books_from_warehouse(client), SharePolicy(), default_cluster)
    if cluster != EVERY_CLUSTER:
        kept = [ln for ln in cb.lines if cluster.includes(str(ln["cluster"]))]
        cb = replace(cb, lines=kept, currency={c: v for c, v in cb.currency.items() if cluster.includes(c)})
        record = False
    known = [
        str(r["business_unit"]) for r in rows(client, "chargeback_business_units", {"start": cb.start, "end": cb.end})
    ]
    present = {str(ln["business_unit"]) for ln in cb.lines}
    if business_unit is not None and business_unit not in known and business_unit not in present:
        raise ExportRefused(f"no business unit {business_unit!r} in {period} (known: {', '.join(known) or 'none'})")
    problems = check_rows(HEADER, focus_rows(cb.lines, cb.currency, (cb.start, cb.end), cfg))
    if problems:
        raise ExportRefused(f"FOCUS rules do not hold, nothing written: {problems[0]} ({len(problems)} problems)")
    paths = write_files(cb, out, fmt, cfg, business_unit, known)
    total = sum((Decimal(ln["cost"]) for ln in cb.lines), Decimal("0.00"))
    platform = sum((Decimal(ln["cost"]) for ln in cb.lines if ln["business_unit"] == PLATFORM), Decimal("0.00"))
    currency = ", ".join(sorted(set(cb.currency.values()))) or "-"
    changed = record_export(client, cb.period, cb.start, cb.end, total, paths) if record else None
    return ExportResult(paths, total, platform, currency, len(cb.lines), cb.source, changed)


def unit_cost_records(client: Client, period: str, default_cluster: str) -> list[dict[str, Any]]:
    """The month's unit cost per cluster (``UNIT_COST_COLUMNS`` keys), stored or computed."""
    first, start, end = month_partition_bounds(period)
    stored = rows(client, "cost_unit_cost", {"month": first})
    if not stored:
        cb = load_chargeback(client, period, books_from_warehouse(client), SharePolicy(), default_cluster)
        month = Month(_charge_lines(cb), cb.currency)
        names = ("month", *UNIT_COST_COLUMNS)
        stored = [
            dict(zip(names, r, strict=False))
            for r in unit_cost_rows(month, first, accepted_units(client, start, end, "auto"))
        ]
    return [with_scaled(r) for r in stored]


def with_scaled(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` (a month's unit cost) with ``SCALED_COLUMNS`` added beside the raw ``unit_cost``."""
    scaled = scaled_unit_cost(
        Decimal(str(record["total"])), float(record["accepted_units"] or 0.0), str(record["unit_kind"])
    )
    return {**record, **scaled}


def scaled_text(record: dict[str, Any]) -> str:
    """The unit cost as a person reads it: ``148.92 USD per 1M tokens_generated``."""
    value = "n/a" if record["unit_cost_scaled"] is None else f"{record['unit_cost_scaled']:,.2f}"
    return f"{value} {record['currency']} per {record['unit_cost_per']}"


def _charge_lines(cb: Chargeback) -> list[ChargeLine]:
    out = []
    for row in cb.lines:
        cluster, _, line = line_from_row(row)
        out.append(ChargeLine(cluster, line, Decimal(row["exact_cost"]), Decimal(row["cost"])))
    return out
