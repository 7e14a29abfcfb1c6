"""The blocking checks can fail: conservation against the physical GPUs (not the facts' own sum),
and lost work against the attempts' own records; lost work never exceeds failed work in a report
range that cuts an attempt."""

from __future__ import annotations

import time
from datetime import timedelta

import dagster as dg
import pytest

from dagster_project.definitions import defs
from dagster_project.defs.common.resources import ClickHouseResource
from pipelines.settings import Settings
from sql import load_query
from sql.client import get_client
from tests.integration.test_dagster_assets import FACT_COLS, INVENTORY_COLS, T0, WINDOW_COLS, load_fixture_rows

pytestmark = pytest.mark.integration


def _check(settings: Settings, asset_name: str, check_name: str, day: str) -> dg.AssetCheckEvaluation:
    assets = [a for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition) and a.key.path[-1] == asset_name]
    checks = [
        c
        for c in defs.asset_checks or []
        if isinstance(c, dg.AssetChecksDefinition) and any(s.name == check_name for s in c.check_specs)
    ]
    result = dg.materialize(
        [*assets, *checks],
        partition_key=day,
        raise_on_error=False,
        resources={"clickhouse": ClickHouseResource.from_settings(settings)},
    )
    [evaluation] = [e for e in result.get_asset_check_evaluations() if e.check_name == check_name]
    return evaluation


@pytest.fixture
def warehouse(isolated_settings: Settings) -> Settings:
    load_fixture_rows(isolated_settings)
    return isolated_settings


def test_conservation_fails_when_a_window_lacks_a_physical_gpu(warehouse: Settings) -> None:
    ok = _check(warehouse, "gpu_usage_daily", "gpu_usage_daily_gpu_seconds_conserved", "2026-03-14")
    assert ok.passed
    # a rewrite of n1's 03:00 window that lost one of its two GPUs: the facts still sum to their own
    # capacity row, but not to the node's physical GPUs
    ws = T0 + timedelta(hours=3)
    version = time.time_ns()
    client = get_client(warehouse)
    try:
        client.insert(
            "gpu_usage_facts",
            [
                [
                    "gone",
                    version,
                    "c1",
                    ws,
                    3600,
                    "n1",
                    "g-n1-0",
                    "g-n1-0",
                    "H100",
                    "unallocated",
                    "",
                    "",
                    "",
                    0,
                    "",
                    "",
                    "",
                    "",
                    "",
                    "",
                    "",
                    3600.0,
                    0.0,
                    3600.0,
                    0.0,
                ]
            ],
            column_names=FACT_COLS,
        )
        client.insert(
            "fact_windows",
            [["c1", "n1", ws, version, 3600.0, 1, 2.0, 3600]],
            column_names=WINDOW_COLS,
        )
    finally:
        client.close()
    bad = _check(warehouse, "gpu_usage_daily", "gpu_usage_daily_gpu_seconds_conserved", "2026-03-14")
    assert not bad.passed
    assert "c1/n1 at 2026-03-14 03:00:00" in (bad.description or "")
    assert "facts 3600.000 s, physical GPUs 7200.000 s" in (bad.description or "")


def _rewrite_window(settings: Settings, node: str, hour: int, gpus: list[str], physical: float) -> None:
    """A rewrite of ``node``'s window whose facts allocate ``gpus`` whole and whose fact_windows row says
    ``physical`` GPUs: the facts sum to what the attribution wrote, as on a node whose GPUs it did not know."""
    ws = T0 + timedelta(hours=hour)
    version = time.time_ns()
    client = get_client(settings)
    try:
        client.insert(
            "gpu_usage_facts",
            [
                [
                    f"over-{node}-{g}",
                    version,
                    "c1",
                    ws,
                    3600,
                    node,
                    g,
                    g,
                    "H100",
                    "allocated",
                    "slurm",
                    "j1",
                    "j1",
                    1,
                    "",
                    "llm",
                    "",
                    "",
                    "batch",
                    "",
                    "gpt-small",
                    3600.0,
                    0.0,
                    3600.0,
                    0.0,
                ]
                for g in gpus
            ],
            column_names=FACT_COLS,
        )
        client.insert(
            "fact_windows",
            [["c1", node, ws, version, 3600.0 * physical, len(gpus), physical, 3600]],
            column_names=WINDOW_COLS,
        )
    finally:
        client.close()


