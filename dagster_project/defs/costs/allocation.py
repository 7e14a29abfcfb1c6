"""The daily cost allocation: who pays for every GPU-second and every shared cost of one day.

Pure functions, no I/O. Each term of the cost model is its own set of lines, so the unit cost
shows ``compute + network + storage + support + operations + idle + retries`` term by term.

Terms (per cluster and day):

- ``compute``: allocated GPU-seconds that were not lost to a failure, at the hourly rate of their
  GPU model in force at the time (effective-dated), charged to the owner that held them.
- ``retries``: GPU-seconds of failed attempts after their last completed checkpoint (the work a
  retry has to redo), at the same rate, charged to the owner of the failed attempt.
- ``idle``: unallocated and unavailable capacity at its GPU model's rate, assigned by the idle
  policy in force (see :func:`allocate_idle`).
- ``network``, ``storage``, ``support``, ``operations``: the monthly shared costs spread evenly
  over the seconds of their month, then shared to owners by the term's basis
  (:class:`SharePolicy`).

Energy rides along, it is not a term: every GPU line carries the kWh of its GPU-seconds (the
retries line the lost part of the attempt's energy, an idle line its share of the idle pool's), and
where the price version in force gives them, what that energy cost (``energy_per_kwh``, a part of
the GPU-hour rate shown, never billed again) and emitted (``carbon_g_per_kwh``).

Whatever no owner takes (the ``platform`` idle policy, idle capacity of a pool nobody used under
``by_allocation``, any cost of a day without allocations) stays on the platform's unshared
remainder line (business unit ``__platform__``). Pro-rata shares are rounded down to 1e-12 and the
residue goes to the largest share, so the lines of a day add up to the day's cluster cost exactly.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime
from decimal import Decimal

from dagster_project.defs.costs.lines import (
    GPU_HOURS,
    HOUR,
    MONTHS,
    PLATFORM,
    PLATFORM_OWNER,
    Q12,
    Basis,
    CostLine,
    DayAllocation,
    IdleShare,
    Owner,
    SharePolicy,
    UsageSegment,
    gpu_cost,
    merge_lines,
    pro_rata,
    with_energy,
)
from dagster_project.defs.costs.pricing import SHARED_TERMS, IdlePolicy, PriceBook, shared_amount
from pipelines.times import EPOCH, month_bounds, utc_text

__all__ = [
    "GPU_HOURS",
    "HOUR",
    "MONTHS",
    "PLATFORM",
    "PLATFORM_OWNER",
    "Q12",
    "CostLine",
    "DayAllocation",
    "IdleShare",
    "Owner",
    "SharePolicy",
    "UsageSegment",
    "allocate_day",
    "allocate_idle",
    "gpu_cost",
    "merge_lines",
    "pro_rata",
    "with_energy",
]


def allocate_day(
    day_start: datetime,
    day_end: datetime,
    usage: Iterable[UsageSegment],
    book: PriceBook,
    policy: SharePolicy,
    storage_bytes: dict[Owner, float] | None = None,
    idle_share: IdleShare = "policy",
) -> DayAllocation:
    """Every cost of ``[day_start, day_end)`` (a UTC day, or the part of one a report covers) as lines
    per term and owner; lines sum to ``total``. ``idle_share`` overrides the idle policy in force
    (:func:`allocate_idle`)."""
    segments = list(usage)
    alloc = DayAllocation([], Decimal(0))
    alloc.lines += direct_lines(segments, book, alloc)
    alloc.lines += allocate_idle(segments, book, alloc, day_start, idle_share)
    weights = allocated_weights(segments)
    for a, b, version in book.shared_segments(day_start, day_end):
        m_start, m_end = month_bounds(a)
        month_fraction = (b - a).total_seconds() / (m_end - m_start).total_seconds()
        day_fraction = (b - a).total_seconds() / max((day_end - day_start).total_seconds(), 1.0)
        for term in SHARED_TERMS:
            amount = shared_amount(version, term, a, b).quantize(Q12)
            alloc.total += amount
            basis, w, unit = _shared_basis(policy.basis(term), weights, storage_bytes or {})
            alloc.lines += _spread(
                term,
                amount,
                w,
                basis,
                version.effective_from,
                version.monthly[term],
                MONTHS,
                month_fraction,
                unit,
                day_fraction,
            )
    alloc.lines = merge_lines(alloc.lines)
    return alloc


def direct_lines(segments: list[UsageSegment], book: PriceBook, alloc: DayAllocation) -> list[CostLine]:
    """``compute`` and ``retries`` lines of the allocated segments, at each segment's rate."""
    lines: list[CostLine] = []
    for s in segments:
        if s.kind != "allocated":
            continue
        price, since = _price(book, s, alloc)
        lost = min(max(s.lost_seconds, 0.0), s.gpu_seconds)
        kept = s.gpu_seconds - lost
        idle = max(s.gpu_seconds - s.busy_seconds - s.unobserved_seconds, 0.0)
        kept_cost, lost_cost = gpu_cost(kept, price), gpu_cost(lost, price)
        alloc.total += kept_cost + lost_cost
        kwh = s.energy_joules / 3.6e6
        lost_kwh = kwh * lost / s.gpu_seconds if s.gpu_seconds > 0 else 0.0
        lines.append(
            with_energy(
                CostLine(
                    "compute",
                    s.owner,
                    s.gpu_model,
                    since,
                    price,
                    GPU_HOURS,
                    kept / 3600,
                    kept / 3600,
                    GPU_HOURS,
                    "direct",
                    kept_cost,
                    gpu_hours=kept / 3600,
                    busy_gpu_hours=s.busy_seconds / 3600,
                    idle_gpu_hours=idle / 3600,
                ),
                kwh - lost_kwh,
                book,
                s.segment_start,
            )
        )
        if lost > 0:
            lines.append(
                with_energy(
                    CostLine(
                        "retries",
                        s.owner,
                        s.gpu_model,
                        since,
                        price,
                        GPU_HOURS,
                        lost / 3600,
                        lost / 3600,
                        GPU_HOURS,
                        "direct",
                        lost_cost,
                        gpu_hours=lost / 3600,
                        failure_waste_gpu_hours=lost / 3600,
                    ),
                    lost_kwh,
                    book,
                    s.segment_start,
                )
            )
    return lines


