"""``gpu.sample`` schema version 2: one node scrape with its GPUs as arrays (see :mod:`pipelines.events`).

Wire form (UTF-8 JSON, the same envelope as every event)::

    {"id": "…", "source": "dcgm", "type": "gpu.sample", "schema_version": 2,
     "time": "2026-11-02T10:00:00Z", "cluster": "c1",
     "data": {"node": "gpu001", "interval_s": 30.0,
              "uuid": ["GPU-a", "GPU-b"], "index": [0, 1], "model": ["NVIDIA H100 80GB HBM3", …],
              "gr_engine_active": [0.5, null], "power_w": [310.0, 75.5], …,
              "holders": [["ns/a", "ns/b"], []]}}

* ``uuid`` is required and gives the row count n; every other field of :data:`FIELDS` is an array
  of n values (``null`` = missing) or absent (every value missing; ``holders``: every list empty).
  A field means what the same field of :class:`~pipelines.events.GpuSample` means, one row per
  GPU or MIG instance, in the same order.
* Checked per message on the arrays, not per sample: equal lengths, types (strings, integers,
  numbers, lists of strings), ratios 0–1, non-negative memory, power and energy, integer ranges of
  the warehouse columns. Anything else is :class:`~pipelines.events.InvalidEvent` with a one-line
  reason (a dead letter), never a crash.
* The id is the version 1 id (``event_id("gpu.sample", cluster, node, time)``): a scrape sent in
  either form deduplicates to one.

``gpu.sample`` schema version 3: several scrapes of one node in one message, the same arrays with
one more, ``offset_us``: each row's scrape time as whole microseconds after the envelope's
``time`` (the earliest scrape; 0 to ``MAX_SPAN_US``). A collector that has a node's history at
hand (a ``query_range`` answer) sends it this way: the per-message cost of the stream (the
consumer, the envelope, the checks) is paid once per message, not once per scrape. The rows are
those of the version 2 messages of the same scrapes (:meth:`GpuColumnsEvent.scrapes`), and so are
the warehouse rows, each with its scrape's version 2 id; the message's own id is
``event_id("gpu.sample", cluster, node, first time, last time, scrapes)``. A message is checked
and dead-lettered whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import chain
from typing import Any, Literal, TypeVar, cast, get_args

import orjson
from pydantic import ConfigDict

from pipelines.events import GpuMetricsData, GpuMetricsEvent, GpuSample, InvalidEvent, Source, event_id
from pipelines.times import MICROSECOND, MissingOffset, parse_rfc3339

COLUMNS_VERSION = 2
SCRAPES_VERSION = 3
MAX_SPAN_US = 86_400 * 1_000_000  # a version 3 message spans at most a day
RATIOS = ("gr_engine_active", "gpu_util", "sm_active", "tensor_active", "dram_active")
NON_NEGATIVE = ("fb_used_mib", "fb_free_mib", "power_w", "energy_mj")
FLOATS = (*RATIOS, *NON_NEGATIVE, "temperature_c")
INTS = {"index": 65535, "mig_instance": 255, "xid": 65535}  # upper bounds: the gpu_samples column types
assert INTS["index"] == INTS["xid"]  # checked as one group
STRINGS = ("model", "mig_profile", "namespace", "pod", "container", "hpc_job")
FIELDS = (
    "uuid",
    "index",
    "model",
    "mig_profile",
    "mig_instance",
    *FLOATS[:-1],
    "temperature_c",
    "xid",
    "namespace",
    "pod",
    "container",
    "hpc_job",
    "holders",
)  # GpuSample's field order
_ENVELOPE = frozenset({"id", "source", "type", "schema_version", "time", "cluster", "data"})
_ARRAYS = frozenset(FIELDS)
_DATA = frozenset({"node", "interval_s", *FIELDS})
_DATA_V3 = _DATA | {"offset_us"}
_SOURCES = frozenset(get_args(Source))
E = TypeVar("E")
_HUGE = 1.7e308  # finite: no JSON number beyond it
_NUMBER: frozenset[type] = frozenset({int, float})
_NUMBER_OR_NULL: frozenset[type] = frozenset({int, float, type(None)})
_INT_OR_NULL: frozenset[type] = frozenset({int, type(None)})
_STR_OR_NULL: frozenset[type] = frozenset({str, type(None)})


@dataclass(frozen=True, slots=True)
class GpuColumns:
    """The GPUs of one node scrape as columns: names of :data:`FIELDS` → lists of n values; a field
    left out has every value missing (:meth:`column` fills it in)."""

    node: str
    interval_s: float | None
    columns: dict[str, list[Any]]
    offset_us: list[int] | None = None  # version 3: each row's time after the event's, in µs

    @property
    def n(self) -> int:
        return len(self.columns["uuid"])

    def column(self, name: str) -> list[Any]:
        values = self.columns.get(name)
        if values is not None:
            return values
        return [[] for _ in range(self.n)] if name == "holders" else [None] * self.n

    @property
    def gpus(self) -> list[GpuSample]:
        """The rows as :class:`GpuSample` (for readers and tests; the hot path reads the columns)."""
        cols = [(name, self.column(name)) for name in FIELDS]
        return [GpuSample.model_validate({name: values[i] for name, values in cols}) for i in range(self.n)]

    def wire(self) -> dict[str, Any]:
        """The ``data`` object on the wire: fields whose every value is missing are left out."""
        out: dict[str, Any] = {"node": self.node, "interval_s": self.interval_s}
        for name in FIELDS:  # one order, whatever built the columns
            values = self.columns.get(name)
            if values is not None and (name == "uuid" or _any_given(values, [] if name == "holders" else None)):
                out[name] = values
        if self.offset_us is not None:
            out["offset_us"] = self.offset_us
        return out

    @classmethod
    def from_samples(cls, data: GpuMetricsData) -> GpuColumns:
        """A version 1 message's GPUs as columns."""
        rows = [g.__dict__ for g in data.gpus]  # a pydantic model's field values
        return cls(data.node, data.interval_s, {f: [r[f] for r in rows] for f in FIELDS})


