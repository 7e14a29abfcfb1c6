"""FOCUS 1.2 rows from chargeback lines: columns, nullability, times, values, tags, files."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from dagster_project.defs.costs.allocation import PLATFORM
from dagster_project.defs.exports.export import Chargeback, write_files
from dagster_project.defs.exports.files import read
from dagster_project.defs.exports.focus import FocusConfig, dec, focus_row, focus_rows
from dagster_project.defs.exports.focus_rules import check_header, check_row, check_rows
from dagster_project.defs.exports.focus_spec import BY_NAME, HEADER, MANDATORY
from pipelines.times import utc_text

PERIOD = (datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 4, 1, tzinfo=UTC))
CFG = FocusConfig()


def line(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "cluster": "c1",
        "currency": "USD",
        "term": "compute",
        "business_unit": "research",
        "team": "llm",
        "model": "gpt-x",
        "gpu_model": "H100",
        "price_from": datetime(2026, 3, 15, 12),
        "unit_price": Decimal("2.10"),
        "pricing_unit": "GPU-Hours",
        "quantity": 24.5,
        "consumed_quantity": 24.5,
        "consumed_unit": "GPU-Hours",
        "basis": "direct",
        "exact_cost": Decimal("51.45"),
        "cost": Decimal("51.45"),
        "gpu_hours": 24.5,
        "busy_gpu_hours": 19.6,
        "idle_gpu_hours": 4.9,
        "failure_waste_gpu_hours": 0.0,
    }
    base.update(over)
    return base


def network(**over: Any) -> dict[str, Any]:
    return line(
        term="network",
        gpu_model="",
        unit_price=Decimal("3100"),
        pricing_unit="Months",
        quantity=0.0175,
        consumed_quantity=18.0,
        basis="gpu_hours",
        cost=Decimal("54.25"),
        gpu_hours=0.0,
        busy_gpu_hours=0.0,
        idle_gpu_hours=0.0,
        **over,
    )


def test_the_21_mandatory_columns_of_focus_1_2() -> None:
    assert len(MANDATORY) == 21
    assert {
        "BilledCost",
        "EffectiveCost",
        "ListCost",
        "ContractedCost",
        "PricingQuantity",
        "PricingUnit",
        "ChargeClass",
        "InvoiceIssuerName",
        "PublisherName",
        "ProviderName",
    } <= set(MANDATORY)
    assert BY_NAME["ChargeClass"].nullable and not BY_NAME["BilledCost"].nullable
    assert all(c in HEADER for c in MANDATORY) and not check_header(HEADER)


def test_gpu_usage_row() -> None:
    row = focus_row(line(), "USD", PERIOD, CFG)
    assert not check_row(0, row)
    assert row["BilledCost"] == row["EffectiveCost"] == row["ListCost"] == row["ContractedCost"] == "51.45"
    assert (row["ChargePeriodStart"], row["ChargePeriodEnd"]) == ("2026-03-01T00:00:00Z", "2026-04-01T00:00:00Z")
    assert (row["ChargeCategory"], row["ChargeClass"], row["ChargeFrequency"]) == ("Usage", None, "Usage-Based")
    assert (row["ServiceCategory"], row["ServiceSubcategory"]) == ("Compute", "Other (Compute)")
    assert row["ListUnitPrice"] == "2.1" and row["PricingQuantity"] == "24.500000000"
    assert row["SkuPriceId"] == "gpu-hour:H100@2026-03-15T12:00:00Z"
    assert row["ResourceId"] == "c1/gpu-pool/H100" and row["ResourceType"] == "GPU Pool"
    assert row["SubAccountId"] == row["SubAccountName"] == "research"
    assert row["CommitmentDiscountId"] is None and row["CapacityReservationId"] is None
    assert json.loads(row["Tags"]) == {
        "gpuledger/cluster": "c1",
        "gpuledger/business_unit": "research",
        "gpuledger/team": "llm",
        "gpuledger/model": "gpt-x",
        "gpuledger/gpu_model": "H100",
        "gpuledger/cost_term": "compute",
    }
    assert (row["x_GpuHours"], row["x_BusyGpuHours"], row["x_IdleShare"]) == ("24.500000", "19.600000", "0.200000")
    assert all(k in BY_NAME or k.startswith("x_") for k in row)


def test_energy_columns_show_kwh_and_where_priced_its_cost_and_emissions() -> None:
    priced = focus_row(line(energy_kwh=9.8, energy_cost=Decimal("1.176"), carbon_kg=3.43), "USD", PERIOD, CFG)
    assert (priced["x_EnergyKwh"], priced["x_EnergyCost"], priced["x_CarbonKg"]) == ("9.800000", "1.176000", "3.430000")
    assert priced["BilledCost"] == "51.45"  # the energy is part of the GPU-hour rate, not billed again
    unpriced = focus_row(line(energy_kwh=9.8), "USD", PERIOD, CFG)
    assert (unpriced["x_EnergyKwh"], unpriced["x_EnergyCost"], unpriced["x_CarbonKg"]) == ("9.800000", None, None)
    assert not check_row(0, priced) and not check_row(0, unpriced)


def test_shared_cost_row_has_no_resource_and_recurs_monthly() -> None:
    row = focus_row(network(), "USD", PERIOD, CFG)
    assert not check_row(0, row)
    assert row["ResourceId"] is row["ResourceName"] is row["ResourceType"] is None
    assert row["ChargeFrequency"] == "Recurring" and row["PricingUnit"] == "Months"
    assert (row["ServiceCategory"], row["ServiceSubcategory"]) == ("Networking", "Network Infrastructure")
    assert row["x_GpuModel"] is None and row["x_IdleShare"] is None


def test_platform_remainder_row() -> None:
    row = focus_row(line(term="idle", business_unit=PLATFORM, team="", model="", basis="platform"), "USD", PERIOD, CFG)
    assert not check_row(0, row)
    assert row["SubAccountId"] == PLATFORM and "unshared" in row["SubAccountName"]
    assert "gpuledger/team" not in json.loads(row["Tags"])


def test_no_invoice_carries_the_charges_so_invoice_id_is_null() -> None:
    """FOCUS 1.2 InvoiceId: null when no invoice (issued or provisional) carries the charge. The
    chargeback is internal: gpuledger issues no invoice document, so every row has a null InvoiceId
    (the column stays, as the spec recommends) and the invoice issuer is still named."""
    rows = [
        focus_row(line(), "USD", PERIOD, CFG),
        focus_row(network(), "USD", PERIOD, CFG),
        focus_row(line(term="idle", business_unit=PLATFORM, team="", model="", basis="platform"), "USD", PERIOD, CFG),
    ]
    assert all(r["InvoiceId"] is None and r["InvoiceIssuerName"] == CFG.invoice_issuer_name for r in rows)
    assert "InvoiceId" in HEADER and not check_rows(HEADER, rows)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"BilledCost": None}, "BilledCost must not be null"),
        ({"ChargeCategory": "Refund"}, "ChargeCategory"),
        ({"ChargeClass": "Fix"}, "ChargeClass"),
        ({"ChargePeriodStart": "2026-03-01 00:00:00"}, "is not YYYY-MM-DDTHH:mm:ssZ"),
        ({"BillingPeriodEnd": "2026-03-01T00:00:00+00:00"}, "is not YYYY-MM-DDTHH:mm:ssZ"),
        ({"ServiceCategory": "GPU"}, "ServiceCategory"),
        ({"ServiceSubcategory": "Support"}, "not a subcategory"),
        ({"PricingQuantity": None}, "PricingQuantity must not be null on a usage charge"),
        ({"SkuPriceId": None}, "SkuPriceId must not be null on a usage charge"),
        ({"ListCost": "99.00"}, "does not match ListCost"),
        ({"Tags": '{"team": "llm"}'}, "prefix"),
        ({"Tags": '{"gpuledger/x": {"nested": 1}}'}, "flat JSON object"),
        ({"RegionId": "eu-1"}, "RegionId and RegionName"),
        ({"CommitmentDiscountType": "Reserved"}, "without CommitmentDiscountId"),
        ({"BillingCurrency": "usd"}, "ISO 4217"),
        ({"ContractedUnitPrice": "-2.1", "ContractedCost": "-51.45"}, "must not be negative"),
        ({"ChargePeriodEnd": "2026-02-01T00:00:00Z"}, "must be before"),
        ({"InvoiceId": "c1-2026-03-research"}, "InvoiceId must be null"),
    ],
)
def test_rules_catch_each_violation(change: dict[str, Any], problem: str) -> None:
    row = {**focus_row(line(), "USD", PERIOD, CFG), **change}
    problems = check_row(7, row)
    assert any(problem in p and p.startswith("row 7:") for p in problems), problems


def test_header_rules() -> None:
    without = [c for c in HEADER if c != "InvoiceIssuerName"]
    assert check_header(without) == ["missing mandatory column InvoiceIssuerName"]
    assert "x_" in check_header([*HEADER, "GpuHours"])[0]


def test_time_and_decimal_formatting() -> None:
    assert utc_text(datetime(2026, 3, 1, 5, 6, 7)) == "2026-03-01T05:06:07Z"
    assert dec(Decimal("100.000000000000")) == "100" and dec(Decimal("3.1"), 2) == "3.10" and dec(0.0) == "0"


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_files_per_business_unit_hold_only_their_rows(tmp_path: Path, fmt: str) -> None:
    lines = [
        line(),
        network(),
        line(
            business_unit="product",
            team="search",
            cost=Decimal("10.00"),
            quantity=4.7619047619,
            exact_cost=Decimal("10.00"),
        ),
        line(
            term="idle", business_unit=PLATFORM, team="", model="", basis="platform", cost=Decimal("7.35"), quantity=3.5
        ),
    ]
    cb = Chargeback("2026-03", *PERIOD, lines, {"c1": "USD"}, "test")
    paths = write_files(cb, tmp_path, fmt, CFG, None, ["finance", "research"])  # type: ignore[arg-type]
    assert sorted(p.name for p in paths) == sorted(
        f"focus-chargeback-2026-03{s}.{fmt}" for s in ("", "-finance", "-product", "-research")
    )
    header, rows = read(tmp_path / f"focus-chargeback-2026-03.{fmt}")
    assert list(header) == list(HEADER) and not check_rows(header, rows)
    assert sum(Decimal(r["BilledCost"]) for r in rows) == Decimal("123.05")  # 51.45 + 54.25 + 10.00 + 7.35
    _, research = read(tmp_path / f"focus-chargeback-2026-03-research.{fmt}")
    assert {r["SubAccountId"] for r in research} == {"research"} and len(research) == 2
    assert read(tmp_path / f"focus-chargeback-2026-03-finance.{fmt}")[1] == []
    only = write_files(cb, tmp_path / "one", fmt, CFG, "product", [])  # type: ignore[arg-type]
    assert [p.name for p in only] == [f"focus-chargeback-2026-03-product.{fmt}"]
    assert [r["SubAccountId"] for r in read(only[0])[1]] == ["product"]


def test_focus_rows_filters_by_business_unit() -> None:
    rows = focus_rows([line(), network(business_unit="product")], {"c1": "USD"}, PERIOD, CFG, "product")
    assert [r["x_CostTerm"] for r in rows] == ["network"]
