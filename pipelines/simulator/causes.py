"""The ground truth of why allocated GPUs sat idle, from the simulation's own state.

docs/ATTRIBUTION.md "Idle causes" is applied to what the simulator planted, never to what a reader
parsed: the checkpoint writes it scheduled, the disk traffic it generated (with the storage stall
it planted at a node's ceiling), the acceptance runs it ran on the degraded node, and the
utilisation it published (with the slow starts: attempts that load data before their GPUs work).
Per attempt, GPU slot and 60-second window (UTC-aligned, as the facts are), the slot's idle
GPU-seconds — its share of the window it held, minus the integral of the published utilisation as
held, minus the unobserved part — are split in the fixed order checkpoint → storage_stall →
fabric_degraded → startup → teardown → idle, each cause taking at most the seconds it covered
within the attempt's part of the window, times the slot's share of its GPU.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pipelines.simulator.config import UNIT, SimConfig
from pipelines.simulator.intervals import Interval, StepIntegral, union
from pipelines.simulator.model.jobs import Attempt
from pipelines.simulator.sharing import ClaimShares

WINDOW_S = 60
PHASE_S = 900  # startup and teardown are at most 15 minutes
CEILING_RATIO = 0.9
CEILING_DAYS = 7
FABRIC_TOLERANCE = 0.10
BASELINE_RUNS = 3
CAUSES = ("checkpoint", "storage_stall", "fabric_degraded", "startup", "teardown", "idle", "unobserved")
GROUPS = ("team", "model", "node")
FOREVER = 10**12


def _cover(intervals: list[Interval], h0: np.ndarray, h1: np.ndarray) -> np.ndarray:
    """Seconds of each [h0, h1) covered by the (disjoint) intervals."""
    out = np.zeros(len(h0))
    for s, e in intervals:
        out += np.maximum(np.minimum(e, h1) - np.maximum(s, h0), 0)
    return out


def storage_stalls(cfg: SimConfig, rates: dict[str, list[tuple[int, int, float]]]) -> dict[str, list[Interval]]:
    """Per node, the scrape intervals whose throughput reached 90 % of the node's ceiling (the
    highest throughput of the 7 UTC days up to the interval's day)."""
    out: dict[str, list[Interval]] = {}
    for node, pairs in rates.items():
        day_max: dict[int, float] = defaultdict(float)
        for _, t, rate in pairs:
            day = (cfg.start_epoch + t) // 86400
            day_max[day] = max(day_max[day], rate)
        stalls = []
        for t0, t, rate in pairs:
            day = (cfg.start_epoch + t) // 86400
            ceiling = max(day_max.get(d, 0.0) for d in range(day - CEILING_DAYS + 1, day + 1))
            if ceiling > 0 and rate >= CEILING_RATIO * ceiling:
                stalls.append((t0, t))
        out[node] = union(stalls)
    return out


def node_rates(
    readings: dict[str, tuple[np.ndarray, np.ndarray]], missing: set[tuple[str, int]], step: int
) -> dict[str, list[tuple[int, int, float]]]:
    """Per node, (t0, t, bytes/s) between consecutive readable scrapes of its disk counters."""
    out: dict[str, list[tuple[int, int, float]]] = {}
    for node, (read, write) in readings.items():
        total = read + write
        ks = [k for k in range(len(total)) if (node, k) not in missing]
        pairs = []
        for k0, k in zip(ks, ks[1:], strict=False):
            delta = total[k] - total[k0]
            pairs.append((k0 * step, k * step, float(delta) / ((k - k0) * step) if delta >= 0 else 0.0))
        out[node] = pairs
    return out


def fabric_degraded(runs: list[dict[str, Any]]) -> dict[str, list[Interval]]:
    """Per node, the time its latest acceptance run said the fabric was degraded: a run that was not
    ok, or below (1 − 10 %) × the median of the earlier passing runs of its node set (of its host
    count with fewer than 3 of those); the verdict holds until the node's next run."""
    ordered = sorted(runs, key=lambda r: r["at"])
    by_set: dict[str, list[float]] = defaultdict(list)
    by_size: dict[int, list[float]] = defaultdict(list)
    verdicts: dict[str, list[tuple[int, bool]]] = defaultdict(list)
    for run in ordered:
        hosts = sorted(set(run["nodes"]))
        key, size = ",".join(hosts), len(hosts)
        ok = run["malformed_rows"] == 0
        busbw = run["avg_busbw_gbps"] if ok else None
        if len(by_set[key]) >= BASELINE_RUNS:
            baseline = statistics.median(by_set[key])
        elif len(by_size[size]) >= BASELINE_RUNS:
            baseline = statistics.median(by_size[size])
        else:
            baseline = None
        bad = not ok or (baseline is not None and (busbw is None or busbw < (1 - FABRIC_TOLERANCE) * baseline))
        for node in hosts:
            verdicts[node].append((run["at"], bad))
        if busbw is not None:
            by_set[key].append(busbw)
            by_size[size].append(busbw)
    out: dict[str, list[Interval]] = {}
    for node, seq in verdicts.items():
        spans = [(at, seq[i + 1][0] if i + 1 < len(seq) else FOREVER) for i, (at, bad) in enumerate(seq) if bad]
        out[node] = union(spans)
    return out


