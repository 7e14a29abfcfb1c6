"""The fast path of :func:`pipelines.parsers.dcgm.parse_query_range`: a clean ``query_range`` answer → columns.

A Prometheus ``matrix`` answer's points are read without a Python object per point
(:func:`scan`): every ``"values"`` array is cut out of the bytes, what is left (the labels) is
decoded with orjson, and the points, laid out as two-column CSV by byte replacement, are read by
Arrow's CSV reader into two float arrays. An answer the scan cannot take exactly (any point not
in the form Prometheus writes) is decoded whole with orjson instead, series by series. The points
are then checked and converted per field as a whole (the rules of :func:`dcgm.convert`), and each
node's series are laid into one (time × GPU) matrix per field. Events are rows of those matrices:
raw text is never built.

It takes only answers where nothing needs a reason: every series placeable, every point a
``[number, "float"]`` pair with a time in range, every value within its field's range, no repeated
time in a series, and at most one label set describing a GPU at a time (no device shared by
several pods, no changing labels at the same instant). For anything else it returns ``None`` and
the record-by-record path runs, which dead-letters exactly what is wrong.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

import numpy as np

from pipelines.gpu_columns import INTS, GpuColumns, build_event, scrape_id, scrapes_event
from pipelines.parsers.base import ParseResult, gc_paused
from pipelines.times import MICROSECOND, from_epoch

Array = np.ndarray[Any, np.dtype[Any]]
# one Prometheus float (Go's ParseFloat forms the exporters write); a list of them joined by newlines is
# checked in one match shaped ``(V(\nV)*)?``: five times quicker in ``re`` than a repeated ``V(\n|\Z)``
VALUE = r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[Ii]nf|NaN|nan)"
_FLOATS = re.compile(f"(?:{VALUE}(?:\n{VALUE})*)?")
_MIN_S, _MAX_S = -62135596800.0, 253402300799.0  # what datetime holds (years 1 to 9999)
META = ("index", "model", "mig_profile", "namespace", "pod", "container", "hpc_job")
# the scan: a series' points array (after ``{`` or ``,``, so never inside an escaped key) and the
# characters of a point's time and value
_POINTS = b'"values":['
_NUMBER = b"0123456789.eE+-NaIinf"
_DIGIT = np.zeros(256, dtype=bool)
_DIGIT[list(b"0123456789")] = True
# rows of one message: a node's scrapes go out several to a message (``gpu.sample`` version 3), the
# stream's per-message cost paid once per up to this many GPU rows (about 60 kB of JSON)
SCRAPE_ROWS = 256


@dataclass
class _Node:
    gpus: dict[tuple[str, int | None], int] = field(default_factory=dict)  # (uuid, GPU_I_ID) -> column
    series: list[int] = field(default_factory=list)  # indices into Layout.series


@dataclass
class Layout:
    """Series of one input laid out per node: :meth:`place` each series, then :meth:`result`.

    Per series only a few appends; the values are converted once per field and laid into the
    matrices once per node (no numpy call per series: an exposition series has one point)."""

    hint: str | None  # the caller's node name
    fields: dict[str, tuple[str, str]]  # metric -> (field, kind), dcgm.FIELDS
    describe: Callable[[dict[str, str], str | None], Any]  # labels -> dcgm._Series, or why not placeable
    blank: Callable[[str, float], bool]
    nodes: dict[str, _Node] = field(default_factory=dict)
    infos: dict[tuple[tuple[str, str], ...], int] = field(default_factory=dict)  # labels -> index in described
    described: list[Any] = field(default_factory=list)
    # per series: (gpu column, label set index, field, times, values): lists of floats and texts as
    # read from text, or float arrays already read and checked by :func:`scan`
    series: list[tuple[int, int, str, Points, Points]] = field(default_factory=list)

    def place(self, name: str, labels: tuple[tuple[str, str], ...], times: Points, values: Points) -> bool:
        """One series (labels sorted, without ``__name__``); False when anything about it needs a reason."""
        if name not in self.fields:
            return True  # a well-formed series of no interest
        ident = self.infos.get(labels)
        if ident is None:
            ident = self.infos[labels] = len(self.described)
            self.described.append(self.describe(dict(labels), self.hint))
        info = self.described[ident]
        if isinstance(info, str) or _repeats(times):
            return False  # cannot be placed, or a time twice: the slow path says why
        node = self.nodes.setdefault(info.host, _Node())
        node.series.append(len(self.series))
        self.series.append((node.gpus.setdefault((info.uuid, info.gi), len(node.gpus)), ident, name, times, values))
        return True

    def result(self, cluster: str, interval_s: float | None, stamp: Callable[[float], datetime]) -> ParseResult | None:
        """The events, node by node and time by time; ``stamp`` turns a time of the series into the event time."""
        if not self.series:
            return None
        converted = self._converted()
        if converted is None:
            return None
        result = ParseResult()
        for host in sorted(self.nodes):
            events = _events(host, self.nodes[host], self, converted, cluster, interval_s, stamp)
            if events is None:
                return None
            result.events.extend(events)
        return result

    def _converted(self) -> list[Array] | None:
        """Each series' values converted (NaN = missing), one conversion per field; None if any needs a reason."""
        out: list[Array] = [np.empty(0)] * len(self.series)
        by_name: dict[str, list[int]] = {}
        for i, (_, _, name, _, _) in enumerate(self.series):
            by_name.setdefault(name, []).append(i)
        for name, members in by_name.items():
            parts = [self.series[i][4] for i in members]
            try:
                if isinstance(parts[0], np.ndarray):  # read and checked by the scan
                    raw = np.concatenate(parts)
                else:
                    texts = [v for part in parts for v in cast(list[str], part)]  # as read from text
                    if not floats(texts) or not valid_times(_joined([self.series[i][3] for i in members])):
                        return None
                    raw = np.array(texts, dtype=np.float64)
                values = _convert(self.fields[name][1], raw, self.blank)
            except ValueError:
                return None
            if values is None:
                return None
            ends = np.cumsum([len(self.series[i][4]) for i in members])[:-1]
            for i, part in zip(members, np.split(values, ends), strict=True):
                out[i] = part
        return out


