"""Capacity sizing and NCCL fabric health against hand-computed examples."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from dagster_project.defs.capacity.sizing import PoolMonth, plan
from dagster_project.defs.fabric.baselines import Run, flagged_nodes, health

H = 3600.0
T = datetime(2026, 3, 10, tzinfo=UTC)


def test_required_gpus_after_failures_idle_and_retries() -> None:
    # 10 GPUs for a 30-day month (720 h): 7200 GPU-h capacity, 720 unavailable, 5832 allocated,
    # 583.2 lost after their checkpoints, 4199.04 busy (all in hours below)
    pool = PoolMonth("c1", "H100", 30, 7200 * H, 720 * H, 5832 * H, 4199.04 * H, 0.0, 583.2 * H)
    line = plan(pool, 720.0, target=10_000.0)
    assert line.installed_gpus == pytest.approx(10)
    assert line.availability == pytest.approx(0.9)  # 6480 / 7200
    assert line.allocation == pytest.approx(0.9)  # 5832 / 6480
    assert line.success == pytest.approx(0.9)  # (5832 - 583.2) / 5832
    assert line.busy == pytest.approx(0.72)  # 4199.04 / 5832
    assert line.useful_work_per_gpu_month == pytest.approx(720 * 0.9 * 0.9 * 0.9 * 0.72)  # 377.9136
    assert line.required_gpus == pytest.approx(10_000 / 377.9136)
    assert line.additional_gpus == pytest.approx(10_000 / 377.9136 - 10)
    assert line.target_source == "config"


def test_target_defaults_to_this_month_scaled_with_growth_and_unobserved_is_left_out() -> None:
    # 15 days of data of 4 GPUs; half the allocated time unobserved, the observed half 50 % busy
    pool = PoolMonth("c1", "A100", 15, 1440 * H, 0.0, 1440 * H, 360 * H, 720 * H, 0.0)
    line = plan(pool, 720.0, target=None, growth=0.5)
    assert line.busy == pytest.approx(0.5) and line.installed_gpus == pytest.approx(4)
    assert line.useful_gpu_hours == pytest.approx(720)
    assert line.target_work == pytest.approx(720 * 2 * 1.5)  # whole month, +50 %
    assert line.required_gpus == pytest.approx(6)  # 2160 / 360 per GPU-month
    assert line.target_source == "current_x_growth"


def test_pool_that_does_no_useful_work_needs_infinite_gpus() -> None:
    pool = PoolMonth("c1", "A100", 1, 24 * H, 24 * H, 0.0, 0.0, 0.0, 0.0)
    assert math.isinf(plan(pool, 720.0, target=5.0).required_gpus)
    assert plan(pool, 720.0, target=None).required_gpus == 0


def run(i: int, bw: float | None, hosts: tuple[str, ...] = ("n1", "n2"), ok: bool = True, days: int = -1) -> Run:
    return Run("c1", "all_reduce_perf", f"r{i}", T + timedelta(days=days, hours=i), hosts, bw, ok)


def test_node_set_below_its_own_baseline_is_flagged() -> None:
    history = [run(1, 180.0), run(2, 184.0), run(3, 176.0), run(4, 100.0, ok=False)]
    today = [run(5, 150.0, hosts=("n2", "n1"), days=0), run(6, 160.0, days=0)]
    [row] = health(today, history)
    assert (row.node_set, row.runs, row.baseline_scope, row.baseline_runs) == ("n1,n2", 2, "node_set", 3)
    assert row.avg_busbw_gbps == pytest.approx(155) and row.baseline_gbps == pytest.approx(180)
    assert row.ratio == pytest.approx(155 / 180) and row.below_baseline
    assert flagged_nodes([row]) == ["n1", "n2"]


def test_new_node_set_is_compared_with_peers_of_the_same_size() -> None:
    history = [run(1, 180.0), run(2, 190.0), run(3, 170.0, hosts=("n3", "n4"))]
    [row] = health([run(9, 175.0, hosts=("n1", "n3"), days=0)], history)
    assert (row.baseline_scope, row.baseline_gbps, row.below_baseline) == ("cluster", 180.0, False)


def test_failed_runs_and_no_history() -> None:
    [row] = health([run(1, None, ok=False, days=0)], [])
    assert (row.failed_runs, row.avg_busbw_gbps, row.baseline_scope, row.below_baseline) == (1, None, "none", False)
