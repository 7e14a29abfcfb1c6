"""Loading price books: from the warehouse's pricing events, or straight from a ``pricing.yaml``.

Prices are per cluster (``gpuledger ingest pricing --cluster``). A cluster without prices of its
own uses the prices ingested for the configured default cluster (``GPULEDGER_CLUSTER``), so one
pricing file can serve a single-cluster setup whatever the facts' cluster is called.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from clickhouse_connect.driver.client import Client

from dagster_project.defs.common.warehouse import rows
from dagster_project.defs.costs.pricing import SHARED_TERMS, PriceBook, PricingError, RateVersion, SharedVersion
from pipelines.events import PricingEvent
from pipelines.parsers.reference import parse_pricing
from pipelines.times import as_utc


def _dec(value: object) -> Decimal:
    return value if isinstance(value, Decimal) else Decimal(str(value))


def books_from_rows(rate_rows: list[dict[str, Any]], shared_rows: list[dict[str, Any]]) -> dict[str, PriceBook]:
    """Rows of ``cost_pricing_rates`` and ``cost_pricing_shared`` → a price book per cluster."""
    rates: dict[str, dict[datetime, RateVersion]] = defaultdict(dict)
    for r in rate_rows:
        cluster, since = str(r["cluster"]), as_utc(r["effective_from"])
        version = rates[cluster].get(since) or RateVersion(since, str(r["currency"]), {})
        version.hourly[str(r["gpu_model"])] = _dec(r["hourly_rate"])
        rates[cluster][since] = version
    shared: dict[str, list[SharedVersion]] = defaultdict(list)
    for s in shared_rows:
        monthly = {term: _dec(s[term]) for term in SHARED_TERMS}
        policy = str(s["idle_policy"])
        if policy not in ("spread", "platform", "by_allocation"):
            raise PricingError(f"unknown idle policy {policy!r}")
        energy, carbon = s.get("energy_per_kwh"), s.get("carbon_g_per_kwh")
        shared[str(s["cluster"])].append(
            SharedVersion(
                as_utc(s["effective_from"]),
                str(s["currency"]),
                monthly,
                policy,  # type: ignore[arg-type]
                None if energy is None else _dec(energy),
                None if carbon is None else float(carbon),
            )
        )
    return {
        c: PriceBook.of(list(rates.get(c, {}).values()), shared.get(c, [])) for c in sorted(set(rates) | set(shared))
    }


def books_from_warehouse(client: Client) -> dict[str, PriceBook]:
    return books_from_rows(rows(client, "cost_pricing_rates", {}), rows(client, "cost_pricing_shared", {}))


def books_from_file(path: Path, cluster: str) -> dict[str, PriceBook]:
    """A pricing YAML file (the format of ``gpuledger ingest pricing``) as the book of ``cluster``."""
    result = parse_pricing(path.read_bytes(), cluster=cluster, origin=str(path))
    if result.dead_letters:
        raise PricingError(f"{path}: {result.dead_letters[0].reason}")
    rate_versions, shared_versions = [], []
    for event in result.events:
        assert isinstance(event, PricingEvent)
        d = event.data
        rate_versions.append(RateVersion(d.effective_from, d.currency, {m: _dec(r) for m, r in d.gpu_hourly.items()}))
        shared_versions.append(
            SharedVersion(
                d.effective_from,
                d.currency,
                {t: _dec(getattr(d.monthly, t)) for t in SHARED_TERMS},
                d.idle_policy,
                None if d.energy_per_kwh is None else _dec(d.energy_per_kwh),
                d.carbon_g_per_kwh,
            )
        )
    return {cluster: PriceBook.of(rate_versions, shared_versions)}


def book_for(books: dict[str, PriceBook], cluster: str, default_cluster: str) -> PriceBook:
    """The cluster's book, else the default cluster's, else the only one there is, else an empty book."""
    if cluster in books:
        return books[cluster]
    if default_cluster in books:
        return books[default_cluster]
    if len(books) == 1:
        return next(iter(books.values()))
    return PriceBook.of([], [])
