"""Export resources: the warehouse, org dimensions (the business units) and where files go."""

from __future__ import annotations

from datetime import datetime

from clickhouse_connect.driver.client import Client

from dagster_project.defs.common.resources import ClickHouseResource, ExportResource, OrgResource, PricingResource
from dagster_project.defs.common.warehouse import rows
from dagster_project.defs.exports.focus import FocusConfig


def business_units(org: OrgResource, client: Client, start: datetime, end: datetime) -> list[str]:
    """Business units of the org mapping versions in force in [start, end), plus configured extra ones."""
    known = [str(r["business_unit"]) for r in rows(client, "chargeback_business_units", {"start": start, "end": end})]
    return sorted(set(known) | set(org.extra_business_units))


def focus_config(exports: ExportResource) -> FocusConfig:
    return FocusConfig(provider_name=exports.provider_name, invoice_issuer_name=exports.invoice_issuer_name)


__all__ = ["ClickHouseResource", "ExportResource", "OrgResource", "PricingResource", "business_units", "focus_config"]
