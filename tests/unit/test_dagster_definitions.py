"""The code location loads, and its asset and check graph is the one the design describes."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from dagster_project import defs
from dagster_project.defs.common.partitions import daily_partitions, monthly_partitions
from dagster_project.defs.late_data.sensors import DAILY_ASSETS, MONTHLY_ASSETS
from dagster_project.defs.late_data.staleness import stale

REPO = Path(__file__).resolve().parents[2]

DAILY = {
    "gpu_usage_daily",
    "queue_time_daily",
    "idle_waste_daily",
    "failure_waste_daily",
    "idle_causes_daily",
    "cost_allocation_daily",
    "fabric_health",
}
MONTHLY = {"effective_cluster_unit_cost_monthly", "chargeback_monthly", "chargeback_files", "capacity_plan"}


def _graph() -> dg.AssetGraph:
    return defs.resolve_asset_graph()


def test_assets_and_their_partitions() -> None:
    graph = _graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert keys == DAILY | MONTHLY
    for key in graph.get_all_asset_keys():
        partitions = graph.get(key).partitions_def
        expected = dg.DailyPartitionsDefinition if key.to_user_string() in DAILY else dg.MonthlyPartitionsDefinition
        assert isinstance(partitions, expected), key


def test_lineage() -> None:
    graph = _graph()

    def parents(name: str) -> set[str]:
        return {k.to_user_string() for k in graph.get(dg.AssetKey(name)).parent_keys}

    assert parents("cost_allocation_daily") == {"gpu_usage_daily", "failure_waste_daily"}
    assert parents("chargeback_monthly") == {"cost_allocation_daily"}
    assert parents("chargeback_files") == {"chargeback_monthly"}
    assert parents("effective_cluster_unit_cost_monthly") == {"cost_allocation_daily"}
    assert parents("capacity_plan") == {"gpu_usage_daily", "failure_waste_daily"}
    assert parents("idle_waste_daily") == parents("failure_waste_daily") == {"gpu_usage_daily"}
    assert parents("idle_causes_daily") == {"gpu_usage_daily"}


def test_checks_are_predicates_and_block_upstream_of_exports() -> None:
    specs = {spec.key.name: spec for c in defs.asset_checks or [] for spec in c.check_specs}
    on = {name: spec.asset_key.to_user_string() for name, spec in specs.items()}
    assert on == {
        "gpu_usage_daily_gpu_seconds_conserved": "gpu_usage_daily",
        "failure_waste_daily_lost_within_failed": "failure_waste_daily",
        "idle_causes_daily_sum_to_idle": "idle_causes_daily",
        "cost_allocation_daily_gpu_seconds_conserved": "cost_allocation_daily",
        "cost_allocation_daily_money_conserved": "cost_allocation_daily",
        "cost_allocation_daily_no_negative_cost": "cost_allocation_daily",
        "chargeback_monthly_money_conserved": "chargeback_monthly",
        "chargeback_monthly_no_negative_cost": "chargeback_monthly",
        "chargeback_monthly_focus_rules_hold": "chargeback_monthly",
        "capacity_plan_ratios_in_range": "capacity_plan",
        "fabric_health_no_node_set_below_baseline": "fabric_health",
    }
    for name in on:
        if on[name] in ("cost_allocation_daily", "chargeback_monthly", "gpu_usage_daily"):
            assert specs[name].blocking, name
    # every blocking check of the chargeback sits on an asset upstream of the files
    assert dg.AssetKey("chargeback_monthly") in _graph().get(dg.AssetKey("chargeback_files")).parent_keys


def test_jobs_schedules_and_resources_follow_the_naming() -> None:
    for name in ("daily_assets_job", "monthly_assets_job"):
        assert defs.resolve_job_def(name).name == name
    assert {s.name for s in defs.schedules or []} == {"daily_assets_schedule", "monthly_assets_schedule"}
    assert set(defs.resources or {}) == {"clickhouse", "pricing", "org", "exports", "capacity"}
    daily = defs.resolve_job_def("daily_assets_job")
    assert {k.to_user_string() for k in daily.asset_layer.executable_asset_keys} == DAILY


# Dagster's partitioned schedule calls its own deprecated ``run_request_for_partition`` (1.13)
@pytest.mark.filterwarnings("ignore:Function `JobDefinition.run_request_for_partition`:DeprecationWarning")
def test_schedules_request_the_period_that_just_closed() -> None:
    daily = defs.resolve_schedule_def("daily_assets_schedule")
    monthly = defs.resolve_schedule_def("monthly_assets_schedule")
    assert (daily.cron_schedule, daily.execution_timezone) == ("0 2 * * *", "UTC")
    assert (monthly.cron_schedule, monthly.execution_timezone) == ("0 4 2 * *", "UTC")
    for schedule, tick, key in (
        (daily, datetime(2026, 3, 1, 2, tzinfo=UTC), "2026-02-28"),
        (monthly, datetime(2026, 3, 2, 4, tzinfo=UTC), "2026-02-01"),
    ):
        with dg.build_schedule_context(scheduled_execution_time=tick, repository_def=defs.get_repository_def()) as ctx:
            [request] = schedule.evaluate_tick(ctx).run_requests or []
        assert (request.partition_key, request.run_key) == (key, key), schedule.name


def test_a_partition_exists_once_its_period_has_closed() -> None:
    """The schedules come from the partitioned jobs (``build_schedule_from_partitioned_job``), which
    run the newest partition: that must be the day (month) that closed, not the one in progress."""
    with dg.partition_loading_context(effective_dt=datetime(2026, 3, 2, 4, 30, tzinfo=UTC)):
        assert daily_partitions.get_last_partition_key() == "2026-03-01"
        assert monthly_partitions.get_last_partition_key() == "2026-02-01"
        assert not daily_partitions.has_partition_key("2026-03-02")


def test_daily_assets_carry_a_freshness_policy_after_the_schedule() -> None:
    graph = _graph()
    for key in graph.get_all_asset_keys():
        policy = graph.get(key).freshness_policy
        if key.to_user_string() in DAILY:  # materialized between the 02:00 run and 04:00 UTC
            assert policy == dg.FreshnessPolicy.cron(
                deadline_cron="0 4 * * *", lower_bound_delta=timedelta(hours=2), timezone="UTC"
            ), key


def test_late_data_sensor_watches_both_jobs() -> None:
    sensor = defs.resolve_sensor_def("late_data_sensor")
    assert {j.name for j in sensor.jobs} == {"daily_assets_job", "monthly_assets_job"}
    assert sensor.minimum_interval_seconds == 300
    # it compares each partition with the materializations of exactly what its job rebuilds
    for job, watched in (("daily_assets_job", DAILY_ASSETS), ("monthly_assets_job", MONTHLY_ASSETS)):
        assert set(watched) == set(defs.resolve_job_def(job).asset_layer.executable_asset_keys), job


S = 1_000_000_000


@pytest.mark.parametrize(
    ("changes", "built", "expected"),
    [
        ({}, {}, []),
        # changed after the run that built it started: stale
        ({"2026-03-14": 20 * S}, {"2026-03-14": 10 * S}, ["2026-03-14"]),
        # the run started after the change (it read the changed facts): not stale
        ({"2026-03-14": 10 * S}, {"2026-03-14": 20 * S}, []),
        ({"2026-03-14": 10 * S}, {"2026-03-14": 10 * S}, []),
        # never built (or one of its assets never was): stale
        ({"2026-03-14": 10 * S}, {"2026-03-14": None}, ["2026-03-14"]),
        ({"2026-03-14": 10 * S}, {}, ["2026-03-14"]),
        (
            {"2026-03-15": 30 * S, "2026-03-14": 30 * S, "2026-03-16": 5 * S},
            {"2026-03-14": 20 * S, "2026-03-15": 40 * S, "2026-03-16": 1 * S},
            ["2026-03-14", "2026-03-16"],
        ),
    ],
)
def test_stale_partitions(changes: dict[str, int], built: dict[str, int | None], expected: list[str]) -> None:
    assert stale(changes, built) == expected


def test_the_code_location_validates_with_the_dagster_cli(tmp_path: Path) -> None:
    module = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["dagster"]["module_name"]
    assert module == "dagster_project.definitions"
    result = subprocess.run(
        [str(Path(sys.executable).parent / "dagster"), "definitions", "validate", "-m", module],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "DAGSTER_HOME": str(tmp_path)},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "All code locations passed validation" in result.stdout + result.stderr
