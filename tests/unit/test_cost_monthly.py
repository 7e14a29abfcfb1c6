"""Month totals to the cent: largest-remainder rounding, money conservation, unit cost."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dagster_project.defs.costs.allocation import PLATFORM, CostLine, SharePolicy, UsageSegment, allocate_day
from dagster_project.defs.costs.month_cents import (
    ConservationError,
    largest_remainder,
    month_lines,
    term_totals,
    to_cents,
    unit_cost,
)
from dagster_project.defs.costs.pricing import PriceBook, RateVersion, SharedVersion
from pipelines.cost_terms import TERMS

D = Decimal
MAR1 = datetime(2026, 3, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("amounts", "total", "expected"),
    [
        (["0.333333", "0.333333", "0.333334"], "1.00", ["0.33", "0.33", "0.34"]),  # largest fraction wins
        (["0.333333", "0.333333", "0.333333"], "1.00", ["0.34", "0.33", "0.33"]),  # tie: first line
        (["0.005", "0.005"], "0.01", ["0.01", "0.00"]),
        (["10.00", "0"], "10.00", ["10.00", "0.00"]),
        ([], "0.00", []),
    ],
)
def test_largest_remainder(amounts: list[str], total: str, expected: list[str]) -> None:
    assert largest_remainder([D(a) for a in amounts], D(total)) == [D(e) for e in expected]


def test_largest_remainder_refuses_negative_or_impossible() -> None:
    with pytest.raises(ConservationError):
        largest_remainder([D("-1")], D("-1.00"))
    with pytest.raises(ConservationError):
        largest_remainder([D("1.00")], D("5.00"))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.decimals(min_value=0, max_value=10_000, places=9, allow_nan=False), min_size=1, max_size=30))
def test_largest_remainder_conserves_the_rounded_total(amounts: list[Decimal]) -> None:
    total = to_cents(sum(amounts, D(0)))
    cents = largest_remainder(amounts, total)
    assert sum(cents, D(0)) == total
    assert all(abs(c - a) < D("0.01") for c, a in zip(cents, amounts, strict=True))


def _line(term: str, bu: str, cost: str) -> CostLine:
    return CostLine(term, (bu, "t", "m"), "H100", MAR1, D("2.5"), "GPU-Hours", 1.0, 1.0, "GPU-Hours", "direct", D(cost))


def test_month_lines_add_up_to_term_totals_in_cents() -> None:
    daily = [
        ("c1", _line("compute", "a", "1.004")),
        ("c1", _line("compute", "a", "1.004")),
        ("c1", _line("compute", "b", "0.333")),
        ("c1", _line("idle", PLATFORM, "0.335")),
    ]
    lines = month_lines(daily)
    totals = term_totals(lines)
    # compute exact = 2.008 + 0.333 = 2.341 -> 2.34; idle 0.335 -> 0.34 (half up)
    assert totals == {("c1", "compute"): D("2.34"), ("c1", "idle"): D("0.34")}
    by_bu = {(ln.line.term, ln.line.owner[0]): ln.cents for ln in lines}
    assert by_bu == {("compute", "a"): D("2.01"), ("compute", "b"): D("0.33"), ("idle", PLATFORM): D("0.34")}


def test_a_month_with_a_rate_change_conserves_money_to_the_cent() -> None:
    # 31 days; A uses H100 all month, B uses A100 in the first half, the rate drops on the 16th at noon
    noon = datetime(2026, 3, 16, 12, tzinfo=UTC)
    book = PriceBook.of(
        [
            RateVersion(MAR1, "USD", {"H100": D("2.50"), "A100": D("1.60")}),
            RateVersion(noon, "USD", {"H100": D("2.10"), "A100": D("1.40")}),
        ],
        [
            SharedVersion(
                MAR1,
                "USD",
                {"network": D("1000"), "storage": D("777.77"), "support": D("333.33"), "operations": D("1234.56")},
                "spread",
            )
        ],
    )
    daily = []
    expected = D(0)
    for i in range(31):
        start = MAR1 + timedelta(days=i)
        seg = noon if start >= noon else MAR1
        usage = [
            UsageSegment("H100", seg, "allocated", ("research", "llm", "x"), 7 * 3600.0, lost_seconds=1234.5),
            UsageSegment("H100", seg, "unallocated", ("", "", ""), 1 * 3600.0 + 17),
        ]
        if i < 15:
            usage.append(UsageSegment("A100", seg, "allocated", ("product", "search", "y"), 3 * 3600.0 + 1))
        result = allocate_day(start, start + timedelta(days=1), usage, book, SharePolicy())
        expected += result.total
        daily += [("c1", ln) for ln in result.lines]
    lines = month_lines(daily)
    total = sum((ln.cents for ln in lines), D(0))
    per_term = term_totals(lines)
    assert total == sum((to_cents(sum((ln.exact for ln in lines if ln.line.term == t), D(0))) for t in TERMS), D(0))
    assert abs(total - expected) <= D("0.01") * len(TERMS)
    # shared costs are whole months here: exactly their monthly amounts
    assert per_term[("c1", "network")] == D("1000.00") and per_term[("c1", "support")] == D("333.33")
    # a business unit with no usage gets no line at all
    assert {ln.line.owner[0] for ln in lines} <= {"research", "product", PLATFORM}
    assert all(ln.cents >= 0 for ln in lines)


def test_unit_cost_shows_every_term_and_divides_by_accepted_units() -> None:
    totals = {("c1", "compute"): D("100.00"), ("c1", "idle"): D("20.00"), ("c1", "network"): D("30.00")}
    uc = unit_cost("c1", "USD", totals, 3, "successful_runs")
    assert list(uc.terms) == list(TERMS)
    assert uc.terms["retries"] == D("0.00") and uc.total == D("150.00")
    assert uc.unit_cost == D("50.000000")
    assert unit_cost("c1", "USD", totals, 0, "successful_runs").unit_cost is None
