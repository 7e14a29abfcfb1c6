"""Idle causes on the real ClickHouse endpoint: a hand-worked node hour whose every idle minute has a
planted cause (a checkpoint, a storage stall, a failed and a below-baseline NCCL run, a slow start,
a slow end), read back by ``report idle-causes`` and checked against ``report gpu-hours``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from clickhouse_connect.driver.client import Client

from gpuledger import reports
from pipelines.clusters import ClusterScope
from sql.idle_causes import IDLE_CAUSES
from tests.integration.test_usage_hourly import insert_rows, write_facts

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 1, 0, 0, tzinfo=UTC)
END = T0 + timedelta(hours=1)
C = ClusterScope.one("c")
RATE = 2.0  # per GPU-hour


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def fact(node: str, minute: int, job: str, team: str, busy: float, unobserved: float = 0.0) -> dict[str, Any]:
    return {
        "fact_id": f"{job}-{minute}",
        "cluster": "c",
        "window_start": at(minute),
        "window_seconds": 60,
        "node": node,
        "gpu_uuid": f"GPU-{job}",
        "slot": f"GPU-{job}",
        "gpu_model": "H100",
        "kind": "allocated",
        "scheduler": "kubernetes",
        "job_id": job,
        "logical_job": f"ns/{job}",
        "attempt": 1,
        "namespace": "ns",
        "account": "",
        "user": "",
        "queue": "",
        "workload_kind": "training",
        "team_label": team,
        "model": f"model-{job}",
        "gpu_seconds": 60.0,
        "busy_seconds": busy,
        "unobserved_seconds": unobserved,
        "energy_joules": 0.0,
    }


def attempt(job: str, start: float, end: float | None) -> dict[str, Any]:
    return {
        "cluster": "c",
        "scheduler": "kubernetes",
        "job_id": job,
        "attempt": 1,
        "logical_job": f"ns/{job}",
        "version": 1,
        "state": "completed" if end is not None else "running",
        "start_time": at(start),
        "end_time": at(end) if end is not None else None,
        "outcome": "success" if end is not None else "",
    }


def busy_of_a(minute: int) -> tuple[float, float]:
    """(busy, unobserved) seconds of job a's GPU in each minute of its hour."""
    if minute < 5 or minute >= 55:  # slow start, slow end
        return 0.0, 0.0
    if minute == 10:  # a 30 s checkpoint write
        return 30.0, 0.0
    if minute == 12:  # a scrape gap
        return 40.0, 20.0
    if 20 <= minute < 30:  # half busy: 20-24 under a storage stall, 25-29 the application's own
        return 30.0, 0.0
    if 30 <= minute < 35:  # waiting on a failed fabric
        return 0.0, 0.0
    return 60.0, 0.0


def plant(client: Client) -> None:
    n1 = [fact("n1", m, "a", "ta", *busy_of_a(m)) for m in range(60)]
    n1 += [fact("n1", m, "b", "tb", 0.0) for m in range(60)]  # never busy, still running
    write_facts(client, "c", "n1", [at(m) for m in range(60)], n1)
    write_facts(
        client, "c", "n2", [at(m) for m in range(38, 50)], [fact("n2", m, "c", "tc", 0.0) for m in range(38, 50)]
    )
    # e holds n3 for the first half of minute 45 only; n3's fabric fails in its second half
    write_facts(client, "c", "n3", [at(45)], [{**fact("n3", 45, "e", "te", 0.0), "gpu_seconds": 30.0}])
    client.insert(
        "job_attempts",
        [
            list(r.values())
            for r in (attempt("a", 0, 60), attempt("b", 0, None), attempt("c", 38, 50), attempt("e", 45, 45.5))
        ],
        column_names=list(attempt("a", 0, 60)),
    )
    insert_rows(
        client,
        "checkpoints",
        [
            {
                "event_id": "ck1",
                "cluster": "c",
                "job_id": "a",
                "attempt": 1,
                "kind": "write",
                "path": "/ckpt/1",
                "bytes": 10**9,
                "started": at(10),
                "finished": at(10.5),
                "node": "n1",
            },
            {
                "event_id": "ck2",
                "cluster": "c",
                "job_id": "a",
                "attempt": 1,
                "kind": "restore",
                "path": "/ckpt/1",
                "bytes": 10**9,
                "started": at(40),
                "finished": at(41),
                "node": "n1",
            },
        ],
    )
    # n1's storage: a counter sampled each minute; 1 GB/s in [20, 25), 0.1 GB/s otherwise
    total, storage = 0.0, []
    for m in range(-60, 61):
        if m > -60:
            total += (1e9 if 20 <= m - 1 < 25 else 1e8) * 60
        storage.append(
            {
                "event_id": f"st{m}",
                "time": at(m),
                "cluster": "c",
                "node": "n1",
                "fs_type": "nfs",
                "device": "home:/data",
                "job_id": "",
                "read_bytes": total,
                "write_bytes": 0.0,
            }
        )
    insert_rows(client, "storage_samples", storage)

    def run(run_id: str, when: datetime, hosts: list[str], busbw: float | None, ok: bool) -> dict[str, Any]:
        return {
            "event_id": run_id,
            "time": when,
            "cluster": "c",
            "run_id": run_id,
            "collective": "all_reduce",
            "hosts": hosts,
            "ranks": 8,
            "nccl_version": "2.21",
            "avg_busbw_gbps": busbw,
            "max_busbw_gbps": busbw,
            "wrong_total": 0,
            "out_of_bounds": 0,
            "ok": ok,
            "payload": "{}",
        }

    insert_rows(
        client,
        "benchmark_runs",
        [
            *(run(f"base{i}", T0 - timedelta(days=1, hours=i), ["n2"], 100.0, True) for i in range(3)),
            run("n1-failed", at(30), ["n1"], None, False),
            run("n1-passed", at(35), ["n1"], 100.0, True),
            run("n2-slow", at(40), ["n2"], 50.0, True),  # half its baseline
            run("n3-failed", at(45.5), ["n3"], None, False),
        ],
    )
    insert_rows(
        client,
        "pricing_rates",
        [
            {
                "event_id": "p1",
                "cluster": "c",
                "effective_from": T0 - timedelta(days=2),
                "currency": "USD",
                "gpu_model": "H100",
                "hourly_rate": RATE,
            }
        ],
    )


