"""Pure attribution of one node's GPU-seconds in one window (no Kafka, no ClickHouse).

Inputs: the node's placements (who holds which GPU slot, when, with what share), the utilisation
and XID series of each GPU / MIG instance, and the window. Output: fact rows, per GPU, that
conserve capacity exactly::

    window_seconds × 1.0  ==  Σ allocated(owner) + unallocated + unavailable      (per GPU)
    busy + unobserved  ≤  allocated                                             (per owner row)

How each rule of docs/ATTRIBUTION.md is applied here:

* Allocation comes from placement intervals (exact to the millisecond), never from samples.
* A binding is a placement's claim on one GPU: share 1 (whole GPU), g/S (MIG instance, S the
  model's slices) or 1/N (time-sliced replica). Claims on a GPU that exceed its capacity at some
  instant (conflicting scheduler data) are scaled down proportionally for that instant so
  conservation still holds, and reported as a :class:`Conflict`.
* Busy = share × ∫ held utilisation over the binding's time in the window; a sample holds until the
  next one, at most ``HOLD_INTERVALS`` scrape intervals; time not covered is unobserved.
* A binding held through a DRA claim (``split``) shares its slot equally with the other split
  bindings on that slot at each instant: k holders take share / k each, k changing as they start and
  end; its busy time is the utilisation weighted by that changing share.
* Placements whose GPUs no source names (``unbound``) take free capacity of the node's GPUs in
  index order, then the node-level slot of GPUs the node declares but no sample names; what
  exceeds the node's physical GPUs is a conflict. Their busy time is all unobserved.
* Unavailable: a GPU showing a fatal XID from that sample until a sample shows it cleared (also
  when the XID sample came before the loaded range, ``Inventory.down_since``), and every GPU of a
  drained or down node; only capacity no placement holds counts as unavailable (allocation wins).
* Capacity is the physical inventory (:class:`NodeContext`): GPUs seen recently stay in capacity
  when they stop reporting (unallocated and unobserved, or unavailable after a fatal XID).
* Busy on a GPU nobody holds is kept on its unallocated row (a rogue process, or missing
  scheduler data), with the unobserved time beside it.
* Energy: the whole GPU's energy in each instant of the window (:meth:`Series.energy_integral`)
  goes where that instant's capacity goes — to each claim by its share, the rest to the unallocated
  or unavailable row — so energy is split exactly as GPU-seconds are and sums to the GPU's energy.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

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
    # held through a DRA claim: the slot is split equally among the split bindings holding it at
    # each instant (a claim reserved for several pods), each taking share / k
    split: bool = False


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
    powers: list[float | None] = field(default_factory=list)  # W (whole GPU), empty when not loaded
    energies: list[float | None] = field(default_factory=list)  # mJ, the GPU's energy counter
    _has_energy: bool | None = field(default=None, repr=False, compare=False)

    def has_energy(self) -> bool:
        """Whether any sample carries power or the energy counter (computed once: a range's series
        do not change while its windows are attributed)."""
        if self._has_energy is None:
            self._has_energy = any(v is not None for v in self.powers) or any(v is not None for v in self.energies)
        return self._has_energy

    def energy_integral(self, a: float, b: float, horizon: float) -> float:
        """Joules over [a, b), never counting on a sample at or after ``horizon`` (the window's end,
        so a window's energy depends on its own samples whatever range it is computed in).

        From each sample on, for as long as utilisation would be held: the energy counter's increase
        to the next sample spread evenly over the gap, when that sample is within the hold limit,
        before ``horizon`` and the counter did not go down (a reset); otherwise the sample's power
        held; without power, the counter's latest rate over one of the three gaps before the sample
        (a reset, or the window's end); without any of these, nothing (unobserved, as for utilisation).
        """
        times = self.times
        if b <= a or not times:
            return 0.0
        hold = HOLD_INTERVALS * self.interval
        i = max(bisect.bisect_right(times, a) - 1, 0)
        n = len(times)
        joules = 0.0
        while i < n and times[i] < b:
            t = times[i]
            nxt = times[i + 1] if i + 1 < n else float("inf")
            lo, hi = max(t, a), min(nxt, t + hold, b)
            if hi > lo:
                watts = self._watts(i, hold, horizon)
                if watts is not None:
                    joules += watts * (hi - lo)
            i += 1
        return joules

    def _watts(self, i: int, hold: float, horizon: float) -> float | None:
        rate = self._counter_rate(i, hold, horizon)
        if rate is not None:
            return rate
        power = self.powers[i] if i < len(self.powers) else None
        if power is not None:
            return power
        for j in range(i - 1, max(i - 1 - HOLD_INTERVALS, -1), -1):  # the counter's last rate, if recent
            rate = self._counter_rate(j, hold, horizon)
            if rate is not None:
                return rate
        return None

    def _counter_rate(self, i: int, hold: float, horizon: float) -> float | None:
        """W from the counter between sample i and the next, when both are usable (see above)."""
        if i + 1 >= len(self.energies):
            return None
        t0, t1 = self.times[i], self.times[i + 1]
        e0, e1 = self.energies[i], self.energies[i + 1]
        if e0 is None or e1 is None or e1 < e0 or t1 <= t0 or t1 - t0 > hold or t1 >= horizon:
            return None
        return (e1 - e0) / 1000.0 / (t1 - t0)

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
class NodeContext:
    """What the node is, beyond its samples: declared GPU count, drained/down intervals, and GPUs
    whose last sample before the loaded range showed a fatal XID (uuid → time of that sample)."""

    declared_gpus: int | None = None
    declared_model: str = "unknown"
    unavailable: tuple[tuple[float, float], ...] = ()  # node drained or down
    down_since: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Conflict:
    """Claims on one GPU (or the node-level slot) beyond its capacity in one window."""

    gpu_uuid: str
    claimed_seconds: float
    capacity_seconds: float
    owners: tuple[str, ...]


@dataclass
class WindowResult:
    rows: list[FactRow]
    physical_gpus: float
    conflicts: list[Conflict]


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
    energy_joules: float = 0.0


def down_intervals(series: Iterable[Series], since: float | None = None) -> list[tuple[float, float]]:
    """Fatal-XID intervals of one GPU from all its slots' samples (merged, ascending); ``since``: the
    GPU was already down from that time (a fatal XID before the samples given)."""
    points = sorted((t, x) for s in series for t, x in zip(s.times, s.xids, strict=True) if x is not None)
    out: list[tuple[float, float]] = []
    start: float | None = since
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


@dataclass
class _Sweep:
    """One GPU's window, swept: allocated seconds per claim and what nobody holds."""

    allocated: dict[int, float] = field(default_factory=dict)
    unallocated: float = 0.0
    unavailable: float = 0.0
    free_spans: list[tuple[float, float]] = field(default_factory=list)  # nobody holds any of the GPU
    # split claims: (start, end, share in force) per claim, to weigh their utilisation
    split_spans: dict[int, list[tuple[float, float, float]]] = field(default_factory=dict)
    claimed_over: float = 0.0  # claims beyond capacity (GPU-seconds)
    over_claims: set[int] = field(default_factory=set)
    energy: dict[int, float] = field(default_factory=dict)  # joules per claim
    unallocated_energy: float = 0.0
    unavailable_energy: float = 0.0


def _covered(intervals: Sequence[tuple[float, float]], t0: float, t1: float) -> bool:
    return any(s <= t0 and e >= t1 for s, e in intervals)


def _gpu_segments(
    claims: list[tuple[int, float, float, float]],
    down: Sequence[tuple[float, float]],
    w0: float,
    w1: float,
    power: Series | None = None,
    split: dict[int, str] | None = None,
) -> _Sweep:
    """Sweep one GPU's window. ``claims`` are (claim index, share, start, end) clipped to the window;
    ``power``: the whole GPU's series, whose energy each segment splits as it splits capacity;
    ``split``: claim index → slot of the claims held through DRA claims, split equally per slot."""
    edges = {w0, w1}
    for _, _, s, e in claims:
        edges.update((s, e))
    for s, e in down:
        if s < w1 and e > w0:
            edges.update((max(s, w0), min(e, w1)))
    cuts = sorted(edges)
    out = _Sweep()
    for t0, t1 in zip(cuts, cuts[1:], strict=False):
        dt = t1 - t0
        if dt <= 0:
            continue
        active = [(k, share) for k, share, s, e in claims if s <= t0 and e >= t1]
        if split:
            active = _split_equally(active, split)
            for k, share in active:
                if k in split:
                    out.split_spans.setdefault(k, []).append((t0, t1, share))
        total = sum(share for _, share in active)
        scale = 1.0 / total if total > 1.0 else 1.0
        if total > 1.0 + 1e-9:
            out.claimed_over += (total - 1.0) * dt
            out.over_claims.update(k for k, _ in active)
        joules = power.energy_integral(t0, t1, w1) if power is not None else 0.0
        for k, share in active:
            out.allocated[k] = out.allocated.get(k, 0.0) + share * scale * dt
            if joules:
                out.energy[k] = out.energy.get(k, 0.0) + share * scale * joules
        free_part = 1.0 - min(total, 1.0)
        rest = dt * free_part
        if _covered(down, t0, t1):
            out.unavailable += rest
            out.unavailable_energy += joules * free_part
        else:
            out.unallocated += rest
            out.unallocated_energy += joules * free_part
            if not active:
                out.free_spans.append((t0, t1))
    return out


def _split_equally(active: list[tuple[int, float]], split: dict[int, str]) -> list[tuple[int, float]]:
    """Split claims on the same slot share it equally: each takes its share / k, k their number now."""
    holders: dict[str, int] = {}
    for k, _ in active:
        if k in split:
            holders[split[k]] = holders.get(split[k], 0) + 1
    return [(k, share / holders[split[k]]) if k in split else (k, share) for k, share in active]


def attribute_window(
    node: str,
    w0: float,
    w1: float,
    gpus: Sequence[GpuInfo],
    placements: Sequence[Placement],
    series: dict[str, Series],
    slots_of_gpu: dict[str, list[str]] | None = None,
    down_cache: dict[str, list[tuple[float, float]]] | None = None,
    context: NodeContext | None = None,
) -> list[FactRow]:
    """All fact rows of ``node`` for the window [w0, w1) (see :func:`attribute_window_full`)."""
    return attribute_window_full(node, w0, w1, gpus, placements, series, slots_of_gpu, down_cache, context).rows


def attribute_window_full(
    node: str,
    w0: float,
    w1: float,
    gpus: Sequence[GpuInfo],
    placements: Sequence[Placement],
    series: dict[str, Series],
    slots_of_gpu: dict[str, list[str]] | None = None,
    down_cache: dict[str, list[tuple[float, float]]] | None = None,
    context: NodeContext | None = None,
) -> WindowResult:
    """Fact rows, physical GPUs and conflicts of ``node`` for the window [w0, w1).

    ``down_cache`` memoises each GPU's fatal-XID intervals across the windows of one range (the
    series and the context are the same for every window, so are the intervals computed from them).
    """
    ctx = context or NodeContext()
    slots_of_gpu = slots_of_gpu or {g.uuid: [g.uuid] for g in gpus}
    info = {g.uuid: g for g in gpus}
    # a fixed order makes the floating-point sums identical however the inputs arrived
    active = sorted(
        (p for p in placements if p.start < w1 and (p.end is None or p.end > w0)),
        key=lambda p: (p.owner.scheduler, p.owner.job_id, p.owner.attempt, p.start, repr(p.bindings)),
    )
    for p in active:  # a GPU named by an allocation is present even without samples
        for b in p.bindings:
            info.setdefault(b.uuid, GpuInfo(b.uuid, None, "unknown"))
    order = sorted(info.values(), key=lambda g: (g.index is None, g.index or 0, g.uuid))
    rows: list[FactRow] = []
    conflicts: list[Conflict] = []
    free: dict[str, float] = {}
    free_energy: dict[str, float] = {}  # joules of the unallocated capacity, shared with unbound placements
    rogue: dict[str, tuple[float, float]] = {}  # busy, unobserved seconds of a GPU nobody holds
    for gpu in order:
        claims: list[tuple[int, float, float, float]] = []
        meta: list[tuple[Placement, Binding, float, float]] = []
        split: dict[int, str] = {}
        for p in active:
            s, e = _clip(p.start, p.end, w0, w1)
            for b in p.bindings:
                if b.uuid == gpu.uuid and e > s:
                    if b.split:
                        split[len(meta)] = b.slot
                    claims.append((len(meta), b.share, s, e))
                    meta.append((p, b, s, e))
        down = _down_of(gpu.uuid, slots_of_gpu, series, down_cache, ctx)
        sweep = _gpu_segments(claims, down, w0, w1, _energy_series(gpu.uuid, slots_of_gpu, series), split)
        for k, (p, b, s, e) in enumerate(meta):
            alloc = sweep.allocated.get(k, 0.0)
            spans = sweep.split_spans.get(k) or [(s, e, b.share)]
            busy = observed = 0.0
            if b.series is not None and b.series in series:
                for a, z, share in spans:
                    got, seen = series[b.series].held_integral(a, z)
                    busy, observed = busy + share * got, observed + share * seen
            busy_s = min(busy, alloc)
            unobserved = max(alloc - observed, 0.0)
            rows.append(
                FactRow(
                    node,
                    gpu.uuid,
                    b.slot,
                    gpu.model,
                    "allocated",
                    p.owner,
                    alloc,
                    busy_s,
                    min(unobserved, alloc - busy_s),
                    sweep.energy.get(k, 0.0),
                )
            )
        if sweep.claimed_over > EPSILON_S:
            owners = tuple(sorted({_owner_key(meta[k][0].owner) for k in sweep.over_claims}))
            conflicts.append(Conflict(gpu.uuid, (w1 - w0) + sweep.claimed_over, w1 - w0, owners))
        free[gpu.uuid] = sweep.unallocated
        free_energy[gpu.uuid] = sweep.unallocated_energy
        rogue[gpu.uuid] = _unheld_usage(series.get(gpu.uuid), sweep.free_spans)
        if sweep.unavailable > EPSILON_S:
            rows.append(
                FactRow(
                    node,
                    gpu.uuid,
                    gpu.uuid,
                    gpu.model,
                    "unavailable",
                    None,
                    sweep.unavailable,
                    energy_joules=sweep.unavailable_energy,
                )
            )
    slot_gpus = max((ctx.declared_gpus or 0) - len(order), 0)
    node_slot = _node_slot(w0, w1, slot_gpus, ctx, known=len(order))
    free_seconds = dict(free)
    placed, conflict = _place_unbound(node, w0, w1, order, active, free, node_slot, ctx.declared_model)
    # an unbound placement took part of a GPU's free time, not a known part: it gets that GPU's free
    # energy in proportion to the seconds it took
    placed = [
        replace(r, energy_joules=free_energy[r.gpu_uuid] * r.gpu_seconds / free_seconds[r.gpu_uuid])
        if r.gpu_uuid in free_energy and free_seconds[r.gpu_uuid] > 0
        else r
        for r in placed
    ]
    rows.extend(placed)
    if conflict is not None:
        conflicts.append(conflict)
    for gpu in order:
        left = free[gpu.uuid]
        if left > EPSILON_S:
            busy, unobserved = rogue[gpu.uuid]
            ratio = 1.0  # unbound placements took part of the free time: scale what was seen on it
            total_free = left + sum(r.gpu_seconds for r in placed if r.gpu_uuid == gpu.uuid)
            if total_free > 0:
                ratio = left / total_free
            rows.append(
                FactRow(
                    node,
                    gpu.uuid,
                    gpu.uuid,
                    gpu.model,
                    "unallocated",
                    None,
                    left,
                    min(busy * ratio, left),
                    min(unobserved * ratio, left),
                    free_energy[gpu.uuid] * ratio,
                )
            )
    physical = float(len(order) + slot_gpus)
    if node_slot.unallocated > EPSILON_S:
        rows.append(
            FactRow(
                node,
                NODE_SLOT,
                NODE_SLOT,
                ctx.declared_model,
                "unallocated",
                None,
                node_slot.unallocated,
                0.0,
                node_slot.unallocated,
            )
        )
    if node_slot.unavailable > EPSILON_S:
        rows.append(FactRow(node, NODE_SLOT, NODE_SLOT, ctx.declared_model, "unavailable", None, node_slot.unavailable))
    if node_slot.uncapped:
        physical += node_slot.allocated_seconds / (w1 - w0)
    return WindowResult(_merge(rows), physical, conflicts)


def _energy_series(uuid: str, slots_of_gpu: dict[str, list[str]], series: dict[str, Series]) -> Series | None:
    """The series that carries the GPU's power and energy counter: its own, or — where the exporter
    repeats the device's readings on every MIG instance instead — its first instance's."""
    whole = series.get(uuid)
    if whole is not None and whole.has_energy():
        return whole
    for slot in sorted(s for s in slots_of_gpu.get(uuid, ()) if s != uuid):
        candidate = series.get(slot)
        if candidate is not None and candidate.has_energy():
            return candidate
    return None


def _owner_key(o: Owner) -> str:
    return f"{o.scheduler}:{o.job_id}#{o.attempt}"


def _down_of(
    uuid: str,
    slots_of_gpu: dict[str, list[str]],
    series: dict[str, Series],
    down_cache: dict[str, list[tuple[float, float]]] | None,
    ctx: NodeContext,
) -> list[tuple[float, float]]:
    """When a GPU is unavailable: its fatal-XID intervals, and the node's drained/down intervals."""
    # every loaded slot of the GPU, not only those with samples near the window: a fatal XID
    # before the GPU stopped reporting keeps it unavailable. The series and the context are the
    # same for every window of a range, so are the intervals: cached per GPU.
    down = down_cache.get(uuid) if down_cache is not None else None
    if down is None:
        prefix = uuid + "/mig"
        slots = sorted(
            {
                *(s for s in slots_of_gpu.get(uuid, []) if s in series),
                *(k for k in series if k == uuid or k.startswith(prefix)),
            }
        )
        down = down_intervals((series[s] for s in slots), ctx.down_since.get(uuid))
        if down_cache is not None:
            down_cache[uuid] = down
    return [*down, *ctx.unavailable] if ctx.unavailable else down


def _unheld_usage(s: Series | None, spans: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(busy, unobserved) seconds of a whole GPU over the spans nobody held any of it."""
    busy = unobserved = 0.0
    for a, b in spans:
        got, observed = s.held_integral(a, b) if s is not None else (0.0, 0.0)
        busy += got
        unobserved += (b - a) - observed
    return busy, unobserved


@dataclass
class _NodeSlot:
    """GPUs the node declares beyond those its samples name: capacity without a GPU id."""

    capacity: float  # GPU-seconds available to unbound placements (minus unavailable)
    unavailable: float
    uncapped: bool  # nothing is known of the node's GPUs: the slot holds what is claimed
    unallocated: float = 0.0
    allocated_seconds: float = 0.0


def _node_slot(w0: float, w1: float, slot_gpus: int, ctx: NodeContext, known: int) -> _NodeSlot:
    if ctx.declared_gpus is None and known == 0:  # no sample, no declaration: capacity is what is claimed
        return _NodeSlot(0.0, 0.0, uncapped=True)
    down = sum(max(min(e, w1) - max(s, w0), 0.0) for s, e in _merged(ctx.unavailable))
    total = slot_gpus * (w1 - w0)
    unavailable = slot_gpus * down
    return _NodeSlot(total - unavailable, unavailable, uncapped=False)


def _merged(intervals: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _place_unbound(
    node: str,
    w0: float,
    w1: float,
    order: Sequence[GpuInfo],
    active: Sequence[Placement],
    free: dict[str, float],
    slot: _NodeSlot,
    slot_model: str = "unknown",
) -> tuple[list[FactRow], Conflict | None]:
    """Give placements without GPU ids free capacity of the node's GPUs, in index order, then the
    node-level slot; claims beyond the node's physical GPUs are scaled down and reported."""
    rows: list[FactRow] = []
    needs: list[tuple[Placement, float]] = []
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
        if need > 1e-9:
            needs.append((p, need))
    total = sum(n for _, n in needs)
    conflict = None
    scale = 1.0
    if not slot.uncapped:
        if total > slot.capacity + EPSILON_S:
            scale = slot.capacity / total if total > 0 else 0.0
            conflict = Conflict(NODE_SLOT, total, slot.capacity, tuple(sorted({_owner_key(p.owner) for p, _ in needs})))
        slot.unallocated = max(slot.capacity - total * scale, 0.0)
    for p, need in needs:
        got = need * scale
        slot.allocated_seconds += got
        if got > EPSILON_S:
            rows.append(FactRow(node, NODE_SLOT, NODE_SLOT, slot_model, "allocated", p.owner, got, 0.0, got))
    return rows, conflict


def _merge(rows: list[FactRow]) -> list[FactRow]:
    """One row per (gpu, slot, kind, owner): a placement may bind a slot through several ids."""
    merged: dict[tuple[object, ...], FactRow] = {}
    for r in rows:
        key = (r.gpu_uuid, r.slot, r.kind, r.owner)
        if key in merged:
            m = merged[key]
            merged[key] = FactRow(
                m.node,
                m.gpu_uuid,
                m.slot,
                m.gpu_model,
                m.kind,
                m.owner,
                m.gpu_seconds + r.gpu_seconds,
                m.busy_seconds + r.busy_seconds,
                m.unobserved_seconds + r.unobserved_seconds,
                m.energy_joules + r.energy_joules,
            )
        else:
            merged[key] = r
    return list(merged.values())
