"""``gpu.sample`` schema version 3 (several scrapes of one node): the rows and ids of its version 2
scrapes, checked on arrays, dead-lettered whole, its newest scrape checked against the clock."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import orjson
import pytest

from pipelines import events as ev
from pipelines import wire
from pipelines.gpu_columns import MAX_SPAN_US, GpuColumnsEvent, from_v1, pack, scrape_id
from streams.ingest.rows import as_rows, rows_for
from streams.ingest.sink import Message, decode_batch
from tests.unit.test_gpu_columns import GPUS, T0, v1_message


def scrape(minutes: float, gpus: list[dict[str, Any]] = GPUS, node: str = "gpu001") -> GpuColumnsEvent:
    """A version 2 scrape of ``node`` ``minutes`` after T0 (30 s apart: ``minutes`` may be a half)."""
    raw = v1_message(gpus, node)
    when = T0 + timedelta(minutes=minutes)
    raw["time"] = when.isoformat().replace("+00:00", "Z")
    raw["id"] = ev.event_id("gpu.sample", "c1", node, when)
    event = from_v1(wire.decode(orjson.dumps(raw)))  # type: ignore[arg-type]
    return event


def scrapes() -> list[GpuColumnsEvent]:
    # the second scrape lost a GPU: a message's scrapes need not have the same rows
    return [scrape(0), scrape(1, GPUS[:2]), scrape(2)]


def v3_message() -> dict[str, Any]:
    out: dict[str, Any] = orjson.loads(pack(scrapes()).to_bytes())
    return out


def test_a_message_of_three_scrapes_gives_back_the_three_scrapes() -> None:
    v2 = scrapes()
    raw = pack(list(reversed(v2))).to_bytes()
    wire_form = orjson.loads(raw)
    assert wire_form["schema_version"] == 3 and wire_form["time"] == "2026-11-02T10:00:00Z"
    assert wire_form["data"]["offset_us"] == [0] * 3 + [60_000_000] * 2 + [120_000_000] * 3
    event = wire.decode(raw)
    assert isinstance(event, GpuColumnsEvent) and event.schema_version == 3
    assert event.time == T0 and event.last_time == T0 + timedelta(minutes=2)
    assert event.id == ev.event_id("gpu.sample", "c1", "gpu001", T0, T0 + timedelta(minutes=2), 3)
    assert ev.message_key(event) == b"c1/gpu001"
    back = event.scrapes()
    assert [e.id for e in back] == [e.id for e in v2] == [scrape_id("c1", "gpu001", e.time) for e in v2]
    assert [e.time for e in back] == [e.time for e in v2]
    assert [e.data.gpus for e in back] == [e.data.gpus for e in v2]
    assert [orjson.loads(e.to_bytes()) for e in back] == [orjson.loads(e.to_bytes()) for e in v2]


def test_the_rows_and_activity_of_a_message_are_those_of_its_scrapes() -> None:
    v2 = scrapes()
    v3 = wire.decode(orjson.dumps(v3_message()))
    tables3, activity3 = rows_for([v3])
    tables2, activity2 = rows_for(list(v2))
    rows3, rows2 = as_rows(tables3["gpu_samples"]), as_rows(tables2["gpu_samples"])
    assert len(rows3) == 8 and rows3 == rows2
    assert {r["event_id"] for r in rows3} == {e.id for e in v2}  # each row keeps its scrape's id
    assert activity3 == activity2
    (span,) = activity3.values()
    assert (span.min_time, span.max_time) == (T0, T0 + timedelta(minutes=2))


def test_a_message_and_its_scrapes_in_one_batch_give_the_same_rows_twice_over() -> None:
    # the batch keeps both (ids differ); the warehouse keeps one row per (node, time, GPU)
    both = [
        Message("gpu.metrics", 0, i, raw)
        for i, raw in enumerate([orjson.dumps(v3_message()), scrape(1, GPUS[:2]).to_bytes()])
    ]
    good, bad = decode_batch(both)
    assert not bad and len(good) == 2
    rows = as_rows(rows_for(good)[0]["gpu_samples"])
    keys = [(r["time"], r["uuid"]) for r in rows]
    assert len(keys) == 10 and len(set(keys)) == 8


def _with(path: str, value: Any) -> bytes:
    message = v3_message()
    if value is ...:
        del message["data"][path]
    else:
        message["data"][path] = value
    return orjson.dumps(message)


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("offset_us", ..., "data.offset_us: an array of 8 integers (one per uuid) is required"),
        ("offset_us", [0] * 7, "data.offset_us: an array of 8 integers (one per uuid) is required"),
        ("offset_us", "0", "data.offset_us: an array of 8 integers (one per uuid) is required"),
        ("offset_us", [0] * 7 + [-1], "data.offset_us: every value must be an integer from 0 to 86400000000"),
        ("offset_us", [0] * 7 + [1.5], "data.offset_us: every value must be an integer from 0 to 86400000000"),
        ("offset_us", [0] * 7 + [None], "data.offset_us: every value must be an integer from 0 to 86400000000"),
        (
            "offset_us",
            [0] * 7 + [MAX_SPAN_US + 1],
            "data.offset_us: every value must be an integer from 0 to 86400000000",
        ),
        ("offset_us", [5] * 8, "data.offset_us: the earliest scrape is the event's time (offset 0)"),
        ("power_w", [1.0] * 7 + [-2.0], "data.power_w: -2.0 is below 0"),
    ],
)
def test_a_bad_message_is_one_dead_letter_with_a_one_line_reason(field: str, value: Any, reason: str) -> None:
    raw = _with(field, value)
    good, bad = decode_batch([Message("gpu.metrics", 3, 9, raw)])
    assert not good
    (letter,) = bad
    assert letter.reason == reason and "\n" not in letter.reason
    assert letter.raw == raw.decode() and letter.origin == "gpu.metrics:3:9"  # the whole message, nothing lost


def test_offsets_belong_to_version_3_only() -> None:
    v2 = orjson.loads(scrape(0).to_bytes())
    v2["data"]["offset_us"] = [0, 0, 0]
    with pytest.raises(ev.InvalidEvent, match="data.offset_us: extra inputs are not permitted"):
        wire.decode(orjson.dumps(v2))


def test_a_message_whose_newest_scrape_is_in_the_future_is_a_dead_letter() -> None:
    raw = orjson.dumps(v3_message())
    # the first scrape is before the limit, the last one after it
    limit = T0 + timedelta(minutes=1)
    good, bad = decode_batch([Message("gpu.metrics", 0, 0, raw)], not_after=limit)
    assert not good
    assert bad[0].reason == (
        "time 2026-11-02T10:02:00Z is in the future (later than 2026-11-02T10:01:00Z, now + the tolerance)"
    )
    good, bad = decode_batch([Message("gpu.metrics", 0, 0, raw)], not_after=T0 + timedelta(minutes=2))
    assert len(good) == 1 and not bad


def test_only_scrapes_of_one_node_and_interval_pack_together() -> None:
    with pytest.raises(ValueError, match="one node"):
        pack([scrape(0), scrape(1, node="gpu002")])
    with pytest.raises(ValueError, match="nothing"):
        pack([])
