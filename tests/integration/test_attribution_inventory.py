"""Capacity is the physical inventory, through the real warehouse: raw events in, one step, facts out.

A GPU that fell off the bus long before a step's loaded samples, a drained node, a requeued
attempt whose end never arrives (the next attempt starts on another node, after the first one's
windows were written), two pods on one GPU, and a pod re-created under the same name.
"""

from __future__ import annotations

import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pipelines import events as ev
from pipelines import wire
from pipelines.settings import Settings
from streams.attribution import step
from streams.attribution.warehouse import AttributionWarehouse
from streams.ingest.sink import Message, write_batch

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 5, 0, 0, tzinfo=UTC)
HOURS = 3
H100 = "NVIDIA H100 80GB HBM3"


def _env(kind: str, t: datetime, data: dict[str, Any], source: str = "slurm", *key: object) -> ev.Envelope:
    return wire.validate(
        {
            "id": ev.event_id(kind, t, *key),
            "source": source,
            "type": kind,
            "time": t.isoformat(),
            "cluster": "c1",
            "data": data,
        }
    )


def _samples(node: str, gpus: dict[str, int], until: dict[str, tuple[datetime, int]]) -> list[ev.Envelope]:
    out = []
    for i in range(HOURS * 120):
        t = T0 + timedelta(seconds=30 * i)
        rows = []
        for uuid, index in gpus.items():
            stop = until.get(uuid)
            if stop and t > stop[0]:
                continue
            xid = stop[1] if stop and t == stop[0] else 0
            rows.append({"uuid": uuid, "index": index, "model": H100, "gr_engine_active": 0.5, "xid": xid})
        out.append(_env("gpu.sample", t, {"node": node, "interval_s": 30, "gpus": rows}, "dcgm", node))
    return out


def _alloc(job: str, attempt: int, node: str, start_min: int, end_min: int | None = None, **kw: Any) -> ev.Envelope:
    data: dict[str, Any] = {
        "scheduler": "slurm",
        "job_id": job,
        "attempt": attempt,
        "node": node,
        "state": "running",
        "start_time": (T0 + timedelta(minutes=start_min)).isoformat(),
        "gpus": [{"kind": "gpu", "count": 1}],
        "owner": {"account": "vision"},
    }
    if end_min is not None:
        data.update(state="ended", end_time=(T0 + timedelta(minutes=end_min)).isoformat(), outcome="success")
    data.update(kw)
    kind = "allocation.ended" if end_min is not None else "allocation.running"
    return _env(
        kind, T0 + timedelta(minutes=start_min), data, data["scheduler"], job, attempt, node, data.get("uid"), end_min
    )


def _write(wh: AttributionWarehouse, events: list[ev.Envelope]) -> None:
    msgs = [Message("scheduler.allocations", 0, i, e.to_bytes()) for i, e in enumerate(events)]
    for i in range(0, len(msgs), 2000):
        write_batch(wh, msgs[i : i + 2000], publish_dead_letters=lambda letters: None)


def _step(wh: AttributionWarehouse, settings: Settings) -> None:
    time.sleep(step.IDLE_FLUSH_S + 0.2)  # bounded input: the idle flush closes every window
    step.run_step(wh, settings, lambda cluster, node: True)


def _facts(wh: AttributionWarehouse) -> list[tuple[Any, ...]]:
    rows = wh.client.query(
        "SELECT node, window_start, gpu_uuid, kind, job_id, attempt, gpu_seconds FROM current_facts"
    ).result_rows
    return [tuple(r) for r in rows]