def test_conservation_fails_on_over_allocation_against_the_inventory(warehouse: Settings) -> None:
    """n1 has two GPUs in its inventory; a window whose facts hold three (physical_gpus raised to what was
    claimed) agrees with itself, but not with the inventory."""
    _rewrite_window(warehouse, "n1", 5, ["g-n1-0", "g-n1-1", ""], 3.0)
    bad = _check(warehouse, "gpu_usage_daily", "gpu_usage_daily_gpu_seconds_conserved", "2026-03-14")
    assert not bad.passed
    assert "c1: usage" in (bad.description or "") and "inventory" in (bad.description or "")


def test_conservation_names_a_node_without_inventory(warehouse: Settings) -> None:
    """A node with no declared GPU count and no GPU reported: whatever its facts say, nothing vouches for
    its capacity; the check fails and names it."""
    _rewrite_window(warehouse, "ghost", 5, [""], 1.0)
    bad = _check(warehouse, "gpu_usage_daily", "gpu_usage_daily_gpu_seconds_conserved", "2026-03-14")
    assert not bad.passed
    assert "no inventory" in (bad.description or "") and "ghost" in (bad.description or "")


def test_a_declared_gpu_count_is_inventory(warehouse: Settings) -> None:
    """The same node with a node.state declaring one GPU: its capacity is known and the check passes."""
    client = get_client(warehouse)
    try:
        client.insert(
            "raw_scheduler_allocations",
            [
                [
                    "ns-ghost",
                    "node.state",
                    "slurm",
                    1,
                    T0,
                    "c1",
                    "",
                    "",
                    0,
                    "ghost",
                    "up",
                    None,
                    None,
                    '{"node":"ghost","state":"up","gpus":1}',
                ]
            ],
            column_names=[
                "event_id",
                "type",
                "source",
                "schema_version",
                "time",
                "cluster",
                "scheduler",
                "job_id",
                "attempt",
                "node",
                "state",
                "start_time",
                "end_time",
                "payload",
            ],
        )
    finally:
        client.close()
    _rewrite_window(warehouse, "ghost", 5, [""], 1.0)
    assert _check(warehouse, "gpu_usage_daily", "gpu_usage_daily_gpu_seconds_conserved", "2026-03-14").passed


@pytest.mark.parametrize(("seen_h", "inventory"), [(3, True), (-19, True), (-20, False), (6, False)])
def test_a_gpu_is_inventory_from_24_hours_before_a_window_until_its_end(
    warehouse: Settings, seen_h: int, inventory: bool
) -> None:
    """A node whose one GPU reported only at ``seen_h`` (hours from T0): its 05:00 window has that GPU
    in its inventory when the report lies within 24 h before the window or in it, not after it."""
    seen = T0 + timedelta(hours=seen_h, minutes=30)
    never = T0 - timedelta(days=365)
    client = get_client(warehouse)
    try:
        client.insert(
            "gpu_inventory",
            [["c1", "n9", seen.replace(minute=0), "g-n9-0", seen, seen, 0, "H100", never, never]],
            column_names=INVENTORY_COLS,
        )
    finally:
        client.close()
    _rewrite_window(warehouse, "n9", 5, ["g-n9-0"], 1.0)
    result = _check(warehouse, "gpu_usage_daily", "gpu_usage_daily_gpu_seconds_conserved", "2026-03-14")
    assert result.passed is inventory, result.description


