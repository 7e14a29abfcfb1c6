"""FinOps FOCUS 1.2 (Cost and Usage) columns that gpuledger writes, and their rules.

Feature levels and nullability follow the 1.2 column requirements. The 21 Mandatory columns are
always present; Recommended and Conditional ones are present where gpuledger has the concept
(a price list with SKUs and unit prices, resources = GPU pools, sub accounts = business units,
tags); commitment discounts and capacity reservations do not exist on an owned cluster, so their
columns are present and null, as the spec requires for charges unrelated to them. InvoiceId is
present and null too: no invoice, issued or provisional, carries an internal chargeback.

``nullable`` is the column's "Allows nulls" attribute. Usage charges that are not corrections
additionally need PricingQuantity, PricingUnit, ListUnitPrice, ContractedUnitPrice, SkuId,
SkuPriceId, PricingCategory, ConsumedQuantity and ConsumedUnit (see :data:`USAGE_REQUIRED`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Level = Literal["mandatory", "recommended", "conditional"]
Kind = Literal["decimal", "string", "datetime", "json"]


@dataclass(frozen=True)
class Column:
    name: str
    kind: Kind
    level: Level
    nullable: bool


def _c(name: str, kind: Kind, level: Level, nullable: bool) -> Column:
    return Column(name, kind, level, nullable)


M: Level = "mandatory"
R: Level = "recommended"
C: Level = "conditional"
COLUMNS: tuple[Column, ...] = (
    _c("AvailabilityZone", "string", R, True),
    _c("BilledCost", "decimal", M, False),
    _c("BillingAccountId", "string", M, False),
    _c("BillingAccountName", "string", M, True),
    _c("BillingCurrency", "string", M, False),
    _c("BillingPeriodEnd", "datetime", M, False),
    _c("BillingPeriodStart", "datetime", M, False),
    _c("CapacityReservationId", "string", C, True),
    _c("CapacityReservationStatus", "string", C, True),
    _c("ChargeCategory", "string", M, False),
    _c("ChargeClass", "string", M, True),
    _c("ChargeDescription", "string", M, True),
    _c("ChargeFrequency", "string", R, False),
    _c("ChargePeriodEnd", "datetime", M, False),
    _c("ChargePeriodStart", "datetime", M, False),
    _c("CommitmentDiscountCategory", "string", C, True),
    _c("CommitmentDiscountId", "string", C, True),
    _c("CommitmentDiscountName", "string", C, True),
    _c("CommitmentDiscountQuantity", "decimal", C, True),
    _c("CommitmentDiscountStatus", "string", C, True),
    _c("CommitmentDiscountType", "string", C, True),
    _c("CommitmentDiscountUnit", "string", C, True),
    _c("ConsumedQuantity", "decimal", C, True),
    _c("ConsumedUnit", "string", C, True),
    _c("ContractedCost", "decimal", M, False),
    _c("ContractedUnitPrice", "decimal", C, True),
    _c("EffectiveCost", "decimal", M, False),
    _c("InvoiceId", "string", R, True),
    _c("InvoiceIssuerName", "string", M, False),
    _c("ListCost", "decimal", M, False),
    _c("ListUnitPrice", "decimal", C, True),
    _c("PricingCategory", "string", C, True),
    _c("PricingQuantity", "decimal", M, True),
    _c("PricingUnit", "string", M, True),
    _c("ProviderName", "string", M, False),
    _c("PublisherName", "string", M, False),
    _c("RegionId", "string", C, True),
    _c("RegionName", "string", C, True),
    _c("ResourceId", "string", C, True),
    _c("ResourceName", "string", C, True),
    _c("ResourceType", "string", C, True),
    _c("ServiceCategory", "string", M, False),
    _c("ServiceName", "string", M, False),
    _c("ServiceSubcategory", "string", R, False),
    _c("SkuId", "string", C, True),
    _c("SkuMeter", "string", C, True),
    _c("SkuPriceDetails", "json", C, True),
    _c("SkuPriceId", "string", C, True),
    _c("SubAccountId", "string", C, True),
    _c("SubAccountName", "string", C, True),
    _c("Tags", "json", C, True),
)
BY_NAME = {c.name: c for c in COLUMNS}
MANDATORY = tuple(c.name for c in COLUMNS if c.level == "mandatory")

# Custom columns (spec: prefixed ``x_``).
CUSTOM: tuple[tuple[str, Kind], ...] = (
    ("x_Cluster", "string"),
    ("x_BusinessUnit", "string"),
    ("x_Team", "string"),
    ("x_Model", "string"),
    ("x_GpuModel", "string"),
    ("x_CostTerm", "string"),
    ("x_AllocationBasis", "string"),
    ("x_GpuHours", "decimal"),
    ("x_BusyGpuHours", "decimal"),
    ("x_IdleShare", "decimal"),
    ("x_FailureWasteGpuHours", "decimal"),
    ("x_EnergyKwh", "decimal"),
    ("x_EnergyCost", "decimal"),
    ("x_CarbonKg", "decimal"),
)
HEADER: tuple[str, ...] = tuple(c.name for c in COLUMNS) + tuple(name for name, _ in CUSTOM)
KINDS: dict[str, Kind] = {**{c.name: c.kind for c in COLUMNS}, **dict(CUSTOM)}

CHARGE_CATEGORIES = frozenset({"Usage", "Purchase", "Tax", "Credit", "Adjustment"})
CHARGE_FREQUENCIES = frozenset({"One-Time", "Recurring", "Usage-Based"})
PRICING_CATEGORIES = frozenset({"Standard", "Dynamic", "Committed", "Other"})
# The (ServiceCategory, ServiceSubcategory) pairs gpuledger uses, all from the spec's allowed values.
SERVICE_CATEGORIES = frozenset(
    {
        "AI and Machine Learning",
        "Analytics",
        "Business Applications",
        "Compute",
        "Databases",
        "Developer Tools",
        "Multicloud",
        "Identity",
        "Integration",
        "Internet of Things",
        "Management and Governance",
        "Media",
        "Migration",
        "Mobile",
        "Networking",
        "Security",
        "Storage",
        "Web",
        "Other",
    }
)
SUBCATEGORY_PARENT = {
    "Other (Compute)": "Compute",
    "Containers": "Compute",
    "Virtual Machines": "Compute",
    "Network Infrastructure": "Networking",
    "Other (Networking)": "Networking",
    "File Storage": "Storage",
    "Other (Storage)": "Storage",
    "Support": "Management and Governance",
    "Other (Management and Governance)": "Management and Governance",
}
USAGE_REQUIRED = (
    "PricingQuantity",
    "PricingUnit",
    "ListUnitPrice",
    "ContractedUnitPrice",
    "SkuId",
    "SkuPriceId",
    "PricingCategory",
    "ConsumedQuantity",
    "ConsumedUnit",
)
TAG_PREFIX = "gpuledger/"
