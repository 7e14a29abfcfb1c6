"""A month's money to the cent: chargeback lines and the effective cluster unit cost.

Daily cost lines (exact to 1e-12) are summed per line key over the month. Each term's month total
is rounded to the cent once (half up), and that term's cents are handed out to its lines by the
largest-remainder method: every line gets its amount rounded down to the cent, and the cents still
missing go, one each, to the lines with the largest dropped fractions (ties in line order). So the
business units' lines plus the platform's remainder add up to the period's total cost exactly.

    effective_cluster_unit_cost = (the cost terms: pipelines/cost_terms.py) / accepted workload units
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from decimal import ROUND_FLOOR, ROUND_HALF_UP, Decimal

from dagster_project.defs.costs.allocation import CostLine, merge_lines
from pipelines.cost_terms import TERMS

CENT = Decimal("0.01")


class ConservationError(ArithmeticError):
    """Rounding could not keep a total (a negative amount, or more missing cents than lines)."""


def to_cents(amount: Decimal) -> Decimal:
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)


def largest_remainder(amounts: list[Decimal], total: Decimal) -> list[Decimal]:
    """``amounts`` rounded to cents so that they add up to ``total`` (a whole number of cents)."""
    if any(a < 0 for a in amounts):
        raise ConservationError("largest-remainder rounding needs non-negative amounts")
    floors = [a.quantize(CENT, rounding=ROUND_FLOOR) for a in amounts]
    missing = int((total - sum(floors, Decimal(0))) / CENT)
    if missing < 0 or missing > len(amounts):
        raise ConservationError(f"cannot spread {missing} cents over {len(amounts)} lines")
    order = sorted(range(len(amounts)), key=lambda i: (-(amounts[i] - floors[i]), i))
    for i in order[:missing]:
        floors[i] += CENT
    return floors


@dataclass(frozen=True)
class ChargeLine:
    """A month's cost line with its exact amount and its share of the term's cents."""

    cluster: str
    line: CostLine
    exact: Decimal
    cents: Decimal


def month_lines(daily: Iterable[tuple[str, CostLine]]) -> list[ChargeLine]:
    """Daily ``(cluster, line)`` pairs of one month → lines in cents, term totals kept to the cent."""
    per_cluster: dict[str, list[CostLine]] = defaultdict(list)
    for cluster, line in daily:
        per_cluster[cluster].append(line)
    out: list[ChargeLine] = []
    for cluster in sorted(per_cluster):
        merged = merge_lines(per_cluster[cluster])
        for term in TERMS:
            lines = [ln for ln in merged if ln.term == term]
            if not lines:
                continue
            total = to_cents(sum((ln.cost for ln in lines), Decimal(0)))
            cents = largest_remainder([ln.cost for ln in lines], total)
            out += [ChargeLine(cluster, replace(ln), ln.cost, c) for ln, c in zip(lines, cents, strict=True)]
    return out


def term_totals(lines: Iterable[ChargeLine]) -> dict[tuple[str, str], Decimal]:
    """(cluster, term) → cents."""
    totals: dict[tuple[str, str], Decimal] = defaultdict(lambda: Decimal("0.00"))
    for ln in lines:
        totals[(ln.cluster, ln.line.term)] += ln.cents
    return dict(totals)


@dataclass(frozen=True)
class UnitCost:
    """The effective cluster unit cost of a month, with every term of its numerator."""

    cluster: str
    currency: str
    terms: dict[str, Decimal]  # term -> cents, all of TERMS
    accepted_units: float
    unit_kind: str  # successful_runs | output_events:<unit>

    @property
    def total(self) -> Decimal:
        return sum(self.terms.values(), Decimal("0.00"))

    @property
    def unit_cost(self) -> Decimal | None:
        if self.accepted_units <= 0:
            return None
        return (self.total / Decimal(repr(float(self.accepted_units)))).quantize(
            Decimal("0.000001"), rounding=ROUND_HALF_UP
        )


def unit_cost(
    cluster: str, currency: str, totals: dict[tuple[str, str], Decimal], accepted_units: float, unit_kind: str
) -> UnitCost:
    terms = {t: totals.get((cluster, t), Decimal("0.00")) for t in TERMS}
    return UnitCost(cluster, currency, terms, accepted_units, unit_kind)


def scaled_unit_cost(total: Decimal, accepted_units: float, unit_kind: str) -> dict[str, float | str | None]:
    """How the unit cost reads on screen: per 1M tokens, per 1k units of another output, per
    successful run. ``unit_cost_scaled`` is total × scale / units to the cent (from the total, not
    from the rounded per-unit cost, which is 0.00 in any currency per token); ``unit_cost_per``
    names the scaled unit (``1M tokens_generated``). The raw ``unit_cost`` stays beside them."""
    unit = unit_kind.removeprefix("output_events:")
    if unit.startswith("tokens"):
        scale, per = 1_000_000, f"1M {unit}"
    elif unit_kind.startswith("output_events"):
        scale, per = 1000, f"1k {unit}"
    else:
        scale, per = 1, "successful run"
    if accepted_units <= 0:
        return {"unit_cost_per": per, "unit_cost_scaled": None}
    value = (Decimal(total) * scale / Decimal(repr(float(accepted_units)))).quantize(CENT, rounding=ROUND_HALF_UP)
    return {"unit_cost_per": per, "unit_cost_scaled": float(value)}