def allocate_idle(
    segments: list[UsageSegment],
    book: PriceBook,
    alloc: DayAllocation,
    day_start: datetime,
    idle_share: IdleShare = "policy",
) -> list[CostLine]:
    """``idle`` lines: the cost of unallocated and unavailable capacity, by the idle policy in force.

    - ``spread``: each idle pool (GPU model × rate segment) is shared to owners pro rata to their
      allocated GPU-hours of the day on any GPU model: idle capacity is a cost of running the
      cluster, paid by everyone who uses it.
    - ``by_allocation``: each pool is shared only to the owners that allocated GPUs of that GPU
      model that day, pro rata to those GPU-hours: who uses a pool pays for its headroom; the
      idle capacity of a pool nobody used stays with the platform.
    - ``platform``: not shared; all idle cost stays on the platform's unshared remainder line.

    A report may override the policy (OpenCost's idle options): ``separate`` keeps every pool on the
    remainder line (as ``platform``), ``weighted`` shares it as ``spread`` does, ``even`` shares it
    in equal parts among the owners that allocated any GPU in the period.
    """
    pools: dict[tuple[str, datetime, Decimal], float] = defaultdict(float)
    pool_joules: dict[tuple[str, datetime, Decimal], float] = defaultdict(float)
    pool_start: dict[tuple[str, datetime, Decimal], datetime] = {}
    for s in segments:
        if s.kind in ("unallocated", "unavailable") and s.gpu_seconds > 0:
            price, since = _price(book, s, alloc)
            pools[(s.gpu_model, since, price)] += s.gpu_seconds
            pool_joules[(s.gpu_model, since, price)] += s.energy_joules
            pool_start.setdefault((s.gpu_model, since, price), s.segment_start)
    everyone = allocated_weights(segments)
    lines: list[CostLine] = []
    for (gpu_model, since, price), seconds in sorted(pools.items()):
        idle_policy: IdlePolicy | IdleShare = book.idle_policy_at(max(since, day_start))
        if idle_share != "policy":
            idle_policy = {"separate": "platform", "weighted": "spread"}.get(idle_share, idle_share)  # type: ignore[assignment]
        weights: dict[Owner, float]
        if idle_policy == "even":
            weights = dict.fromkeys(everyone, 1.0)
        elif idle_policy == "spread":
            weights = everyone
        elif idle_policy == "by_allocation":
            weights = allocated_weights([s for s in segments if s.gpu_model == gpu_model])
        else:
            weights = {}
        cost = gpu_cost(seconds, price)
        alloc.total += cost
        pool_kwh = pool_joules[(gpu_model, since, price)] / 3.6e6
        for line in _spread(
            "idle", cost, weights, idle_policy, since, price, GPU_HOURS, seconds / 3600, GPU_HOURS, seconds / 3600
        ):
            hours = line.quantity
            lines.append(
                with_energy(
                    replace(line, gpu_model=gpu_model, gpu_hours=hours, idle_gpu_hours=hours),
                    pool_kwh * hours / (seconds / 3600),
                    book,
                    pool_start[(gpu_model, since, price)],
                )
            )
    return lines


