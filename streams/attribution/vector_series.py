"""One node's samples as per-GPU numpy arrays, and the scalar core's integrals over many intervals.

The vectorised attribution (``streams/attribution/vector.py``) asks, for thousands of intervals at
once, what :class:`streams.attribution.core.Series` answers one interval at a time:
``held_integral`` (sample-and-hold utilisation) and ``energy_integral`` (joules). Each interval's
pieces are the same pieces the core visits, computed with the same floating-point operations and
summed in the same order (``np.bincount`` adds its weights one after the other), so the results are
bit-identical to the core's, not merely close.

:func:`build_series` mirrors ``compute._build_slots`` for whole-GPU samples: time order (stable), a
repeated (GPU, time) counted once (the first), the scrape interval the last one a sample states,
else the median gap, else 30 s; index and model of the GPU's first sample.
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
class GpuSeries:
    """One GPU's kept samples, ascending by time; NaN stands for a missing reading."""

    uuid: str
    index: int | None
    model: str
    times: Floats
    utils: Floats
    xids: Floats
    interval: float
    watts_in: Floats | None  # W from sample i on while the next sample lies before the horizon
    watts_edge: Floats | None  # W from sample i on when the next sample is at or after the horizon

    @property
    def hold(self) -> float:
        return HOLD_INTERVALS * self.interval


def sums(groups: Ints, weights: Floats, groups_count: int) -> Floats:
    """Per group the sum of its weights, added one after the other in the order given (as a loop would)."""
    return cast(Floats, np.bincount(groups, weights, groups_count))


def _floats(column: Sequence[Any]) -> Floats:
    return np.asarray(column, dtype=np.float64)  # None → NaN


def has_mig(migs: Sequence[Any]) -> bool:
    if isinstance(migs, list):
        return migs.count(None) != len(migs)
    return bool(np.any(~np.isnan(_floats(migs))))


def build_series(columns: tuple[Sequence[Any], ...]) -> dict[str, GpuSeries]:
    """Per GPU uuid its series (whole-GPU samples only: the caller checked there is no MIG instance)."""
    times, uuids, _migs, indices, models, _profiles, utils, xids, _ns, _pods, _jobs, intervals, *energy = columns
    n = len(times)
    if n == 0:
        return {}
    t = _floats(times)
    lookup: dict[str, int] = {}
    codes = np.fromiter((lookup.setdefault(u, len(lookup)) for u in uuids), dtype=np.int64, count=n)
    by_time = np.argsort(t, kind="stable") if np.any(t[1:] < t[:-1]) else np.arange(n)
    perm = by_time[np.argsort(codes[by_time], kind="stable")]  # per GPU, in time order
    ct, cc = t[perm], codes[perm]
    keep = np.ones(n, dtype=bool)
    keep[1:] = (cc[1:] != cc[:-1]) | (ct[1:] != ct[:-1])
    perm, cc = perm[keep], cc[keep]
    bounds = np.flatnonzero(np.r_[True, cc[1:] != cc[:-1], True])
    cols = {
        "utils": _floats(utils),
        "xids": _floats(xids),
        "intervals": _floats(intervals),
        "powers": _floats(energy[0]) if energy else np.full(n, np.nan),
        "energies": _floats(energy[1]) if energy else np.full(n, np.nan),
    }
    uuid_of = list(lookup)
    out: dict[str, GpuSeries] = {}
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        rows = perm[a:b]
        first = int(rows[0])
        out[uuid_of[int(cc[a])]] = _series(
            uuid_of[int(cc[a])], indices[first], models[first], t[rows], {k: v[rows] for k, v in cols.items()}
        )
    return out


