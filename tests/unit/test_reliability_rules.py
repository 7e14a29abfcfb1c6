"""Which warehouse errors wait, which stop a worker and which become dead letters; quarantined
nodes in the planner; events from the future."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError, ProgrammingError

from pipelines import events as ev
from pipelines.settings import Settings
from sql.errors import describe, is_schema_error, is_transient
from streams.attribution.step import QUARANTINE_RETRY_S, plans
from streams.attribution.warehouse import Quarantine
from streams.ingest.rows import allocation_change
from streams.ingest.sink import Message, decode_batch


@pytest.mark.parametrize(
    ("exc", "transient", "schema"),
    [
        (OperationalError("Network Error: connection refused"), True, False),
        (DatabaseError("Received ClickHouse exception, code: 202", code=202), True, False),
        (DatabaseError("Received ClickHouse exception, code: 241", code=241), True, False),
        (DatabaseError("Received ClickHouse exception, code: 159", code=159), True, False),
        (DatabaseError("Received ClickHouse exception, code: 242", code=242), True, False),
        (DatabaseError("HTTP driver received HTTP status 503, server response: Service Unavailable"), True, False),
        (DatabaseError("HTTP driver received HTTP status 429"), True, False),
        (DatabaseError("HTTP driver received HTTP status 400"), False, False),
        (DatabaseError("Received ClickHouse exception, code: 60 (UNKNOWN_TABLE)", code=60), False, True),
        (DatabaseError("Received ClickHouse exception, code: 516", code=516), False, True),
        (
            DatabaseError("Received ClickHouse exception, code: 27 (CANNOT_PARSE_INPUT_ASSERTION_FAILED)", code=27),
            False,
            False,
        ),
        (ProgrammingError("bad column data"), False, False),
        (ValueError("a defect"), False, False),
    ],
)
def test_errors_are_classified_by_clickhouse_code(exc: Exception, transient: bool, schema: bool) -> None:
    assert is_transient(exc) is transient
    assert is_schema_error(exc) is schema
    assert "\n" not in describe(exc)


def test_describe_names_the_code() -> None:
    assert (
        describe(DatabaseError("Received ClickHouse exception, code: 202\nmore", code=202))
        == "code 202: Received ClickHouse exception, code: 202"
    )


def _pending(node: str, last_seq: int) -> tuple[object, ...]:
    t = datetime(2026, 11, 2, tzinfo=UTC)
    return ("c", node, t, t + timedelta(hours=1), last_seq, 1, t, None, 0)


def test_a_quarantined_node_is_tried_again_only_after_newer_input_and_a_pause() -> None:
    settings = Settings(window_seconds=60)
    now = int(datetime(2026, 11, 3, tzinfo=UTC).timestamp()) * 10**9
    failed = int(now - QUARANTINE_RETRY_S * 10**9 / 2)
    held = {
        ("c", "bad"): Quarantine(
            "c", "bad", "stored allocation rejected", now - 60 * 10**9, datetime.now(UTC), tried_seq=failed
        )
    }
    rows = [_pending("good", now - 30 * 10**9), _pending("bad", now - 60 * 10**9)]
    assert [p.node for p in plans(rows, settings, now, lambda c, n: True, held)] == ["good"]  # no newer input
    rows = [_pending("bad", now - 59 * 10**9)]
    assert plans(rows, settings, now, lambda c, n: True, held) == []  # newer input, but it just failed
    later = now + int(QUARANTINE_RETRY_S * 10**9)
    assert [(p.node, p.input_seq) for p in plans(rows, settings, later, lambda c, n: True, held)] == [
        ("bad", now - 59 * 10**9)
    ]


def _sample(at: datetime) -> bytes:
    return ev.GpuMetricsEvent.model_validate(
        {
            "id": f"sample-{at:%Y%m%d%H%M%S}",
            "source": "dcgm",
            "time": at,
            "cluster": "c",
            "data": {"node": "n1", "gpus": []},
        }
    ).to_bytes()


def test_events_after_now_plus_the_tolerance_are_dead_letters() -> None:
    now = datetime.now(UTC)
    messages = [
        Message("gpu.metrics", 0, i, _sample(t))
        for i, t in enumerate([now - timedelta(minutes=1), now + timedelta(minutes=4), now + timedelta(days=1)])
    ]
    events, dead = decode_batch(messages, not_after=now + timedelta(minutes=5))
    assert len(events) == 2
    assert [d.origin for d in dead] == ["gpu.metrics:0:2"]
    assert "time" in dead[0].reason and "is in the future" in dead[0].reason
    ended = ev.AllocationEvent.model_validate(
        {
            "id": "alloc-future-end",
            "source": "slurm",
            "type": "allocation.ended",
            "time": now,
            "cluster": "c",
            "data": {
                "scheduler": "slurm",
                "job_id": "1",
                "node": "n1",
                "state": "ended",
                "start_time": now,
                "end_time": now + timedelta(hours=2),
                "outcome": "success",
            },
        }
    ).to_bytes()
    events, dead = decode_batch([Message("scheduler.allocations", 0, 0, ended)], now + timedelta(minutes=5))
    assert events == [] and "end_time" in dead[0].reason


def _event(state: str, at: datetime, end: datetime | None = None, **data: object) -> ev.AllocationEvent:
    t0 = datetime(2026, 11, 2, tzinfo=UTC)
    payload: dict[str, object] = {
        "scheduler": "slurm",
        "job_id": "1",
        "node": "n1",
        "state": state,
        "start_time": t0,
        "gpus": [{"kind": "gpu", "count": 2}],
        **data,
    }
    if end is not None:
        payload.update(end_time=end, outcome="success")
    return ev.AllocationEvent.model_validate(
        {
            "id": f"e-{state}-{at:%H%M}",
            "source": "slurm",
            "type": f"allocation.{state}",
            "time": at,
            "cluster": "c",
            "data": payload,
        }
    )


def _stored(e: ev.AllocationEvent) -> tuple[tuple[int, datetime], dict[str, object]]:
    return (2 if e.data.state == "ended" else 1, e.time), e.data.model_dump(mode="json")


def test_an_end_changes_the_windows_from_the_end_on_and_a_repeat_changes_nothing() -> None:
    t0 = datetime(2026, 11, 2, tzinfo=UTC)
    running = _event("running", t0)
    assert allocation_change(None, running) == (t0, t0)  # new: its whole range so far
    again = _event("running", t0 + timedelta(days=6))
    assert allocation_change(_stored(running), again) is None  # the same snapshot, re-published
    end = t0 + timedelta(days=7)
    ended = _event("ended", end, end=end)
    assert allocation_change(_stored(running), ended) == (end, end)
    assert allocation_change(_stored(ended), again) is None  # the end stays in force
    moved = _event("ended", end + timedelta(hours=1), end=end - timedelta(hours=3))
    assert allocation_change(_stored(ended), moved) == (end - timedelta(hours=3), end + timedelta(hours=1))
    relabelled = _event("running", t0 + timedelta(days=1), owner={"account": "other"})
    assert allocation_change(_stored(running), relabelled) == (t0, t0 + timedelta(days=1))  # owner: everything
