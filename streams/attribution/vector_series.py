"""One node's samples as numpy arrays, and the scalar core's integrals over many intervals at once.

The vectorised attribution (``streams/attribution/vector.py``) asks, for thousands of (GPU,
interval) pairs at once, what :class:`streams.attribution.core.Series` answers one interval at a
time: ``held_integral`` (sample-and-hold utilisation) and ``energy_integral`` (joules). Each
interval's pieces are the pieces the core visits, computed with the same floating-point operations
and summed in the same order (``np.bincount`` adds its weights one after the other), so the results
are bit-identical to the core's, not merely close.

:func:`build_series` mirrors ``compute._build_slots`` for whole-GPU samples: time order (stable), a
repeated (GPU, time) counted once (the first), the scrape interval the last sample stating one
gives, else the median gap, else 30 s; index and model of the GPU's first sample. All GPUs' samples
sit in one array, GPU after GPU, each in time order; a (GPU, time) search uses exact integer keys
(the GPU, then the time's rank among every value searched), never a float offset.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from streams.attribution.core import FATAL_XIDS, HOLD_INTERVALS

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
DEFAULT_INTERVAL_S = 30.0
_FATAL = np.array(sorted(FATAL_XIDS), dtype=np.float64)


@dataclass
class NodeSeries:
    """Every GPU's kept samples; GPU g's are ``[bounds[g], bounds[g + 1])``. NaN: no reading."""

    uuids: list[str]
    index: list[int | None]
    model: list[str]
    hold: Floats  # per GPU: HOLD_INTERVALS × its scrape interval
    bounds: Ints
    gpu: Ints  # per sample
    times: Floats
    utils: Floats
    xids: Floats
    fatal: npt.NDArray[np.bool_]  # the sample shows a fatal XID
    nxt: Floats  # the GPU's next sample time, inf after its last
    watts_in: Floats  # W from the sample on while the next sample lies before the horizon
    watts_edge: Floats  # W from the sample on when the next sample is at or after the horizon


def sums(groups: Ints, weights: Floats, groups_count: int) -> Floats:
    """Per group the sum of its weights, added one after the other in the order given (as a loop would)."""
    return cast(Floats, np.bincount(groups, weights, groups_count))


def _floats(column: Sequence[Any]) -> Floats:
    if isinstance(column, list) and column.count(None) == len(column):  # a metric not scraped at all
        return np.full(len(column), np.nan)
    return np.asarray(column, dtype=np.float64)  # None → NaN


def has_mig(migs: Sequence[Any]) -> bool:
    if isinstance(migs, list):
        return migs.count(None) != len(migs)
    return bool(np.any(~np.isnan(_floats(migs))))


def build_series(columns: tuple[Sequence[Any], ...]) -> NodeSeries:
    """The node's series (whole-GPU samples only: the caller checked there is no MIG instance)."""
    times, uuids, _migs, indices, models, _profiles, utils, xids, _ns, _pods, _jobs, intervals, *energy = columns
    n = len(times)
    t = _floats(times)
    lookup = {u: i for i, u in enumerate(dict.fromkeys(uuids))}  # GPUs in order of first appearance
    codes = np.fromiter(map(lookup.__getitem__, uuids), dtype=np.int64, count=n)
    by_time = np.argsort(t, kind="stable") if np.any(t[1:] < t[:-1]) else np.arange(n)
    perm = by_time[np.argsort(codes[by_time], kind="stable")]  # per GPU, in time order
    gpu, ts = codes[perm], t[perm]
    keep = np.ones(n, dtype=bool)
    keep[1:] = (gpu[1:] != gpu[:-1]) | (ts[1:] != ts[:-1])
    perm, gpu, ts = perm[keep], gpu[keep], ts[keep]
    bounds = np.searchsorted(gpu, np.arange(len(lookup) + 1), "left")
    firsts = perm[bounds[:-1]].tolist()
    last = bounds[1:] - 1
    nxt = np.append(ts[1:], np.inf)
    nxt[last] = np.inf
    hold = HOLD_INTERVALS * _intervals(_floats(intervals)[perm], ts, bounds)
    ns = NodeSeries(
        list(lookup),
        [indices[i] for i in firsts],
        [models[i] for i in firsts],
        hold,
        bounds,
        gpu,
        ts,
        _floats(utils)[perm],
        xid := _floats(xids)[perm],
        np.isin(xid, _FATAL),
        nxt,
        ts,
        ts,
    )
    powers = _floats(energy[0])[perm] if energy else np.full(gpu.size, np.nan)
    energies = _floats(energy[1])[perm] if energy else np.full(gpu.size, np.nan)
    ns.watts_in, ns.watts_edge = _watts(ns, powers, energies)
    return ns


