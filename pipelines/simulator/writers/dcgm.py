"""``dcgm/query_range.json``: a Prometheus ``query_range`` answer (matrix) of dcgm-exporter series.

Labels as dcgm-exporter sets them (``gpu``, ``UUID``, ``device``, ``modelName``, ``Hostname`` or
``hostname``, ``pci_bus_id``, ``DCGM_FI_DRIVER_VERSION``; ``GPU_I_PROFILE``/``GPU_I_ID`` on MIG
instances; ``namespace``/``pod``/``container`` while a pod holds the entity, ``hpc_job`` while a
Slurm job does) plus ``instance`` and ``job`` added by Prometheus. With modern sharing: the
``dra_claim_name``/``dra_claim_namespace``/``dra_driver_name``/``dra_pool_name``/``dra_device_name``
labels on a device held through a DRA claim (a shared claim's device repeats its series once per
pod holding it), and on the node whose exporter runs without ``NODE_NAME`` the exporter's pod name
as host label, the node only in Prometheus' ``kubernetes_node`` target label. A change of holder starts a
new series of the same GPU. Points are ``[<unix seconds>, "<value>"]`` at every scrape the node
answered (none during its gap). ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` only on nodes that have it;
``DCGM_FI_DEV_GPU_UTIL`` not on MIG instances; the device's power and energy counter are repeated on
every MIG instance's series, as dcgm-exporter does. One ``DCGM_FI_DEV_POWER_USAGE`` point holds a
blank sentinel (a missing value, not an error); two points hold out-of-range values
(:mod:`pipelines.simulator.anomalies`).

The same series, in memory (:class:`StoredSeries`), feed the live exporter endpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson

from pipelines.simulator import sharing
from pipelines.simulator.anomalies import BadSample
from pipelines.simulator.config import SimConfig
from pipelines.simulator.dcgm_view import Entity, Metrics
from pipelines.simulator.writers.common import prom_value, write_text

DRIVER = "550.90.07"
BLANK_INT64 = "9223372036854775794"
METRICS = (
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "DCGM_FI_DEV_XID_ERRORS",
)


@dataclass
class StoredSeries:
    labels: dict[str, str]  # including __name__, instance, job
    steps: np.ndarray  # scrape indices with a point
    values: list[str]


def _base_labels(ent: Entity) -> dict[str, str]:
    node, gpu = ent.node, ent.gpu
    labels = {
        "gpu": str(gpu.index),
        "UUID": gpu.uuid,
        "device": f"nvidia{gpu.index}",
        "modelName": node.model.name,
        node.host_label: node.name,
        "pci_bus_id": gpu.pci_bus_id,
        "DCGM_FI_DRIVER_VERSION": DRIVER,
        "instance": f"{node.ip}:9400",
        "job": "dcgm-exporter",
    }
    if node.exporter_pod is not None:  # no NODE_NAME: the exporter names its own pod, Prometheus the node
        labels.update(
            {
                node.host_label: node.exporter_pod,
                sharing.NODE_LABEL: node.name,
                "instance": f"10.244.{node.index}.254:9400",  # the exporter pod's address
            }
        )
    if ent.mig is not None:
        labels["GPU_I_PROFILE"] = ent.mig.profile
        labels["GPU_I_ID"] = str(ent.mig.gi)
    return labels


def _values(ent: Entity, m: Metrics, metric: str, cache: dict[float, str]) -> list[str] | None:
    if metric == "DCGM_FI_PROF_GR_ENGINE_ACTIVE":
        if not ent.node.has_prof:
            return None
        arr = ent.util
    elif metric == "DCGM_FI_DEV_GPU_UTIL":
        if ent.mig is not None:
            return None
        arr = np.round(ent.util * 100.0)
    elif metric == "DCGM_FI_DEV_FB_USED":
        arr = ent.fb
    elif metric == "DCGM_FI_DEV_POWER_USAGE":
        arr = m.power[ent.gpu.uuid]
    elif metric == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION":
        arr = m.energy[ent.gpu.uuid]
    else:
        arr = m.xid[ent.gpu.uuid].astype(float)
    out = []
    for v in arr.tolist():
        text = cache.get(v)
        if text is None:
            text = cache[v] = prom_value(v)
        out.append(text)
    return out


def _holder_steps(ent: Entity, m: Metrics, sampled: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """(holder label id, scrape steps) of each series of the entity: one per holder at a time, or
    for a shared DRA claim's device one per pod holding it (and one without holder while none does)."""
    holders = ent.holder
    if ent.key not in m.co_holders:
        return [(int(h), np.flatnonzero(sampled & (holders == h))) for h in np.unique(holders[sampled])]
    held = np.zeros(len(sampled), bool)
    out: list[tuple[int, np.ndarray]] = []
    for label, k0, k1 in m.co_holders[ent.key]:
        held[k0:k1] = True
        out.append((label, k0 + np.flatnonzero(sampled[k0:k1])))
    free = np.flatnonzero(sampled & ~held)
    return ([(0, free)] if len(free) else []) + [(label, steps) for label, steps in out if len(steps)]


def build_series(cfg: SimConfig, m: Metrics, bad: list[BadSample]) -> list[StoredSeries]:
    """Every series with its points, in a stable order (node, GPU, instance, metric, holder)."""
    bad_at = {(b.entity, b.metric): b for b in bad}
    blank_done = False
    cache: dict[float, str] = {}
    out: list[StoredSeries] = []
    for ent in sorted(m.entities.values(), key=lambda e: (e.node.index, e.gpu.index, e.mig.gi if e.mig else -1)):
        sampled = m.present(ent)
        groups = _holder_steps(ent, m, sampled)
        base = _base_labels(ent)
        for metric in METRICS:
            values = _values(ent, m, metric, cache)
            if values is None:
                continue
            if (ent.key, metric) in bad_at:
                values[bad_at[(ent.key, metric)].step] = bad_at[(ent.key, metric)].value
            if metric == "DCGM_FI_DEV_POWER_USAGE" and not blank_done and ent.gpu.layout == "whole":
                values[len(values) // 2] = BLANK_INT64
                blank_done = True
            for holder, steps in groups:
                labels = {"__name__": metric, **base, **m.labels[int(holder)]}
                out.append(StoredSeries(labels, steps, [values[k] for k in steps.tolist()]))
    return out


def write_query_range(path: Path, cfg: SimConfig, series: list[StoredSeries]) -> None:
    ts = [prom_value(cfg.start_epoch + k * cfg.scrape_interval_s) for k in range(cfg.steps)]
    parts = []
    for s in series:
        points = ",".join(f'[{ts[k]},"{v}"]' for k, v in zip(s.steps.tolist(), s.values, strict=True))
        parts.append(f'{{"metric":{orjson.dumps(dict(sorted(s.labels.items()))).decode()},"values":[{points}]}}')
    write_text(path, '{"status":"success","data":{"resultType":"matrix","result":[' + ",".join(parts) + "]}}")
