"""Org mappings per cluster, on the real ClickHouse endpoint: two clusters' org files in one
warehouse resolve independently, a reorg splits the month at its date, a version ingested without a
cluster applies only where a cluster has none of its own, and export files list only the business
units that exist for the period."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from clickhouse_connect.driver.client import Client

from pipelines.clusters import ALL_CLUSTERS
from sql import load_query
from streams.rollup import rebuild_since
from tests.integration.test_usage_hourly import T0, at, fact, insert_rows, report, write_facts

pytestmark = pytest.mark.integration

HOURS = 4


def version(cluster: str, effective: datetime, units: dict[str, list[str]]) -> list[dict[str, Any]]:
    return [
        {
            "event_id": f"{cluster}-{effective:%d%H%M}-{team}",
            "cluster": cluster,
            "effective_from": effective,
            "kind": "team_business_unit",
            "key": team,
            "value": unit,
        }
        for unit, teams in units.items()
        for team in teams
    ]


def usage(client: Client, cluster: str) -> None:
    """Team llm holds one GPU of the cluster's node for every window of HOURS hours."""
    minutes = range(HOURS * 60)
    rows = [fact(cluster, "n1", m, f"{cluster}-job", 60.0, team_label="llm") for m in minutes]
    write_facts(client, cluster, "n1", [at(m) for m in minutes], rows)


def by_unit(client: Client, cluster: str, start: datetime, end: datetime) -> dict[str, float]:
    out = {}
    for query in ("gpu_hours", "gpu_hours_facts"):  # the rollup answer and the facts-level answer
        _, rows = report(client, query, "business_unit", start, end, cluster)
        out[query] = {str(r[0]): round(float(r[1]), 9) for r in rows}
    assert out["gpu_hours"] == out["gpu_hours_facts"]
    return out["gpu_hours"]


def test_each_cluster_resolves_through_its_own_org_versions(client: Client) -> None:
    for cluster in ("a", "b", "c"):
        usage(client, cluster)
    insert_rows(
        client,
        "org_mappings",
        version("a", T0, {"research": ["llm"]})
        + version("a", at(120), {"ai": ["llm"]})  # a reorg of cluster a at 02:00
        + version("b", T0, {"product": ["llm"]})
        + version(ALL_CLUSTERS, T0 - timedelta(days=1), {"shared": ["llm"]}),
    )
    rebuild_since(client, "", T0)
    assert by_unit(client, "a", T0, at(HOURS * 60)) == {"research": 2.0, "ai": 2.0}
    assert by_unit(client, "a", at(90), at(150)) == {"research": 0.5, "ai": 0.5}  # split at its date
    assert by_unit(client, "b", T0, at(HOURS * 60)) == {"product": 4.0}  # a's file changes nothing here
    assert by_unit(client, "c", T0, at(HOURS * 60)) == {"shared": 4.0}  # no file of its own: the global one
    assert by_unit(client, "", at(30), at(90)) == {"research": 1.0, "product": 1.0, "shared": 1.0}


def test_a_cluster_falls_back_to_the_global_version_before_its_own_starts(client: Client) -> None:
    usage(client, "a")
    insert_rows(
        client,
        "org_mappings",
        version(ALL_CLUSTERS, T0, {"shared": ["llm"]}) + version("a", at(60), {"research": ["llm"]}),
    )
    rebuild_since(client, "", T0)
    assert by_unit(client, "a", T0, at(HOURS * 60)) == {"shared": 1.0, "research": 3.0}


def test_export_business_units_are_those_in_force_in_the_period_for_clusters_there(client: Client) -> None:
    usage(client, "a")
    insert_rows(
        client,
        "org_mappings",
        version("a", T0 - timedelta(days=60), {"old-unit": ["llm"]})
        + version("a", T0 - timedelta(days=1), {"research": ["llm"], "idle-unit": ["nobody"]})
        + version("b", T0, {"product": ["llm"]}),
    )  # cluster b has no facts in the period
    rows = client.query(
        load_query("chargeback_business_units"), parameters={"start": T0, "end": T0 + timedelta(days=30)}
    ).result_rows
    assert [r[0] for r in rows] == ["idle-unit", "research"]
