"""In-process micro-benchmark of the attribution stage: µs per GPU-sample, vectorised vs scalar.

The inputs are what ``streams.attribution.step._compute_group`` passes to ``compute_range_full``:
per node and one-hour chunk, the node's samples from 900 s before the chunk (``SampleColumns``,
times in epoch seconds, rows in time order) and the placements overlapping it. Two loads: the
benchmark load (``bench/load.py``: 8 GPUs per node, one pod on half of them per period, failures)
and a simulator history (``pipelines/simulator``: Kubernetes and Slurm, MIG, time-slicing, DRA,
XIDs, drains), parsed by the real parsers. Usage::

    python -m bench.attribution_micro [--nodes 32 --hours 6] [--sim-nodes 8 --sim-hours 6]

Measured on the 2-core development machine (defaults): the benchmark load 10.3–10.6 µs per
GPU-sample window by window, 2.7–2.8 µs vectorised (every chunk covered); the simulator history
12.5–12.7 µs, 8.9–9.3 µs with 42 % of its samples vectorised (its MIG nodes take the scalar path).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from bench.load import GPUS_PER_NODE, Load, allocation_message, sample_message
from pipelines import events as ev
from pipelines import wire
from pipelines.gpu_columns import GpuColumns
from pipelines.gpu_models import model_key
from pipelines.parsers.registry import parse_manifest_entry
from pipelines.simulator.simulate import simulate
from streams.attribution.node_range import (
    SAMPLE_COLUMNS,
    NodeInputs,
    NodeState,
    RangeResult,
    SampleColumns,
    compute_range_scalar,
)
from streams.attribution.ranges import compute_range_full
from streams.attribution.step import CHUNK_S, LOOKBACK_S

WINDOW_S = 60


@dataclass
class NodeHistory:
    rows: list[tuple[Any, ...]] = field(default_factory=list)  # in SAMPLE_COLUMNS order
    placements: dict[tuple[Any, ...], ev.AllocationData] = field(default_factory=dict)
    states: list[NodeState] = field(default_factory=list)


def _sample_rows(t: float, interval: float | None, gpus: Iterable[ev.GpuSample]) -> list[tuple[Any, ...]]:
    return [
        (t, g.uuid, g.mig_instance, g.index, model_key(g.model), g.mig_profile or "", g.utilization, g.xid,
         g.namespace or "", g.pod or "", g.hpc_job or "", interval, g.power_w, g.energy_mj)
        for g in gpus
    ]  # fmt: skip


def _add_placement(h: NodeHistory, p: ev.AllocationData) -> None:
    """The snapshot in force per placement: ended beats running, then the later event."""
    key = (p.scheduler, p.job_id, p.attempt, p.uid)
    held = h.placements.get(key)
    if held is None or (p.state == "ended") >= (held.state == "ended"):
        h.placements[key] = p


def bench_load_histories(nodes: int, hours: float, interval_s: int = 30) -> dict[str, NodeHistory]:
    load = Load(nodes, interval_s)
    out: dict[str, NodeHistory] = defaultdict(NodeHistory)
    for index in range(load.rounds_for(hours)):
        for node in range(nodes):
            msg = wire.decode(sample_message(load, node, index))
            d = msg.data
            assert isinstance(d, ev.GpuMetricsData | GpuColumns)
            out[d.node].rows += _sample_rows(msg.time.timestamp(), d.interval_s, d.gpus)
    for period in range(int(hours * 3600 // load.alloc_period_s) + 1):
        for node in range(nodes):
            msg = wire.decode(allocation_message(load, node, period))
            assert isinstance(msg.data, ev.AllocationData) and msg.data.node is not None
            _add_placement(out[msg.data.node], msg.data)
    return out


def simulator_histories(nodes: int, hours: float, seed: int, out_dir: Path) -> dict[str, NodeHistory]:
    sim = simulate(nodes, hours, seed, out_dir)
    out: dict[str, NodeHistory] = defaultdict(NodeHistory)
    for entry in sim.manifest["files"]:
        if entry["source"] not in ("dcgm", "kubernetes", "slurm"):
            continue
        for e in parse_manifest_entry(out_dir, entry, sim.config.cluster).events:
            d, t = e.data, e.time.timestamp()
            if isinstance(d, ev.GpuMetricsData):
                out[d.node].rows += _sample_rows(t, d.interval_s, d.gpus)
            elif isinstance(d, ev.AllocationData) and d.node is not None and d.start_time is not None:
                _add_placement(out[d.node], d)
            elif isinstance(d, ev.NodeStateData):
                out[d.node].states.append(NodeState(t, d.state, d.gpus, d.gpu_model, d.gpu_replicas))
    return out


@dataclass
class Chunk:
    node: str
    start: float
    end: float
    samples: SampleColumns
    placements: list[ev.AllocationData]
    inputs: NodeInputs
    gpu_samples: int  # in [start, end), the look-back not counted


def chunks(histories: dict[str, NodeHistory]) -> list[Chunk]:
    """Each node's history in one-hour chunks, as one attribution step loads them."""
    out: list[Chunk] = []
    for node, h in histories.items():
        rows = sorted(h.rows, key=lambda r: r[0])
        if not rows:
            continue
        first = rows[0][0] // CHUNK_S * CHUNK_S
        placements = list(h.placements.values())
        inputs = NodeInputs((), sorted(h.states, key=lambda s: s.time))
        for start in range(int(first), int(rows[-1][0]) + 1, CHUNK_S):
            end = start + CHUNK_S
            own = [r for r in rows if start - LOOKBACK_S <= r[0] < end]
            cols = SampleColumns(tuple(list(c) for c in zip(*own, strict=True)) if own else ())
            active = [p for p in placements if _overlaps(p, start, end)]
            counted = sum(1 for r in own if r[0] >= start)
            out.append(Chunk(node, float(start), float(end), cols, active, inputs, counted))
    return out


