"""A month of cost: the daily lines rolled up to cents, and the accepted workload units."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from clickhouse_connect.driver.client import Client

from dagster_project.defs.common.warehouse import rows
from dagster_project.defs.costs.day_lines import line_from_row
from dagster_project.defs.costs.month_cents import ChargeLine, UnitCost, month_lines, term_totals, unit_cost

UNIT_COLUMNS = (
    "month",
    "cluster",
    "currency",
    "compute",
    "network",
    "storage",
    "support",
    "operations",
    "idle",
    "retries",
    "total",
    "accepted_units",
    "unit_kind",
    "unit_cost",
    "capacity_gpu_hours",
    "allocated_gpu_hours",
    "idle_gpu_hours",
    "lost_gpu_hours",
)
CHARGEBACK_COLUMNS = (
    "month",
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
    "exact_cost",
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
class Month:
    lines: list[ChargeLine]
    currency: dict[str, str]  # cluster -> currency


def month_from_daily(client: Client, first: Any, next_first: Any) -> Month:
    """Roll the days of ``[first, next_first)`` of ``cost_allocation_daily`` up to cents."""
    currency: dict[str, str] = {}
    daily = []
    for r in rows(client, "cost_allocation_month", {"start": first, "end": next_first}):
        cluster, cur, line = line_from_row(r)
        currency[cluster] = cur
        daily.append((cluster, line))
    return Month(month_lines(daily), currency)


PREFERRED_OUTPUT = "tokens_generated"  # inference's natural unit of output (not the prompt it read)


def output_units(found: Iterable[dict[str, Any]]) -> dict[str, tuple[float, str]]:
    """Per cluster, the output unit its unit cost divides by: generated tokens where the outputs
    carry them, else the most reported unit (``found`` is ordered most reported first)."""
    out: dict[str, tuple[float, str]] = {}
    for r in found:
        cluster = str(r["cluster"])
        if cluster not in out or r["unit"] == PREFERRED_OUTPUT:
            out[cluster] = (float(r["quantity"]), f"output_events:{r['unit']}")
    return out


def accepted_units(client: Client, start: datetime, end: datetime, mode: str) -> dict[str, tuple[float, str]]:
    """Per cluster, the month's accepted units and their kind.

    ``auto``: reported output units (``output_units``) where a cluster has any, else
    successful runs; ``successful_runs`` / ``output_events``: only that kind.
    """
    runs = {
        str(r["cluster"]): float(r["runs"]) for r in rows(client, "cost_accepted_runs", {"start": start, "end": end})
    }
    outputs = output_units(rows(client, "cost_output_units", {"start": start, "end": end}))
    out: dict[str, tuple[float, str]] = {}
    for cluster in set(runs) | set(outputs):
        if mode == "output_events" or (mode == "auto" and cluster in outputs):
            out[cluster] = outputs.get(cluster, (0.0, "output_events"))
        else:
            out[cluster] = (runs.get(cluster, 0.0), "successful_runs")
    return out


def unit_cost_rows(month: Month, first: Any, units: dict[str, tuple[float, str]]) -> list[tuple[Any, ...]]:
    totals = term_totals(month.lines)
    out = []
    for cluster in sorted(month.currency):
        n, kind = units.get(cluster, (0.0, "successful_runs"))
        uc: UnitCost = unit_cost(cluster, month.currency[cluster], totals, n, kind)
        mine = [ln.line for ln in month.lines if ln.cluster == cluster]
        capacity = sum(ln.gpu_hours for ln in mine if ln.pricing_unit == "GPU-Hours")
        allocated = sum(ln.gpu_hours for ln in mine if ln.term in ("compute", "retries"))
        idle = sum(ln.idle_gpu_hours for ln in mine if ln.term in ("compute", "idle"))
        lost = sum(ln.failure_waste_gpu_hours for ln in mine)
        out.append(
            (
                first,
                cluster,
                uc.currency,
                *(uc.terms[t] for t in uc.terms),
                uc.total,
                uc.accepted_units,
                uc.unit_kind,
                uc.unit_cost,
                capacity,
                allocated,
                idle,
                lost,
            )
        )
    return out


def chargeback_rows(month: Month, first: Any) -> list[tuple[Any, ...]]:
    return [
        (
            first,
            c.cluster,
            month.currency[c.cluster],
            c.line.term,
            c.line.owner[0],
            c.line.owner[1],
            c.line.owner[2],
            c.line.gpu_model,
            c.line.price_from,
            c.line.unit_price,
            c.line.pricing_unit,
            c.line.quantity,
            c.line.consumed_quantity,
            c.line.consumed_unit,
            c.line.basis,
            c.exact,
            c.cents,
            c.line.gpu_hours,
            c.line.busy_gpu_hours,
            c.line.idle_gpu_hours,
            c.line.failure_waste_gpu_hours,
            c.line.energy_kwh,
            c.line.energy_cost,
            c.line.carbon_kg,
        )
        for c in month.lines
    ]
