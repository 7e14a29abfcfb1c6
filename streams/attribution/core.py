"""Pure attribution of one node's GPU-seconds in one window (no Kafka, no ClickHouse).

Inputs: the node's placements (who holds which GPU slot, when, with what share), the utilisation
and XID series of each GPU / MIG instance, and the window. Output: fact rows, per GPU, that
conserve capacity exactly::

    window_seconds × 1.0  ==  Σ allocated(owner) + unallocated + unavailable      (per GPU)
    busy + unobserved  ≤  allocated                                             (per owner row)

How each rule of docs/ATTRIBUTION.md is applied here:

* Allocation comes from placement intervals (exact to the millisecond), never from samples.
* A binding is a placement's claim on one GPU: share 1 (whole GPU), g/7 (MIG instance) or 1/N
  (time-sliced replica). Claims on a GPU that exceed its capacity at some instant (conflicting
  scheduler data) are scaled down proportionally for that instant so conservation still holds.
* Busy = share × ∫ held utilisation over the binding's time in the window; a sample holds until the
  next one, at most ``HOLD_INTERVALS`` scrape intervals; time not covered is unobserved.
* Placements whose GPUs no source names (``unbound``) take free capacity of the node's GPUs in
  index order; their busy time is all unobserved.
* Unavailable: a GPU showing a fatal XID from that sample until a sample shows it cleared; only
  capacity no placement holds counts as unavailable (allocation wins).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

HOLD_INTERVALS = 3
FATAL_XIDS = frozenset({48, 63, 64, 74, 79, 92, 94, 95, 119, 120})
NODE_SLOT = ""  # capacity claimed on a node whose GPUs are unknown
EPSILON_S = 1e-6  # float residue below a microsecond is not a fact row (capacity stays exact to the ms)


@dataclass(frozen=True)
class Owner:
    """Owner dimensions stamped on allocated facts (team/business unit resolved at query time)."""

    scheduler: str
    job_id: str
    attempt: int
    logical_job: str = ""
    namespace: str = ""
    account: str = ""
    user: str = ""
    queue: str = ""
    workload_kind: str = "unknown"
    team_label: str = ""
    model: str = "unknown"


@dataclass(frozen=True)
class Binding:
    uuid: str  # the physical GPU
    share: float  # of the GPU's capacity: 1, g/7 or 1/N
    series: str | None  # slot whose utilisation applies (uuid or uuid/migN); None → unobserved
    slot: str  # reported slot: uuid, uuid/migN or uuid::replica


@dataclass(frozen=True)
class Placement:
    owner: Owner
    start: float  # epoch seconds
    end: float | None  # None: still running (held through the window)
    bindings: tuple[Binding, ...] = ()
    unbound_gpus: float = 0.0  # whole-GPU equivalents held on the node, GPUs unknown


@dataclass
class Series:
    """Samples of one slot, ascending by time."""

    times: list[float] = field(default_factory=list)
    utils: list[float | None] = field(default_factory=list)
    xids: list[int | None] = field(default_factory=list)
    interval: float = 30.0

    def held_integral(self, a: float, b: float) -> tuple[float, float]:
        """(∫ util dt, observed seconds) over [a, b) with sample-and-hold."""
        if b <= a or not self.times:
            return 0.0, 0.0
        hold = HOLD_INTERVALS * self.interval
        i = max(bisect.bisect_right(self.times, a) - 1, 0)
        busy = observed = 0.0
        n = len(self.times)
        while i < n and self.times[i] < b:
            t = self.times[i]
            nxt = self.times[i + 1] if i + 1 < n else float("inf")
            lo, hi = max(t, a), min(nxt, t + hold, b)
            if hi > lo:
                util = self.utils[i]
                if util is not None:
                    busy += util * (hi - lo)
                    observed += hi - lo
            i += 1
        return busy, observed


@dataclass(frozen=True)
class GpuInfo:
    uuid: str
    index: int | None
    model: str


@dataclass(frozen=True)
class FactRow:
    node: str
    gpu_uuid: str
    slot: str
    gpu_model: str
    kind: str  # allocated | unallocated | unavailable
    owner: Owner | None
    gpu_seconds: float
    busy_seconds: float = 0.0
    unobserved_seconds: float = 0.0


def down_intervals(series: Iterable[Series]) -> list[tuple[float, float]]:
    """Fatal-XID intervals of one GPU from all its slots' samples (merged, ascending)."""
    points = sorted((t, x) for s in series for t, x in zip(s.times, s.xids, strict=True) if x is not None)
    out: list[tuple[float, float]] = []
    start: float | None = None
    for t, xid in points:
        if xid in FATAL_XIDS and start is None:
            start = t
        elif xid not in FATAL_XIDS and start is not None:
            out.append((start, t))
            start = None
    if start is not None:
        out.append((start, float("inf")))
    return out


def _clip(start: float, end: float | None, w0: float, w1: float) -> tuple[float, float]:
    return max(start, w0), min(end if end is not None else w1, w1)


def _gpu_segments(claims: list[tuple[int, float, float, float]], down: Sequence[tuple[float, float]],
                  w0: float, w1: float) -> tuple[dict[int, float], float, float]:
    """Sweep one GPU's window: allocated seconds per claim, unallocated and unavailable seconds.

    ``claims`` are (claim index, share, start, end) already clipped to the window.
    """
    edges = {w0, w1}
    for _, _, s, e in claims:
        edges.update((s, e))
    for s, e in down:
        if s < w1 and e > w0:
            edges.update((max(s, w0), min(e, w1)))
    cuts = sorted(edges)
    allocated: dict[int, float] = {}
    unallocated = unavailable = 0.0
    for t0, t1 in zip(cuts, cuts[1:], strict=False):
        dt = t1 - t0
        if dt <= 0:
            continue
        active = [(k, share) for k, share, s, e in claims if s <= t0 and e >= t1]
        total = sum(share for _, share in active)
        scale = 1.0 / total if total > 1.0 else 1.0
        for k, share in active:
            allocated[k] = allocated.get(k, 0.0) + share * scale * dt
        rest = dt * (1.0 - min(total, 1.0))
        if any(s <= t0 and e >= t1 for s, e in down):
            unavailable += rest
        else:
            unallocated += rest
    return allocated, unallocated, unavailable


