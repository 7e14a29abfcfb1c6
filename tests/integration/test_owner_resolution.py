"""Owner rules that live in the warehouse's read views, against the real ClickHouse endpoint:
team = pod label, else namespace mapping, else account mapping, else ``unassigned``; business unit
by the org version in force at each window; corrections replace a window's facts whole."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from infra.services import apply_migrations
from pipelines.settings import Settings
from sql import load_query
from sql.client import get_client
from streams.attribution.rows import NodeFacts
from streams.attribution.warehouse import AttributionWarehouse

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 1, 0, 0, tzinfo=UTC)
REORG = T0 + timedelta(minutes=2)


def fact(window: int, job: str, seconds: float, **owner: Any) -> dict[str, Any]:
    base = {
        "fact_id": f"f-{window}-{job}",
        "cluster": "c",
        "window_start": T0 + timedelta(minutes=window),
        "window_seconds": 60,
        "node": "n1",
        "gpu_uuid": f"GPU-{job}",
        "slot": f"GPU-{job}",
        "gpu_model": "H100",
        "kind": "allocated",
        "scheduler": "kubernetes",
        "job_id": job,
        "logical_job": job,
        "attempt": 1,
        "namespace": "",
        "account": "",
        "user": "",
        "queue": "",
        "workload_kind": "training",
        "team_label": "",
        "model": "m",
        "gpu_seconds": seconds,
        "busy_seconds": seconds / 2,
        "unobserved_seconds": 0.0,
        "energy_joules": 0.0,
    }
    base.update(owner)
    return base


def mapping(effective: datetime, kind: str, key: str, value: str) -> dict[str, Any]:
    return {
        "event_id": f"{effective:%H%M}-{kind}-{key}",
        "cluster": "c",
        "effective_from": effective,
        "kind": kind,
        "key": key,
        "value": value,
    }


def write(wh: AttributionWarehouse, windows: list[datetime], facts: list[dict[str, Any]]) -> None:
    """One facts write of node n1, as the attribution step makes it."""
    wh.write_fact_batch([NodeFacts("c", "n1", windows, facts, T0, 0)])


@pytest.fixture
def wh(isolated_settings: Settings):
    apply_migrations(isolated_settings)
    w = AttributionWarehouse(isolated_settings)
    yield w
    w.close()


def report(settings: Settings, by: str) -> dict[str, float]:
    client = get_client(settings)
    try:
        rows = client.query(
            load_query("gpu_hours"), parameters={"by": by, "start": T0, "end": T0 + timedelta(hours=1), "cluster": ""}
        ).result_rows
    finally:
        client.close()
    return {r[0]: round(r[1] * 3600, 6) for r in rows}


def test_team_and_business_unit_resolution_with_effective_dating(
    wh: AttributionWarehouse, isolated_settings: Settings
) -> None:
    for window in range(4):
        facts = [
            fact(window, "labelled", 60, namespace="ns-a", team_label="vision"),  # label beats mapping
            fact(window, "by-ns", 30, namespace="ns-a"),
            fact(window, "by-account", 20, scheduler="slurm", account="acct-b"),
            fact(window, "nobody", 10, namespace="ns-unknown"),
        ]
        write(wh, [T0 + timedelta(minutes=window)], facts)
    wh.insert(
        "org_mappings",
        [
            mapping(T0, "namespace_team", "ns-a", "llm"),
            mapping(T0, "account_team", "acct-b", "search"),
            mapping(T0, "team_business_unit", "llm", "research"),
            mapping(T0, "team_business_unit", "vision", "research"),
            mapping(T0, "team_business_unit", "search", "product"),
            # the reorg: llm moves to product; vision is absent from the new version → unassigned
            mapping(REORG, "namespace_team", "ns-a", "llm"),
            mapping(REORG, "account_team", "acct-b", "search"),
            mapping(REORG, "team_business_unit", "llm", "product"),
            mapping(REORG, "team_business_unit", "search", "product"),
        ],
    )
    wh.request_rollup_rebuild(T0)  # what the raw sink does after org mappings arrive
    assert wh.work_rollup_rebuilds() == 0  # and the next attribution step
    assert report(isolated_settings, "team") == {"vision": 240.0, "llm": 120.0, "search": 80.0, "unassigned": 40.0}
    assert report(isolated_settings, "business_unit") == {
        "research": 2 * 60 + 2 * 30 + 0,  # windows 0-1: vision + llm
        "product": 2 * 30 + 4 * 20,  # windows 2-3: llm; all windows: search
        "unassigned": 40.0 + 2 * 60,  # nobody, and vision after the reorg
    }


def test_a_window_written_again_replaces_its_facts_whole(wh: AttributionWarehouse, isolated_settings: Settings) -> None:
    window = T0 + timedelta(minutes=5)
    write(wh, [window], [fact(5, "first", 60, team_label="a")])
    assert report(isolated_settings, "team") == {"a": 60.0}
    # a correction: the same window, now owned by another job only; the old row must vanish
    write(
        wh,
        [window],
        [
            fact(5, "second", 45, team_label="b"),
            {**fact(5, "x", 15), "kind": "unallocated", "job_id": "", "fact_id": "u"},
        ],
    )
    assert report(isolated_settings, "team") == {"b": 45.0, "__unallocated__": 0.0}