def test_lost_work_check_fails_when_the_facts_exceed_the_attempt_record(warehouse: Settings) -> None:
    assert _check(warehouse, "failure_waste_daily", "failure_waste_daily_lost_within_failed", "2026-03-14").passed
    client = get_client(warehouse)
    try:  # the attempt's record now says it held half of what the facts give it
        client.command(
            "INSERT INTO job_attempts SELECT * REPLACE (version + 1 AS version, gpu_seconds / 2 AS "
            "gpu_seconds) FROM job_attempts FINAL WHERE job_id = 'k-search-a'"
        )
    finally:
        client.close()
    assert not _check(warehouse, "failure_waste_daily", "failure_waste_daily_lost_within_failed", "2026-03-14").passed


def test_idle_causes_add_up_to_the_idle_time_and_the_check_sees_when_not(warehouse: Settings) -> None:
    assert _check(warehouse, "idle_causes_daily", "idle_causes_daily_sum_to_idle", "2026-03-14").passed
    client = get_client(warehouse)
    try:
        causes: dict[str, float] = {
            str(cause): float(seconds)
            for cause, seconds in client.query(
                "SELECT cause, sum(idle_seconds) FROM idle_causes_daily WHERE day = '2026-03-14' GROUP BY cause"
            ).result_rows
        }
        facts_idle = client.query(
            "SELECT sum(gpu_seconds - busy_seconds - unobserved_seconds) FROM resolved_facts WHERE kind = 'allocated' "
            "AND toDate(window_start) = '2026-03-14'"
        ).result_rows[0][0]
        assert causes["idle"] > 0 and facts_idle > 0
        assert sum(v for c, v in causes.items() if c != "unobserved") == pytest.approx(facts_idle, abs=1e-6)
        # the facts of that day change after the asset was built (a late correction): the day's causes
        # no longer add up to its idle time
        client.command(
            "INSERT INTO idle_causes_daily SELECT * REPLACE ('idle' AS cause, 600. AS idle_seconds) "
            "FROM idle_causes_daily WHERE day = '2026-03-14' LIMIT 1"
        )
        params = {"day": T0.date(), "start": T0, "end": T0 + timedelta(days=1), "tolerance_s": 0.0036}
        result = client.query(load_query("waste_idle_causes_check"), parameters=params)
        check = dict(zip(result.column_names, result.result_rows[0], strict=True))
    finally:
        client.close()
    assert check["bad"] == 1 and check["worst"] == pytest.approx(600.0)


def test_lost_work_is_clipped_to_the_report_range_and_counts_the_checkpoint_window(warehouse: Settings) -> None:
    client = get_client(warehouse)
    try:

        def failures(start_h: float, end_h: float) -> tuple[float, float]:
            rows = client.query(
                load_query("failures"),
                parameters={
                    "start": T0 + timedelta(hours=start_h),
                    "end": T0 + timedelta(hours=end_h),
                    "cluster": "",
                    "limit": 10,
                },
            ).result_rows
            [row] = [r for r in rows if r[4] == "search-ns/k-search" and r[5] == 1]
            return float(row[6]), float(row[7])

        # k-search-a: failed after 10 h, last checkpoint at 6 h → 4 h lost of 10 h
        assert failures(0, 24) == pytest.approx((10.0, 4.0))
        assert failures(0, 7) == pytest.approx((7.0, 1.0))  # the range cuts it: lost within failed
        assert failures(8, 24) == pytest.approx((2.0, 2.0))
        # a checkpoint at 06:30 loses the second half of the 06:00 window too, not only the windows after it
        client.command(
            "INSERT INTO job_attempts SELECT * REPLACE (version + 1 AS version, last_checkpoint + "
            "toIntervalMinute(30) AS last_checkpoint) FROM job_attempts FINAL WHERE job_id = 'k-search-a'"
        )
        assert failures(0, 24) == pytest.approx((10.0, 3.5))
        waste = client.query(
            load_query("waste_failure_daily"), parameters={"start": T0, "end": T0 + timedelta(days=1)}
        ).result_rows
        [row] = [r for r in waste if r[9] == "k-search-a"]
        assert (row[12], row[13]) == pytest.approx((10 * 3600.0, 3.5 * 3600.0))
    finally:
        client.close()
