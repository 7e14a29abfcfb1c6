"""Resources: the ClickHouse warehouse, prices and cost policy, org dimensions, exports, capacity targets.

Connection details default to the process's :class:`pipelines.settings.Settings` (read when a run
starts, not at import); anything configured on a resource overrides them. The ClickHouse password
is a secret: it is passed as a Dagster ``EnvVar`` and never written into code or run config.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
from clickhouse_connect.driver.client import Client
from pydantic import SecretStr

from pipelines.settings import Settings
from sql.client import get_client


class ClickHouseResource(dg.ConfigurableResource):
    """ClickHouse through clickhouse-connect (the same ``sql.client.get_client`` as the CLI)."""

    url: str | None = None
    user: str | None = None
    password: str | None = None
    database: str | None = None

    def settings(self) -> Settings:
        base = Settings()
        update: dict[str, Any] = {}
        if self.url:
            update["clickhouse_url"] = self.url
        if self.user:
            update["clickhouse_user"] = self.user
        if self.password is not None:
            update["clickhouse_password"] = SecretStr(self.password)
        if self.database:
            update["clickhouse_database"] = self.database
        return base.model_copy(update=update)

    @contextmanager
    def client(self) -> Iterator[Client]:
        client = get_client(self.settings())
        try:
            yield client
        finally:
            client.close()

    @staticmethod
    def from_settings(settings: Settings) -> ClickHouseResource:
        return ClickHouseResource(
            url=settings.clickhouse_endpoint_url,
            user=settings.clickhouse_user,
            password=settings.clickhouse_password.get_secret_value(),
            database=settings.clickhouse_database,
        )


class PricingResource(dg.ConfigurableResource):
    """Prices (from the warehouse's pricing events, or a ``pricing.yaml``) and the cost policy.

    ``*_basis``: how each monthly shared cost is divided, ``gpu_hours`` | ``bytes_moved`` |
    ``platform`` (see ``defs/costs/allocation.py``). ``accepted_units``: ``auto`` (output events when
    any were reported for the month, else successful runs) | ``successful_runs`` | ``output_events``.
    """

    pricing_file: str | None = None
    network_basis: str = "gpu_hours"
    storage_basis: str = "bytes_moved"
    support_basis: str = "gpu_hours"
    operations_basis: str = "gpu_hours"
    accepted_units: str = "auto"


class OrgResource(dg.ConfigurableResource):
    """Org dimensions: which business units exist (from the effective-dated org mapping)."""

    extra_business_units: list[str] = []


class ExportResource(dg.ConfigurableResource):
    """Where FOCUS chargeback files go, and the names FOCUS rows carry."""

    out_dir: str | None = None  # default: <GPULEDGER_HOME>/exports
    formats: list[str] = ["csv", "parquet"]
    provider_name: str = "GPU Platform"
    invoice_issuer_name: str = "GPU Platform"

    def directory(self) -> Path:
        return Path(self.out_dir) if self.out_dir else Settings().home / "exports"


class CapacityResource(dg.ConfigurableResource):
    """Capacity targets: useful GPU-hours wanted per month by GPU model; else this month's × (1 + growth)."""

    targets: dict[str, float] = {}
    growth: float = 0.0


def _secret(name: str) -> dg.EnvVar | None:
    """An ``EnvVar`` for a secret that is set in the environment (Dagster resolves it at run time)."""
    return dg.EnvVar(name) if name in os.environ else None


def default_resources() -> dict[str, Any]:
    password = _secret("CLICKHOUSE_PASSWORD") or _secret("GPULEDGER_CLICKHOUSE_PASSWORD")
    return {
        "clickhouse": ClickHouseResource(password=password),
        "pricing": PricingResource(),
        "org": OrgResource(),
        "exports": ExportResource(),
        "capacity": CapacityResource(),
    }
