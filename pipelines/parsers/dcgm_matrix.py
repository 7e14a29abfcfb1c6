"""The fast path of :func:`pipelines.parsers.dcgm.parse_query_range`: a clean ``query_range`` answer → columns.

A Prometheus ``matrix`` answer is decoded once with orjson; each series' points become two numpy
arrays (times, values) checked and converted as a whole (the rules of :func:`dcgm.convert`), and
each node's series are laid into one (time × GPU) matrix per field. Events are rows of those
matrices: no object per sample or per point, and raw text is never built.

It takes only answers where nothing needs a reason: every series placeable, every point a
``[number, "float"]`` pair with a time in range, every value within its field's range, no repeated
time in a series, and at most one label set describing a GPU at a time (no device shared by
several pods, no changing labels at the same instant). For anything else it returns ``None`` and
the record-by-record path runs, which dead-letters exactly what is wrong.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from pipelines.events import event_id
from pipelines.gpu_columns import INTS, GpuColumns, build_event
from pipelines.parsers.base import ParseResult
from pipelines.times import from_epoch

Array = np.ndarray[Any, np.dtype[Any]]
# one Prometheus float (Go's ParseFloat forms the exporters write); a list of them joined by newlines is
# checked in one match shaped ``(V(\nV)*)?``: five times quicker in ``re`` than a repeated ``V(\n|\Z)``
VALUE = r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[Ii]nf|NaN|nan)"
_FLOATS = re.compile(f"(?:{VALUE}(?:\n{VALUE})*)?")
_MIN_S, _MAX_S = -62135596800.0, 253402300799.0  # what datetime holds (years 1 to 9999)
META = ("index", "model", "mig_profile", "namespace", "pod", "container", "hpc_job")


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
    # per series: (gpu column, label set index, field, times, values as text)
    series: list[tuple[int, int, str, list[float], list[str]]] = field(default_factory=list)

    def place(self, name: str, labels: tuple[tuple[str, str], ...], times: list[float], values: list[str]) -> bool:
        """One series (labels sorted, without ``__name__``); False when anything about it needs a reason."""
        if name not in self.fields:
            return True  # a well-formed series of no interest
        ident = self.infos.get(labels)
        if ident is None:
            ident = self.infos[labels] = len(self.described)
            self.described.append(self.describe(dict(labels), self.hint))
        info = self.described[ident]
        if isinstance(info, str) or len(set(times)) != len(times):
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
            texts = [v for i in members for v in self.series[i][4]]
            times = np.array([t for i in members for t in self.series[i][3]], dtype=np.float64)
            if not floats(texts) or not valid_times(times):
                return None
            try:
                values = _convert(self.fields[name][1], np.array(texts, dtype=np.float64), self.blank)
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

    try:
        obj = orjson.loads(answer)
    except orjson.JSONDecodeError:
        return None
    data = obj.get("data") if isinstance(obj, dict) and obj.get("status") == "success" else None
    if not isinstance(data, dict) or data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
        return None
    layout = Layout(node, fields, describe, blank)
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
    if not valid_times(np.array(times)) or set(map(type, metric.values())) - {str}:
        return False
    labels = tuple(sorted((k, v) for k, v in metric.items() if k != "__name__"))
    return layout.place(metric.get("__name__", ""), labels, times, list(vs))


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
    all_times = np.array([t for i in members for t in layout.series[i][3]], dtype=np.float64)
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
        block = np.ix_(np.array(group), picked)
        values = {key: objs[block].tolist() for key, objs in columns_of.items()}
        for i, row in enumerate(group):
            when = stamps[row]
            columns = {**shared, **{key: per_row[i] for key, per_row in values.items()}}
            event = build_event(
                event_id("gpu.sample", cluster, host, when), "dcgm", when, cluster, GpuColumns(host, step, columns)
            )
            out.append((row, event))
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
