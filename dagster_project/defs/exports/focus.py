"""Chargeback lines → FOCUS 1.2 rows, and the rules a FOCUS row must hold (pure functions).

Every row is a ``Usage`` charge of one month (the billing and charge period), in the cluster's
currency; Billed, Effective, List and Contracted cost are the line's cents (internal prices have no
discounts). The billing account is the cluster, the sub account the business unit; the platform's
unshared remainder is the sub account ``__platform__``. Provider-defined tags carry the prefix
``gpuledger/``. ``x_EnergyKwh``, ``x_EnergyCost`` and ``x_CarbonKg`` give the energy of a line's
GPU-hours, what it cost (included in BilledCost) and emitted, where the prices say. No invoice,
issued or provisional, carries these charges (the chargeback is internal and gpuledger issues no
invoice document), so InvoiceId is null on every row, as FOCUS 1.2 requires.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from dagster_project.defs.costs.allocation import GPU_HOURS, PLATFORM
from dagster_project.defs.exports.focus_spec import HEADER, TAG_PREFIX
from pipelines.times import utc_text  # FOCUS Date/Time: YYYY-MM-DDTHH:mm:ssZ

# term -> (ServiceName, ServiceCategory, ServiceSubcategory, SkuMeter)
SERVICES = {
    "compute": ("GPU Compute", "Compute", "Other (Compute)", "GPU Hours"),
    "retries": ("GPU Compute", "Compute", "Other (Compute)", "GPU Hours"),
    "idle": ("GPU Compute", "Compute", "Other (Compute)", "GPU Hours"),
    "network": ("Cluster Network", "Networking", "Network Infrastructure", "Monthly Network"),
    "storage": ("Cluster Storage", "Storage", "File Storage", "Monthly Storage"),
    "support": ("Platform Support", "Management and Governance", "Support", "Monthly Support"),
    "operations": (
        "Platform Operations",
        "Management and Governance",
        "Other (Management and Governance)",
        "Monthly Operations",
    ),
}


@dataclass(frozen=True)
class FocusConfig:
    provider_name: str = "GPU Platform"
    invoice_issuer_name: str = "GPU Platform"


def dec(value: Any, places: int | None = None) -> str:
    """A decimal as plain text (no exponent); ``places`` fixes the scale."""
    d = value if isinstance(value, Decimal) else Decimal(repr(float(value)))
    if places is not None:
        d = d.quantize(Decimal(1).scaleb(-places))
    text = format(d.normalize() if places is None else d, "f")
    return "0" if text in ("-0", "") else text


def _blank(value: str) -> str | None:
    return value if value else None


def _description(line: dict[str, Any], currency: str) -> str:
    term, gpu, bu = line["term"], line["gpu_model"], line["business_unit"]
    who = "the platform (unshared)" if bu == PLATFORM else f"team {line['team'] or 'unassigned'} of {bu}"
    if term == "compute":
        return f"{gpu} GPU-hours used by {who} at {dec(line['unit_price'])} {currency} per GPU-hour"
    if term == "retries":
        return f"{gpu} GPU-hours of failed attempts after their last checkpoint, {who}"
    if term == "idle":
        return f"Idle {gpu} capacity (unallocated or unavailable) assigned to {who} by the {line['basis']} policy"
    return f"Share of the monthly {term} cost for {who}, by {line['basis'].replace('_', ' ')}"


def focus_row(
    line: dict[str, Any], currency: str, period: tuple[datetime, datetime], cfg: FocusConfig
) -> dict[str, Any]:
    """One chargeback line (a ``chargeback_lines`` row) → one FOCUS row (``HEADER`` keys)."""
    cluster, bu, term = str(line["cluster"]), str(line["business_unit"]), str(line["term"])
    service, category, subcategory, meter = SERVICES[term]
    gpu_row = line["pricing_unit"] == GPU_HOURS
    sku = f"gpu-hour:{line['gpu_model']}" if gpu_row else f"shared:{term}"
    cost = dec(Decimal(line["cost"]), 2)
    gpu_hours = float(line["gpu_hours"])
    tags = {
        f"{TAG_PREFIX}{k}": v
        for k, v in (
            ("cluster", cluster),
            ("business_unit", bu),
            ("team", line["team"]),
            ("model", line["model"]),
            ("gpu_model", line["gpu_model"]),
            ("cost_term", term),
        )
        if v
    }
    row: dict[str, Any] = dict.fromkeys(HEADER)
    row.update(
        {
            "BilledCost": cost,
            "EffectiveCost": cost,
            "ListCost": cost,
            "ContractedCost": cost,
            "BillingAccountId": cluster,
            "BillingAccountName": f"{cluster} GPU cluster",
            "BillingCurrency": currency,
            "BillingPeriodStart": utc_text(period[0]),
            "BillingPeriodEnd": utc_text(period[1]),
            "ChargePeriodStart": utc_text(period[0]),
            "ChargePeriodEnd": utc_text(period[1]),
            "ChargeCategory": "Usage",
            "ChargeClass": None,
            "ChargeDescription": _description(line, currency),
            "ChargeFrequency": "Usage-Based" if gpu_row else "Recurring",
            "ConsumedQuantity": dec(line["consumed_quantity"], 9),
            "ConsumedUnit": line["consumed_unit"],
            "PricingQuantity": dec(line["quantity"], 9),
            "PricingUnit": line["pricing_unit"],
            "ListUnitPrice": dec(line["unit_price"]),
            "ContractedUnitPrice": dec(line["unit_price"]),
            "PricingCategory": "Standard",
            "InvoiceId": None,
            "InvoiceIssuerName": cfg.invoice_issuer_name,
            "ProviderName": cfg.provider_name,
            "PublisherName": cfg.provider_name,
            "ServiceName": service,
            "ServiceCategory": category,
            "ServiceSubcategory": subcategory,
            "SkuId": sku,
            "SkuMeter": meter,
            "SkuPriceId": f"{sku}@{utc_text(line['price_from'])}",
            "SubAccountId": bu,
            "SubAccountName": "Platform (unshared remainder)" if bu == PLATFORM else bu,
            "Tags": json.dumps(tags, sort_keys=True, separators=(",", ":")),
            "x_Cluster": cluster,
            "x_BusinessUnit": bu,
            "x_Team": _blank(line["team"]),
            "x_Model": _blank(line["model"]),
            "x_GpuModel": _blank(line["gpu_model"]),
            "x_CostTerm": term,
            "x_AllocationBasis": line["basis"],
            "x_GpuHours": dec(gpu_hours, 6),
            "x_BusyGpuHours": dec(line["busy_gpu_hours"], 6),
            "x_IdleShare": dec(float(line["idle_gpu_hours"]) / gpu_hours, 6) if gpu_hours > 0 else None,
            "x_FailureWasteGpuHours": dec(line["failure_waste_gpu_hours"], 6),
            # energy of the line's GPU-hours; its cost is part of BilledCost (the GPU-hour rate), shown
            # where the price version gives a price per kWh, and its emissions where it gives an intensity
            "x_EnergyKwh": dec(line.get("energy_kwh") or 0.0, 6),
            "x_EnergyCost": None if line.get("energy_cost") is None else dec(Decimal(line["energy_cost"]), 6),
            "x_CarbonKg": None if line.get("carbon_kg") is None else dec(line["carbon_kg"], 6),
        }
    )
    if gpu_row:
        row.update(
            {
                "ResourceId": f"{cluster}/gpu-pool/{line['gpu_model']}",
                "ResourceName": f"{cluster} {line['gpu_model']} GPUs",
                "ResourceType": "GPU Pool",
            }
        )
    return row


def focus_rows(
    lines: list[dict[str, Any]],
    currency: dict[str, str],
    period: tuple[datetime, datetime],
    cfg: FocusConfig,
    business_unit: str | None = None,
) -> list[dict[str, Any]]:
    """FOCUS rows of a month's lines; with ``business_unit``, only that unit's rows."""
    return [
        focus_row(ln, currency[str(ln["cluster"])], period, cfg)
        for ln in lines
        if business_unit is None or ln["business_unit"] == business_unit
    ]
