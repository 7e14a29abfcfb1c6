"""From the warehouse to cost lines: fetch a day's usage and prices, run the pure cost model.

Shared by the Dagster assets (which persist the result) and the CLI (which can compute a month
that was never materialized). No writes here.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from clickhouse_connect.driver.client import Client

from dagster_project.defs.common.warehouse import rows
from dagster_project.defs.costs.allocation import (
    Q12,
    CostLine,
    DayAllocation,
    Owner,
    SharePolicy,
    UsageSegment,
    allocate_day,
)
from dagster_project.defs.costs.price_books import book_for
from dagster_project.defs.costs.pricing import SHARED_TERMS, PriceBook, shared_amount
from pipelines.times import as_utc

COST_COLUMNS = (
    "day",
    "cluster",
    "currency",
    "term",
    "business_unit",
    "team",
    "model",
    "gpu_model",
    "price_from",
    "unit_price",
    "pricing_unit",
    "quantity",
    "consumed_quantity",
    "consumed_unit",
    "basis",
    "cost",
    "gpu_hours",
    "busy_gpu_hours",
    "idle_gpu_hours",
    "failure_waste_gpu_hours",
    "energy_kwh",
    "energy_cost",
    "carbon_kg",
)


@dataclass
class ClusterDay:
    cluster: str
    currency: str
    allocation: DayAllocation


OWNER_DIMENSIONS = ("business_unit", "team", "model")  # the owner of the daily cost lines
DayKey = tuple[datetime, str]  # (UTC day, cluster)


def fetch_day_segments(
    client: Client,
    start: datetime,
    end: datetime,
    books: dict[str, PriceBook],
    dims: tuple[str, ...] = OWNER_DIMENSIONS,
    cluster: str = "",
) -> dict[DayKey, list[UsageSegment]]:
    """GPU-seconds of ``[start, end)`` per UTC day and cluster; an owner is the values of ``dims``."""
    bounds = sorted({b for book in books.values() for b in book.rate_boundaries()})
    out: dict[DayKey, list[UsageSegment]] = defaultdict(list)
    params = {"start": start, "end": end, "bounds": bounds, "by": ",".join(dims), "cluster": cluster}
    for r in rows(client, "cost_usage_segments", params):
        out[(as_utc(r["day"]), str(r["cluster"]))].append(
            UsageSegment(
                str(r["gpu_model"]),
                as_utc(r["segment_start"]),
                str(r["kind"]),
                tuple(r["owner"]) or ("", "", ""),
                float(r["gpu_seconds"]),
                float(r["busy_seconds"]),
                float(r["unobserved_seconds"]),
                float(r["lost_seconds"]),
                float(r["energy_joules"]),
            )
        )
    return dict(out)


def fetch_day_storage(
    client: Client, start: datetime, end: datetime, dims: tuple[str, ...] = OWNER_DIMENSIONS, cluster: str = ""
) -> dict[DayKey, dict[Owner, float]]:
    """Storage bytes moved per UTC day, cluster and owner (the values of ``dims``)."""
    out: dict[DayKey, dict[Owner, float]] = defaultdict(dict)
    params = {"start": start, "end": end, "by": ",".join(dims), "cluster": cluster}
    for r in rows(client, "cost_storage_bytes", params):
        out[(as_utc(r["day"]), str(r["cluster"]))][tuple(r["owner"])] = float(r["bytes"])
    return dict(out)


def cost_day(
    client: Client, start: datetime, books: dict[str, PriceBook], policy: SharePolicy, default_cluster: str
) -> list[ClusterDay]:
    """Every cluster's cost lines for the day starting at ``start``."""
    end = start + timedelta(days=1)
    segments = fetch_day_segments(client, start, end, books)
    storage = fetch_day_storage(client, start, end)
    out = []
    for day, cluster in sorted(segments):
        book = book_for(books, cluster, default_cluster)
        allocation = allocate_day(start, end, segments[(day, cluster)], book, policy, storage.get((day, cluster), {}))
        out.append(ClusterDay(cluster, book.currency, allocation))
    return out


def cost_rows(day: Any, days: list[ClusterDay]) -> list[tuple[Any, ...]]:
    """Rows for ``cost_allocation_daily`` in ``COST_COLUMNS`` order."""
    return [
        (
            day,
            d.cluster,
            d.currency,
            ln.term,
            ln.owner[0],
            ln.owner[1],
            ln.owner[2],
            ln.gpu_model,
            ln.price_from,
            ln.unit_price,
            ln.pricing_unit,
            ln.quantity,
            ln.consumed_quantity,
            ln.consumed_unit,
            ln.basis,
            ln.cost,
            ln.gpu_hours,
            ln.busy_gpu_hours,
            ln.idle_gpu_hours,
            ln.failure_waste_gpu_hours,
            ln.energy_kwh,
            ln.energy_cost,
            ln.carbon_kg,
        )
        for d in days
        for ln in d.allocation.lines
    ]


def line_from_row(r: dict[str, Any]) -> tuple[str, str, CostLine]:
    """A ``cost_allocation_month`` / ``chargeback_lines`` row → (cluster, currency, line)."""
    line = CostLine(
        str(r["term"]),
        (str(r["business_unit"]), str(r["team"]), str(r["model"])),
        str(r["gpu_model"]),
        as_utc(r["price_from"]),
        Decimal(r["unit_price"]),
        str(r["pricing_unit"]),
        float(r["quantity"]),
        float(r["consumed_quantity"]),
        str(r["consumed_unit"]),
        str(r["basis"]),
        Decimal(r.get("exact_cost", r["cost"])),
        float(r["gpu_hours"]),
        float(r["busy_gpu_hours"]),
        float(r["idle_gpu_hours"]),
        float(r["failure_waste_gpu_hours"]),
        float(r.get("energy_kwh") or 0.0),
        None if r.get("energy_cost") is None else Decimal(r["energy_cost"]),
        None if r.get("carbon_kg") is None else float(r["carbon_kg"]),
    )
    return str(r["cluster"]), str(r["currency"]), line


def shared_total(book: PriceBook, start: datetime, end: datetime) -> Decimal:
    """The shared costs that fall in ``[start, end)`` (one day) — for the money check."""
    total = Decimal(0)
    for a, b, version in book.shared_segments(start, end):
        for term in SHARED_TERMS:
            total += shared_amount(version, term, a, b).quantize(Q12)
    return total
