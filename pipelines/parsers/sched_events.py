"""Helpers shared by the scheduler parsers (Slurm, Kubernetes): envelopes, times, raw text.

Allocation events are *state-carrying*: every placement event holds the whole state of the
placement (owner, GPUs, times, outcome), so downstream keeps the latest per placement by
(type order pending < running < ended, event time) and never needs to merge partial updates.

Ids come from the natural key ``(type, cluster, scheduler, job_id, attempt, node)``: the same
input parsed twice gives the same ids, and a placement seen running in one poll and ended in a
later one gives two distinct ids (one per type).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import orjson

from pipelines.events import Envelope, InvalidEvent, event_id
from pipelines.parsers.base import NotThisFormat, ParseResult
from pipelines.times import time_hint
from pipelines.wire import validate

# What a malformed record can raise while a parser picks it apart; caught per record and turned
# into a dead letter, so one bad record never stops the rest of the file.
RECORD_ERRORS: tuple[type[Exception], ...] = (
    ValueError,
    TypeError,
    KeyError,
    AttributeError,
    IndexError,
    ArithmeticError,
    RecursionError,
)

TYPE_ORDER = {"allocation.pending": 0, "allocation.running": 1, "allocation.ended": 2}


def decode_text(data: bytes | str, what: str) -> str:
    """The input as text; undecodable bytes mean the input is not ``what`` at all."""
    if isinstance(data, str):
        return data
    if not isinstance(data, bytes | bytearray | memoryview):
        raise NotThisFormat(f"not {what}: input is {type(data).__name__}, not text")
    try:
        return bytes(data).decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise NotThisFormat(f"not {what}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def as_dict(value: Any) -> dict[str, Any]:
    """The value if it is a JSON object, else an empty one (for optional nested objects)."""
    return value if isinstance(value, dict) else {}


def raw_text(obj: object) -> str:
    """A record as one line of JSON for a dead letter (never fails)."""
    if isinstance(obj, str):
        return obj
    try:
        return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS, default=str).decode()
    except (TypeError, ValueError, orjson.JSONEncodeError):
        return repr(obj)


def hint_time(hints: Mapping[str, Any], name: str = "observed_at") -> datetime | None:
    """The time hint ``name``, else ``time`` (what ``gpuledger ingest --time`` passes), read by
    ``pipelines.times.time_hint``."""
    value = hints.get(name)
    if value is None:
        value = hints.get("time")
    return time_hint(value)


def allocation_envelope(
    *, source: str, event_type: str, cluster: str, time: datetime, data: dict[str, Any]
) -> dict[str, Any]:
    """An allocation envelope (unvalidated dict) with its deterministic id; a pod's uid is part of it,
    so a pod re-created under the same name never shares an id with its predecessor."""
    key = [event_type, cluster, data["scheduler"], data["job_id"], data.get("attempt", 1), data.get("node")]
    if data.get("uid"):
        key.append(data["uid"])
    ident = event_id(*key)
    return {"id": ident, "source": source, "type": event_type, "time": time, "cluster": cluster, "data": data}


def node_state_envelope(
    *,
    source: str,
    cluster: str,
    node: str,
    state: str,
    time: datetime,
    reason: str | None,
    gpus: int | None = None,
    gpu_model: str | None = None,
) -> dict[str, Any]:
    """A ``node.state`` envelope (with the node's GPU count when known); the id is keyed by node,
    state and time."""
    data: dict[str, Any] = {"node": node, "state": state, "reason": reason}
    if gpus is not None:
        data.update(gpus=gpus, gpu_model=gpu_model)
    return {
        "id": event_id("node.state", cluster, node, state, time),
        "source": source,
        "type": "node.state",
        "time": time,
        "cluster": cluster,
        "data": data,
    }


def add_record_events(
    result: ParseResult, objs: list[dict[str, Any]], *, topic: str, source: str, raw: str, origin: str | None
) -> None:
    """Validate all events of one input record; if any is invalid the whole record is dead-lettered
    (one dead letter with the first reason), so a record never lands half-applied."""
    valid: list[Envelope] = []
    for obj in objs:
        try:
            valid.append(validate(obj))
        except InvalidEvent as exc:
            reason = f"{obj.get('type')}: {exc}"
            result.reject(topic=topic, source=source, reason=reason, raw=raw, origin=origin)
            return
    result.events.extend(valid)