def test_capacity_is_the_physical_gpus_in_every_window(
    warehouse: AttributionWarehouse, isolated_settings: Settings
) -> None:
    fell = T0 + timedelta(minutes=30)
    events = [
        *_samples("n1", {"GPU-10": 0, "GPU-11": 1}, {"GPU-11": (fell, 79)}),
        *_samples("n2", {"GPU-20": 0, "GPU-21": 1}, {}),
        _env("node.state", T0, {"node": "n2", "state": "up", "gpus": 2}, "slurm", "n2"),
        _env(
            "node.state",
            T0 + timedelta(minutes=60),
            {"node": "n2", "state": "drained", "reason": "maint"},
            "slurm",
            "n2",
        ),
        _env("node.state", T0 + timedelta(minutes=90), {"node": "n2", "state": "up", "gpus": 2}, "slurm", "n2"),
        _alloc("77", 1, "n1", 0),  # requeued: its end record never arrives
        # two pods on GPU-10 (conflicting scheduler data), then a re-created pod of the same name
        _alloc("ns/a", 1, "n2", 150, 170, scheduler="kubernetes", device_ids=["GPU-20"], uid="a1"),
        _alloc("ns/b", 1, "n2", 150, 170, scheduler="kubernetes", device_ids=["GPU-20"], uid="b1"),
        _alloc("db/db-0", 1, "n2", 100, 110, scheduler="kubernetes", device_ids=["GPU-20"], uid="u1"),
        _alloc("db/db-0", 1, "n2", 120, 130, scheduler="kubernetes", device_ids=["GPU-20"], uid="u2"),
    ]
    _write(warehouse, events)
    _step(warehouse, isolated_settings)
    before = sum(r[6] for r in _facts(warehouse) if r[4] == "77")
    assert before == pytest.approx(HOURS * 3600.0)  # attempt 1 looks running to the end
    # attempt 2 starts on the other node, after attempt 1's windows were written
    _write(warehouse, [_alloc("77", 2, "n2", 120)])
    _step(warehouse, isolated_settings)

    facts = _facts(warehouse)
    windows = warehouse.client.query(
        "SELECT node, window_start, capacity_seconds, physical_gpus FROM fact_windows FINAL"
    ).result_rows
    assert len(windows) == 2 * HOURS * 60
    assert all(r[3] == 2 and r[2] == pytest.approx(120.0, abs=1e-6) for r in windows), [
        r for r in windows if r[3] != 2 or abs(r[2] - 120) > 1e-6
    ][:3]

    by: dict[tuple[str, str, str], float] = defaultdict(float)
    for node, _, uuid, kind, job, attempt, seconds in facts:
        by[(node, kind, f"{job}#{attempt}" if job else uuid)] += seconds
    # GPU-11 fell off the bus at +30 min: unavailable from then on, hours after its last sample
    assert by[("n1", "unavailable", "GPU-11")] == pytest.approx((HOURS * 60 - 30) * 60.0)
    # attempt 1 ends where attempt 2 started (+120 min); it held one GPU of n1 until then
    assert by[("n1", "allocated", "77#1")] == pytest.approx(120 * 60.0)
    assert by[("n2", "allocated", "77#2")] == pytest.approx(60 * 60.0)
    # n2 drained from +60 to +90 min: what nobody held was unavailable
    assert by[("n2", "unavailable", "GPU-20")] + by[("n2", "unavailable", "GPU-21")] == pytest.approx(2 * 30 * 60.0)
    # the re-created pod of the same name and attempt number is another placement
    assert by[("n2", "allocated", "db/db-0#1")] == pytest.approx(20 * 60.0)

    attempts = warehouse.client.query(
        "SELECT attempt, outcome, failure_reason, end_time, lost_gpu_seconds FROM job_attempts FINAL "
        "WHERE job_id = '77' ORDER BY attempt"
    ).result_rows
    assert [(a, o, r) for a, o, r, _, _ in attempts] == [(1, "failure", "unknown"), (2, "running", "")]
    assert attempts[0][3].replace(tzinfo=UTC) == T0 + timedelta(minutes=120)

    conflicts = warehouse.client.query(
        "SELECT gpu_uuid, sum(claimed_seconds - capacity_seconds), any(owners) FROM attribution_conflicts FINAL "
        "GROUP BY gpu_uuid"
    ).result_rows
    assert conflicts == [("GPU-20", pytest.approx(20 * 60.0), ["kubernetes:ns/a#1", "kubernetes:ns/b#1"])]


def test_a_failure_with_a_fatal_xid_at_its_end_is_a_gpu_error(
    warehouse: AttributionWarehouse, isolated_settings: Settings
) -> None:
    def failed(job: str, node: str, end_min: int) -> ev.Envelope:
        return _alloc(
            job,
            1,
            node,
            0,
            end_min,
            outcome="failure",
            failure_reason="app_error",
            scheduler_state="FAILED",
            exit_code=1,
        )

    def xid_sample(node: str, minute: float, xid: int) -> ev.Envelope:
        t = T0 + timedelta(minutes=minute)
        return _env(
            "gpu.sample",
            t,
            {
                "node": node,
                "interval_s": 30,
                "gpus": [{"uuid": f"GPU-{node}", "index": 0, "model": H100, "gr_engine_active": 0.0, "xid": xid}],
            },
            "dcgm",
            node,
        )

    _write(warehouse, [failed("81", "x1", 60), failed("82", "x2", 60), failed("83", "x3", 60), failed("84", "x4", 60)])
    # samples arrive after the attempts were recorded; only x1 and x2 show a fatal XID near the end
    _write(
        warehouse,
        [xid_sample("x1", 58, 48), xid_sample("x2", 60.5, 79), xid_sample("x3", 40, 48), xid_sample("x4", 59, 13)],
    )
    # x5: the fatal XID is on the node's other GPU, not the one the attempt held
    _write(
        warehouse,
        [
            _alloc("85", 1, "x5", 0, 60, outcome="failure", failure_reason="app_error", device_ids=["GPU-x5"]),
            xid_sample("x5", 59, 0),
            _env(
                "gpu.sample",
                T0 + timedelta(minutes=59),
                {
                    "node": "x5",
                    "interval_s": 30,
                    "gpus": [{"uuid": "GPU-x5b", "index": 1, "model": H100, "gr_engine_active": 0.0, "xid": 79}],
                },
                "dcgm",
                "x5b",
            ),
        ],
    )
    _step(warehouse, isolated_settings)  # the facts say which GPUs each attempt held
    got: dict[str, str] = {
        str(k): str(v)
        for k, v in warehouse.client.query("SELECT job_id, failure_reason FROM attempt_outcomes").result_rows
    }
    assert got == {"81": "gpu_error", "82": "node_failure", "83": "app_error", "84": "app_error", "85": "app_error"}
    scheduler = {
        str(k): str(v)
        for k, v in warehouse.client.query("SELECT job_id, scheduler_reason FROM attempt_outcomes").result_rows
    }
    assert set(scheduler.values()) == {"app_error"}  # the scheduler's own words are kept beside it