@dataclass
class CauseTruth:
    cfg: SimConfig
    integrals: dict[str, tuple[StepIntegral, StepIntegral]]  # per entity: (utilisation as held, unobserved)
    stalls: dict[str, list[Interval]]
    fabric: dict[str, list[Interval]]
    shares: ClaimShares = field(default_factory=lambda: ClaimShares([], 0))

    def __post_init__(self) -> None:
        self.sums: dict[str, dict[str, dict[str, float]]] = {g: defaultdict(lambda: defaultdict(float)) for g in GROUPS}

    def _windows(self, a: int, b: int) -> np.ndarray:
        base = -(self.cfg.start_epoch % WINDOW_S)
        first = (a - base) // WINDOW_S
        last = -(-(b - base) // WINDOW_S)
        return base + WINDOW_S * np.arange(first, last)

    def add(self, attempt: Attempt, keys: dict[str, str | None]) -> None:
        horizon = self.cfg.horizon
        end = attempt.end if attempt.end is not None else horizon
        a, b = max(attempt.start, 0), min(end, horizon)
        if b <= a:
            return
        ws = self._windows(a, b)
        h0, h1 = np.maximum(ws, a), np.minimum(ws + WINDOW_S, b)
        rows = []
        busy_any = np.zeros(len(ws), bool)
        for slot in attempt.slots:
            util, unobs = self.integrals[slot.series]
            for lo, hi, weight in self.shares.pieces(slot, a, b):  # the slot's share, constant in each piece
                share = weight / UNIT
                p0, p1 = np.maximum(h0, lo), np.minimum(h1, hi)
                p1 = np.maximum(p1, p0)
                busy = share * (util.upto(p1) - util.upto(p0))
                rows.append((slot, share, p0, p1, busy, share * (unobs.upto(p1) - unobs.upto(p0))))
                busy_any |= busy > 0
        busy_windows = ws[busy_any]
        s = attempt.start
        startup_end = min(int(busy_windows[0]), s + PHASE_S) if len(busy_windows) else s + PHASE_S
        if attempt.end is not None and attempt.end <= horizon:
            e = attempt.end
            teardown = max(int(busy_windows[-1]) + WINDOW_S, e - PHASE_S) if len(busy_windows) else e - PHASE_S
        else:
            teardown = FOREVER
        writes = union([(c.started, c.finished) for c in attempt.checkpoints if c.kind == "write"])
        for slot, share, p0, p1, busy, unobs in rows:
            node = slot.gpu.node
            idle = share * (p1 - p0) - busy - unobs
            parts: dict[str, np.ndarray] = {}
            left = idle
            covers = (
                ("checkpoint", _cover(writes, p0, p1)),
                ("storage_stall", _cover(self.stalls.get(node, []), p0, p1)),
                ("fabric_degraded", _cover(self.fabric.get(node, []), p0, p1)),
                ("startup", np.maximum(np.minimum(startup_end, p1) - p0, 0)),
                ("teardown", np.maximum(p1 - np.maximum(teardown, p0), 0)),
            )
            for cause, cover in covers:
                part = np.maximum(np.minimum(left, share * cover), 0.0)
                parts[cause] = part
                left = left - part
            parts["idle"] = left
            parts["unobserved"] = unobs
            for group in GROUPS:
                key = node if group == "node" else keys.get(group)
                if key is None:
                    continue
                acc = self.sums[group][key]
                for cause, values in parts.items():
                    acc[cause] += math.fsum(values.tolist())

    def out(self) -> dict[str, dict[str, dict[str, float]]]:
        return {g: {k: {c: v[c] for c in CAUSES} for k, v in sorted(rows.items())} for g, rows in self.sums.items()}