def _overlaps(p: ev.AllocationData, start: float, end: float) -> bool:
    assert p.start_time is not None
    return p.start_time.timestamp() < end and (p.end_time is None or p.end_time.timestamp() > start)


Compute = Callable[..., RangeResult]


def measure(work: list[Chunk], compute: Compute, repeat: int = 3) -> tuple[float, int]:
    """Best µs per GPU-sample over ``repeat`` runs, and the fact rows written."""
    samples = sum(c.gpu_samples for c in work)
    best, facts = float("inf"), 0
    for _ in range(repeat):
        began = time.perf_counter()
        facts = 0
        for c in work:
            result = compute("bench", c.node, c.start, c.end, WINDOW_S, c.samples, c.placements, c.inputs)
            facts += len(result.columns)
        best = min(best, time.perf_counter() - began)
    return best / samples * 1e6, facts


def covered(work: list[Chunk]) -> float:
    """The share of GPU-samples whose chunk the vectorised path takes."""
    from streams.attribution.vector import compute_range_vector

    hit = sum(
        c.gpu_samples
        for c in work
        if compute_range_vector("bench", c.node, c.start, c.end, WINDOW_S, c.samples, c.placements, c.inputs)
    )
    return hit / max(sum(c.gpu_samples for c in work), 1)


def report(name: str, work: list[Chunk]) -> dict[str, Any]:
    scalar, facts_s = measure(work, compute_range_scalar)
    full, facts_v = measure(work, compute_range_full)
    return {
        "load": name,
        "gpu_samples": sum(c.gpu_samples for c in work),
        "fact_rows": facts_v,
        "scalar_us_per_sample": round(scalar, 3),
        "full_us_per_sample": round(full, 3),
        "vector_share_of_samples": round(covered(work), 3),
        "same_fact_count": facts_s == facts_v,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=32)
    parser.add_argument("--hours", type=float, default=6.0)
    parser.add_argument("--sim-nodes", type=int, default=8)
    parser.add_argument("--sim-hours", type=float, default=6.0)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    assert len(SAMPLE_COLUMNS) == 14 and GPUS_PER_NODE == 8
    print(orjson.dumps(report("bench_load", chunks(bench_load_histories(args.nodes, args.hours)))).decode())
    with tempfile.TemporaryDirectory() as tmp:
        sim = simulator_histories(args.sim_nodes, args.sim_hours, args.seed, Path(tmp))
    print(orjson.dumps(report("simulator", chunks(sim))).decode())


if __name__ == "__main__":
    main()
