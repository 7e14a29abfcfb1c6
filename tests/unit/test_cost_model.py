"""Cost maths against hand-computed examples: effective-dated rates, idle policies, shared costs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from dagster_project.defs.costs.allocation import PLATFORM, SharePolicy, UsageSegment, allocate_day, gpu_cost
from dagster_project.defs.costs.price_books import book_for, books_from_file
from dagster_project.defs.costs.pricing import PriceBook, PricingError, RateVersion, SharedVersion
from pipelines.times import EPOCH

MAR1 = datetime(2026, 3, 1, tzinfo=UTC)
MAR16 = datetime(2026, 3, 16, tzinfo=UTC)
NOON = datetime(2026, 3, 16, 12, tzinfo=UTC)
A = ("research", "llm", "gpt-x")
B = ("product", "search", "ranker")
H = 3600.0
ZERO_SHARED = {"network": Decimal(0), "storage": Decimal(0), "support": Decimal(0), "operations": Decimal(0)}


def book(policy: str = "spread", network: str = "0") -> PriceBook:
    rates = [
        RateVersion(MAR1, "USD", {"H100": Decimal("2.50"), "A100": Decimal("1.60")}),
        RateVersion(NOON, "USD", {"H100": Decimal("2.10"), "A100": Decimal("1.40")}),
    ]
    shared = [SharedVersion(MAR1, "USD", {**ZERO_SHARED, "network": Decimal(network)}, policy)]  # type: ignore[arg-type]
    return PriceBook.of(rates, shared)


def alloc(
    owner: tuple[str, str, str],
    hours: float,
    start: datetime = MAR1,
    model: str = "H100",
    lost: float = 0.0,
    busy: float = 0.0,
) -> UsageSegment:
    return UsageSegment(model, start, "allocated", owner, hours * H, busy_seconds=busy * H, lost_seconds=lost * H)


def free(hours: float, start: datetime = MAR1, model: str = "H100", kind: str = "unallocated") -> UsageSegment:
    return UsageSegment(model, start, kind, ("", "", ""), hours * H)


def by(lines: list, term: str) -> dict:
    out: dict = {}
    for ln in lines:
        if ln.term == term:
            out[ln.owner[0]] = out.get(ln.owner[0], Decimal(0)) + ln.cost
    return out


def day(d: datetime) -> tuple[datetime, datetime]:
    return d, d + timedelta(days=1)


def test_rate_change_in_the_middle_of_a_day_prices_each_half_at_its_rate() -> None:
    # 120 GPU-h before noon at 2.50 = 300.00, 120 GPU-h after noon at 2.10 = 252.00
    usage = [alloc(A, 120, MAR1), alloc(A, 120, NOON)]
    result = allocate_day(*day(MAR16), usage, book(), SharePolicy())
    compute = {ln.unit_price: ln.cost for ln in result.lines if ln.term == "compute"}
    assert compute == {Decimal("2.50"): Decimal("300.000000000000"), Decimal("2.10"): Decimal("252.000000000000")}
    assert result.total == Decimal("552")


def test_price_book_finds_the_version_in_force() -> None:
    b = book()
    assert b.rate_at("H100", MAR1) == (Decimal("2.50"), MAR1)
    assert b.rate_at("H100", NOON - timedelta(seconds=1)) == (Decimal("2.50"), MAR1)
    assert b.rate_at("H100", NOON) == (Decimal("2.10"), NOON)
    assert b.rate_at("H100", MAR1 - timedelta(seconds=1)) is None
    assert b.rate_at("B200", NOON) is None


def test_mixed_currencies_are_refused() -> None:
    with pytest.raises(PricingError):
        PriceBook.of([RateVersion(MAR1, "USD", {}), RateVersion(NOON, "EUR", {})], [])


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        # idle pool: 40 H100 GPU-h unallocated at 2.50 = 100.00; A holds 30 H100 GPU-h, B 10 A100 GPU-h
        ("spread", {"research": Decimal(75), "product": Decimal(25)}),  # pro rata 30:10 over all models
        ("by_allocation", {"research": Decimal(100)}),  # only H100 users pay the H100 pool
        ("platform", {PLATFORM: Decimal(100)}),  # stays with the platform
    ],
)
def test_idle_policies(policy: str, expected: dict) -> None:
    usage = [alloc(A, 30), alloc(B, 10, model="A100"), free(40)]
    result = allocate_day(*day(MAR16 - timedelta(days=1)), usage, book(policy), SharePolicy())
    assert by(result.lines, "idle") == expected
    # the day's total is every GPU-hour at its rate: 30*2.5 + 10*1.6 + 40*2.5
    assert result.total == Decimal("191") and sum(ln.cost for ln in result.lines) == result.total


def test_unavailable_capacity_is_idle_cost_too() -> None:
    usage = [alloc(A, 10), free(4, kind="unavailable")]
    result = allocate_day(*day(MAR1), usage, book("spread"), SharePolicy())
    assert by(result.lines, "idle") == {"research": Decimal(10)}


def test_idle_with_no_allocation_stays_with_platform() -> None:
    result = allocate_day(*day(MAR1), [free(8)], book("spread"), SharePolicy())
    assert by(result.lines, "idle") == {PLATFORM: Decimal(20)}


def test_shared_cost_is_a_day_of_the_month_shared_by_gpu_hours() -> None:
    # network 3100/month, March has 31 days: 100.00 a day, shared 30:10
    usage = [alloc(A, 30), alloc(B, 10)]
    result = allocate_day(*day(MAR16 - timedelta(days=1)), usage, book(network="3100"), SharePolicy())
    assert by(result.lines, "network") == {"research": Decimal(75), "product": Decimal(25)}
    line = next(ln for ln in result.lines if ln.term == "network" and ln.owner == A)
    assert line.pricing_unit == "Months" and line.unit_price == Decimal(3100)
    assert line.quantity == pytest.approx(0.75 / 31)


def test_storage_is_shared_by_bytes_moved_where_known_else_gpu_hours() -> None:
    b = PriceBook.of(
        [RateVersion(MAR1, "USD", {"H100": Decimal(1)})],
        [SharedVersion(MAR1, "USD", {**ZERO_SHARED, "storage": Decimal(3100)})],
    )
    usage = [alloc(A, 30), alloc(B, 10)]
    by_bytes = allocate_day(*day(MAR1), usage, b, SharePolicy(), storage_bytes={B: 3e12, A: 1e12})
    assert by(by_bytes.lines, "storage") == {"research": Decimal(25), "product": Decimal(75)}
    fallback = allocate_day(*day(MAR1), usage, b, SharePolicy(), storage_bytes={})
    assert by(fallback.lines, "storage") == {"research": Decimal(75), "product": Decimal(25)}


def test_shared_version_changing_mid_month_is_prorated_by_time() -> None:
    apr1, apr16 = datetime(2026, 4, 1, tzinfo=UTC), datetime(2026, 4, 16, tzinfo=UTC)
    b = PriceBook.of(
        [RateVersion(apr1, "USD", {"H100": Decimal(1)})],
        [
            SharedVersion(apr1, "USD", {**ZERO_SHARED, "network": Decimal(3000)}),
            SharedVersion(apr16 + timedelta(hours=6), "USD", {**ZERO_SHARED, "network": Decimal(6000)}),
        ],
    )
    total = Decimal(0)
    for i in range(30):
        d = apr1 + timedelta(days=i)
        total += sum(
            ln.cost for ln in allocate_day(*day(d), [alloc(A, 1, apr1)], b, SharePolicy()).lines if ln.term == "network"
        )
    # 15.25 days at 100/day + 14.75 days at 200/day
    assert total.quantize(Decimal("0.000001")) == Decimal("4475.000000")


def test_failed_attempt_after_checkpoint_is_retries_before_is_compute() -> None:
    usage = [alloc(A, 4, lost=1, busy=2)]
    result = allocate_day(*day(MAR1), usage, book(), SharePolicy())
    assert by(result.lines, "compute") == {"research": Decimal("7.5")}
    assert by(result.lines, "retries") == {"research": Decimal("2.5")}
    retries = next(ln for ln in result.lines if ln.term == "retries")
    assert retries.failure_waste_gpu_hours == pytest.approx(1.0)


def test_gpu_seconds_without_a_rate_are_counted_and_priced_at_zero() -> None:
    usage = [alloc(A, 2, model="B200"), UsageSegment("H100", EPOCH, "allocated", A, 3600.0)]
    result = allocate_day(*day(MAR1), usage, book(), SharePolicy())
    assert result.unpriced_gpu_seconds == pytest.approx(3 * 3600)
    assert result.total == 0 and len(result.notes) == 2
    assert sum(ln.gpu_hours for ln in result.lines) == pytest.approx(3.0)


def test_pro_rata_residue_goes_to_the_largest_share_and_never_negative() -> None:
    # 1.00 of network a day shared three ways: shares round down, the 1e-12 residue goes to the first largest
    owners = [("a", "t1", ""), ("b", "t2", ""), ("c", "t3", "")]
    b = PriceBook.of(
        [RateVersion(MAR1, "USD", {"H100": Decimal(0)})],
        [SharedVersion(MAR1, "USD", {**ZERO_SHARED, "network": Decimal(31)})],
    )
    result = allocate_day(*day(MAR1), [alloc(o, 1) for o in owners], b, SharePolicy())
    network = [ln for ln in result.lines if ln.term == "network"]
    assert all(ln.cost >= 0 for ln in network)
    assert sum(ln.cost for ln in network) == Decimal(1)
    assert not any(ln.owner[0] == PLATFORM for ln in network)
    assert [ln.cost for ln in sorted(network, key=lambda ln: ln.owner)] == [
        Decimal("0.333333333334"),
        Decimal("0.333333333333"),
        Decimal("0.333333333333"),
    ]


def test_gpu_cost_is_exact_decimal() -> None:
    assert gpu_cost(5400.0, Decimal("2.10")) == Decimal("3.150000000000")


PRICING_YAML = """\
kind: pricing
currency: USD
versions:
  - effective_from: 2026-01-01
    gpu_hourly: {H100: 2.50, A100: 1.60}
    monthly: {network: 12000, storage: 8000, support: 5000, operations: 15000}
    idle_policy: spread
  - effective_from: 2026-07-01T00:00:00Z
    gpu_hourly: {H100: 2.10, A100: 1.40}
    monthly: {network: 12000, storage: 9500, support: 5000, operations: 15000}
    idle_policy: by_allocation
