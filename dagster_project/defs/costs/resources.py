"""Cost resources: the warehouse, and prices with the cost policy."""

from __future__ import annotations

from pathlib import Path

from clickhouse_connect.driver.client import Client

from dagster_project.defs.common.resources import ClickHouseResource, PricingResource
from dagster_project.defs.costs.allocation import SharePolicy
from dagster_project.defs.costs.price_books import books_from_file, books_from_warehouse
from dagster_project.defs.costs.pricing import PriceBook, PricingError
from pipelines.settings import Settings

BASES = ("gpu_hours", "bytes_moved", "platform")


def price_books(pricing: PricingResource, client: Client, default_cluster: str) -> dict[str, PriceBook]:
    """The configured pricing file's book, else the warehouse's pricing events."""
    if pricing.pricing_file:
        return books_from_file(Path(pricing.pricing_file), default_cluster)
    return books_from_warehouse(client)


def share_policy(pricing: PricingResource) -> SharePolicy:
    bases = {
        "network": pricing.network_basis,
        "storage": pricing.storage_basis,
        "support": pricing.support_basis,
        "operations": pricing.operations_basis,
    }
    for term, basis in bases.items():
        if basis not in BASES:
            raise PricingError(f"{term}_basis must be one of {', '.join(BASES)}, got {basis!r}")
    return SharePolicy(**bases)  # type: ignore[arg-type]


def default_cluster() -> str:
    return Settings().cluster


__all__ = ["ClickHouseResource", "PricingResource", "default_cluster", "price_books", "share_policy"]
