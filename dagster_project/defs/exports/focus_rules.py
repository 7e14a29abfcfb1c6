"""The rules a FOCUS 1.2 row set must hold before it leaves the building (pure; used by the
blocking asset check, the CLI and the tests). Each problem is one line naming the row and column."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from dagster_project.defs.exports.focus_spec import (
    BY_NAME,
    CHARGE_CATEGORIES,
    CHARGE_FREQUENCIES,
    KINDS,
    MANDATORY,
    PRICING_CATEGORIES,
    SERVICE_CATEGORIES,
    SUBCATEGORY_PARENT,
    TAG_PREFIX,
    USAGE_REQUIRED,
)

TIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
CURRENCY_RE = re.compile(r"^[A-Z]{3}$")
PRICE_TOLERANCE = Decimal("0.01")  # cost lines are rounded to the cent; unit price × quantity is not
PAIRED_NULLS = (("RegionId", "RegionName"), ("SubAccountId", "SubAccountName"), ("ResourceId", "ResourceType"))


def check_header(header: Sequence[str]) -> list[str]:
    problems = [f"missing mandatory column {c}" for c in MANDATORY if c not in header]
    problems += [
        f"column {c} is neither a FOCUS column nor x_-prefixed"
        for c in header
        if c not in BY_NAME and not c.startswith("x_")
    ]
    return problems


def _decimal(value: Any) -> Decimal | None:
    try:
        return Decimal(str(value))
    except InvalidOperation:
        return None


def _null(value: Any) -> bool:
    return value is None or value == ""


def check_row(i: int, row: dict[str, Any]) -> list[str]:
    """Problems of one row (``i`` names it)."""
    p: list[str] = []
    for name, value in row.items():
        col = BY_NAME.get(name)
        if col is not None and not col.nullable and _null(value):
            p.append(f"row {i}: {name} must not be null")
        if _null(value):
            continue
        kind = KINDS.get(name)
        if kind == "datetime" and not TIME_RE.match(str(value)):
            p.append(f"row {i}: {name} {value!r} is not YYYY-MM-DDTHH:mm:ssZ")
        if kind == "decimal" and _decimal(value) is None:
            p.append(f"row {i}: {name} {value!r} is not a decimal")
        if kind == "json" and not _flat_object(value):
            p.append(f"row {i}: {name} is not a flat JSON object")
    return p + _values(i, row) + _conditions(i, row)


def _values(i: int, row: dict[str, Any]) -> list[str]:
    p: list[str] = []
    if row.get("ChargeCategory") not in CHARGE_CATEGORIES:
        p.append(f"row {i}: ChargeCategory {row.get('ChargeCategory')!r} is not an allowed value")
    if not _null(row.get("ChargeClass")) and row.get("ChargeClass") != "Correction":
        p.append(f"row {i}: ChargeClass must be null or 'Correction'")
    if "ChargeFrequency" in row and row["ChargeFrequency"] not in CHARGE_FREQUENCIES:
        p.append(f"row {i}: ChargeFrequency {row['ChargeFrequency']!r} is not an allowed value")
    if not _null(row.get("PricingCategory")) and row["PricingCategory"] not in PRICING_CATEGORIES:
        p.append(f"row {i}: PricingCategory {row['PricingCategory']!r} is not an allowed value")
    if row.get("ServiceCategory") not in SERVICE_CATEGORIES:
        p.append(f"row {i}: ServiceCategory {row.get('ServiceCategory')!r} is not an allowed value")
    sub = row.get("ServiceSubcategory")
    if "ServiceSubcategory" in row and SUBCATEGORY_PARENT.get(str(sub)) != row.get("ServiceCategory"):
        p.append(f"row {i}: ServiceSubcategory {sub!r} is not a subcategory of {row.get('ServiceCategory')!r}")
    if not CURRENCY_RE.match(str(row.get("BillingCurrency", ""))):
        p.append(f"row {i}: BillingCurrency is not an ISO 4217 code")
    for a, b in (("ChargePeriodStart", "ChargePeriodEnd"), ("BillingPeriodStart", "BillingPeriodEnd")):
        if str(row.get(a)) >= str(row.get(b)):
            p.append(f"row {i}: {a} must be before {b}")
    tags = row.get("Tags")
    if not _null(tags) and any(not k.startswith(TAG_PREFIX) for k in json.loads(str(tags))):
        p.append(f"row {i}: provider-defined tags must carry the {TAG_PREFIX!r} prefix")
    return p


def _conditions(i: int, row: dict[str, Any]) -> list[str]:
    p: list[str] = []
    if row.get("ChargeCategory") in ("Usage", "Purchase") and _null(row.get("ChargeClass")):
        p += [f"row {i}: {c} must not be null on a usage charge" for c in USAGE_REQUIRED if c in row and _null(row[c])]
    for a, b in PAIRED_NULLS:
        if a in row and _null(row.get(a)) != _null(row.get(b)):
            p.append(f"row {i}: {a} and {b} must be null together")
    if _null(row.get("CommitmentDiscountId")):
        p += [
            f"row {i}: {c} must be null without CommitmentDiscountId"
            for c in row
            if c.startswith("CommitmentDiscount") and not _null(row[c])
        ]
    if not _null(row.get("InvoiceId")):  # FOCUS 1.2 InvoiceId-C-004-C; no invoice carries gpuledger's charges
        p.append(f"row {i}: InvoiceId must be null: no invoice, issued or provisional, carries the charge")
    if _null(row.get("CapacityReservationId")) and not _null(row.get("CapacityReservationStatus")):
        p.append(f"row {i}: CapacityReservationStatus must be null without CapacityReservationId")
    quantity = _decimal(row.get("PricingQuantity")) if not _null(row.get("PricingQuantity")) else None
    for price, cost in (("ListUnitPrice", "ListCost"), ("ContractedUnitPrice", "ContractedCost")):
        unit, total = _decimal(row.get(price) or ""), _decimal(row.get(cost) or "")
        if quantity is not None and unit is not None and total is not None:
            if unit < 0:
                p.append(f"row {i}: {price} must not be negative")
            if abs(unit * quantity - total) >= PRICE_TOLERANCE:
                p.append(f"row {i}: {price} × PricingQuantity ({unit * quantity}) does not match {cost} ({total})")
    return p


def _flat_object(value: Any) -> bool:
    try:
        obj = json.loads(str(value))
    except ValueError:
        return False
    return isinstance(obj, dict) and all(isinstance(v, str | int | float | bool) for v in obj.values())


def check_rows(header: Sequence[str], rows: Iterable[dict[str, Any]]) -> list[str]:
    """Every problem of a FOCUS row set: header rules, then each row's."""
    problems = check_header(header)
    for i, row in enumerate(rows):
        problems += check_row(i, row)
    return problems
