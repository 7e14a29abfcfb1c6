"""Wire bytes (or a collector's dict) to the typed envelope: the one decode path of every message.

``gpu.sample`` in schema version 2 (columns) is checked on its arrays by :mod:`pipelines.gpu_columns`;
every other message by its pydantic model in :mod:`pipelines.events`. Both raise
:class:`~pipelines.events.InvalidEvent` with a one-line reason.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import ValidationError

from pipelines import gpu_columns
from pipelines.events import ANY_EVENT, Envelope, InvalidEvent, one_line


def decode(raw: bytes | str) -> Envelope:
    """Validate raw wire bytes into the typed envelope; raises :class:`InvalidEvent`.

    ``gpu.sample`` in schema version 2 (columns) is checked on its arrays
    (:func:`pipelines.gpu_columns.decode_columns`); every other message by its pydantic model."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        obj = None  # the model's own error says where the JSON breaks
    if gpu_columns.is_columns(obj):
        return gpu_columns.decode_columns(obj)
    try:
        result: Envelope = ANY_EVENT.validate_json(raw)
    except ValidationError as exc:
        raise InvalidEvent(one_line(exc)) from exc
    return result


def validate(obj: dict[str, Any]) -> Envelope:
    """Validate an already-parsed object (collectors build dicts) into its envelope."""
    if gpu_columns.is_columns(obj):
        return gpu_columns.decode_columns(orjson.loads(orjson.dumps(obj, option=orjson.OPT_UTC_Z)))
    try:
        result: Envelope = ANY_EVENT.validate_python(obj)
    except ValidationError as exc:
        raise InvalidEvent(one_line(exc)) from exc
    return result