def valid_times(times: Array) -> bool:
    return bool(np.isfinite(times).all() and times.min() >= _MIN_S and times.max() <= _MAX_S)


def floats(values: list[str] | tuple[str, ...]) -> bool:
    """Every value has the syntax of a Prometheus float."""
    text = "\n".join(values)
    if text.count("\n") != len(values) - 1 and values:
        return False  # a newline inside a value
    return _FLOATS.fullmatch(text) is not None and (bool(text) or not values)  # [""]: one empty value


Points = list[float] | list[str] | Array


def _joined(parts: list[Points]) -> Array:
    """Series' times (or values) end to end, as one float array."""
    if parts and isinstance(parts[0], np.ndarray):
        return np.concatenate(parts)
    return np.array([t for part in parts for t in part], dtype=np.float64)


def _repeats(times: Points) -> bool:
    """A time appears twice in the series."""
    if isinstance(times, np.ndarray):
        return bool(len(times) > 1 and not (np.diff(times) > 0).all() and len(np.unique(times)) != len(times))
    return len(set(times)) != len(times)


def scan(answer: bytes) -> tuple[Any, list[Array], list[Array]] | None:
    """A matrix answer as (the answer with every series' points left out, each series' times, each
    series' values), with no Python object per point; ``None`` when any point is not exactly in the
    form Prometheus writes (``[<JSON number>,"<float>"]``, no spaces), a value is NaN or infinite,
    or the answer is not a matrix of ``{"metric", "values"}`` series, and where pyarrow is not
    installed. Then the answer is decoded with orjson as a whole, which says what is wrong."""
    import orjson

    try:  # not in a collector-only install (the collect extra): orjson reads the answer there
        import pyarrow as pa
        from pyarrow import ArrowException, csv
    except ImportError:
        return None
    rest: list[bytes] = []
    lines: list[bytes] = []
    counts: list[int] = []
    start = 0
    at = answer.find(_POINTS)
    while at >= 0:
        first = at + len(_POINTS) - 1
        end = answer.find(b"]]", first) + 2
        if end < 2 or answer[first + 1 : first + 2] != b"[" or answer[at - 1 : at] not in (b"{", b","):
            return None
        at = answer.find(_POINTS, end)
        rest += (answer[start:first], b"[]")
        region = answer[first + 2 : end - 2]
        lines += (b"\n", region)
        counts.append(region.count(b"],[") + 1)
        start = end
    rest.append(answer[start:])
    text = b"".join(lines).replace(b"],[", b"\n")
    total = sum(counts)
    if not counts or text.translate(None, _NUMBER) != b'\n,""' * total or _not_json_time(text):
        return None
    try:
        obj = orjson.loads(b"".join(rest))
        table = csv.read_csv(
            io.BytesIO(text),
            read_options=csv.ReadOptions(column_names=["t", "v"], block_size=1 << 24),
            convert_options=csv.ConvertOptions(
                column_types={"t": pa.float64(), "v": pa.float64()},
                null_values=[],
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    except (orjson.JSONDecodeError, ArrowException):
        return None
    if table.column("t").null_count or table.column("v").null_count:
        return None
    times, values = _floats_of(table.column("t")), _floats_of(table.column("v"))
    data = obj.get("data") if isinstance(obj, dict) and obj.get("status") == "success" else None
    result = data.get("result") if isinstance(data, dict) and data.get("resultType") == "matrix" else None
    if (
        not isinstance(result, list)
        or len(result) != len(counts)
        or len(times) != total
        or not np.isfinite(values).all()
        or not valid_times(times)
        or not all(isinstance(series, dict) and series.keys() == {"metric", "values"} for series in result)
        or any(series["values"] != [] for series in result)
    ):
        return None
    ends = np.cumsum(counts)[:-1]
    return result, np.split(times, ends), np.split(values, ends)


def _floats_of(column: Any) -> Array:
    """An Arrow float64 column without nulls as one numpy array, read from its buffers
    (``to_numpy`` of a chunked column imports pandas: a quarter of a second the first time)."""
    parts = [
        np.frombuffer(chunk.buffers()[1], dtype=np.float64, count=len(chunk), offset=chunk.offset * 8)
        for chunk in column.chunks
    ]
    return np.concatenate(parts) if parts else np.empty(0)


def _not_json_time(text: bytes) -> bool:
    """A point's time (each line ``\\n<time>,"<value>"``) in a form a float reader takes but a JSON
    number cannot have: +5, .5, -.5, 05, 5., 1.e5 (a value such as "5." or "1.e5", which Prometheus
    never writes, only costs the scan). Vectorised: a few passes over the bytes."""
    chars = np.frombuffer(text + b"\n", dtype=np.uint8)
    digit = _DIGIT[chars]
    starts = np.flatnonzero(chars == ord("\n"))[:-1] + 1
    signed = chars[starts] == ord("-")
    starts[signed] += 1
    zero = chars[starts] == ord("0")
    dots = np.flatnonzero(chars == ord("."))
    commas = np.flatnonzero(chars == ord(","))
    return bool(
        not digit[starts].all()
        or digit[starts[zero] + 1].any()
        or not digit[dots + 1].all()
        or not digit[commas - 1].all()
    )


def read(
    answer: bytes | str,
    *,
    cluster: str,
    node: str | None,
    interval_s: float | None,
    fields: dict[str, tuple[str, str]],
    describe: Callable[[dict[str, str], str | None], Any],
    blank: Callable[[str, float], bool],
) -> ParseResult | None:
    """Events of a clean matrix answer, or ``None`` (let the record-by-record path read it)."""
    import orjson

    with gc_paused(answer):
        layout = Layout(node, fields, describe, blank)
        scanned = scan(answer.encode() if isinstance(answer, str) else answer)
        if scanned is not None:
            result, times, values = scanned
            if not all(_place(s["metric"], t, v, layout) for s, t, v in zip(result, times, values, strict=True)):
                return None
            return layout.result(cluster, interval_s, from_epoch)  # in range: checked by the scan
        try:
            obj = orjson.loads(answer)
        except orjson.JSONDecodeError:
            return None
        data = obj.get("data") if isinstance(obj, dict) and obj.get("status") == "success" else None
        if not isinstance(data, dict) or data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
            return None
        if not all(_add(series, layout) for series in data["result"]):
            return None
        return layout.result(cluster, interval_s, from_epoch)  # in range: checked before


def read_by_node(
    answer: bytes | str,
    *,
    cluster: str,
    node: str | None,
    interval_s: float | None,
    fields: dict[str, tuple[str, str]],
    describe: Callable[[dict[str, str], str | None], Any],
    blank: Callable[[str, float], bool],
) -> tuple[ParseResult, list[Any]] | None:
    """A matrix answer node by node: the events of every node whose series are all clean, and the
    series left for the record-by-record path (the other nodes' and those that name no node), in
    their order. A node's events depend only on its own series, so one bad record costs its node
    the slow path, not the whole answer. ``None`` when the answer is not a matrix."""
    import orjson

    try:
        obj = orjson.loads(answer)
    except orjson.JSONDecodeError:
        return None
    data = obj.get("data") if isinstance(obj, dict) and obj.get("status") == "success" else None
    if not isinstance(data, dict) or data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
        return None
    hosts: dict[str, list[int]] = {}
    unplaced: list[int] = []
    known: dict[tuple[tuple[str, str], ...], Any] = {}
    for i, series in enumerate(data["result"]):
        metric = series.get("metric") if isinstance(series, dict) else None
        if not isinstance(metric, dict) or set(map(type, metric.values())) - {str}:
            unplaced.append(i)
            continue
        labels = tuple(sorted((k, v) for k, v in metric.items() if k != "__name__"))
        info = known.get(labels)
        if info is None:
            info = known[labels] = describe(dict(labels), node)
        (unplaced if isinstance(info, str) else hosts.setdefault(info.host, [])).append(i)
    done = ParseResult()
    slow = set(unplaced)
    for members in hosts.values():
        layout = Layout(node, fields, describe, blank)
        part = None
        if all(_add(data["result"][i], layout) for i in members):
            part = layout.result(cluster, interval_s, from_epoch)  # in range: checked before
        if part is None:
            slow.update(members)
        else:
            done.events.extend(part.events)
    return done, [series for i, series in enumerate(data["result"]) if i in slow]


def _add(series: Any, layout: Layout) -> bool:
    metric = series.get("metric") if isinstance(series, dict) else None
    points = series.get("values") if isinstance(series, dict) else None
    if not isinstance(metric, dict) or not isinstance(points, list) or not points:
        return False
    if set(map(type, points)) != {list} or set(map(len, points)) != {2}:
        return False
    ts, vs = zip(*points, strict=True)
    if not set(map(type, ts)) <= {int, float} or set(map(type, vs)) != {str} or not floats(vs):
        return False  # the points of series gpuledger does not read are checked too, as the slow path does
    times = [float(t) for t in ts]
    if not valid_times(np.array(times)):
        return False
    return _place(metric, times, list(vs), layout)


def _place(metric: Any, times: Points, values: Points, layout: Layout) -> bool:
    """A series' labels checked and sorted, and the series placed in ``layout``."""
    if not isinstance(metric, dict) or set(map(type, metric.values())) - {str}:
        return False
    labels = tuple(sorted((k, v) for k, v in metric.items() if k != "__name__"))
    return layout.place(metric.get("__name__", ""), labels, times, values)


def _convert(kind: str, v: Array, blank: Callable[[str, float], bool]) -> Array | None:
    """:func:`dcgm.convert` over an array: NaN for missing, ``None`` when any value needs a reason."""
    missing = np.isnan(v)
    if np.isinf(v).any():
        return None
    finite = ~missing
    blanks = np.zeros(len(v), dtype=bool)
    candidates = finite & (v >= 2147483632.0)
    for i in np.flatnonzero(candidates):
        blanks[i] = blank(kind, float(v[i]))
    ok = finite & ~blanks
    x = v[ok]
    if kind in ("ratio", "percent"):
        top = 1.0 if kind == "ratio" else 100.0
        if ((x < -1e-9) | (x > top * (1 + 1e-9))).any():
            return None
        x = np.clip(x / top, 0.0, 1.0)
    elif kind in ("nonneg", "counter"):
        if (x < 0).any():
            return None
    elif kind == "temp":
        if ((x < -50.0) | (x > 200.0)).any():
            return None
    elif ((x != np.floor(x)) | (x < 0) | (x > INTS["xid"])).any():
        return None
    out = np.full(len(v), np.nan)
    out[ok] = x
    return out


def _events(
    host: str,
    node: _Node,
    layout: Layout,
    converted: list[Array],
    cluster: str,
    interval_s: float | None,
    stamp: Callable[[float], datetime],
) -> list[Any] | None:
    members = node.series
    lengths = [len(layout.series[i][3]) for i in members]
    all_times = _joined([layout.series[i][3] for i in members])
    times = np.unique(all_times)
    n_t, n_g = len(times), len(node.gpus)
    cells = np.searchsorted(times, all_times) * n_g + np.repeat([layout.series[i][0] for i in members], lengths)
    idents = np.repeat([layout.series[i][1] for i in members], lengths)
    by_cell = np.argsort(cells, kind="stable")
    same = cells[by_cell][1:] == cells[by_cell][:-1]
    if (same & (idents[by_cell][1:] != idents[by_cell][:-1])).any():
        return None  # two label sets at once (a shared device, a label change): the slow path merges
    present = np.zeros(n_t * n_g, dtype=bool)
    present[cells] = True
    described_flat = np.full(n_t * n_g, -1, dtype=np.int64)
    described_flat[cells] = idents
    present_cells, described = present.reshape(n_t, n_g), described_flat.reshape(n_t, n_g)
    infos = layout.described
    keys_of = np.repeat([layout.series[i][2] for i in members], lengths)
    values_all = np.concatenate([converted[i] for i in members])
    matrices: dict[str, Array] = {}
    for name in dict.fromkeys(layout.series[i][2] for i in members):
        mine = (keys_of == name) & ~np.isnan(values_all)
        first_cells, first = np.unique(cells[mine], return_index=True)  # the first value given wins
        m = np.full(n_t * n_g, np.nan)
        m[first_cells] = values_all[mine][first]
        matrices[layout.fields[name][0]] = m.reshape(n_t, n_g)
    step = interval_s or _min_step(times)
    stamps = [stamp(float(s)) for s in times]
    columns_of = {key: _objects(m, key == "xid") for key, m in matrices.items()}
    keys = sorted(node.gpus, key=lambda k: node.gpus[k])
    layouts: dict[tuple[bytes, bytes], list[int]] = {}  # rows with the same GPUs, described the same way
    for row in range(n_t):
        here = np.flatnonzero(present_cells[row])
        if len(here):
            layouts.setdefault((here.tobytes(), described[row, here].tobytes()), []).append(row)
    out: list[tuple[int, Any]] = []
    for group in layouts.values():
        cols = np.flatnonzero(present_cells[group[0]])
        metas = [infos[int(i)].meta for i in described[group[0], cols]]
        order = sorted(range(len(cols)), key=lambda j: order_key(metas[j], keys[cols[j]]))
        picked = cols[order]
        shared: dict[str, list[Any]] = {
            "uuid": [keys[c][0] for c in picked],
            "mig_instance": [keys[c][1] for c in picked],
        }
        for name in META:
            shared[name] = [metas[j][name] for j in order]
        per_message = max(1, SCRAPE_ROWS // len(picked))
        for at in range(0, len(group), per_message):
            rows = group[at : at + per_message]
            block = np.ix_(np.array(rows), picked)
            columns = {name: values * len(rows) for name, values in shared.items()}
            columns.update((key, objs[block].ravel().tolist()) for key, objs in columns_of.items())
            start = stamps[rows[0]]
            if len(rows) == 1:  # one scrape: version 2
                event = build_event(
                    scrape_id(cluster, host, start), "dcgm", start, cluster, GpuColumns(host, step, columns)
                )
            else:
                offsets = [(stamps[row] - start) // MICROSECOND for row in rows for _ in picked]
                data = GpuColumns(host, step, columns, offsets)
                event = scrapes_event(source="dcgm", time=start, cluster=cluster, data=data, checked=True)
            out.append((rows[0], event))
    out.sort(key=lambda pair: pair[0])
    return [event for _, event in out]


def _objects(m: Array, integral: bool) -> Array:
    """A float matrix as Python values (``int`` for XIDs), ``None`` where missing."""
    missing = np.isnan(m)
    objs = np.where(missing, 0, m).astype(np.int64).astype(object) if integral else m.astype(object)
    objs[missing] = None
    return objs


def order_key(meta: dict[str, Any], key: tuple[str, int | None]) -> tuple[int, str, int]:
    index = meta["index"]
    return (index if index is not None else 1 << 30, key[0], -1 if key[1] is None else key[1])


def _min_step(times: Array) -> float | None:
    gaps = np.diff(times)
    gaps = gaps[gaps > 0]
    return float(gaps.min()) if len(gaps) and math.isfinite(gaps.min()) else None