def causes(client: Client, by: str = "team") -> dict[str, dict[str, float]]:
    result = reports.run(client, "idle-causes", by=by, start=T0, end=END, cluster=C)
    out: dict[str, dict[str, float]] = {}
    for r in result.records:
        out.setdefault(r[by] if by in r else r["key"], {})[r["cause"]] = r["idle_gpu_hours"] * 3600
        assert r["cost"] == pytest.approx(r["idle_gpu_hours"] * RATE, abs=1e-6)
    return out


def test_each_planted_cause_comes_out_as_planted(client: Client) -> None:
    plant(client)
    got = causes(client)
    assert set(IDLE_CAUSES) == set(got["ta"])
    expected = {
        # a: 5 slow minutes, half of minute 10 checkpointing, 20-24 half idle under the stall, 25-29 half
        # idle of its own, 30-34 on a failed fabric, 5 minutes after its last busy window
        "ta": {
            "checkpoint": 30,
            "storage_stall": 150,
            "fabric_degraded": 300,
            "startup": 300,
            "teardown": 300,
            "idle": 150,
            "unobserved": 20,
        },
        # b: never busy; startup is at most 15 minutes, the stall and the fabric took their minutes
        "tb": {
            "checkpoint": 0,
            "storage_stall": 300,
            "fabric_degraded": 300,
            "startup": 900,
            "teardown": 0,
            "idle": 3600 - 300 - 300 - 900,
            "unobserved": 0,
        },
        # c: n2 below its baseline from minute 40; the two minutes before are its start
        "tc": {
            "checkpoint": 0,
            "storage_stall": 0,
            "fabric_degraded": 600,
            "startup": 120,
            "teardown": 0,
            "idle": 0,
            "unobserved": 0,
        },
        # e: its half minute was before n3's fabric failed (a cause counts within the attempt's part of
        # the window, not anywhere in it)
        "te": {
            "checkpoint": 0,
            "storage_stall": 0,
            "fabric_degraded": 0,
            "startup": 30,
            "teardown": 0,
            "idle": 0,
            "unobserved": 0,
        },
    }
    for team, want in expected.items():
        assert got[team] == pytest.approx(want, abs=1e-6), team
    # the price list ingested again (the same event, not yet merged away): nothing counts twice
    insert_rows(
        client,
        "pricing_rates",
        [
            {
                "event_id": "p1",
                "cluster": "c",
                "effective_from": T0 - timedelta(days=2),
                "currency": "USD",
                "gpu_model": "H100",
                "hourly_rate": RATE,
            }
        ],
    )
    again = causes(client)
    assert set(again) == set(got) and all(again[t] == pytest.approx(got[t]) for t in got)


def test_causes_sum_to_the_idle_of_gpu_hours_for_every_grouping(client: Client) -> None:
    plant(client)
    for by in ("team", "model", "job", "node", "business_unit", "team,model"):
        split = reports.run(client, "idle-causes", by=by, start=T0 + timedelta(minutes=7), end=END, cluster=C)
        hours = reports.run(client, "gpu-hours", by=by, start=T0 + timedelta(minutes=7), end=END, cluster=C)
        dims = by.split(",")
        idle: dict[tuple[str, ...], float] = {}
        unobserved: dict[tuple[str, ...], float] = {}
        for r in split.records:
            key = tuple(r[d] for d in dims) if len(dims) > 1 else (r["key"],)
            bucket = unobserved if r["cause"] == "unobserved" else idle
            bucket[key] = bucket.get(key, 0.0) + r["idle_gpu_hours"]
        expected = {
            (tuple(r[d] for d in dims) if len(dims) > 1 else (r["key"],)): r
            for r in hours.records
            if not str(r.get("key", r.get(dims[0]))).startswith("__")
        }
        assert set(idle) == set(expected), by
        for key, row in expected.items():
            assert idle[key] == pytest.approx(row["idle_gpu_hours"], abs=1e-6), (by, key)
            assert unobserved[key] == pytest.approx(row["unobserved_gpu_hours"], abs=1e-6), (by, key)


def test_a_business_unit_scope_sees_its_own_rows_only(client: Client) -> None:
    plant(client)
    insert_rows(
        client,
        "org_mappings",
        [
            {
                "event_id": "o1",
                "cluster": "*",
                "effective_from": T0 - timedelta(days=1),
                "kind": "team_business_unit",
                "key": "ta",
                "value": "research",
            }
        ],
    )
    scoped = reports.run(client, "idle-causes", by="team", start=T0, end=END, cluster=C, business_unit="research")
    assert {r["key"] for r in scoped.records} == {"ta"}
    with pytest.raises(reports.OutOfScope):
        reports.run(client, "idle-causes", by="node", start=T0, end=END, cluster=C, business_unit="research")