def _series(uuid: str, index: int | None, model: str, times: Floats, cols: dict[str, Floats]) -> GpuSeries:
    stated = cols["intervals"]
    truthy = np.flatnonzero(~np.isnan(stated) & (stated != 0))
    if truthy.size:
        interval = float(stated[truthy[-1]])
    elif times.size > 1:
        gaps = np.sort(np.diff(times))
        gaps = gaps[gaps > 0]
        interval = float(gaps[len(gaps) // 2]) if gaps.size else DEFAULT_INTERVAL_S
    else:
        interval = DEFAULT_INTERVAL_S
    s = GpuSeries(uuid, index, model, times, cols["utils"], cols["xids"], interval, None, None)
    powers, energies = cols["powers"], cols["energies"]
    if not (np.all(np.isnan(powers)) and np.all(np.isnan(energies))):
        s.watts_in, s.watts_edge = _watts(times, powers, energies, s.hold)
    return s


def _watts(times: Floats, powers: Floats, energies: Floats, hold: float) -> tuple[Floats, Floats]:
    """``Series._watts`` for every sample, for a horizon beyond the next sample and for one before it."""
    n = times.size
    rate = np.full(n, np.nan)
    if n > 1:
        t0, t1, e0, e1 = times[:-1], times[1:], energies[:-1], energies[1:]
        ok = ~np.isnan(e0) & ~np.isnan(e1) & (e1 >= e0) & (t1 > t0) & (t1 - t0 <= hold)
        with np.errstate(invalid="ignore", divide="ignore"):
            rate[:-1] = np.where(ok, (e1 - e0) / 1000.0 / (t1 - t0), np.nan)
    fallback = np.full(n, np.nan)
    for lag in range(HOLD_INTERVALS, 0, -1):  # the nearest earlier rate wins: written last
        earlier = np.full(n, np.nan)
        earlier[lag:] = rate[:-lag] if n > lag else earlier[lag:]
        fallback = np.where(np.isnan(earlier), fallback, earlier)
    edge = np.where(np.isnan(powers), fallback, powers)
    return np.where(np.isnan(rate), edge, rate), edge


def down_intervals(xids: Floats, times: Floats, since: float | None) -> list[tuple[float, float]]:
    """``core.down_intervals`` of one whole GPU's series."""
    seen = ~np.isnan(xids)
    t, fatal = times[seen], np.isin(xids[seen], _FATAL)
    out: list[tuple[float, float]] = []
    start = since
    if not t.size:
        return [(since, float("inf"))] if since is not None else []
    changes = np.flatnonzero(fatal != np.r_[since is not None, fatal[:-1]])
    for i in changes.tolist():
        if fatal[i]:
            start = float(t[i])
        elif start is not None:
            out.append((start, float(t[i])))
            start = None
    if start is not None:
        out.append((start, float("inf")))
    return out


def _pieces(s: GpuSeries, a: Floats, b: Floats) -> tuple[Ints, Ints, Floats]:
    """Per piece: its query, its sample, and its length — the core's ``lo, hi`` for sample i over [a, b)."""
    times = s.times
    lo = np.maximum(np.searchsorted(times, a, "right") - 1, 0)
    count = np.maximum(np.searchsorted(times, b, "left") - lo, 0)
    query = np.repeat(np.arange(a.size), count)
    sample = lo[query] + (np.arange(query.size) - np.repeat(np.cumsum(count) - count, count))
    t = times[sample]
    nxt = np.append(times, np.inf)[sample + 1]
    start = np.maximum(t, a[query])
    stop = np.minimum(np.minimum(nxt, t + s.hold), b[query])
    return query, sample, np.where(stop > start, stop - start, 0.0)


def held_integrals(s: GpuSeries | None, a: Floats, b: Floats) -> tuple[Floats, Floats]:
    """``Series.held_integral(a[q], b[q])`` for every q: (∫ util dt, observed seconds)."""
    if s is None or s.times.size == 0 or a.size == 0:
        return np.zeros(a.size), np.zeros(a.size)
    query, sample, length = _pieces(s, a, b)
    util = s.utils[sample]
    seen = ~np.isnan(util) & (length > 0)
    busy = sums(query, np.where(seen, util * length, 0.0), a.size)
    observed = sums(query, np.where(seen, length, 0.0), a.size)
    return busy, observed


def energy_integrals(s: GpuSeries | None, a: Floats, b: Floats, horizon: Floats) -> Floats:
    """``Series.energy_integral(a[q], b[q], horizon[q])`` for every q."""
    if s is None or s.watts_in is None or s.watts_edge is None or a.size == 0:
        return np.zeros(a.size)
    query, sample, length = _pieces(s, a, b)
    nxt = np.append(s.times, np.inf)[sample + 1]
    watts = np.where(nxt < horizon[query], s.watts_in[sample], s.watts_edge[sample])
    used = ~np.isnan(watts) & (length > 0)
    return sums(query, np.where(used, watts * length, 0.0), a.size)
