"""Capacity sizing (pure):

    required_gpu_capacity = target_work_completed_per_month
                            / useful_work_per_gpu_month_after_failures_idle_and_retries

Work is measured in useful GPU-hours: GPU-hours that were busy, in attempts whose work was kept.
Per GPU model, from a month of usage:

    availability = (capacity − unavailable) / capacity           hardware that could run work
    allocation   = allocated / (capacity − unavailable)          not idle for lack of a job
    success      = (allocated − lost) / allocated                 not redone after a failure (retries)
    busy         = busy / (allocated − unobserved)               not idle while held (unobserved time
                                                                 is left out; none observed → 1)
    useful_work_per_gpu_month = month_hours × availability × allocation × success × busy

The target is configured per GPU model (useful GPU-hours per month), else this month's useful
GPU-hours scaled to the whole month × (1 + growth).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PoolMonth:
    cluster: str
    gpu_model: str
    days: int  # days with data
    capacity_s: float
    unavailable_s: float
    allocated_s: float
    busy_s: float
    unobserved_s: float
    lost_s: float


@dataclass(frozen=True)
class CapacityLine:
    cluster: str
    gpu_model: str
    month_hours: float
    installed_gpus: float
    capacity_gpu_hours: float
    availability: float
    allocation: float
    success: float
    busy: float
    useful_gpu_hours: float
    useful_work_per_gpu_month: float
    target_work: float
    target_source: str
    required_gpus: float
    additional_gpus: float


def _ratio(num: float, den: float, empty: float = 0.0) -> float:
    return num / den if den > 0 else empty


def plan(pool: PoolMonth, month_hours: float, target: float | None, growth: float = 0.0) -> CapacityLine:
    covered_h = pool.days * 24.0
    capacity_h = pool.capacity_s / 3600
    available = pool.capacity_s - pool.unavailable_s
    availability = _ratio(available, pool.capacity_s)
    allocation = _ratio(pool.allocated_s, available)
    success = _ratio(pool.allocated_s - min(pool.lost_s, pool.allocated_s), pool.allocated_s, 1.0)
    busy = min(_ratio(pool.busy_s, pool.allocated_s - pool.unobserved_s, 1.0), 1.0)
    factor = availability * allocation * success * busy
    useful_h = capacity_h * factor
    per_gpu = month_hours * factor
    if target is not None:
        goal, source = target, "config"
    else:
        goal, source = useful_h * _ratio(month_hours, covered_h) * (1.0 + growth), "current_x_growth"
    required = _ratio(goal, per_gpu, float("inf") if goal > 0 else 0.0)
    installed = _ratio(capacity_h, covered_h)
    return CapacityLine(
        pool.cluster,
        pool.gpu_model,
        month_hours,
        installed,
        capacity_h,
        availability,
        allocation,
        success,
        busy,
        useful_h,
        per_gpu,
        goal,
        source,
        required,
        required - installed,
    )
