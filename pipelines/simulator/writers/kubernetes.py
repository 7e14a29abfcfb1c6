"""``kubernetes/pods.watch.jsonl``: Pod watch events as the API server sends them, in time order.

Per pod: ``ADDED`` (Pending, unscheduled) at creation; ``MODIFIED`` when bound to a node, when
the kubelet admits it (``status.startTime``, containers creating; the ``gpuledger.io/devices``
annotation appears with the devices), when the container runs, at every container restart (the
terminated run in ``lastState.terminated``, ``restartCount`` up, ``CrashLoopBackOff`` while
backing off, then running again), on preemption (``DisruptionTarget`` condition and
``deletionTimestamp``), and when it ends (``Succeeded``/``Failed`` with the container's
terminated state; ``status.reason`` ``DeadlineExceeded`` or ``NodeLost``). A pod lost with its
node keeps its stale container status and gets ``deletionTimestamp`` at the loss. ``DELETED``
when it is removed. A ``BOOKMARK`` every hour. Every event carries a fresh ``resourceVersion``.

Two malformed records: a truncated JSON line, and a running pod whose GPU limit is ``-1``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson

from pipelines.simulator.config import SimConfig
from pipelines.simulator.model.cluster import Cluster
from pipelines.simulator.model.jobs import Attempt, JobSpec
from pipelines.simulator.writers.common import write_text
from pipelines.simulator.writers.k8s_objects import PodView
from pipelines.times import utc_text

FILE = "kubernetes/pods.watch.jsonl"
MALFORMED = 2


def _events_of(view: PodView) -> list[tuple[int, str, dict[str, Any]]]:
    """(time, type, pod object) of every watch event of one pod."""
    pod, attempts = view.pod, view.attempts
    out: list[tuple[int, str, dict[str, Any]]] = [(pod.created, "ADDED", view.render(pod.created, "created"))]
    if pod.scheduled is None:
        return out
    out.append((pod.scheduled, "MODIFIED", view.render(pod.scheduled, "scheduled")))
    first = attempts[0]
    out.append((first.start, "MODIFIED", view.render(first.start, "admitted")))
    for i, attempt in enumerate(attempts):
        if i > 0 and attempts[i - 1].end is not None:
            out.append((attempts[i - 1].end, "MODIFIED", view.render(attempts[i - 1].end, "backoff", i)))  # type: ignore[arg-type]
        if attempt.end is None or attempt.run_start < attempt.end:
            out.append((attempt.run_start, "MODIFIED", view.render(attempt.run_start, "running", i)))
    last = attempts[-1]
    if pod.disruption is not None:
        out.append((pod.disruption, "MODIFIED", view.render(pod.disruption, "disrupted", len(attempts) - 1)))
    if last.end is not None:
        out.append((last.end, "MODIFIED", view.render(last.end, "ended", len(attempts) - 1)))
    if pod.deleted is not None:
        out.append((pod.deleted, "DELETED", view.render(pod.deleted, "deleted", len(attempts) - 1)))
    return out


def _pods(specs: list[JobSpec]) -> list[PodView]:
    views: list[PodView] = []
    for spec in specs:
        if spec.scheduler != "kubernetes":
            continue
        by_pod: dict[str, list[Attempt]] = {}
        for attempt in spec.attempts:
            assert attempt.pod is not None
            by_pod.setdefault(attempt.pod.uid, []).append(attempt)
        for attempts in by_pod.values():
            views.append(PodView(spec, attempts[0].pod, attempts))  # type: ignore[arg-type]
        if spec.pending_pod is not None:
            views.append(PodView(spec, spec.pending_pod, []))
    return views


def _bad_pod(cfg: SimConfig, cluster: Cluster, t: int) -> dict[str, Any]:
    node = cluster.by_scheduler("kubernetes")[0]
    created = utc_text(cfg.at(t))
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": "sandbox-debug-x7k2p",
            "namespace": "ml-sandbox",
            "uid": "00000000-0000-4000-8000-0000000000bd",
            "creationTimestamp": created,
            "labels": {"gpuledger.io/kind": "batch"},
        },
        "spec": {
            "nodeName": node.name,
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "worker",
                    "image": "registry.local/batch/worker:1.4",
                    "resources": {"limits": {"nvidia.com/gpu": "-1"}},
                }
            ],
        },
        "status": {
            "phase": "Running",
            "startTime": created,
            "hostIP": node.ip,
            "containerStatuses": [
                {"name": "worker", "ready": True, "restartCount": 0, "state": {"running": {"startedAt": created}}}
            ],
        },
    }


def write_watch(path: Path, cfg: SimConfig, cluster: Cluster, specs: list[JobSpec]) -> int:
    """Write the watch stream; returns the number of malformed records in it."""
    events: list[tuple[int, int, int, str, dict[str, Any]]] = []
    for n, view in enumerate(_pods(specs)):
        view.cfg, view.cluster = cfg, cluster
        for i, (t, kind, obj) in enumerate(_events_of(view)):
            if t < cfg.horizon:
                events.append((t, n, i, kind, obj))
    for hour in range(3600, cfg.horizon, 3600):
        events.append((hour, -1, 0, "BOOKMARK", {"kind": "Pod", "apiVersion": "v1", "metadata": {}}))
    events.append((cfg.horizon // 3, -2, 0, "ADDED", _bad_pod(cfg, cluster, cfg.horizon // 3)))
    events.sort(key=lambda e: (e[0], e[1], e[2]))
    lines, version = [], 48_213_377
    digest = hashlib.sha256(f"{cfg.seed}".encode()).digest()
    for j, (_, _, _, kind, obj) in enumerate(events):
        version += 1 + digest[j % len(digest)] % 37
        obj["metadata"]["resourceVersion"] = str(version)
        lines.append(orjson.dumps({"type": kind, "object": obj}).decode())
    middle = len(lines) // 2
    lines.insert(middle + 1, lines[middle][: max(len(lines[middle]) // 2, 10)])
    write_text(path, "\n".join(lines) + "\n")
    return MALFORMED