def _any_given(values: list[Any], missing: Any) -> bool:
    """Some value is not ``missing``: the first one decides most columns without a pass over the
    rest (``list.count`` compares every number with ``None`` the slow way)."""
    return bool(values) and (values[0] != missing or values.count(missing) < len(values))


class GpuColumnsEvent(GpuMetricsEvent):
    """A ``gpu.sample`` event in schema version 2 (one scrape) or 3 (several scrapes of a node);
    ``data.gpus`` still reads as rows."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)
    schema_version: Literal[2, 3] = 2
    data: GpuColumns  # type: ignore[assignment]

    @property
    def last_time(self) -> datetime:
        """The latest scrape's time (the event's own in version 2)."""
        offsets = self.data.offset_us
        return self.scrape_time(max(offsets)) if offsets else self.time

    def scrape_time(self, offset_us: int) -> datetime:
        """The time of the scrape at ``offset_us`` (a value of ``data.offset_us``)."""
        return self.time + offset_us * MICROSECOND

    def scrapes(self) -> list[GpuColumnsEvent]:
        """The version 2 events of the scrapes this event carries, in time order (itself in version 2)."""
        offsets = self.data.offset_us
        if offsets is None:
            return [self]
        rows: dict[int, list[int]] = {}
        for i, offset in enumerate(offsets):
            rows.setdefault(offset, []).append(i)
        out = []
        for offset in sorted(rows):
            picked = rows[offset]
            when = self.scrape_time(offset)
            columns = {name: [values[i] for i in picked] for name, values in self.data.columns.items()}
            data = GpuColumns(self.data.node, self.data.interval_s, columns)
            out.append(build_event(scrape_id(self.cluster, data.node, when), self.source, when, self.cluster, data))
        return out

    def to_bytes(self) -> bytes:
        return orjson.dumps(
            {
                "id": self.id,
                "source": self.source,
                "type": self.type,
                "schema_version": self.schema_version,
                "time": self.time,
                "cluster": self.cluster,
                "data": self.data.wire(),
            },
            option=orjson.OPT_UTC_Z,
        )


def columns_event(*, id: str, source: str, time: datetime, cluster: str, data: GpuColumns) -> GpuColumnsEvent:
    """A version 2 event from columns already in memory, checked as a decoded message is."""
    check_columns(data.node, data.interval_s, data.columns)
    return build_event(id, source, time, cluster, data)


def from_v1(event: GpuMetricsEvent) -> GpuColumnsEvent:
    """The version 2 form of a version 1 event (same id, same rows)."""
    return columns_event(
        id=event.id,
        source=event.source,
        time=event.time,
        cluster=event.cluster,
        data=GpuColumns.from_samples(event.data),
    )


def scrape_id(cluster: str, node: str, time: datetime) -> str:
    """The id of one node scrape, in every form (version 1's natural key)."""
    return event_id("gpu.sample", cluster, node, time)


def scrapes_id(cluster: str, node: str, first: datetime, last: datetime, scrapes: int) -> str:
    """The id of a version 3 message: its node, its first and last scrape and how many it carries."""
    return event_id("gpu.sample", cluster, node, first, last, scrapes)


def scrapes_event(
    *, source: str, time: datetime, cluster: str, data: GpuColumns, checked: bool = False
) -> GpuColumnsEvent:
    """A version 3 event of several scrapes of one node (``data.offset_us`` set; ``time`` the
    earliest); checked as a decoded message is unless ``checked`` (a parser's vectorised checks)."""
    offsets = data.offset_us
    if offsets is None:
        raise ValueError("a version 3 event needs offset_us")
    if not checked:
        check_columns(data.node, data.interval_s, data.columns)
        _check_offsets(offsets, data.n)
    last = time + max(offsets) * MICROSECOND if offsets else time
    id_ = scrapes_id(cluster, data.node, time, last, len(set(offsets)))
    return build_event(id_, source, time, cluster, data)


def pack(events: Sequence[GpuColumnsEvent]) -> GpuColumnsEvent:
    """One version 3 event carrying the scrapes of version 2 ``events`` of one node (one cluster,
    source and interval), in time order; :meth:`GpuColumnsEvent.scrapes` gives them back."""
    if not events:
        raise ValueError("nothing to pack")
    ordered = sorted(events, key=lambda e: e.time)
    first = ordered[0]
    if any(
        (e.cluster, e.source, e.data.node, e.data.interval_s, e.schema_version)
        != (first.cluster, first.source, first.data.node, first.data.interval_s, COLUMNS_VERSION)
        for e in ordered
    ):
        raise ValueError("only version 2 scrapes of one node, cluster, source and interval pack together")
    names = [name for name in FIELDS if any(name in e.data.columns for e in ordered)]
    columns = {name: [v for e in ordered for v in e.data.column(name)] for name in names}
    offsets = [(e.time - first.time) // MICROSECOND for e in ordered for _ in range(e.data.n)]
    data = GpuColumns(first.data.node, first.data.interval_s, columns, offsets)
    return scrapes_event(source=first.source, time=first.time, cluster=first.cluster, data=data)


def per_scrape(events: Iterable[E]) -> list[E]:
    """The events as sent, each version 3 message replaced by the version 2 scrapes it carries
    (for readers that look at one scrape at a time)."""
    out: list[E] = []
    for e in events:
        if isinstance(e, GpuColumnsEvent) and e.data.offset_us is not None:
            out.extend(cast(list[E], e.scrapes()))
        else:
            out.append(e)
    return out


def is_columns(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and obj.get("type") == "gpu.sample"
        and obj.get("schema_version") in (COLUMNS_VERSION, SCRAPES_VERSION)
    )


def decode_columns(obj: dict[str, Any]) -> GpuColumnsEvent:
    """Check a decoded version 2 or 3 message on its arrays; raises :class:`InvalidEvent` (one line)."""
    extra = obj.keys() - _ENVELOPE
    if extra:
        raise InvalidEvent(f"{sorted(extra)[0]}: extra inputs are not permitted")
    id_, source, cluster = obj.get("id"), obj.get("source"), obj.get("cluster")
    if not isinstance(id_, str) or not 8 <= len(id_) <= 128:
        raise InvalidEvent("id: a string of 8 to 128 characters is required")
    if source not in _SOURCES:
        raise InvalidEvent(f"source: not one of the sources: {str(source)[:40]!r}")
    if not isinstance(cluster, str) or not 1 <= len(cluster) <= 128:
        raise InvalidEvent("cluster: a string of 1 to 128 characters is required")
    time = _time(obj.get("time"))
    data = obj.get("data")
    if not isinstance(data, dict):
        raise InvalidEvent("data: an object is required")
    version = obj["schema_version"]
    extra = data.keys() - (_DATA_V3 if version == SCRAPES_VERSION else _DATA)
    if extra:
        raise InvalidEvent(f"data.{sorted(extra)[0]}: extra inputs are not permitted")
    if not isinstance(data.get("uuid"), list):
        raise InvalidEvent("data.uuid: an array of strings is required")
    columns = {name: values for name, values in data.items() if name in _ARRAYS}
    node, interval_s = data.get("node"), data.get("interval_s")
    check_columns(node, interval_s, columns)
    offsets = None
    if version == SCRAPES_VERSION:
        offsets = data.get("offset_us")
        _check_offsets(offsets, len(columns["uuid"]))
    data_ = GpuColumns(cast(str, node), float(interval_s) if interval_s else None, columns, offsets)
    return build_event(id_, cast(str, source), time, cluster, data_)


def build_event(id_: str, source: str, time: datetime, cluster: str, data: GpuColumns) -> GpuColumnsEvent:
    """The event of columns whose every value is already checked (a parser's vectorised checks):
    version 3 when ``data.offset_us`` is set, else version 2."""
    version = COLUMNS_VERSION if data.offset_us is None else SCRAPES_VERSION
    return GpuColumnsEvent.model_construct(
        id=id_, source=source, type="gpu.sample", schema_version=version, time=time, cluster=cluster, data=data
    )


def _check_offsets(offsets: Any, n: int) -> None:
    if type(offsets) is not list or len(offsets) != n:
        raise InvalidEvent(f"data.offset_us: an array of {n} integers (one per uuid) is required")
    if n and (set(map(type, offsets)) != {int} or min(offsets) < 0 or max(offsets) > MAX_SPAN_US):
        raise InvalidEvent(f"data.offset_us: every value must be an integer from 0 to {MAX_SPAN_US}")
    if n and min(offsets) != 0:
        raise InvalidEvent("data.offset_us: the earliest scrape is the event's time (offset 0)")


def _time(value: Any) -> datetime:
    if not isinstance(value, str):
        raise InvalidEvent("time: an RFC 3339 time with offset is required")
    try:
        return parse_rfc3339(value)
    except MissingOffset:
        raise InvalidEvent(f"time: an offset is required: {value[:40]!r}") from None
    except ValueError:
        raise InvalidEvent(f"time: not an RFC 3339 time: {value[:40]!r}") from None


# the value checks, by group: (fields, value types, lowest, highest, what a value must be)
_CHECKS: tuple[tuple[tuple[str, ...], frozenset[type], float, float, str], ...] = (
    (RATIOS, _NUMBER_OR_NULL, 0.0, 1.0, "a number"),
    (NON_NEGATIVE, _NUMBER_OR_NULL, 0.0, _HUGE, "a number"),
    (("temperature_c",), _NUMBER_OR_NULL, -_HUGE, _HUGE, "a number"),
    (("index", "xid"), _INT_OR_NULL, 0, INTS["xid"], "an integer"),
    (("mig_instance",), _INT_OR_NULL, 0, INTS["mig_instance"], "an integer"),
)


def check_columns(node: Any, interval_s: Any, columns: dict[str, list[Any]]) -> None:
    """Every array of one message: lengths, types, ranges; raises :class:`InvalidEvent`.

    Fields of one kind are checked together (one type set, one min and max); only a message that
    fails is looked at field by field, for the reason."""
    if not isinstance(node, str) or not node:
        raise InvalidEvent("data.node: a non-empty string is required")
    if interval_s is not None and (type(interval_s) not in _NUMBER or not 0 < interval_s < 1e9):
        raise InvalidEvent("data.interval_s: a positive number or null is required")
    n = len(columns["uuid"])
    for name, values in columns.items():
        if type(values) is not list or len(values) != n:
            raise InvalidEvent(f"data.{name}: an array of {n} values (one per uuid) is required")
    if n and set(map(type, columns["uuid"])) != {str}:
        raise InvalidEvent("data.uuid: every value must be a string")
    if not set(chain.from_iterable(map(type, columns[f]) for f in STRINGS if f in columns)) <= _STR_OR_NULL:
        name = next(f for f in STRINGS if f in columns and not set(map(type, columns[f])) <= _STR_OR_NULL)
        raise InvalidEvent(f"data.{name}: every value must be a string or null")
    for fields, types, low, high, what in _CHECKS:
        present = [columns[f] for f in fields if f in columns]
        if present and not _within([v for vs in present for v in vs], types, low, high):
            for name in fields:
                if name in columns:
                    _bounded(name, columns[name], types, low, high, what)
    holders = columns.get("holders", ())
    if set(map(type, holders)) - {list} or any(h and set(map(type, h)) - {str} for h in holders):
        raise InvalidEvent("data.holders: every value must be an array of strings")


def _within(values: list[Any], types: frozenset[type], low: float, high: float) -> bool:
    kinds = set(map(type, values))
    if not kinds <= types:
        return False
    present = [v for v in values if v is not None] if type(None) in kinds else values
    return not present or (low <= min(present) and max(present) <= high)


def _bounded(name: str, values: list[Any], types: frozenset[type], low: float, high: float, what: str) -> None:
    if not set(map(type, values)) <= types:
        raise InvalidEvent(f"data.{name}: every value must be {what} or null")
    bad = next((v for v in values if v is not None and not low <= v <= high), None)
    if bad is not None:
        where = f"below {low:g}" if bad < low else f"above {high:g}" if bad > high else "not a number"
        raise InvalidEvent(f"data.{name}: {bad!r} is {where}")
