"""``gpuledger bench --smoke --format json`` runs end to end and reports every measurement: the stream
phases, live against backlog CPU per sample, the collectors' parse + publish rates, the monthly query.

No timing thresholds: performance is measured by the benchmark (docs/BENCHMARKS.md), not by
tests. The command runs as a subprocess against the test services; it uses its own topics and
databases and removes them afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr

from pipelines.settings import Settings
from sql.client import get_client
from tests.conftest import Endpoints

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
POSITIVE = [
    "pipeline_samples_per_s",
    "bare_consume_samples_per_s",
    "freshness_p50_s",
    "freshness_p99_s",
    "freshness_rate_achieved",
    "replay_samples_per_s",
    "rss_1h_mib",
    "rss_24h_mib",
    "monthly_query_s",
    "monthly_query_cold_s",
    "publish_samples_per_s",
    "pipeline_vs_bare_pct",
    "query_fact_rows",
    "live_cpu_us_per_sample",
    "backlog_cpu_us_per_sample",
    "live_endpoint_cpu_us_per_sample",
    "backlog_endpoint_cpu_us_per_sample",
    "backlog_drain_s",
]
SOURCES = ["dcgm_query_range", "dcgm_exposition", "kubernetes_pods"]
RUNNER = """
import typer
from gpuledger.cli import bench_cmd
app = typer.Typer()
bench_cmd.register(app)
app.command("noop")(lambda: None)  # two commands: `bench` stays a subcommand, as in the main app
app()
"""


def test_bench_smoke_reports_every_measurement(endpoints: Endpoints, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": endpoints.kafka_bootstrap,
        "CLICKHOUSE_URL": endpoints.clickhouse_url,
        "CLICKHOUSE_USER": endpoints.clickhouse_user,
        "CLICKHOUSE_PASSWORD": endpoints.clickhouse_password,
        "GPULEDGER_HOME": str(tmp_path),
    }
    run = subprocess.run(
        [sys.executable, "-c", RUNNER, "bench", "--smoke", "--format", "json"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    results = json.loads(run.stdout)
    assert results["mode"] == "smoke"
    for key in POSITIVE:
        assert isinstance(results[key], int | float) and results[key] > 0, key
    for key in ("idle_worker_cpu_pct", "live_idle_cpu_us_per_sample"):  # may round to 0 in the smoke's 10 s
        assert isinstance(results[key], int | float) and results[key] >= 0, key
    assert results["freshness_rounds_missing"] == 0
    assert results["monthly_query_teams"] == 12  # the generated month has twelve teams
    assert results["pipeline_gpu_samples"] == results["gpus"] * 23 * 3600 // results["scrape_interval_s"]
    # live: 4 nodes × 8 GPUs, 30 s at one scrape per 10 s, and the same number of samples as a backlog
    assert results["live_rounds"] == 3
    assert results["live_gpu_samples"] == results["backlog_gpu_samples"] == 4 * 8 * 3
    # the live phase's endpoint holds its own database, and no longer the stream phase's (its tables
    # cost the endpoint idle CPU, which the live figures include)
    tag = results["tag"]
    assert f"bench_live_{tag}" in results["live_endpoint_databases"]
    assert f"bench_{tag}" not in results["live_endpoint_databases"]
    for name in ("parse_publish_samples_per_s", "parse_samples_per_s"):
        rates = results[name]
        assert sorted(rates) == sorted(SOURCES), name
        assert all(isinstance(r, float) and r > 0 for r in rates.values()), rates
    assert results["parse_items"] == {
        "dcgm_query_range": 4 * 8 * 30,
        "dcgm_exposition": 4 * 8 * 3,
        "kubernetes_pods": 3 * 40 - 10,
    }  # pending, running, ended unless running
    for source in SOURCES:  # parsing alone is faster than parsing and publishing
        assert results["parse_samples_per_s"][source] > results["parse_publish_samples_per_s"][source]
    client = get_client(
        Settings(
            clickhouse_url=endpoints.clickhouse_url,
            clickhouse_user=endpoints.clickhouse_user,
            clickhouse_password=SecretStr(endpoints.clickhouse_password),
        ),
        database="default",
    )
    try:  # the run removed its own databases, their data at once (not left for the engine to remove later)
        left = client.query(
            "SELECT name FROM system.databases WHERE name LIKE {p:String}", parameters={"p": f"bench%{results['tag']}"}
        ).result_rows
        pending = client.query(
            "SELECT database, table FROM system.dropped_tables WHERE database LIKE {p:String}",
            parameters={"p": f"bench%{results['tag']}"},
        ).result_rows
    finally:
        client.close()
    assert left == []
    assert pending == []
