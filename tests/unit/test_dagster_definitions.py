"""The code location loads, and its asset and check graph is the one the design describes."""

from __future__ import annotations

import dagster as dg

from dagster_project import defs

DAILY = {"gpu_usage_daily", "queue_time_daily", "idle_waste_daily", "failure_waste_daily", "cost_allocation_daily",
         "fabric_health"}
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


def test_checks_are_predicates_and_block_upstream_of_exports() -> None:
    specs = {spec.key.name: spec for c in defs.asset_checks or [] for spec in c.check_specs}
    on = {name: spec.asset_key.to_user_string() for name, spec in specs.items()}
    assert on == {
        "gpu_usage_daily_gpu_seconds_conserved": "gpu_usage_daily",
        "failure_waste_daily_lost_within_failed": "failure_waste_daily",
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


def test_schedules_request_the_period_that_just_closed() -> None:
    from datetime import UTC, datetime

    by_name = {s.name: s for s in defs.schedules or [] if isinstance(s, dg.ScheduleDefinition)}
    daily, monthly = by_name["daily_assets_schedule"], by_name["monthly_assets_schedule"]
    with dg.build_schedule_context(scheduled_execution_time=datetime(2026, 3, 1, 2, tzinfo=UTC),
                                   repository_def=defs.get_repository_def()) as ctx:
        assert daily.evaluate_tick(ctx).run_requests[0].partition_key == "2026-02-28"  # type: ignore[index]
    with dg.build_schedule_context(scheduled_execution_time=datetime(2026, 3, 2, 4, tzinfo=UTC),
                                   repository_def=defs.get_repository_def()) as ctx:
        assert monthly.evaluate_tick(ctx).run_requests[0].partition_key == "2026-02-01"  # type: ignore[index]
