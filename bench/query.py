"""The monthly cost-by-team query over a month of generated facts.

Facts are generated inside ClickHouse (``INSERT … SELECT FROM numbers()``) into an isolated
database that holds the real schema (``apply_migrations``): one fact per GPU per 60 s window for a
30-day month, i.e. two GPU-sample-equivalents per fact at a 30 s scrape interval. The query timed
is ``sql/queries/gpu_hours.sql`` grouped by team — the same text ``gpuledger report gpu-hours``
runs: whole hours from the hourly rollup (``resolved_hourly``), which is built after the facts
with ``streams.rollup.rebuild_hours`` one day at a time (as ``rebuild_since`` does) and timed
separately; partial hours at the range's edges (none for a whole month) from ``resolved_facts``.
"""

from __future__ import annotations

import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from infra.services import apply_migrations
from pipelines.settings import Settings
from sql import load_query
from sql.client import get_client
from streams.rollup import chunks, rebuild_hours

MONTH_START = datetime(2026, 9, 1, tzinfo=UTC)
WINDOWS = 30 * 24 * 60  # one month of 60 s windows
SAMPLES_PER_FACT = 2  # 60 s window / 30 s scrape interval

FACTS_SQL = """
INSERT INTO gpu_usage_facts
SELECT
    hex(number) AS fact_id, toUInt64(1) AS version, 'bench' AS cluster,
    toDateTime64({start:DateTime64(3, 'UTC')}, 3, 'UTC') + toIntervalMinute(number % {windows:UInt64}) AS window_start,
    toUInt32(60) AS window_seconds,
    concat('node-', toString(intDiv(intDiv(number, {windows:UInt64}), 8))) AS node,
    concat('GPU-', toString(intDiv(number, {windows:UInt64}))) AS gpu_uuid,
    gpu_uuid AS slot, 'h100' AS gpu_model,
    if(intDiv(number, {windows:UInt64}) % 5 = 0, 'unallocated', 'allocated') AS kind,
    if(kind = 'allocated', 'kubernetes', '') AS scheduler,
    if(kind = 'allocated', concat('team-', toString(intDiv(number, {windows:UInt64}) % 12), '/job-',
       toString(intDiv(number % {windows:UInt64}, 240))), '') AS job_id,
    job_id AS logical_job, toUInt16(if(kind = 'allocated', 1, 0)) AS attempt,
    if(kind = 'allocated', concat('team-', toString(intDiv(number, {windows:UInt64}) % 12)), '') AS namespace,
    '' AS account, '' AS user, '' AS queue, if(kind = 'allocated', 'training', '') AS workload_kind,
    namespace AS team_label, '' AS model,
    60.0 AS gpu_seconds, if(kind = 'allocated', (number % 100) * 0.6, 0.0) AS busy_seconds,
    0.0 AS unobserved_seconds, 0.0 AS energy_joules
FROM numbers({rows:UInt64})
"""

WINDOWS_SQL = """
INSERT INTO fact_windows
SELECT 'bench' AS cluster, concat('node-', toString(intDiv(number, {windows:UInt64}))) AS node,
       toDateTime64({start:DateTime64(3, 'UTC')}, 3, 'UTC') + toIntervalMinute(number % {windows:UInt64}),
       toUInt64(1), 480.0, toUInt32(8), 8.0 AS physical_gpus, 0.0 AS conflict_seconds, toUInt32(60) AS window_seconds
FROM numbers({rows:UInt64})
"""


def generate_facts(settings: Settings, target_samples: int) -> dict[str, Any]:
    """Fill an isolated database with about ``target_samples`` GPU-sample-equivalents of facts."""
    apply_migrations(settings)
    gpus = max(8, -(-target_samples // (SAMPLES_PER_FACT * WINDOWS * 8)) * 8)
    rows = gpus * WINDOWS
    params = {"start": MONTH_START, "windows": WINDOWS}
    client = get_client(settings)
    try:
        began = time.perf_counter()
        client.command(FACTS_SQL, parameters={**params, "rows": rows})
        client.command(WINDOWS_SQL, parameters={**params, "rows": (gpus // 8) * WINDOWS})
        elapsed = time.perf_counter() - began
        began = time.perf_counter()
        nodes = [f"node-{i}" for i in range(gpus // 8)]
        for a, b in chunks(MONTH_START, MONTH_START + timedelta(minutes=WINDOWS)):
            rebuild_hours(client, "bench", nodes, a, b)
        build = time.perf_counter() - began
    finally:
        client.close()
    return {
        "query_fact_rows": rows,
        "query_gpu_sample_equivalents": rows * SAMPLES_PER_FACT,
        "query_gpus": gpus,
        "query_generate_s": round(elapsed, 2),
        "query_rollup_build_s": round(build, 2),
    }


def time_monthly_query(settings: Settings, repeats: int = 3) -> dict[str, Any]:
    """Cold (first) and warm (median of ``repeats``) latency of gpu-hours by team over the month."""
    params = {"by": "team", "start": MONTH_START, "end": MONTH_START + timedelta(days=30), "cluster": ""}
    sql = load_query("gpu_hours")
    client = get_client(settings)
    timings: list[float] = []
    try:
        for _ in range(repeats + 1):
            began = time.perf_counter()
            result = client.query(sql, parameters=params)
            timings.append(time.perf_counter() - began)
        teams = [r for r in result.result_rows if not str(r[0]).startswith("__")]
    finally:
        client.close()
    return {
        "monthly_query_cold_s": round(timings[0], 3),
        "monthly_query_s": round(statistics.median(timings[1:]), 3),
        "monthly_query_teams": len(teams),
    }
