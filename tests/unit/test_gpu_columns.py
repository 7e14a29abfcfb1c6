"""``gpu.sample`` schema version 2 (columns): the id and rows of version 1, checked on arrays, garbage dead-lettered."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines import events as ev
from pipelines import wire
from pipelines.gpu_columns import GpuColumnsEvent, from_v1
from streams.ingest.rows import SAMPLE_COLUMNS, as_rows, rows_for
from streams.ingest.sink import Message, decode_batch

T0 = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
GPUS: list[dict[str, Any]] = [
    {
        "uuid": "GPU-a",
        "index": 0,
        "model": "NVIDIA H100 80GB HBM3",
        "gr_engine_active": 0.4,
        "gpu_util": 0.5,
        "fb_used_mib": 1024.0,
        "power_w": 310.5,
        "energy_mj": 1e9,
        "temperature_c": 41.0,
        "xid": 0,
        "namespace": "ml",
        "pod": "train-0",
        "container": "trainer",
        "holders": ["ml/train-0", "ml/train-1"],
    },
    {
        "uuid": "GPU-b",
        "index": 1,
        "model": "NVIDIA H100 80GB HBM3",
        "mig_profile": "3g.40gb",
        "mig_instance": 2,
        "gpu_util": None,
        "sm_active": 0.25,
        "power_w": 0.0,
        "hpc_job": "1234_7",
        "xid": 79,
    },
    {"uuid": "GPU-c", "index": None, "model": None},
]


def v1_message(gpus: list[dict[str, Any]] = GPUS, node: str = "gpu001") -> dict[str, Any]:
    return {
        "id": ev.event_id("gpu.sample", "c1", node, T0),
        "source": "dcgm",
        "type": "gpu.sample",
        "schema_version": 1,
        "time": "2026-11-02T10:00:00Z",
        "cluster": "c1",
        "data": {"node": node, "interval_s": 30.0, "gpus": gpus},
    }


def v2_message() -> dict[str, Any]:
    v2: dict[str, Any] = orjson.loads(from_v1(wire.decode(orjson.dumps(v1_message()))).to_bytes())  # type: ignore[arg-type]
    return v2


def test_version_2_of_a_scrape_has_the_id_rows_and_samples_of_version_1() -> None:
    v1 = wire.decode(orjson.dumps(v1_message()))
    raw2 = from_v1(v1).to_bytes()  # type: ignore[arg-type]
    v2 = wire.decode(raw2)
    assert isinstance(v2, GpuColumnsEvent) and not isinstance(v1, GpuColumnsEvent)
    assert orjson.loads(raw2)["schema_version"] == 2 and "gpus" not in orjson.loads(raw2)["data"]
    assert v2.id == v1.id == ev.event_id("gpu.sample", "c1", "gpu001", T0)
    assert ev.message_key(v2) == ev.message_key(v1) == b"c1/gpu001"
    assert v2.data.gpus == v1.data.gpus
    rows1 = as_rows(rows_for([v1])[0]["gpu_samples"])
    rows2 = as_rows(rows_for([v2])[0]["gpu_samples"])
    assert rows1 == rows2 and len(rows1) == 3
    assert tuple(rows1[0]) == SAMPLE_COLUMNS
    assert rows1[0]["utilization"] == 0.4 and rows1[1]["utilization"] is None
    assert rows1[1]["mig_profile"] == "3g.40gb" and rows1[1]["xid"] == 79 and rows1[2]["gpu_model"] == "unknown"


def test_a_v1_and_a_v2_message_of_one_scrape_dedupe_to_one_event() -> None:
    raw1 = orjson.dumps(v1_message())
    raw2 = orjson.dumps(v2_message())
    events, dead = decode_batch([Message("gpu.metrics", 0, 0, raw2), Message("gpu.metrics", 0, 1, raw1)])
    assert dead == [] and len(events) == 1 and isinstance(events[0], GpuColumnsEvent)


def test_absent_arrays_mean_all_missing() -> None:
    msg = v2_message()
    msg["data"] = {"node": "gpu001", "interval_s": None, "uuid": ["GPU-a", "GPU-b"]}
    event = wire.decode(orjson.dumps(msg))
    assert [g.uuid for g in event.data.gpus] == ["GPU-a", "GPU-b"]
    assert all(g.power_w is None and g.holders == [] for g in event.data.gpus)


BAD = [
    (lambda d: d.update(power_w=[1.0]), "data.power_w: an array of 3 values"),
    (lambda d: d.update(gr_engine_active=[0.4, 1.5, None]), "data.gr_engine_active: 1.5 is above 1"),
    (lambda d: d.update(fb_used_mib=[-1.0, None, None]), "data.fb_used_mib: -1.0 is below 0"),
    (lambda d: d.update(index=[0, "1", None]), "data.index: every value must be an integer or null"),
    (lambda d: d.update(xid=[0, True, None]), "data.xid: every value must be an integer or null"),
    (lambda d: d.update(mig_instance=[0, 256, None]), "data.mig_instance: 256 is above 255"),
    (lambda d: d.update(uuid=["GPU-a", None, "GPU-c"]), "data.uuid: every value must be a string"),
    (lambda d: d.update(holders=[["a/b"], [1], []]), "data.holders: every value must be an array of strings"),
    (lambda d: d.update(gpus=[]), "data.gpus: extra inputs are not permitted"),
    (lambda d: d.update(node=""), "data.node: a non-empty string is required"),
    (lambda d: d.update(interval_s=0), "data.interval_s: a positive number or null is required"),
    (lambda d: d.pop("uuid"), "data.uuid: an array of strings is required"),
]


@pytest.mark.parametrize(("spoil", "reason"), BAD)
def test_bad_arrays_are_dead_letters_with_a_one_line_reason(spoil: Any, reason: str) -> None:
    msg = v2_message()
    spoil(msg["data"])
    events, dead = decode_batch([Message("gpu.metrics", 3, 9, orjson.dumps(msg))])
    assert events == [] and len(dead) == 1
    assert dead[0].reason.startswith(reason) and "\n" not in dead[0].reason
    assert dead[0].origin == "gpu.metrics:3:9" and orjson.loads(dead[0].raw) == msg


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("time", "2026-11-02T10:00:00", "time: an offset is required"),
        ("time", 5, "time: an RFC 3339 time"),
        ("id", "short", "id: a string of 8 to 128"),
        ("source", "nvidia", "source: not one of the sources"),
        ("extra", 1, "extra: extra inputs are not permitted"),
    ],
)
def test_bad_envelopes_of_version_2_are_invalid(field: str, value: Any, reason: str) -> None:
    msg = v2_message()
    msg[field] = value
    with pytest.raises(ev.InvalidEvent, match=reason):
        wire.decode(orjson.dumps(msg))


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
FIELDS = st.sampled_from(
    [
        "uuid",
        "index",
        "model",
        "mig_instance",
        "gr_engine_active",
        "gpu_util",
        "power_w",
        "energy_mj",
        "temperature_c",
        "xid",
        "pod",
        "holders",
        "node",
        "interval_s",
    ]
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(changes=st.dictionaries(FIELDS, JSON, min_size=1, max_size=4))
def test_garbage_arrays_are_dead_letters_or_valid_events_never_a_crash(changes: dict[str, Any]) -> None:
    msg = v2_message()
    msg["data"].update(changes)
    events, dead = decode_batch([Message("gpu.metrics", 0, 0, json.dumps(msg).encode())])  # big ints too
    assert len(events) + len(dead) == 1
    if events:  # whatever is accepted is a whole, insertable scrape
        table = rows_for(events)[0]["gpu_samples"]
        assert table.num_rows == len(events[0].data.gpus)  # type: ignore[union-attr]
    else:
        assert dead[0].reason and "\n" not in dead[0].reason


@settings(max_examples=200, deadline=None)
@given(
    raw=st.binary(max_size=200)
    | JSON.map(lambda obj: json.dumps({"type": "gpu.sample", "schema_version": 2, "data": obj}).encode())
)
def test_garbage_bytes_are_dead_letters(raw: bytes) -> None:
    events, dead = decode_batch([Message("gpu.metrics", 0, 0, raw)])
    assert events == [] and len(dead) == 1 and "\n" not in dead[0].reason
