"""The vectorised attribution gives exactly the scalar core's facts (docs/ATTRIBUTION.md "Two paths").

Random node histories — several GPUs, scrape gaps, GPUs that stop reporting, repeated, late and
out-of-order samples, fatal XIDs that clear or not, power readings and energy counters with resets,
GPUs only the inventory remembers (some down since before the range), declared GPU counts, drained
and down nodes, placements bound by device ids or Slurm GPU indices that start and end mid-window,
failed attempts — are
attributed by ``compute_range_vector`` and by ``compute_range_scalar`` (the window-by-window core).
The two must agree **bit for bit**: the same fact rows in the same order, with the same fact ids
and the same float values (compared with ``==``, no tolerance), and the same physical GPUs and
conflicts per window. Histories outside the vectorised path's cover (MIG instances, time-sliced
replicas, DRA claims, GPU indices no GPU has, mapping labels, unbound GPUs, overlapping claims) must make it
decline, and ``compute_range_full`` must then return the scalar answer.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines import events as ev
from streams.attribution.node_range import (
    InventoryGpu,
    NodeInputs,
    NodeState,
    SampleColumns,
    SampleRow,
    compute_range_scalar,
)
from streams.attribution.ranges import compute_range_full
from streams.attribution.vector import compute_range_vector

T0 = datetime(2026, 11, 2, 10, 0, tzinfo=UTC).timestamp()
H100 = "NVIDIA H100 80GB HBM3"
EXAMPLES = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _utc(t: float) -> datetime:
    return datetime.fromtimestamp(t, tz=UTC)


def _samples(rnd: random.Random, gpus: int, start: float, end: float) -> list[SampleRow]:
    rows: list[SampleRow] = []
    for g in range(gpus):
        interval = rnd.choice([10, 30, 30])
        stops = end + 60 if rnd.random() < 0.7 else rnd.uniform(start - 200, end)  # stops reporting
        t = start - 300 + rnd.uniform(0, interval)
        energy = rnd.uniform(0, 1e9)
        with_power, with_energy = rnd.random() < 0.7, rnd.random() < 0.5
        index = g if rnd.random() < 0.9 else rnd.choice([None, 7])  # some exporters give none, or another
        while t < stops:
            if rnd.random() < 0.85:  # else a scrape gap
                energy = rnd.uniform(0, 1e6) if rnd.random() < 0.05 else energy + rnd.uniform(0, 3e4) * interval
                rows.append(
                    SampleRow(
                        round(t, 3),
                        f"GPU-{g}",
                        None,
                        index,
                        H100,
                        "",
                        rnd.choice([None, 0.0, 1.0, rnd.random(), rnd.random()]),
                        rnd.choice([None, 0, 0, 0, 0, 0, 0, 13, 79, 48]),
                        "",
                        "",
                        "",
                        rnd.choice([float(interval), float(interval), None]),
                        rnd.uniform(60, 700) if with_power and rnd.random() < 0.9 else None,
                        energy if with_energy and rnd.random() < 0.9 else None,
                    )
                )
                if rnd.random() < 0.05:  # repeated scrape
                    rows.append(rows[-1])
            t += interval * rnd.choice([1, 1, 1, 1, 2, 5])
    rows.sort(key=lambda r: r.time)
    for _ in range(len(rows) // 20):  # late, out-of-order samples
        i, j = rnd.randrange(len(rows)), rnd.randrange(len(rows))
        rows[i], rows[j] = rows[j], rows[i]
    return rows


def _alloc(rnd: random.Random, i: int, devices: list[str], s: float, e: float | None, **kw: Any) -> ev.AllocationData:
    failed = rnd.random() < 0.3
    data: dict[str, Any] = {
        "scheduler": rnd.choice(["kubernetes", "slurm"]),
        "job_id": f"team-{i % 3}/job-{i // 2}",
        "attempt": 1 + i % 2,
        "node": "n1",
        "state": "running" if e is None else "ended",
        "start_time": _utc(s),
        "end_time": None if e is None else _utc(e),
        "outcome": None if e is None else ("failure" if failed else "success"),
        "failure_reason": "oom" if failed and e is not None else None,
        "device_ids": devices,
        "gpus": [{"kind": "gpu", "count": len(devices)}],
        "owner": {"namespace": f"team-{i % 3}", "labels": {"team": f"t{i % 3}"}, "user": "u"},
    }
    data.update(kw)
    return ev.AllocationData.model_validate(data)


def _placements(rnd: random.Random, gpus: int, start: float, end: float) -> list[ev.AllocationData]:
    """Placements on whole GPUs by device id, never two at once on a GPU (the vectorised cover)."""
    out: list[ev.AllocationData] = []
    busy: dict[int, list[tuple[float, float]]] = {}
    for i in range(rnd.randint(0, 6)):
        held = rnd.sample(range(gpus + 1), rnd.randint(1, min(2, gpus + 1)))  # GPU-<gpus>: samples never name it
        s = round(rnd.uniform(start - 120, end + 30), 3)
        e = None if rnd.random() < 0.25 else round(s + rnd.uniform(0, end - start + 60), 3)
        hi = e if e is not None else float("inf")
        if any(a < hi and s < b for g in held for a, b in busy.get(g, [])):
            continue
        for g in held:
            busy.setdefault(g, []).append((s, hi))
        if rnd.random() < 0.3:  # Slurm, bound by GPU index (gres_detail)
            out.append(_alloc(rnd, i, [], s, e, scheduler="slurm", job_id=f"{100 + i}", gpu_indices=held))
        else:
            out.append(_alloc(rnd, i, [f"GPU-{g}" for g in held], s, e))
    return out


def _inputs(rnd: random.Random, gpus: int, start: float, end: float) -> NodeInputs:
    inventory = [
        InventoryGpu(
            f"GPU-{g}",
            g,
            H100,
            start - 7200,
            rnd.uniform(start - 3600, end),
            rnd.uniform(start - 3600, start) if rnd.random() < 0.2 else None,
        )
        for g in range(gpus + 2)
        if rnd.random() < 0.5
    ]
    states: list[NodeState] = []
    t = start - 600
    for _ in range(rnd.randint(0, 4)):
        t += rnd.uniform(0, (end - start) / 2 + 300)
        gpus_declared = rnd.choice([None, gpus, gpus + 2])
        states.append(
            NodeState(round(t, 3), rnd.choice(["up", "up", "drained", "down"]), gpus_declared, rnd.choice([None, H100]))
        )
    return NodeInputs(inventory, states)


def _node(seed: int, windows: int) -> tuple[float, float, list[SampleRow], list[ev.AllocationData], NodeInputs]:
    rnd = random.Random(seed)
    gpus = rnd.randint(1, 4)
    start = T0 + rnd.choice([0.0, 0.0, 0.25, 17.5])
    end = start + 60 * windows - rnd.choice([0, 0, 20])
    return (
        start,
        end,
        _samples(rnd, gpus, start, end),
        _placements(rnd, gpus, start, end),
        _inputs(rnd, gpus, start, end),
    )


@EXAMPLES
@given(seed=st.integers(0, 2**32 - 1), windows=st.integers(1, 6))
def test_vectorised_facts_are_the_scalar_facts_bit_for_bit(seed: int, windows: int) -> None:
    start, end, rows, placements, inputs = _node(seed, windows)
    cols = SampleColumns.from_rows(rows)
    vector = compute_range_vector("c", "n1", start, end, 60, cols, placements, inputs)
    scalar = compute_range_scalar("c", "n1", start, end, 60, rows, placements, inputs)
    if vector is None:  # only Slurm GPU indices decline: ambiguous, or a GPU some window does not know
        assert any(p.gpu_indices for p in placements)
        return
    assert vector.facts == scalar.facts
    assert vector.windows == scalar.windows


def _uncovered(rnd: random.Random, start: float) -> ev.AllocationData:
    s = round(start + rnd.uniform(-30, 30), 3)
    kind = rnd.choice(["mig", "replica", "dra", "indices", "labels", "unbound"])
    if kind == "mig":
        return _alloc(rnd, 9, ["MIG-GPU-0/1"], s, None, gpus=[{"kind": "mig", "count": 1, "profile": "3g.40gb"}])
    if kind == "replica":
        return _alloc(rnd, 9, ["GPU-0::1"], s, None, gpus=[{"kind": "gpu", "count": 1}])
    if kind == "dra":
        return _alloc(rnd, 9, ["GPU-0"], s, None, claims=["ns/claim"])
    if kind == "indices":
        return _alloc(rnd, 9, [], s, None, scheduler="slurm", job_id="77", gpu_indices=[9])
    if kind == "labels":
        return _alloc(rnd, 9, [], s, None, scheduler="kubernetes", job_id="team-0/p")
    return _alloc(rnd, 9, [], s, None, gpus=[{"kind": "gpu", "count": 3}])


@EXAMPLES
@given(seed=st.integers(0, 2**32 - 1), windows=st.integers(1, 4))
def test_outside_the_cover_the_scalar_path_answers(seed: int, windows: int) -> None:
    start, end, rows, placements, inputs = _node(seed, windows)
    rnd = random.Random(seed)
    extra = [_uncovered(rnd, start)]
    if rnd.random() < 0.5:  # a second claim on GPU-0 at the same time: a conflict
        extra = [_alloc(rnd, 10, ["GPU-0"], start - 1, None), _alloc(rnd, 11, ["GPU-0"], start + 5.5, None)]
    placements = [*placements, *extra]
    if rnd.random() < 0.3:  # a MIG instance's sample
        rows = [*rows, SampleRow(start + 1, "GPU-0", 1, 0, H100, "3g.40gb", 0.5, 0, "", "", "", 30.0)]
    cols = SampleColumns.from_rows(rows)
    assert compute_range_vector("c", "n1", start, end, 60, cols, placements, inputs) is None
    full = compute_range_full("c", "n1", start, end, 60, rows, placements, inputs)
    scalar = compute_range_scalar("c", "n1", start, end, 60, rows, placements, inputs)
    assert full.facts == scalar.facts
    assert full.windows == scalar.windows


def test_replicas_changing_within_the_range_fall_back() -> None:
    start, end, rows, placements, _ = _node(7, 3)
    inputs = NodeInputs(states=[NodeState(start - 10, "up", 2, H100, 1), NodeState(start + 70, "up", 2, H100, 4)])
    cols = SampleColumns.from_rows(rows)
    assert compute_range_vector("c", "n1", start, end, 60, cols, placements, inputs) is None


def test_a_range_without_samples_or_placements_gives_what_the_scalar_path_gives() -> None:
    """A due range where the node has no samples and no placements (a recomputed range past its
    data): the vectorised path raised IndexError on its empty cuts, and the worker quarantined the
    node until a later, longer range succeeded. Now it gives the scalar path's answer: no facts, and
    every window with no capacity."""
    cols = SampleColumns.from_rows([])
    inputs = NodeInputs()
    vector = compute_range_vector("c", "n", 0.0, 600.0, 60, cols, [], inputs)
    scalar = compute_range_scalar("c", "n", 0.0, 600.0, 60, cols, [], inputs)
    assert vector is not None
    assert vector.facts == scalar.facts == []
    assert vector.windows == scalar.windows and len(vector.windows) == 10