def attribute_window(
    node: str,
    w0: float,
    w1: float,
    gpus: Sequence[GpuInfo],
    placements: Sequence[Placement],
    series: dict[str, Series],
    slots_of_gpu: dict[str, list[str]] | None = None,
    down_cache: dict[tuple[str, ...], list[tuple[float, float]]] | None = None,
) -> list[FactRow]:
    """All fact rows of ``node`` for the window [w0, w1).

    ``down_cache`` memoises fatal-XID intervals per set of slots across the windows of one range
    (the series are the same for every window, so are the intervals computed from them).
    """
    slots_of_gpu = slots_of_gpu or {g.uuid: [g.uuid] for g in gpus}
    info = {g.uuid: g for g in gpus}
    # a fixed order makes the floating-point sums identical however the inputs arrived
    active = sorted((p for p in placements if p.start < w1 and (p.end is None or p.end > w0)),
                    key=lambda p: (p.owner.scheduler, p.owner.job_id, p.owner.attempt, p.start, repr(p.bindings)))
    for p in active:  # a GPU named by an allocation is present even without samples
        for b in p.bindings:
            info.setdefault(b.uuid, GpuInfo(b.uuid, None, "unknown"))
    order = sorted(info.values(), key=lambda g: (g.index is None, g.index or 0, g.uuid))
    rows: list[FactRow] = []
    free: dict[str, float] = {}
    for gpu in order:
        claims: list[tuple[int, float, float, float]] = []
        meta: list[tuple[Placement, Binding, float, float]] = []
        for p in active:
            s, e = _clip(p.start, p.end, w0, w1)
            for b in p.bindings:
                if b.uuid == gpu.uuid and e > s:
                    claims.append((len(meta), b.share, s, e))
                    meta.append((p, b, s, e))
        slots = tuple(s for s in slots_of_gpu.get(gpu.uuid, []) if s in series)
        down = down_cache.get(slots) if down_cache is not None else None
        if down is None:
            down = down_intervals(series[s] for s in slots)
            if down_cache is not None:
                down_cache[slots] = down
        allocated, unallocated, unavailable = _gpu_segments(claims, down, w0, w1)
        for k, (p, b, s, e) in enumerate(meta):
            alloc = allocated.get(k, 0.0)
            busy = observed = 0.0
            if b.series is not None and b.series in series:
                busy, observed = series[b.series].held_integral(s, e)
            busy_s = min(b.share * busy, alloc)
            unobserved = max(alloc - b.share * observed, 0.0)
            rows.append(FactRow(node, gpu.uuid, b.slot, gpu.model, "allocated", p.owner, alloc, busy_s,
                                min(unobserved, alloc - busy_s)))
        free[gpu.uuid] = unallocated
        if unavailable > EPSILON_S:
            rows.append(FactRow(node, gpu.uuid, gpu.uuid, gpu.model, "unavailable", None, unavailable))
    rows.extend(_place_unbound(node, w0, w1, order, active, free))
    for gpu in order:
        if free[gpu.uuid] > EPSILON_S:
            rows.append(FactRow(node, gpu.uuid, gpu.uuid, gpu.model, "unallocated", None, free[gpu.uuid]))
    return _merge(rows)


def _place_unbound(node: str, w0: float, w1: float, order: Sequence[GpuInfo], active: Sequence[Placement],
                   free: dict[str, float]) -> list[FactRow]:
    """Give placements without GPU ids free capacity of the node's GPUs, in index order."""
    rows: list[FactRow] = []
    for p in sorted(active, key=lambda p: (p.start, p.owner.job_id, p.owner.attempt)):
        if p.unbound_gpus <= 0:
            continue
        s, e = _clip(p.start, p.end, w0, w1)
        need = p.unbound_gpus * max(e - s, 0.0)
        for gpu in order:
            if need <= 1e-9:
                break
            take = min(free[gpu.uuid], need)
            if take > 0:
                free[gpu.uuid] -= take
                need -= take
                rows.append(FactRow(node, gpu.uuid, gpu.uuid, gpu.model, "allocated", p.owner, take, 0.0, take))
        if need > 1e-9:  # more claimed than the node's known GPUs can hold: keep it, on the node slot
            rows.append(FactRow(node, NODE_SLOT, NODE_SLOT, "unknown", "allocated", p.owner, need, 0.0, need))
    return rows


def _merge(rows: list[FactRow]) -> list[FactRow]:
    """One row per (gpu, slot, kind, owner): a placement may bind a slot through several ids."""
    merged: dict[tuple[object, ...], FactRow] = {}
    for r in rows:
        key = (r.gpu_uuid, r.slot, r.kind, r.owner)
        if key in merged:
            m = merged[key]
            merged[key] = FactRow(m.node, m.gpu_uuid, m.slot, m.gpu_model, m.kind, m.owner,
                                  m.gpu_seconds + r.gpu_seconds, m.busy_seconds + r.busy_seconds,
                                  m.unobserved_seconds + r.unobserved_seconds)
        else:
            merged[key] = r
    return list(merged.values())
