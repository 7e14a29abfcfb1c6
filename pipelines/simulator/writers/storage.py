"""``storage/node_exporter.json`` and ``storage/checkpoints.jsonl``.

node_exporter: a ``query_range`` matrix of ``node_disk_read_bytes_total`` /
``node_disk_written_bytes_total`` (device ``nvme0n1``) per node — background I/O, dataset reads
when an attempt starts, Kubernetes checkpoint writes staged on local disk, the planted storage
stall at the node's ceiling — and the Lustre
exporter's per-job ``lustre_job_read_bytes_total`` / ``lustre_job_write_bytes_total`` (``jobid``,
``target``, ``component="ost"``) for Slurm jobs while they run (dataset reads, checkpoint writes
and restores). Counters are cumulative integers. One point holds a non-number (malformed; its device's read
half at that time cannot stand alone and is a dead letter too).

checkpoints: one JSON object per line per checkpoint write or restore, in start order:
``job_id`` (Slurm id, or ``<namespace>/<pod>``), ``attempt``, ``kind`` (``write``/``restore``),
``path``, ``bytes``, ``started``, ``finished`` (RFC 3339 UTC), ``node``, ``cluster``. Two
malformed lines: one truncated, one finishing before it starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson

from pipelines.simulator.anomalies import STALL_MIN_RATE, StorageStall
from pipelines.simulator.config import SimConfig
from pipelines.simulator.model.cluster import Cluster
from pipelines.simulator.model.jobs import Attempt, SimState
from pipelines.simulator.writers.common import prom_value, write_text
from pipelines.times import utc_text

NODE_FILE, CHECKPOINT_FILE = "storage/node_exporter.json", "storage/checkpoints.jsonl"
NODE_MALFORMED, CHECKPOINT_MALFORMED = 2, 2  # the unreadable point and the read half it leaves alone


def _spread(series: np.ndarray, cfg: SimConfig, a: int, b: int, total: float) -> None:
    step = cfg.scrape_interval_s
    k0, k1 = max(a // step, 0), min(max(b // step, a // step + 1), cfg.steps)
    if k1 > k0:
        series[k0:k1] += total / (k1 - k0)


@dataclass
class NodeCounters:
    """One node's local disk: bytes read and written in each scrape interval, and the counters'
    values before the window."""

    read: np.ndarray
    write: np.ndarray
    read0: float
    write0: float

    def readings(self) -> tuple[np.ndarray, np.ndarray]:
        """The two counters as an exporter prints them at each scrape (whole bytes)."""
        return np.round(self.read0 + np.cumsum(self.read)), np.round(self.write0 + np.cumsum(self.write))


def node_counters(
    cfg: SimConfig, cluster: Cluster, state: SimState, rng: np.random.Generator, stall: StorageStall | None
) -> dict[str, NodeCounters]:
    """Every node's disk traffic; during the planted storage stall its node reads at its ceiling."""
    step, steps = cfg.scrape_interval_s, cfg.steps
    out = {}
    for node in cluster.nodes:
        read = rng.uniform(1e6, 5e6, steps) * step
        write = rng.uniform(5e5, 3e6, steps) * step
        out[node.name] = NodeCounters(read, write, float(rng.uniform(1e11, 5e12)), float(rng.uniform(1e11, 3e12)))
    for attempt in state.attempts:
        end = attempt.end if attempt.end is not None else cfg.horizon
        for name in attempt.nodes:
            _spread(out[name].read, cfg, attempt.run_start, min(attempt.run_start + 300, end), rng.uniform(5e9, 2e11))
        if attempt.pod is not None:
            for ckpt in attempt.checkpoints:
                if ckpt.kind == "write":
                    _spread(out[ckpt.node].write, cfg, ckpt.started, ckpt.finished, ckpt.bytes)
    if stall is not None:
        c = out[stall.node]
        ceiling = max(float((c.read + c.write).max()), STALL_MIN_RATE * step)
        c.read[stall.k1 : stall.k2] = ceiling - c.write[stall.k1 : stall.k2]
    return out


def unreadable(cluster: Cluster, cfg: SimConfig) -> tuple[str, int]:
    """The node and scrape whose written-bytes counter is printed as a non-number."""
    return sorted(n.name for n in cluster.nodes)[0], cfg.steps // 2


def _series(name: str, labels: dict[str, str], steps: list[int], values: list[str], ts: list[str]) -> str:
    metric = orjson.dumps(dict(sorted({"__name__": name, **labels}.items()))).decode()
    points = ",".join(f'[{ts[k]},"{v}"]' for k, v in zip(steps, values, strict=True))
    return f'{{"metric":{metric},"values":[{points}]}}'


