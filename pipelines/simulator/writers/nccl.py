"""``nccl/<YYYY-MM-DD>-<nodeset>.log``: ``all_reduce_perf`` stdout of each acceptance run.

Preceded by the acceptance wrapper's ``Started: <RFC 3339>`` line and its ``srun`` command (the
run's only timestamp: nccl-tests prints none). Layout of nccl-tests 2.13 (version line,
``# Using devices`` rank lines, ``#wrong`` columns, ``# Out of bounds values``,
``# Avg bus bandwidth``), one MPI rank per GPU. Bus bandwidth follows
a latency + bandwidth model per GPU model (NVLink within a node, InfiniBand across nodes); a set
containing the degraded node reaches well under half of it. The first log of a set with the
degraded node holds one truncated result row (malformed; a reader marks that run not ok anyway).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipelines.simulator.config import SimConfig
from pipelines.simulator.model.cluster import Cluster
from pipelines.simulator.model.jobs import SimState
from pipelines.simulator.writers.common import write_text
from pipelines.times import utc_text

PEAK_BUSBW = {"H100": (470.0, 360.0), "H200": (480.0, 370.0), "A100": (230.0, 185.0)}  # (intra, inter) GB/s
DEGRADED_FACTOR = 0.42
MALFORMED_ROWS = 1


def _time_text(t_us: float) -> str:
    """nccl-tests' time column: fewer decimals as the time grows."""
    if t_us >= 10000.0:
        return f"{t_us:7.0f}"
    return f"{t_us:7.1f}" if t_us >= 100.0 else f"{t_us:7.2f}"


def _header(cluster: Cluster, nodes: list[str], rng: np.random.Generator) -> list[str]:
    lines = [
        "# nccl-tests version 2.13.11 nccl-headers=22107 nccl-library=22107",
        "# Collective test starting: all_reduce_perf",
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 "
        "agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    rank = 0
    for name in nodes:
        node = cluster.node(name)
        base_pid = int(rng.integers(20000, 90000))
        for gpu in node.gpus:
            bus = gpu.pci_bus_id.split(":")[1].lower()
            lines.append(
                f"#  Rank {rank:2d} Group  0 Pid {base_pid + gpu.index:6d} on {name:>10} device "
                f"{gpu.index:2d} [0x{bus}] {node.model.name}"
            )
            rank += 1
    return lines + [
        "#",
        "#                                                              out-of-place                 "
        "      in-place          ",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time"
        "   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)"
        "  (GB/s)  (GB/s)       ",
    ]


def _rows(ranks: int, peak_bus: float, latency_us: float, rng: np.random.Generator) -> tuple[list[str], float]:
    factor = 2.0 * (ranks - 1) / ranks if ranks > 1 else 1.0
    rows, busbws = [], []
    for power in range(3, 34):
        size = 2**power
        cells = []
        for _ in range(2):  # out-of-place, in-place
            t_us = (latency_us + size / (peak_bus / factor * 1e9) * 1e6) * rng.uniform(0.98, 1.03)
            algbw = size / (t_us * 1e-6) / 1e9
            busbw = algbw * factor
            busbws.append(round(busbw, 2))
            cells.append(f"  {_time_text(t_us)}  {algbw:6.2f}  {busbw:6.2f}  {0:5d}")
        rows.append(f"{size:12d}  {size // 4:12d}  {'float':>8}  {'sum':>6}  {-1:6d}{cells[0]}{cells[1]}")
    return rows, sum(busbws) / len(busbws)


def write_logs(
    out_dir: Path, cfg: SimConfig, cluster: Cluster, state: SimState, rng: np.random.Generator
) -> tuple[dict[str, int], list[dict[str, object]]]:
    """Write one log per completed acceptance run; returns ({relative path: malformed count},
    a summary of each run for the truth)."""
    written: dict[str, int] = {}
    runs_out: list[dict[str, object]] = []
    runs = sorted(
        (a for a in state.attempts if a.spec.kind == "benchmark" and a.end is not None),
        key=lambda a: (a.start, a.nodes),
    )
    for attempt in runs:
        nodes = attempt.nodes
        models = {cluster.node(n).model.short for n in nodes}
        intra, inter = min(PEAK_BUSBW[m][0] for m in models), min(PEAK_BUSBW[m][1] for m in models)
        peak = intra if len(nodes) == 1 else inter
        if cluster.degraded_node in nodes:
            peak *= DEGRADED_FACTOR
        rows, avg = _rows(8 * len(nodes), peak, 25.0 if len(nodes) == 1 else 45.0, rng)
        degraded = cluster.degraded_node in nodes
        malformed = MALFORMED_ROWS if degraded and not any(written.values()) else 0
        if malformed:
            rows[18] = " ".join(rows[18].split()[:8])  # cut off after the out-of-place busbw
        wrapper = [
            f"Started: {utc_text(cfg.at(attempt.run_start))}",
            f"+ srun --nodes={len(nodes)} --ntasks-per-node=8 --gpus-per-node=8 all_reduce_perf -b 8 -e 8G -f 2 -g 1",
        ]
        lines = (
            wrapper
            + _header(cluster, nodes, rng)
            + rows
            + ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {avg:.5g} ", "#", ""]
        )
        name = nodes[0] if len(nodes) == 1 else f"{nodes[0]}-{nodes[-1]}"
        rel = f"nccl/{cfg.at(attempt.run_start).strftime('%Y-%m-%d')}-{name}.log"
        write_text(out_dir / rel, "\n".join(lines))
        written[rel] = malformed
        runs_out.append(
            {
                "file": rel,
                "started": utc_text(cfg.at(attempt.run_start)),
                "at": attempt.run_start,
                "nodes": nodes,
                "ranks": 8 * len(nodes),
                "avg_busbw_gbps": float(f"{avg:.5g}"),
                "degraded": degraded,
                "malformed_rows": malformed,
            }
        )
    return written, runs_out