def _intervals(stated: Floats, times: Floats, bounds: Ints) -> Floats:
    """Per GPU: the last interval a sample states, else the median positive gap, else 30 s."""
    out = np.full(bounds.size - 1, DEFAULT_INTERVAL_S)
    truthy = np.where(~np.isnan(stated) & (stated != 0), np.arange(stated.size), -1)
    for g, (a, b) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)):
        at = int(truthy[a:b].max()) if b > a else -1
        if at >= 0:
            out[g] = stated[at]
        elif b - a > 1:
            gaps = np.sort(np.diff(times[a:b]))
            gaps = gaps[gaps > 0]
            out[g] = gaps[len(gaps) // 2] if gaps.size else DEFAULT_INTERVAL_S
    return out


def _watts(ns: NodeSeries, powers: Floats, energies: Floats) -> tuple[Floats, Floats]:
    """``Series._watts`` for every sample, for a horizon beyond the next sample and for one before it."""
    n = ns.times.size
    hold = ns.hold[ns.gpu]
    e1 = np.append(energies[1:], np.nan)
    e1[np.isinf(ns.nxt)] = np.nan
    ok = ~np.isnan(energies) & ~np.isnan(e1) & (e1 >= energies) & (ns.nxt > ns.times) & (ns.nxt - ns.times <= hold)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(ok, (e1 - energies) / 1000.0 / (ns.nxt - ns.times), np.nan)
    fallback = np.full(n, np.nan)
    for lag in range(HOLD_INTERVALS, 0, -1):  # the nearest earlier rate wins: written last
        if n <= lag:
            continue
        earlier = np.full(n, np.nan)
        earlier[lag:] = np.where(ns.gpu[lag:] == ns.gpu[:-lag], rate[:-lag], np.nan)
        fallback = np.where(np.isnan(earlier), fallback, earlier)
    edge = np.where(np.isnan(powers), fallback, powers)
    return np.where(np.isnan(rate), edge, rate), edge


def down_intervals(ns: NodeSeries | None, g: int, since: float | None) -> list[tuple[float, float]]:
    """``core.down_intervals`` of GPU ``g``'s series (``g`` beyond the series: no samples)."""
    if ns is None or g >= len(ns.uuids):
        return [(since, float("inf"))] if since is not None else []
    a, b = int(ns.bounds[g]), int(ns.bounds[g + 1])
    if since is None and not ns.fatal[a:b].any():
        return []
    seen = ~np.isnan(ns.xids[a:b])
    t, fatal = ns.times[a:b][seen], ns.fatal[a:b][seen]
    if not t.size:
        return [(since, float("inf"))] if since is not None else []
    out: list[tuple[float, float]] = []
    start = since
    for i in np.flatnonzero(fatal != np.r_[since is not None, fatal[:-1]]).tolist():
        if fatal[i]:
            start = float(t[i])
        elif start is not None:
            out.append((start, float(t[i])))
            start = None
    if start is not None:
        out.append((start, float("inf")))
    return out


def keys(groups: Ints, values: Floats, *more: tuple[Ints, Floats]) -> list[Ints]:
    """Exact sort keys of (group, value) pairs: the group, then the value's rank among all given."""
    allv = np.concatenate([values, *(v for _, v in more)])
    _, rank = np.unique(allv, return_inverse=True)
    width = int(rank.max()) + 1 if rank.size else 1
    out, at = [], 0
    for g, v in [(groups, values), *more]:
        out.append(g.astype(np.int64) * width + rank[at : at + v.size])
        at += v.size
    return out


def _pieces(ns: NodeSeries, gpu: Ints, a: Floats, b: Floats) -> tuple[Ints, Ints, Floats]:
    """Per piece: its query, its sample, and its length — the core's ``lo, hi`` for sample i over [a, b)."""
    sk, ak, bk = keys(ns.gpu, ns.times, (gpu, a), (gpu, b))
    first = np.append(ns.bounds, ns.bounds[-1])[np.minimum(gpu, ns.bounds.size - 1)]
    lo = np.maximum(np.searchsorted(sk, ak, "right") - 1, first)
    count = np.maximum(np.searchsorted(sk, bk, "left") - lo, 0)
    query = np.repeat(np.arange(a.size), count)
    sample = lo[query] + (np.arange(query.size) - np.repeat(np.cumsum(count) - count, count))
    t = ns.times[sample]
    start = np.maximum(t, a[query])
    stop = np.minimum(np.minimum(ns.nxt[sample], t + ns.hold[ns.gpu[sample]]), b[query])
    return query, sample, np.where(stop > start, stop - start, 0.0)


def held_integrals(ns: NodeSeries | None, gpu: Ints, a: Floats, b: Floats) -> tuple[Floats, Floats]:
    """``Series.held_integral(a[q], b[q])`` of GPU ``gpu[q]`` for every q: (∫ util dt, observed seconds)."""
    if ns is None or not ns.times.size or not a.size:
        return np.zeros(a.size), np.zeros(a.size)
    query, sample, length = _pieces(ns, gpu, a, b)
    util = ns.utils[sample]
    seen = ~np.isnan(util) & (length > 0)
    busy = sums(query, np.where(seen, util * length, 0.0), a.size)
    observed = sums(query, np.where(seen, length, 0.0), a.size)
    return busy, observed


def energy_integrals(ns: NodeSeries | None, gpu: Ints, a: Floats, b: Floats, horizon: Floats) -> Floats:
    """``Series.energy_integral(a[q], b[q], horizon[q])`` of GPU ``gpu[q]`` for every q."""
    if ns is None or not ns.times.size or not a.size:
        return np.zeros(a.size)
    query, sample, length = _pieces(ns, gpu, a, b)
    watts = np.where(ns.nxt[sample] < horizon[query], ns.watts_in[sample], ns.watts_edge[sample])
    used = ~np.isnan(watts) & (length > 0)
    return sums(query, np.where(used, watts * length, 0.0), a.size)
