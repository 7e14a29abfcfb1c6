"""The fast path of :func:`pipelines.parsers.dcgm.parse_query_range`: a clean ``query_range`` answer → columns.

A Prometheus ``matrix`` answer's points are read without a Python object per point by
:mod:`pipelines.parsers.dcgm_scan` (the labels decoded with orjson while Arrow reads the points),
and its series placed meanwhile. An answer the scan cannot take exactly (any point not in the form
Prometheus writes) is decoded whole with orjson instead, series by series. The points of all
series are then checked, converted (the rules of :func:`dcgm.convert`) and laid into one
(node × time × GPU) grid per field in whole-answer array operations, with no numpy call per
series; events are rows of that grid, raw text is never built.

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

from pipelines.gpu_columns import INTS, GpuColumns, build_event, scrape_id, scrapes_id
from pipelines.parsers.base import ParseResult, gc_paused
from pipelines.parsers.dcgm_scan import start_scan, valid_times
from pipelines.times import MICROSECOND, from_epoch

Array = np.ndarray[Any, np.dtype[Any]]
# one Prometheus float (Go's ParseFloat forms the exporters write); a list of them joined by newlines is
# checked in one match shaped ``(V(\nV)*)?``: five times quicker in ``re`` than a repeated ``V(\n|\Z)``
VALUE = r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[Ii]nf|NaN|nan)"
_FLOATS = re.compile(f"(?:{VALUE}(?:\n{VALUE})*)?")
META = ("index", "model", "mig_profile", "namespace", "pod", "container", "hpc_job")
# the value checks of dcgm.convert by kind: (lowest, highest, divisor, clipped to 0–1); any other kind
# is an XID's (a whole number from 0 to INTS["xid"])
_KINDS: dict[str, tuple[float, float, float, bool]] = {
    "ratio": (-1e-9, 1.0 * (1 + 1e-9), 1.0, True),
    "percent": (-1e-9, 100.0 * (1 + 1e-9), 100.0, True),
    "nonneg": (0.0, math.inf, 1.0, False),
    "counter": (0.0, math.inf, 1.0, False),
    "temp": (-50.0, 200.0, 1.0, False),
}
_WHOLE = (0.0, float(INTS["xid"]), 1.0, False)
_BLANK_FROM = 2147483632.0  # below it no value is a blank sentinel (dcgm._is_blank)
# rows of one message: a node's scrapes go out several to a message (``gpu.sample`` version 3), the
# stream's per-message cost paid once per up to this many GPU rows (about 60 kB of JSON)
SCRAPE_ROWS = 256


@dataclass
class Layout:
    """Series of one input laid out per node: :meth:`place` each series, then :meth:`result`.

    Per series only a few appends; the points of every series are checked, converted and laid out
    once for the whole input (no numpy call per series: an exposition series has one point)."""

    hint: str | None  # the caller's node name
    fields: dict[str, tuple[str, str]]  # metric -> (field, kind), dcgm.FIELDS
    describe: Callable[[dict[str, str], str | None], Any]  # labels -> dcgm._Series, or why not placeable
    blank: Callable[[str, Array], Array]  # which of the values (of one kind) are blank sentinels (dcgm._is_blank)
    hosts: dict[str, int] = field(default_factory=dict)  # host -> node number, in order of first series
    gpus: list[dict[tuple[str, int | None], int]] = field(default_factory=list)  # per node: (uuid, GPU_I_ID) -> column
    infos: dict[tuple[tuple[str, str], ...], tuple[int, int, int] | None] = field(default_factory=dict)
    described: list[Any] = field(default_factory=list)  # per label set: dcgm._Series, or why not placeable
    # per placed series, in input order: (node, GPU column, label set index, metric name)
    series: list[tuple[int, int, int, str]] = field(default_factory=list)
    # the points of each placed series: lists of floats and texts as read from text (:meth:`place`), or
    # the index of the series in arrays already read and checked by the scan (:func:`_place_scanned`)
    parts: list[tuple[list[float], list[str]]] = field(default_factory=list)
    scanned: list[int] = field(default_factory=list)
    arrays: tuple[Array, Array, Array] | None = None  # the scan's times, values and points per series

    def place(self, name: str, labels: tuple[tuple[str, str], ...], times: list[float], values: list[str]) -> bool:
        """One series (labels sorted, without ``__name__``); False when it cannot be placed."""
        if name not in self.fields:
            return True  # a well-formed series of no interest
        where = self.where(labels)
        if where is None:
            return False  # cannot be placed: the slow path says why
        self.series.append((*where, name))
        self.parts.append((times, values))
        return True

    def where(self, labels: tuple[tuple[str, str], ...]) -> tuple[int, int, int] | None:
        """(node, GPU column, index in described) of a label set, described when first seen; None when
        it cannot be placed."""
        if labels in self.infos:
            return self.infos[labels]
        where = self.infos[labels] = self._describe(labels)
        return where

    def _describe(self, labels: tuple[tuple[str, str], ...]) -> tuple[int, int, int] | None:
        """(node, GPU column, index in described) of a new label set; None when it cannot be placed."""
        ident = len(self.described)
        info = self.describe(dict(labels), self.hint)
        self.described.append(info)
        if isinstance(info, str):
            return None
        node = self.hosts.get(info.host)
        if node is None:
            node = self.hosts[info.host] = len(self.gpus)
            self.gpus.append({})
        gpus = self.gpus[node]
        return node, gpus.setdefault((info.uuid, info.gi), len(gpus)), ident

    def result(self, cluster: str, interval_s: float | None, stamp: Callable[[float], datetime]) -> ParseResult | None:
        """The events, node by node and time by time; ``stamp`` turns a time of the series into the event time."""
        if not self.series:
            return None
        points = self._points()
        if points is None:
            return None
        times, raw, counts = points
        ends = np.cumsum(counts)
        same = _same_times(times, counts)  # every series holds the same rising times: none twice
        if same is None and _repeats(times, counts, ends):
            return None  # a time twice in a series: the slow path says why
        names = {name: i for i, name in enumerate(dict.fromkeys(s[3] for s in self.series))}
        codes = np.array([names[s[3]] for s in self.series])
        values = _convert(raw, counts, ends, codes, [self.fields[n][1] for n in names], self.blank)
        if values is None:
            return None
        grid = _Grid.build(self, times, counts, same)
        if grid is None:
            return None  # two label sets at once (a shared device, a label change): the slow path merges
        return grid.events(self, names, codes, values, counts, cluster, interval_s, stamp)

    def _points(self) -> tuple[Array, Array, Array] | None:
        """(times, values, points per series) of the placed series end to end; None when a value is
        not a float or a time out of range (read from text: checked here)."""
        if self.arrays is not None:
            times, values, counts = self.arrays
            if len(self.scanned) == len(counts):  # every series placed, in order
                return times, values, counts
            picked = np.array(self.scanned)
            starts = (np.cumsum(counts) - counts)[picked]
            counts = counts[picked]
            index = np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum()))
            return times[index], values[index], counts
        texts = [v for _, part in self.parts for v in part]
        try:
            times = np.array([t for part, _ in self.parts for t in part], dtype=np.float64)
            if not floats(texts) or not valid_times(times):
                return None
            return times, np.array(texts, dtype=np.float64), np.array([len(part) for part, _ in self.parts])
        except ValueError:
            return None


def floats(values: list[str] | tuple[str, ...]) -> bool:
    """Every value has the syntax of a Prometheus float."""
    text = "\n".join(values)
    if text.count("\n") != len(values) - 1 and values:
        return False  # a newline inside a value
    return _FLOATS.fullmatch(text) is not None and (bool(text) or not values)  # [""]: one empty value


def _repeats(times: Array, counts: Array, ends: Array) -> bool:
    """A time appears twice in one series (``times``: the series end to end, ``counts`` long each,
    ending before ``ends``). Only a series whose times do not rise throughout is looked at on its own."""
    if len(times) < 2:
        return False
    falls = np.flatnonzero(~(times[1:] > times[:-1]))  # i: the time at i + 1 is not after the one at i
    falls = falls[~np.isin(falls + 1, ends)]  # not from the last point of a series to the next series
    for s in np.unique(np.searchsorted(ends, falls, side="right")).tolist():
        own = times[ends[s] - counts[s] : ends[s]]
        if len(np.unique(own)) != len(own):
            return True
    return False


def _convert(
    v: Array, counts: Array, ends: Array, codes: Array, kinds: list[str], blank: Callable[[str, Array], Array]
) -> Array | None:
    """:func:`dcgm.convert` over the values of every series (``counts`` long each, ending before
    ``ends``; ``codes``: each series' metric, by index into ``kinds``): NaN for missing, ``None``
    when any value needs a reason. The ranges are checked on each series' lowest and highest value."""
    if np.isinf(v).any():
        return None
    missing = np.isnan(v)
    candidates = np.flatnonzero(v >= _BLANK_FROM)  # NaN compares false
    if len(candidates):
        of = codes[np.searchsorted(ends, candidates, side="right")]
        for code in np.flatnonzero(np.bincount(of)).tolist():
            mine = candidates[of == code]
            missing[mine] = blank(kinds[code], v[mine])
    given = np.where(missing, np.nan, v) if missing.any() else v
    rules = np.array([_KINDS.get(kind, _WHOLE) for kind in kinds])[codes]  # per series: low, high, divisor, clipped
    starts = ends - counts
    if ((np.fmin.reduceat(given, starts) < rules[:, 0]) | (np.fmax.reduceat(given, starts) > rules[:, 1])).any():
        return None  # NaN (a series without a value) compares false
    # per-series numbers against the points: broadcast over a (series × point) view when every series is
    # as long (a query_range answer without gaps), else repeated per point
    even = bool((counts == counts[0]).all())
    shape = (len(counts), int(counts[0])) if even else (len(v),)

    def per_point(per_series: Array) -> Array:
        return per_series[:, None] if even else np.repeat(per_series, counts)

    whole = np.array([kind not in _KINDS for kind in kinds])[codes]
    if whole.any():
        x = given.reshape(shape)[whole] if even else given[np.repeat(whole, counts)]
        x = x[~np.isnan(x)]
        if (x != np.floor(x)).any():
            return None
    divisor, clipped = rules[:, 2], rules[:, 3] == 1.0
    out = v.reshape(shape) / per_point(divisor) if (divisor != 1.0).any() else v.reshape(shape).copy()
    if clipped.any():
        np.clip(out, per_point(np.where(clipped, 0.0, -np.inf)), per_point(np.where(clipped, 1.0, np.inf)), out=out)
    out = out.ravel()
    out[missing] = np.nan
    return out


@dataclass
class _Grid:
    """The cells of a whole input: per node (in host order) its rows (distinct times, ascending) ×
    its GPU columns, end to end; ``ident`` holds the label set describing each cell (-1: absent)."""

    order: list[str]  # hosts, sorted
    nodes: list[int]  # node number of each host in ``order``
    first: Array  # per host: its first row
    rows: Array  # per host: how many rows
    width: Array  # per host: how many GPU columns
    base: Array  # per host: its first cell
    row_time: Array  # per row: index into ``times``
    times: Array  # the distinct times of the input
    cell: Array  # per point: its cell
    ident: Array  # per cell
    first_cells: Array | None = None  # per series its first cell, when every series holds every time

    @classmethod
    def build(cls, layout: Layout, all_times: Array, counts: Array, same: Array | None) -> _Grid | None:
        """None when two label sets describe one cell; ``same``: the times of every series when they all
        hold the same (:func:`_same_times`)."""
        order = sorted(layout.hosts)
        nodes = [layout.hosts[h] for h in order]
        rank = np.empty(len(nodes), dtype=np.int64)
        rank[nodes] = np.arange(len(nodes))
        node, column, ident = (np.array(c, dtype=np.int64) for c in list(zip(*layout.series, strict=True))[:3])
        width = np.array([len(layout.gpus[n]) for n in nodes], dtype=np.int64)
        if same is not None:
            return cls._every_time(order, nodes, width, rank[node], column, ident, same)
        times = np.unique(all_times)
        positions = np.searchsorted(times, all_times)
        n_t = len(times)
        key = np.repeat(rank[node], counts) * n_t + positions
        if len(nodes) * n_t <= 4 * len(key) + 4096:  # rows as (host, time) pairs present: a bitmap
            seen = np.zeros(len(nodes) * n_t, dtype=bool)
            seen[key] = True
            row_keys = np.flatnonzero(seen)
            row = (np.cumsum(seen) - 1)[key]
        else:
            row_keys, row = np.unique(key, return_inverse=True)
        first = np.searchsorted(row_keys // n_t, np.arange(len(nodes)))
        rows = np.diff(np.append(first, len(row_keys)))
        base = np.cumsum(rows * width) - rows * width
        per_series = (base - first * width)[rank[node]] + column
        cell = np.repeat(per_series, counts) + row * np.repeat(width[rank[node]], counts)
        described = np.full(int((rows * width).sum()), -1, dtype=np.int64)
        point_ident = np.repeat(ident, counts)
        described[cell] = point_ident
        if (described[cell] != point_ident).any():
            return None
        return cls(order, nodes, first, rows, width, base, row_keys % n_t, times, cell, described)

    @classmethod
    def _every_time(
        cls, order: list[str], nodes: list[int], width: Array, rank: Array, column: Array, ident: Array, times: Array
    ) -> _Grid | None:
        """:meth:`build` when every series holds every time, in order (``rank``, ``column``, ``ident``:
        per series): then every host has a row per time, and two series share cells only when they
        share their host and GPU column, all of them. So the label sets are checked per (host, column)
        slot, and each host's rows repeat its slots' label sets."""
        n_t, n = len(times), len(nodes)
        rows = np.full(n, n_t, dtype=np.int64)
        base = (np.cumsum(width) - width) * n_t
        slots = np.cumsum(width) - width  # per host: its first (host, column) slot
        slot = slots[rank] + column
        held = np.full(int(width.sum()), -1, dtype=np.int64)
        held[slot] = ident
        if (held[slot] != ident).any():
            return None  # two label sets describe one GPU at once
        sizes = n_t * width
        host = np.repeat(np.arange(n), sizes)  # per cell
        within = np.arange(int(sizes.sum())) - base[host]
        described = held[slots[host] + within % width[host]]
        cell = (base[rank] + column)[:, None] + np.arange(n_t) * width[rank][:, None]  # per series and time
        row_time = np.tile(np.arange(n_t), n)
        first = np.arange(n) * n_t
        return cls(order, nodes, first, rows, width, base, row_time, times.copy(), cell.ravel(), described, cell[:, 0])

    def values(self, codes: Array, counts: Array, values: Array, n_names: int) -> Array:
        """Per metric, the value of each cell (NaN: none): the first value given wins (``codes``: each
        series' metric, ``counts``: its points)."""
        n_cells = len(self.ident)
        if self.first_cells is not None and len(np.unique(codes * n_cells + self.first_cells)) == len(codes):
            # every series holds every time: two series share all their cells or none, and no two of
            # one metric share theirs, so each cell is given once at most
            out = np.full(n_names * n_cells, np.nan)
            out[(codes * n_cells)[:, None] + self.cell.reshape(len(codes), -1)] = values.reshape(len(codes), -1)
            return out.reshape(n_names, n_cells)
        key = np.repeat(codes, counts) * n_cells + self.cell
        given = values
        have = ~np.isnan(values)
        if not have.all():
            key, given = key[have], values[have]
        out = np.full(n_names * len(self.ident), np.nan)
        out[key] = given
        if (out.view(np.int64)[key] != given.view(np.int64)).any():  # one cell given twice, differently
            cells, first = np.unique(key, return_index=True)
            out[cells] = given[first]
        return out.reshape(n_names, len(self.ident))

    def events(
        self,
        layout: Layout,
        names: dict[str, int],
        codes: Array,
        values: Array,
        counts: Array,
        cluster: str,
        interval_s: float | None,
        stamp: Callable[[float], datetime],
    ) -> ParseResult:
        grid = self.values(codes, counts, values, len(names))
        metrics: list[dict[str, int]] = [{} for _ in layout.gpus]  # per node: its metrics in order of first series
        for node, _, _, name in layout.series:
            metrics[node].setdefault(name, names[name])
        stamps = [stamp(float(t)) for t in self.times]
        micros = np.array([(s - stamps[0]) // MICROSECOND for s in stamps], dtype=np.int64)
        blocks = [_Block.of(self, rank, layout) for rank in range(len(self.order))]
        picked = np.concatenate([g.cells for b in blocks for g in b.groups])
        columns = _columns(grid, picked, {m for ms in metrics for m in ms.values()}, names, layout.fields)
        result = ParseResult()
        at = 0
        for rank, block in enumerate(blocks):
            host = self.order[rank]
            fields: dict[str, int] = {}
            for name, code in metrics[self.nodes[rank]].items():
                fields[layout.fields[name][0]] = code  # one field given by two metrics: the last one's
            step = interval_s or _min_step(
                self.times[self.row_time[self.first[rank] : self.first[rank] + self.rows[rank]]]
            )
            out: list[tuple[int, Any]] = []
            for group in block.groups:
                n = len(group.picked)
                per_message = max(1, SCRAPE_ROWS // n)
                rows = self.row_time[self.first[rank] + group.rows]
                row_times = rows.tolist()
                row_micros = np.repeat(micros[rows], n)  # per GPU row of the group, its time's µs
                for start in range(0, len(row_times), per_message):
                    times = row_times[start : start + per_message]
                    size = len(times) * n
                    cols = {name: values * len(times) for name, values in group.shared.items()}
                    for key, code in fields.items():
                        cols[key] = columns[code][at : at + size].tolist()
                    at += size
                    when = stamps[times[0]]
                    if len(times) == 1:  # one scrape: version 2
                        data = GpuColumns(host, step, cols)
                        event = build_event(scrape_id(cluster, host, when), "dcgm", when, cluster, data)
                    else:  # gpu_columns.scrapes_event, its offsets and id from the rows' times
                        offsets = row_micros[start * n : start * n + size] - row_micros[start * n]
                        us = offsets[::n].tolist()
                        data = GpuColumns(host, step, cols, offsets.tolist())
                        last = when + max(us) * MICROSECOND
                        id_ = scrapes_id(cluster, host, when, last, len(set(us)))
                        event = build_event(id_, "dcgm", when, cluster, data)
                    out.append((int(group.rows[start]), event))
            if len(block.groups) > 1:
                out.sort(key=lambda pair: pair[0])
            result.events.extend(event for _, event in out)
        return result


def _same_times(all_times: Array, counts: Array) -> Array | None:
    """The times of the first series when every series holds the same times in order (a query_range
    answer without gaps), else None."""
    n_t = int(counts[0])
    times = all_times[:n_t]
    if (
        (counts == n_t).all()
        and (n_t == 1 or (times[1:] > times[:-1]).all())
        and (all_times.reshape(-1, n_t) == times).all()
    ):
        return times
    return None


@dataclass
class _Group:
    rows: Array  # rows of the node (from its first) with the same GPUs, described the same way
    picked: Array  # their GPU columns, in GPU order
    shared: dict[str, list[Any]]  # the columns every row of the group has alike
    cells: Array  # the cells, row by row


@dataclass
class _Block:
    groups: list[_Group]  # in order of first row

    @classmethod
    def of(cls, grid: _Grid, rank: int, layout: Layout) -> _Block:
        n_rows, width, base = int(grid.rows[rank]), int(grid.width[rank]), int(grid.base[rank])
        idents = grid.ident[base : base + n_rows * width].reshape(n_rows, width)
        if n_rows == 1 or (idents == idents[0]).all():
            layouts = [np.arange(n_rows)]
        else:
            rows: dict[bytes, list[int]] = {}
            for row in range(n_rows):
                rows.setdefault(idents[row].tobytes(), []).append(row)
            layouts = [np.array(r) for r in rows.values()]
        keys = sorted(layout.gpus[grid.nodes[rank]].items(), key=lambda kv: kv[1])
        groups = []
        for members in layouts:
            cols = np.flatnonzero(idents[members[0]] >= 0)
            metas = [layout.described[i].meta for i in idents[members[0], cols].tolist()]
            order = sorted(range(len(cols)), key=lambda j: order_key(metas[j], keys[cols[j]][0]))
            picked = cols[order]
            shared: dict[str, list[Any]] = {
                "uuid": [keys[c][0][0] for c in picked.tolist()],
                "mig_instance": [keys[c][0][1] for c in picked.tolist()],
            }
            for name in META:
                shared[name] = [metas[j][name] for j in order]
            cells = (base + members[:, None] * width + picked[None, :]).ravel()
            groups.append(_Group(members, picked, shared, cells))
        return cls(groups)


def _columns(
    grid: Array, picked: Array, codes: set[int], names: dict[str, int], fields: dict[str, tuple[str, str]]
) -> dict[int, Array]:
    """Per metric, the values of the ``picked`` cells, whose ``tolist`` gives Python values (``int`` for
    XIDs, ``None`` where missing): each message takes its slice as a list (one list per message, no
    list of the whole input sliced again)."""
    out: dict[int, Array] = {}
    for name, code in names.items():
        if code not in codes:
            continue
        m = grid[code][picked]
        missing = np.isnan(m)
        integral = fields[name][0] == "xid"
        if not missing.any():
            out[code] = m.astype(np.int64) if integral else m
            continue
        objs = np.where(missing, 0, m).astype(np.int64).astype(object) if integral else m.astype(object)
        objs[missing] = None
        out[code] = objs
    return out


def read(
    answer: bytes | str,
    *,
    cluster: str,
    node: str | None,
    interval_s: float | None,
    fields: dict[str, tuple[str, str]],
    describe: Callable[[dict[str, str], str | None], Any],
    blank: Callable[[str, Array], Array],
) -> ParseResult | None:
    """Events of a clean matrix answer, or ``None`` (let the record-by-record path read it)."""
    with gc_paused(answer):  # what _read built and dropped is gone before the collector runs again
        return _read(answer, Layout(node, fields, describe, blank), cluster, interval_s)


def _read(answer: bytes | str, layout: Layout, cluster: str, interval_s: float | None) -> ParseResult | None:
    scanning = start_scan(answer.encode() if isinstance(answer, str) else answer)
    if scanning is not None:
        result, points = scanning
        placed = _place_scanned(result, layout)  # while Arrow reads the points
        read = points()
        if not placed:
            return None  # whatever the points: a series that cannot be placed has a reason to be told
        if read is not None:
            layout.arrays = read
            return layout.result(cluster, interval_s, from_epoch)  # in range: checked by the scan
        layout = Layout(layout.hint, layout.fields, layout.describe, layout.blank)
    series_list = _matrix_series(answer)
    if series_list is None or not all(_add(series, layout) for series in series_list):
        return None
    return layout.result(cluster, interval_s, from_epoch)  # in range: checked before


def _matrix_series(answer: bytes | str) -> list[Any] | None:
    """The ``result`` list of a successful Prometheus matrix answer, or ``None`` when it is not one."""
    import orjson

    try:
        obj = orjson.loads(answer)
    except orjson.JSONDecodeError:
        return None
    data = obj.get("data") if isinstance(obj, dict) and obj.get("status") == "success" else None
    if not isinstance(data, dict) or data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
        return None
    return data["result"]


def read_by_node(
    answer: bytes | str,
    *,
    cluster: str,
    node: str | None,
    interval_s: float | None,
    fields: dict[str, tuple[str, str]],
    describe: Callable[[dict[str, str], str | None], Any],
    blank: Callable[[str, Array], Array],
) -> tuple[ParseResult, list[Any]] | None:
    """A matrix answer node by node: the events of every node whose series are all clean, and the
    series left for the record-by-record path (the other nodes' and those that name no node), in
    their order. A node's events depend only on its own series, so one bad record costs its node
    the slow path, not the whole answer. ``None`` when the answer is not a matrix."""
    series_list = _matrix_series(answer)
    if series_list is None:
        return None
    hosts: dict[str, list[int]] = {}
    unplaced: list[int] = []
    known: dict[tuple[tuple[str, str], ...], Any] = {}
    for i, series in enumerate(series_list):
        metric = series.get("metric") if isinstance(series, dict) else None
        labels = _labels(metric)
        if labels is None:
            unplaced.append(i)
            continue
        info = known.get(labels)
        if info is None:
            info = known[labels] = describe(dict(labels), node)
        (unplaced if isinstance(info, str) else hosts.setdefault(info.host, [])).append(i)
    done = ParseResult()
    slow = set(unplaced)
    for members in hosts.values():
        layout = Layout(node, fields, describe, blank)
        part = None
        if all(_add(series_list[i], layout) for i in members):
            part = layout.result(cluster, interval_s, from_epoch)  # in range: checked before
        if part is None:
            slow.update(members)
        else:
            done.events.extend(part.events)
    return done, [series for i, series in enumerate(series_list) if i in slow]


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
    labels = _labels(metric)
    return labels is not None and layout.place(metric.get("__name__", ""), labels, times, list(vs))


def _place_scanned(result: list[dict[str, Any]], layout: Layout) -> bool:
    """Every series of a scanned answer placed in ``layout`` (as :meth:`Layout.place` places one, by
    its index in the scan's arrays); False when one cannot be. The metrics of one GPU share their
    labels but ``__name__``: those are checked, sorted and looked up once per order given."""
    # labels as given (without __name__) -> [sorted labels, where they go: () until a series read needs it]
    known: dict[tuple[tuple[str, Any], ...], list[Any]] = {}
    fields, series, scanned = layout.fields, layout.series, layout.scanned
    for i, item in enumerate(result):
        metric = item["metric"]
        if type(metric) is not dict:
            return False
        given = metric.copy()
        name = given.pop("__name__", "")
        try:
            entry = known.get(key := tuple(given.items()))
        except TypeError:  # a value that is not hashable, so not a string
            return False
        if entry is None:
            labels = _labels(metric)
            if labels is None:
                return False
            entry = known[key] = [labels, ()]
        elif type(name) is not str:
            return False
        if name not in fields:
            continue  # a well-formed series of no interest
        where = entry[1]
        if where == ():
            where = entry[1] = layout.where(entry[0])
        if where is None:
            return False  # cannot be placed: the slow path says why
        series.append((*where, name))
        scanned.append(i)
    return True


def _labels(metric: Any) -> tuple[tuple[str, str], ...] | None:
    """A series' labels sorted, without ``__name__``; None unless every label is a string."""
    if not isinstance(metric, dict) or set(map(type, metric.values())) - {str}:
        return None
    return tuple(sorted((k, v) for k, v in metric.items() if k != "__name__"))


def order_key(meta: dict[str, Any], key: tuple[str, int | None]) -> tuple[int, str, int]:
    index = meta["index"]
    return (index if index is not None else 1 << 30, key[0], -1 if key[1] is None else key[1])


def _min_step(times: Array) -> float | None:
    gaps = np.diff(times)
    gaps = gaps[gaps > 0]
    return float(gaps.min()) if len(gaps) and math.isfinite(gaps.min()) else None