def allocated_weights(segments: Iterable[UsageSegment]) -> dict[Owner, float]:
    weights: dict[Owner, float] = defaultdict(float)
    for s in segments:
        if s.kind == "allocated" and s.gpu_seconds > 0:
            weights[s.owner] += s.gpu_seconds / 3600
    return dict(weights)


def _spread(
    term: str,
    amount: Decimal,
    weights: dict[Owner, float],
    basis: str,
    since: datetime,
    price: Decimal,
    unit: str,
    quantity: float,
    consumed_unit: str,
    consumed_scale: float,
) -> list[CostLine]:
    """``amount`` shared by ``weights``. The 1e-12 residue of rounding the shares down goes to the
    largest share; with no positive weight the whole amount stays on the platform's remainder line."""
    shares = pro_rata(amount, weights)
    if not shares:
        consumed = 0.0 if unit == MONTHS else quantity
        return [
            CostLine(
                term, PLATFORM_OWNER, "", since, price, unit, quantity, consumed, consumed_unit, "platform", amount
            )
        ]
    largest = max(sorted(shares), key=lambda o: weights[o])  # first of the largest, in owner order
    shares[largest] += amount - sum(shares.values(), Decimal(0))
    total_w = sum(weights[o] for o in shares)
    lines = []
    for owner, share in shares.items():
        frac = weights[owner] / total_w
        consumed = weights[owner] * consumed_scale if unit == MONTHS else quantity * frac
        lines.append(
            CostLine(term, owner, "", since, price, unit, quantity * frac, consumed, consumed_unit, basis, share)
        )
    return lines


def _shared_basis(
    basis: Basis, weights: dict[Owner, float], storage_bytes: dict[Owner, float]
) -> tuple[str, dict[Owner, float], str]:
    if basis == "bytes_moved" and sum(storage_bytes.values()) > 0:
        return "bytes_moved", {o: b / 1e9 for o, b in storage_bytes.items()}, "GB"
    if basis == "platform":
        return "platform", {}, GPU_HOURS
    return "gpu_hours", weights, GPU_HOURS


def _price(book: PriceBook, s: UsageSegment, alloc: DayAllocation) -> tuple[Decimal, datetime]:
    found = book.rate_at(s.gpu_model, s.segment_start) if s.segment_start > EPOCH else None
    if found is None:
        alloc.unpriced_gpu_seconds += s.gpu_seconds
        note = f"no rate for GPU model {s.gpu_model!r} at {utc_text(s.segment_start)}: priced at 0"
        if note not in alloc.notes:
            alloc.notes.append(note)
        return Decimal(0), EPOCH
    return found