def test_conflicts_and_busy_without_an_owner_reach_the_reports(
    warehouse: AttributionWarehouse, isolated_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from typer.testing import CliRunner

    from gpuledger.cli.report_cmd import report_app
    from infra.services import status
    from pipelines.settings import reset_settings
    from sql import load_query

    # GPU-30 busy at 0.5 the whole time; nobody holds it until two pods claim it at +60..+90 min
    rows = _samples("n3", {"GPU-30": 0}, {})
    _write(
        warehouse,
        [
            *rows,
            _alloc("ns/a", 1, "n3", 60, 90, scheduler="kubernetes", device_ids=["GPU-30"], uid="a"),
            _alloc("ns/b", 1, "n3", 60, 90, scheduler="kubernetes", device_ids=["GPU-30"], uid="b"),
        ],
    )
    _step(warehouse, isolated_settings)
    end = T0 + timedelta(hours=HOURS)
    got = {
        r[0]: r
        for r in warehouse.client.query(
            load_query("gpu_hours"), parameters={"by": "team", "start": T0, "end": end, "cluster": ""}
        ).result_rows
    }
    assert got["__unallocated__"][2] == pytest.approx((HOURS - 0.5) * 0.5)  # busy without an owner
    idle = warehouse.client.query(
        load_query("idle"), parameters={"by": "node", "start": T0, "end": end, "cluster": ""}
    ).named_results()
    assert [round(r["unowned_busy_gpu_hours"], 6) for r in idle] == [round((HOURS - 0.5) * 0.5, 6)]

    monkeypatch.setenv("GPULEDGER_CLICKHOUSE_URL", isolated_settings.clickhouse_endpoint_url)
    monkeypatch.setenv("GPULEDGER_CLICKHOUSE_DATABASE", isolated_settings.clickhouse_database)
    reset_settings()
    res = CliRunner().invoke(
        report_app, ["conflicts", "--from", T0.isoformat(), "--to", end.isoformat(), "--format", "json"]
    )
    assert res.exit_code == 0, res.output
    [row] = json.loads(res.output)
    assert (row["node"], row["gpu"], row["windows"]) == ("n3", "GPU-30", 30)
    assert row["excess_gpu_hours"] == pytest.approx(0.5)
    assert row["owners"] == ["kubernetes:ns/a#1", "kubernetes:ns/b#1"]
    assert status(isolated_settings)["conflicts"] == {"c1": 30}


def test_a_gpu_that_fell_off_between_its_groups_look_back_and_its_own_stays_unavailable(
    warehouse: AttributionWarehouse, isolated_settings: Settings
) -> None:
    """A node computed in a group with a node far behind it: the group's look-back starts hours before
    the node's own. The fatal XID in between (the GPU then fell silent) is neither in the node's own
    look-back samples nor in the inventory's state before the group's look-back; it must still count."""
    fell = T0 + timedelta(minutes=70)
    b = _samples("b", {"GPU-b0": 0, "GPU-b1": 1}, {"GPU-b1": (fell, 79)})
    first_hour = [e for e in b if e.time < T0 + timedelta(minutes=60)]
    _write(warehouse, first_hour)
    _step(warehouse, isolated_settings)  # b is closed at +60 min
    # then node a's whole backlog arrives, with the rest of b's: one group, a from T0, b from +60 min
    _write(warehouse, [*_samples("a", {"GPU-a0": 0}, {}), *[e for e in b if e not in first_hour]])
    _step(warehouse, isolated_settings)

    by: dict[tuple[str, str], float] = defaultdict(float)
    for node, _, uuid, kind, _, _, seconds in _facts(warehouse):
        if node == "b":
            by[(uuid, kind)] += seconds
    assert by[("GPU-b1", "unallocated")] == pytest.approx(70 * 60.0)
    assert by[("GPU-b1", "unavailable")] == pytest.approx((HOURS * 60 - 70) * 60.0)
