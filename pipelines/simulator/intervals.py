"""Half-open integer intervals ``[a, b)``: union, intersection, measure; and step integrals.

``StepIntegral`` integrates a per-scrape step function (the value of scrape ``k`` holds on
``[k*dt, (k+1)*dt)``, the last step cut at the window end) over any ``[a, b)`` exactly, from
prefix sums.
"""

from __future__ import annotations

import numpy as np

Interval = tuple[int, int]


def union(intervals: list[Interval]) -> list[Interval]:
    out: list[Interval] = []
    for a, b in sorted(intervals):
        if b <= a:
            continue
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def intersect(xs: list[Interval], ys: list[Interval]) -> list[Interval]:
    out, i, j = [], 0, 0
    while i < len(xs) and j < len(ys):
        a, b = max(xs[i][0], ys[j][0]), min(xs[i][1], ys[j][1])
        if a < b:
            out.append((a, b))
        if xs[i][1] < ys[j][1]:
            i += 1
        else:
            j += 1
    return out


def measure(intervals: list[Interval]) -> int:
    return sum(b - a for a, b in intervals)


def clip(a: int, b: int, lo: int, hi: int) -> Interval | None:
    a, b = max(a, lo), min(b, hi)
    return (a, b) if a < b else None


class StepIntegral:
    def __init__(self, values: np.ndarray, dt: int, horizon: int) -> None:
        widths = np.full(len(values), float(dt))
        widths[-1] = horizon - dt * (len(values) - 1)
        self.values, self.dt = values, dt
        self.prefix = np.concatenate(([0.0], np.cumsum(values * widths)))

    def over(self, a: int, b: int) -> float:
        """``∫_a^b f(t) dt`` for ``0 <= a < b <= horizon``."""
        dt, vals = self.dt, self.values
        ka, kb = a // dt, b // dt
        if ka == kb:
            return float(vals[ka] * (b - a))
        total = vals[ka] * ((ka + 1) * dt - a) + (self.prefix[kb] - self.prefix[ka + 1])
        if kb < len(vals) and b > kb * dt:
            total += vals[kb] * (b - kb * dt)
        return float(total)

    def upto(self, t: np.ndarray) -> np.ndarray:
        """``∫_0^t f`` for every ``t`` in ``[0, horizon]`` at once (``over(a, b) = upto(b) − upto(a)``)."""
        k = np.minimum(t // self.dt, len(self.values) - 1)
        return self.prefix[k] + self.values[k] * (t - k * self.dt)