@dataclass
class JobCounters:
    """One Slurm job's Lustre per-job stats: the scrapes its series is present at (while an attempt
    of it runs) and its read and write counters there (whole bytes)."""

    steps: list[int]
    read: np.ndarray
    write: np.ndarray

    def moved(self, cfg: SimConfig, day_start: int, day_end: int) -> float:
        """Bytes read and written between each present scrape in ``[day_start, day_end)`` and the
        present scrape before it (the first scrape of the series has none)."""
        total = self.read + self.write
        out = 0.0
        for prev, k in zip(self.steps, self.steps[1:], strict=False):
            if day_start <= k * cfg.scrape_interval_s < day_end:
                out += float(total[k] - total[prev])
        return out


def lustre_counters(cfg: SimConfig, state: SimState, rng: np.random.Generator) -> dict[str, JobCounters]:
    """Every Slurm job's Lustre traffic: dataset reads as each attempt starts, checkpoint writes and
    restores."""
    by_job: dict[str, list[Attempt]] = {}
    for attempt in state.attempts:
        if attempt.spec.scheduler == "slurm":
            by_job.setdefault(attempt.job_id, []).append(attempt)
    out, step = {}, cfg.scrape_interval_s
    for job_id, attempts in sorted(by_job.items()):
        read, write = np.zeros(cfg.steps), np.zeros(cfg.steps)
        alive = np.zeros(cfg.steps, bool)
        for attempt in attempts:
            end = attempt.end if attempt.end is not None else cfg.horizon
            alive[-(-attempt.start // step) : -(-end // step)] = True
            _spread(read, cfg, attempt.run_start, min(attempt.run_start + 240, end), rng.uniform(1e9, 5e10))
            for ckpt in attempt.checkpoints:
                _spread(write if ckpt.kind == "write" else read, cfg, ckpt.started, ckpt.finished, ckpt.bytes)
        out[job_id] = JobCounters(np.flatnonzero(alive).tolist(), np.round(np.cumsum(read)), np.round(np.cumsum(write)))
    return out


def _lustre(jobs: dict[str, JobCounters], ts: list[str]) -> list[str]:
    out = []
    for job_id, c in sorted(jobs.items()):
        labels = {
            "component": "ost",
            "jobid": job_id,
            "target": f"scratch-OST{int(job_id) % 8:04x}",
            "instance": "oss01:9169",
            "job": "lustre",
        }
        for name, total in (("lustre_job_read_bytes_total", c.read), ("lustre_job_write_bytes_total", c.write)):
            out.append(_series(name, labels, c.steps, [prom_value(total[k]) for k in c.steps], ts))
    return out


def write_node_exporter(
    path: Path, cfg: SimConfig, cluster: Cluster, counters: dict[str, NodeCounters], jobs: dict[str, JobCounters]
) -> int:
    ts = [prom_value(cfg.start_epoch + k * cfg.scrape_interval_s) for k in range(cfg.steps)]
    every = list(range(cfg.steps))
    parts = []
    bad_node, bad_step = unreadable(cluster, cfg)
    for name, c in sorted(counters.items()):
        labels = {"device": "nvme0n1", "instance": f"{name}:9100", "job": "node-exporter"}
        for metric, arr in zip(
            ("node_disk_read_bytes_total", "node_disk_written_bytes_total"), c.readings(), strict=True
        ):
            values = [prom_value(v) for v in arr.tolist()]
            if name == bad_node and metric == "node_disk_written_bytes_total":
                values[bad_step] = "n/a"
            parts.append(_series(metric, labels, every, values, ts))
    parts += _lustre(jobs, ts)
    write_text(path, '{"status":"success","data":{"resultType":"matrix","result":[' + ",".join(parts) + "]}}")
    return NODE_MALFORMED


def write_checkpoints(path: Path, cfg: SimConfig, state: SimState) -> int:
    rows = []
    for attempt in state.attempts:
        for c in attempt.checkpoints:
            rows.append(
                (
                    c.started,
                    attempt.job_id,
                    attempt.number,
                    {
                        "job_id": attempt.job_id,
                        "attempt": attempt.number,
                        "kind": c.kind,
                        "path": c.path,
                        "bytes": c.bytes,
                        "started": utc_text(cfg.at(c.started)),
                        "finished": utc_text(cfg.at(c.finished)),
                        "node": c.node,
                        "cluster": cfg.cluster,
                    },
                )
            )
    rows.sort(key=lambda r: r[:3])
    lines = [orjson.dumps(r[3]).decode() for r in rows]
    fake = {
        "job_id": "99997",
        "attempt": 1,
        "kind": "write",
        "path": "/lustre/scratch/tmp/99997/ckpt-000001",
        "bytes": 1_000_000,
        "started": utc_text(cfg.at(cfg.horizon // 2)),
        "finished": utc_text(cfg.at(cfg.horizon // 2 - 60)),
        "node": "gpu001",
        "cluster": cfg.cluster,
    }
    whole = orjson.dumps({**fake, "started": utc_text(cfg.at(cfg.horizon // 4))}).decode()
    lines.insert(len(lines) // 3, whole[: len(whole) // 2])
    lines.insert(2 * len(lines) // 3, orjson.dumps(fake).decode())
    write_text(path, "\n".join(lines) + "\n")
    return CHECKPOINT_MALFORMED
