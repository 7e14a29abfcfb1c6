"""``simulate()``: run the cluster simulation and write every output file, the manifest and the
ground truth into one directory.

Output layout (fixed names; ``manifest.json`` lists each file with the ``gpuledger ingest``
source it is for, in a sensible ingest order, and its number of malformed records)::

    org.yaml  pricing.yaml
    kubernetes/pods.watch.jsonl
    slurm/sacct.json  slurm/squeue.json
    dcgm/query_range.json
    storage/node_exporter.json  storage/checkpoints.jsonl
    outputs/vllm_query_range.json
    nccl/<YYYY-MM-DD>-<nodeset>.log …
    truth.json  manifest.json

Everything is a pure function of ``(nodes, hours, seed, start, scrape_interval_s, cluster)``:
the same arguments give byte-identical files. Random streams are split per subsystem from the
seed, so changing one subsystem does not reshuffle the others.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from pipelines.simulator import anomalies, causes, costs, sharing, workload
from pipelines.simulator.config import DEFAULT_CLUSTER, DEFAULT_START, SimConfig
from pipelines.simulator.dcgm_view import build_metrics
from pipelines.simulator.failures import plan_node_failures
from pipelines.simulator.model.cluster import build_cluster
from pipelines.simulator.org import org_versions
from pipelines.simulator.scheduler import run
from pipelines.simulator.truth import attempt_keys, build_truth
from pipelines.simulator.utilization import loading_seconds
from pipelines.simulator.writers import dcgm, dra, k8s_nodes, kubernetes, nccl, outputs, reference, slurm, storage
from pipelines.simulator.writers.common import write_text
from pipelines.simulator.writers.dcgm import StoredSeries
from pipelines.times import utc_text

DCGM_FILE = "dcgm/query_range.json"


@dataclass
class SimulationResult:
    config: SimConfig
    out_dir: Path
    manifest: dict[str, Any]
    truth: dict[str, Any]
    elapsed_s: float
    series: list[StoredSeries] = field(repr=False, default_factory=list)

    def path(self, relative: str) -> Path:
        return self.out_dir / relative


def _extras(
    cfg: SimConfig, state: Any, metrics: Any, bad: list[anomalies.BadSample], versions: list[Any], cluster: Any
) -> dict[str, Any]:
    gap = metrics.gap
    step = cfg.scrape_interval_s
    return {
        "scrape_gap": None
        if gap is None
        else {
            "node": gap[0],
            "first_missing": utc_text(cfg.at(gap[1] * step)),
            "first_back": utc_text(cfg.at(gap[2] * step)),
            "missing_scrapes": gap[2] - gap[1],
        },
        "xid_intervals": [
            {
                "gpu": x.gpu,
                "node": x.node,
                "xid": 79,
                "from": utc_text(cfg.at(x.at)),
                "to": utc_text(cfg.at(x.repaired)),
            }
            for x in state.xids
        ],
        "bad_samples": [
            {"uuid": b.entity, "metric": b.metric, "time": utc_text(cfg.at(b.step * step)), "value": b.value}
            for b in bad
        ],
        "org_versions": [
            {"effective_from": utc_text(cfg.at(v.effective_from)), "business_units": v.business_units} for v in versions
        ],
        "degraded_node": cluster.degraded_node,
        "pending_jobs": {
            s: sum(
                1
                for spec in state.specs
                if spec.scheduler == s and not spec.dropped and (not spec.attempts or spec.pending_pod is not None)
            )
            for s in ("kubernetes", "slurm")
        },
    }


def simulate(
    nodes: int,
    hours: float,
    seed: int,
    out_dir: Path,
    start: datetime | None = None,
    *,
    scrape_interval_s: int = 30,
    cluster: str = DEFAULT_CLUSTER,
    modern_sharing: bool = False,
) -> SimulationResult:
    """Simulate ``nodes`` nodes for ``hours`` from ``start`` and write the files into ``out_dir``
    (``modern_sharing``: see :mod:`pipelines.simulator.sharing`)."""
    began = time.perf_counter()
    cfg = SimConfig(nodes, hours, seed, start or DEFAULT_START, scrape_interval_s, cluster, modern_sharing)
    rng = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(8)]
    topology = build_cluster(cfg, rng[0])
    state = run(
        cfg, topology, workload.generate(cfg, topology, rng[1]), plan_node_failures(cfg, topology, rng[2]), rng[3]
    )
    stall = anomalies.plan_storage_stall(cfg, topology, state)
    metrics = build_metrics(cfg, topology, state, rng[4], lambda m: anomalies.starve(m, stall))
    anomalies.choose_gap(cfg, topology, state, metrics)
    bad = anomalies.bad_samples(metrics)
    hour_start = -(cfg.start.minute * 60 + cfg.start.second)
    versions = org_versions(hour_start, cfg.horizon)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    reference.write_org(out / "org.yaml", cfg, versions)
    reference.write_pricing(out / "pricing.yaml", cfg, hour_start)
    malformed: dict[str, int] = {"org.yaml": 0, "pricing.yaml": 0}
    if cfg.modern_sharing:
        k8s_nodes.write_nodes(out / k8s_nodes.FILE, cfg, topology)
        dra.write_dra(out, cfg, topology, state)
        malformed[k8s_nodes.FILE] = 0
    malformed[kubernetes.FILE] = kubernetes.write_watch(out / kubernetes.FILE, cfg, topology, state.specs)
    malformed[slurm.SACCT_FILE], pending = slurm.write_sacct(out / slurm.SACCT_FILE, cfg, state.specs)
    malformed[slurm.SQUEUE_FILE] = slurm.write_squeue(out / slurm.SQUEUE_FILE, cfg, state.specs, pending)
    series = dcgm.build_series(cfg, metrics, bad)
    dcgm.write_query_range(out / DCGM_FILE, cfg, series)
    malformed[DCGM_FILE] = len(bad)
    disks = storage.node_counters(cfg, topology, state, rng[5], stall)
    lustre = storage.lustre_counters(cfg, state, rng[5])
    malformed[storage.NODE_FILE] = storage.write_node_exporter(out / storage.NODE_FILE, cfg, topology, disks, lustre)
    malformed[storage.CHECKPOINT_FILE] = storage.write_checkpoints(out / storage.CHECKPOINT_FILE, cfg, state)
    logs, runs = nccl.write_logs(out, cfg, topology, state, rng[6])
    malformed.update(logs)
    servers = outputs.servers(cfg, state, metrics)
    outputs.write_query_range(out / outputs.FILE, cfg, servers)
    malformed[outputs.FILE] = 0
    extras = _extras(cfg, state, metrics, bad, versions, topology)
    if cfg.modern_sharing:
        extras["modern_sharing"] = _modern(topology)
    extras["acceptance_runs"] = runs
    extras["outputs_by_model"] = outputs.tokens(servers)
    rates = causes.node_rates(
        {n: c.readings() for n, c in disks.items()}, {storage.unreadable(topology, cfg)}, cfg.scrape_interval_s
    )
    planted = (causes.storage_stalls(cfg, rates), causes.fabric_degraded(runs))
    if stall is not None:
        stalled, ended = stall.span(cfg.scrape_interval_s)
        extras["storage_stall"] = {"node": stall.node, "from": utc_text(cfg.at(stalled)), "to": utc_text(cfg.at(ended))}
    else:
        extras["storage_stall"] = None
    extras["slow_starts"] = sum(1 for a in state.attempts if loading_seconds(cfg.seed, a) > 0)
    truth = build_truth(cfg, topology, state, metrics, versions, malformed, extras, planted)
    truth["cost_by_model"] = costs.cost_by_model(
        cfg, topology, state, lambda a: attempt_keys(a, cfg.cluster)["model"], hour_start, lustre
    )
    truth["cost_per_million_tokens"] = costs.per_million_tokens(truth["cost_by_model"], extras["outputs_by_model"])
    write_text(out / "truth.json", orjson.dumps(truth, option=orjson.OPT_INDENT_2).decode() + "\n")
    manifest = _manifest(cfg, malformed)
    write_text(out / "manifest.json", orjson.dumps(manifest, option=orjson.OPT_INDENT_2).decode() + "\n")
    return SimulationResult(cfg, out, manifest, truth, time.perf_counter() - began, series)


def _modern(cluster: Any) -> dict[str, Any]:
    """What modern sharing planted: the node of each role, the shared claims, the blind exporter."""
    out: dict[str, Any] = {n.sharing: n.name for n in cluster.nodes if n.sharing}
    out["replicas"] = {n.name: sharing.REPLICAS[n.sharing] for n in cluster.nodes if n.sharing in sharing.REPLICAS}
    out["shared_claim_devices"] = [
        {"node": g.node, "device": f"gpu-{g.index}", "uuid": g.uuid} for g in cluster.all_gpus() if g.layout == "claim"
    ]
    blind = next(n for n in cluster.nodes if n.exporter_pod)
    out["exporter_without_node_name"] = {
        "node": blind.name,
        "hostname": blind.exporter_pod,
        "target_label": sharing.NODE_LABEL,
    }
    return out


SOURCES = {
    "org.yaml": "org",
    "pricing.yaml": "pricing",
    kubernetes.FILE: "kubernetes",
    k8s_nodes.FILE: "kubernetes",
    slurm.SACCT_FILE: "slurm",
    slurm.SQUEUE_FILE: "slurm",
    DCGM_FILE: "dcgm",
    storage.NODE_FILE: "storage",
    storage.CHECKPOINT_FILE: "storage",
    outputs.FILE: "outputs",
}


def _manifest(cfg: SimConfig, malformed: dict[str, int]) -> dict[str, Any]:
    files = []
    for rel, count in malformed.items():
        source = SOURCES.get(rel, "nccl")
        entry: dict[str, Any] = {"path": rel, "source": source, "malformed_records": count}
        if rel == storage.CHECKPOINT_FILE:
            entry["format"] = "checkpoint"
        elif rel == k8s_nodes.FILE:  # the node list holds no time of its own: it says how nodes were at the start
            entry["hints"] = {"time": utc_text(cfg.start)}
        elif rel == kubernetes.FILE and cfg.modern_sharing:  # which devices the pods' DRA claims hold
            entry["with"] = [dra.CLAIMS_FILE, dra.SLICES_FILE]
        files.append(entry)
    return {
        "generator": "pipelines.simulator",
        "cluster": cfg.cluster,
        "start": utc_text(cfg.start),
        "end": utc_text(cfg.end),
        "nodes": cfg.nodes,
        "hours": cfg.hours,
        "seed": cfg.seed,
        "scrape_interval_s": cfg.scrape_interval_s,
        "files": files,
        "truth": "truth.json",
    }
