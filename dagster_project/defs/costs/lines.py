"""The vocabulary of the cost model: owners, usage segments, cost lines, and the money helpers
(rates to cost, pro-rata shares, merging lines). Pure; ``allocation.py`` allocates with them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import ROUND_DOWN, Decimal
from typing import Literal

from dagster_project.defs.costs.pricing import PriceBook

PLATFORM = "__platform__"
Q12 = Decimal("0.000000000001")
HOUR = Decimal(3600)
GPU_HOURS = "GPU-Hours"
MONTHS = "Months"
Basis = Literal["gpu_hours", "bytes_moved", "platform"]
Owner = tuple[str, ...]  # (business_unit, team, model), and a report's further dimensions
IdleShare = Literal["policy", "separate", "weighted", "even"]
PLATFORM_OWNER: Owner = (PLATFORM, "", "")


@dataclass(frozen=True)
class SharePolicy:
    """How each shared monthly cost is divided among owners.

    ``gpu_hours``: pro rata to each owner's allocated GPU-hours of the day (all GPU models).
    ``bytes_moved``: pro rata to the storage bytes read and written by each owner's jobs, where the
    storage counters name the job; on a day without such bytes it falls back to ``gpu_hours``.
    ``platform``: not shared; the whole amount stays on the platform's remainder line.
    """

    network: Basis = "gpu_hours"
    storage: Basis = "bytes_moved"
    support: Basis = "gpu_hours"
    operations: Basis = "gpu_hours"

    def basis(self, term: str) -> Basis:
        value: Basis = getattr(self, term)
        return value


@dataclass(frozen=True)
class UsageSegment:
    """GPU-seconds of one kind and owner, on one GPU model, in one rate segment of a day.

    ``segment_start`` is the start of the rate version in force (``EPOCH`` before any version).
    """

    gpu_model: str
    segment_start: datetime
    kind: str  # allocated | unallocated | unavailable
    owner: Owner
    gpu_seconds: float
    busy_seconds: float = 0.0
    unobserved_seconds: float = 0.0
    lost_seconds: float = 0.0  # failed attempts' seconds after their last checkpoint
    energy_joules: float = 0.0


@dataclass(frozen=True)
class CostLine:
    term: str
    owner: Owner
    gpu_model: str
    price_from: datetime
    unit_price: Decimal
    pricing_unit: str
    quantity: float
    consumed_quantity: float
    consumed_unit: str
    basis: str
    cost: Decimal
    gpu_hours: float = 0.0
    busy_gpu_hours: float = 0.0
    idle_gpu_hours: float = 0.0
    failure_waste_gpu_hours: float = 0.0
    energy_kwh: float = 0.0
    energy_cost: Decimal | None = None  # None: no energy price in force
    carbon_kg: float | None = None  # None: no carbon intensity in force

    def key(self) -> tuple[object, ...]:
        return (
            self.term,
            self.owner,
            self.gpu_model,
            self.price_from,
            self.unit_price,
            self.pricing_unit,
            self.consumed_unit,
            self.basis,
        )


@dataclass
class DayAllocation:
    lines: list[CostLine]
    total: Decimal
    unpriced_gpu_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


def gpu_cost(seconds: float, hourly: Decimal) -> Decimal:
    """Cost of ``seconds`` GPU-seconds at ``hourly`` per GPU-hour, to 1e-12."""
    return (Decimal(repr(float(seconds))) * hourly / HOUR).quantize(Q12)


def with_energy(line: CostLine, kwh: float, book: PriceBook, at: datetime) -> CostLine:
    """``line`` carrying ``kwh``, its cost and its emissions at the energy price in force at ``at``."""
    price, carbon = book.energy_at(at)
    cost = None if price is None else (Decimal(repr(float(kwh))) * price).quantize(Q12)
    return replace(line, energy_kwh=kwh, energy_cost=cost, carbon_kg=None if carbon is None else kwh * carbon / 1000)


def _plus(a: float | Decimal | None, b: float | Decimal | None) -> float | Decimal | None:
    if a is None:
        return b
    return a if b is None else a + b  # type: ignore[operator]


def pro_rata(amount: Decimal, weights: dict[Owner, float]) -> dict[Owner, Decimal]:
    """Shares of ``amount`` proportional to ``weights``, rounded down to 1e-12 (never more than amount)."""
    total = sum(w for w in weights.values() if w > 0)
    if total <= 0:
        return {}
    t = Decimal(repr(float(total)))
    return {
        o: (amount * Decimal(repr(float(w))) / t).quantize(Q12, rounding=ROUND_DOWN)
        for o, w in sorted(weights.items())
        if w > 0
    }


def merge_lines(lines: Iterable[CostLine]) -> list[CostLine]:
    """Lines with the same key summed; order is the key order (deterministic)."""
    merged: dict[tuple[object, ...], CostLine] = {}
    for line in lines:
        k = line.key()
        prev = merged.get(k)
        merged[k] = (
            line
            if prev is None
            else replace(
                prev,
                quantity=prev.quantity + line.quantity,
                consumed_quantity=prev.consumed_quantity + line.consumed_quantity,
                cost=prev.cost + line.cost,
                gpu_hours=prev.gpu_hours + line.gpu_hours,
                busy_gpu_hours=prev.busy_gpu_hours + line.busy_gpu_hours,
                idle_gpu_hours=prev.idle_gpu_hours + line.idle_gpu_hours,
                failure_waste_gpu_hours=prev.failure_waste_gpu_hours + line.failure_waste_gpu_hours,
                energy_kwh=prev.energy_kwh + line.energy_kwh,
                energy_cost=_plus(prev.energy_cost, line.energy_cost),  # type: ignore[arg-type]
                carbon_kg=_plus(prev.carbon_kg, line.carbon_kg),  # type: ignore[arg-type]
            )
        )
    return [merged[k] for k in sorted(merged, key=repr)]
