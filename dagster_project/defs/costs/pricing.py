"""Effective-dated prices: GPU-hour rates per GPU model and the monthly shared costs.

A price version is in force from its ``effective_from`` until the next version's (the pricing file's
semantics, ``pipelines/parsers/reference.py``). Rates are looked up per (GPU model, instant), so a
rate change in the middle of a month, or of a day, prices each GPU-second at the rate in force when
it was used. Money is ``Decimal`` throughout; floats only ever hold GPU-seconds.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Literal

from pipelines.times import month_bounds

IdlePolicy = Literal["spread", "platform", "by_allocation"]
SHARED_TERMS: tuple[str, ...] = ("network", "storage", "support", "operations")


class PricingError(ValueError):
    """Prices that cannot be used as given (mixed currencies, a shared term that does not exist)."""


@dataclass(frozen=True)
class RateVersion:
    effective_from: datetime
    currency: str
    hourly: dict[str, Decimal]  # GPU model -> price per GPU-hour


@dataclass(frozen=True)
class SharedVersion:
    effective_from: datetime
    currency: str
    monthly: dict[str, Decimal]  # network | storage | support | operations -> per calendar month
    idle_policy: IdlePolicy = "spread"
    energy_per_kwh: Decimal | None = None  # shown beside the GPU-hours, not billed again
    carbon_g_per_kwh: float | None = None


@dataclass(frozen=True)
class PriceBook:
    """One cluster's price history; versions are kept sorted by ``effective_from``."""

    rates: tuple[RateVersion, ...] = ()
    shared: tuple[SharedVersion, ...] = ()
    _rate_starts: tuple[datetime, ...] = field(default=(), repr=False, compare=False)
    _shared_starts: tuple[datetime, ...] = field(default=(), repr=False, compare=False)

    @staticmethod
    def of(rates: list[RateVersion], shared: list[SharedVersion]) -> PriceBook:
        r = tuple(sorted(rates, key=lambda v: v.effective_from))
        s = tuple(sorted(shared, key=lambda v: v.effective_from))
        currencies = {v.currency for v in r} | {v.currency for v in s}
        if len(currencies) > 1:
            raise PricingError(f"one cluster's prices must share a currency, found {sorted(currencies)}")
        return PriceBook(r, s, tuple(v.effective_from for v in r), tuple(v.effective_from for v in s))

    @property
    def currency(self) -> str:
        if self.rates:
            return self.rates[0].currency
        return self.shared[0].currency if self.shared else "USD"

    def rate_version_at(self, at: datetime) -> RateVersion | None:
        i = bisect.bisect_right(self._rate_starts, at) - 1
        return self.rates[i] if i >= 0 else None

    def rate_at(self, gpu_model: str, at: datetime) -> tuple[Decimal, datetime] | None:
        """The hourly rate for ``gpu_model`` in force at ``at`` and the version's start, or None."""
        version = self.rate_version_at(at)
        if version is None or gpu_model not in version.hourly:
            return None
        return version.hourly[gpu_model], version.effective_from

    def shared_at(self, at: datetime) -> SharedVersion | None:
        i = bisect.bisect_right(self._shared_starts, at) - 1
        return self.shared[i] if i >= 0 else None

    def energy_at(self, at: datetime) -> tuple[Decimal | None, float | None]:
        """(price per kWh, grams of CO2e per kWh) in force at ``at``; None where not given."""
        version = self.shared_at(at)
        return (version.energy_per_kwh, version.carbon_g_per_kwh) if version else (None, None)

    def idle_policy_at(self, at: datetime) -> IdlePolicy:
        version = self.shared_at(at)
        return version.idle_policy if version else "spread"

    def rate_boundaries(self) -> list[datetime]:
        """Starts of the rate versions: the segments GPU-seconds are grouped by before pricing."""
        return list(self._rate_starts)

    def shared_segments(self, start: datetime, end: datetime) -> list[tuple[datetime, datetime, SharedVersion]]:
        """``[start, end)`` cut where the shared-cost version changes; time before any version is skipped."""
        cuts = [start] + [b for b in self._shared_starts if start < b < end] + [end]
        out = []
        for a, b in zip(cuts, cuts[1:], strict=False):
            version = self.shared_at(a)
            if version is not None:
                out.append((a, b, version))
        return out


def shared_amount(version: SharedVersion, term: str, start: datetime, end: datetime) -> Decimal:
    """The part of a monthly shared cost that falls in ``[start, end)`` (inside one calendar month).

    A monthly amount is spread evenly over the seconds of its calendar month, so a day of a 30-day
    month carries 1/30 of it and a version that starts mid-month is charged only from then on.
    """
    if term not in version.monthly:
        raise PricingError(f"unknown shared cost term {term!r}")
    m_start, m_end = month_bounds(start)
    if end > m_end:
        raise PricingError("a shared-cost segment must not cross a month boundary")
    seconds = Decimal(int((end - start).total_seconds()))
    month_seconds = Decimal(int((m_end - m_start).total_seconds()))
    return version.monthly[term] * seconds / month_seconds
