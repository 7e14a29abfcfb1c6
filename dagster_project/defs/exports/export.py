"""A month's chargeback from the warehouse: the persisted lines, or computed on the spot.

``chargeback_monthly`` holds the lines once the monthly asset ran; for a month it has not run for,
the same lines are computed from ``cost_allocation_daily`` (and, for days without allocation rows,
straight from the facts), so ``gpuledger export chargeback`` works either way.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from clickhouse_connect.driver.client import Client

from dagster_project.defs.common.partitions import month_partition_bounds
from dagster_project.defs.common.warehouse import rows
from dagster_project.defs.costs.allocation import PLATFORM, SharePolicy
from dagster_project.defs.costs.day_lines import cost_day
from dagster_project.defs.costs.month_cents import month_lines
from dagster_project.defs.costs.month_rollup import Month, month_from_daily
from dagster_project.defs.costs.pricing import PriceBook
from dagster_project.defs.exports.files import FileFormat, file_name, write
from dagster_project.defs.exports.focus import FocusConfig, focus_rows


@dataclass
class Chargeback:
    period: str  # YYYY-MM
    start: datetime
    end: datetime
    lines: list[dict[str, Any]]
    currency: dict[str, str]
    source: str  # chargeback_monthly | cost_allocation_daily | facts


def lines_of(month: Month) -> list[dict[str, Any]]:
    cur = month.currency
    return [
        {
            "cluster": c.cluster,
            "currency": cur[c.cluster],
            "term": c.line.term,
            "business_unit": c.line.owner[0],
            "team": c.line.owner[1],
            "model": c.line.owner[2],
            "gpu_model": c.line.gpu_model,
            "price_from": c.line.price_from,
            "unit_price": c.line.unit_price,
            "pricing_unit": c.line.pricing_unit,
            "quantity": c.line.quantity,
            "consumed_quantity": c.line.consumed_quantity,
            "consumed_unit": c.line.consumed_unit,
            "basis": c.line.basis,
            "exact_cost": c.exact,
            "cost": c.cents,
            "gpu_hours": c.line.gpu_hours,
            "busy_gpu_hours": c.line.busy_gpu_hours,
            "idle_gpu_hours": c.line.idle_gpu_hours,
            "failure_waste_gpu_hours": c.line.failure_waste_gpu_hours,
            "energy_kwh": c.line.energy_kwh,
            "energy_cost": c.line.energy_cost,
            "carbon_kg": c.line.carbon_kg,
        }
        for c in month.lines
    ]


def load_chargeback(
    client: Client, period: str, books: dict[str, PriceBook], policy: SharePolicy, default_cluster: str
) -> Chargeback:
    first, start, end = month_partition_bounds(period)
    stored = rows(client, "chargeback_lines", {"month": first})
    if stored:
        return Chargeback(
            period[:7],
            start,
            end,
            stored,
            {str(r["cluster"]): str(r["currency"]) for r in stored},
            "chargeback_monthly",
        )
    month = month_from_daily(client, first, end.date())
    if month.lines:
        return Chargeback(period[:7], start, end, lines_of(month), month.currency, "cost_allocation_daily")
    daily, currency = [], {}
    day = start
    while day < end:
        for d in cost_day(client, day, books, policy, default_cluster):
            currency[d.cluster] = d.currency
            daily += [(d.cluster, ln) for ln in d.allocation.lines]
        day += timedelta(days=1)
    return Chargeback(period[:7], start, end, lines_of(Month(month_lines(daily), currency)), currency, "facts")


def business_units_of(cb: Chargeback, known: list[str]) -> list[str]:
    return sorted({str(ln["business_unit"]) for ln in cb.lines if ln["business_unit"] != PLATFORM} | set(known))


def write_files(
    cb: Chargeback, out: Path, fmt: FileFormat, cfg: FocusConfig, business_unit: str | None, known_units: list[str]
) -> list[Path]:
    """With ``business_unit``: that unit's file only. Else the full file and one per business unit."""
    period = (cb.start, cb.end)
    if business_unit is not None:
        rows_ = focus_rows(cb.lines, cb.currency, period, cfg, business_unit)
        return [write(rows_, out / file_name(cb.period, fmt, business_unit), fmt)]
    paths = [write(focus_rows(cb.lines, cb.currency, period, cfg), out / file_name(cb.period, fmt), fmt)]
    for bu in business_units_of(cb, known_units):
        rows_ = focus_rows(cb.lines, cb.currency, period, cfg, bu)
        paths.append(write(rows_, out / file_name(cb.period, fmt, bu), fmt))
    return paths