"""


def test_price_book_from_the_pricing_file_format(tmp_path: Path) -> None:
    path = tmp_path / "pricing.yaml"
    path.write_text(PRICING_YAML)
    b = book_for(books_from_file(path, "c1"), "other-cluster", "c1")
    july = datetime(2026, 7, 1, tzinfo=UTC)
    assert b.rate_at("H100", july - timedelta(seconds=1)) == (Decimal("2.5"), datetime(2026, 1, 1, tzinfo=UTC))
    assert b.rate_at("H100", july) == (Decimal("2.1"), july)
    assert b.idle_policy_at(july) == "by_allocation" and b.idle_policy_at(july - timedelta(days=1)) == "spread"
    assert b.shared_at(july).monthly["storage"] == Decimal(9500)  # type: ignore[union-attr]
    assert b.currency == "USD"


def _energy_book(price: str | None, carbon: float | None) -> PriceBook:
    rates = [RateVersion(MAR1, "USD", {"H100": Decimal("2.50")})]
    energy = None if price is None else Decimal(price)
    shared = [SharedVersion(MAR1, "USD", dict(ZERO_SHARED), "spread", energy, carbon)]
    return PriceBook.of(rates, shared)


def test_energy_rides_on_the_gpu_lines_with_its_cost_and_emissions_and_bills_nothing_more() -> None:
    # A holds 4 GPU-hours at 400 W (1.6 kWh), 1 of them lost after its checkpoint; 2 idle hours at 60 W
    usage = [
        UsageSegment("H100", MAR1, "allocated", A, 4 * H, lost_seconds=1 * H, energy_joules=1.6 * 3.6e6),
        UsageSegment("H100", MAR1, "allocated", B, 2 * H, energy_joules=0.8 * 3.6e6),
        UsageSegment("H100", MAR1, "unallocated", ("", "", ""), 2 * H, energy_joules=0.12 * 3.6e6),
    ]
    priced = allocate_day(*day(MAR1), usage, _energy_book("0.12", 350.0), SharePolicy())
    unpriced = allocate_day(*day(MAR1), usage, _energy_book(None, None), SharePolicy())
    assert priced.total == unpriced.total == Decimal("20.00")  # energy is part of the GPU-hour rate
    lines = {(ln.term, ln.owner[0]): ln for ln in priced.lines}
    assert lines[("compute", "research")].energy_kwh == pytest.approx(1.2)
    assert lines[("retries", "research")].energy_kwh == pytest.approx(0.4)
    assert lines[("compute", "research")].energy_cost == Decimal("0.144")
    assert lines[("retries", "research")].carbon_kg == pytest.approx(0.4 * 0.35)
    # the idle pool's energy is shared like its cost: by allocated GPU-hours (A 4, B 2)
    assert lines[("idle", "research")].energy_kwh == pytest.approx(0.08)
    assert lines[("idle", "product")].energy_kwh == pytest.approx(0.04)
    assert sum(ln.energy_kwh for ln in priced.lines) == pytest.approx(1.6 + 0.8 + 0.12)
    assert all(ln.energy_cost is None and ln.carbon_kg is None for ln in unpriced.lines if ln.energy_kwh)
