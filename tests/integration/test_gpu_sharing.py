"""The node's replicas reach the attribution through the real warehouse: a node.state with GPU feature
discovery's replicas in, one step, facts and attempt records out (docs/ATTRIBUTION.md "Time-slicing and MPS")."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta
from typing import Any

import pytest

from pipelines import events as ev
from pipelines.settings import Settings
from streams.attribution.warehouse import AttributionWarehouse
from tests.integration.test_attribution_inventory import T0, _env, _facts, _samples, _step, _write

pytestmark = pytest.mark.integration


def _pod(name: str, start_min: int, end_min: int, device: str) -> ev.Envelope:
    data: dict[str, Any] = {
        "scheduler": "kubernetes",
        "job_id": f"ml/{name}",
        "attempt": 1,
        "node": "ts1",
        "state": "ended",
        "start_time": (T0 + timedelta(minutes=start_min)).isoformat(),
        "end_time": (T0 + timedelta(minutes=end_min)).isoformat(),
        "outcome": "success",
        "gpus": [{"kind": "gpu", "count": 1}],
        "device_ids": [device],
        "uid": f"uid-{name}",
        "owner": {"namespace": "ml"},
    }
    return _env("allocation.ended", T0 + timedelta(minutes=start_min), data, "kubernetes", name)


def _node(minute: int, replicas: int, sharing: str) -> ev.Envelope:
    data = {"node": "ts1", "state": "up", "gpus": 1, "gpu_model": "H100", "gpu_replicas": replicas, "sharing": sharing}
    return _env("node.state", T0 + timedelta(minutes=minute), data, "kubernetes", "ts1", minute)


def test_ten_replicas_then_mps_with_two(warehouse: AttributionWarehouse, isolated_settings: Settings) -> None:
    """Labelled ``nvidia.com/gpu.replicas: "10"`` for the first hour, then MPS with 2: ten pods hold 0.1 GPU
    each, then two hold 0.5 each; the GPU's capacity is one GPU throughout, and each attempt record
    holds what its facts hold."""
    events = [
        _node(-10, 10, "time-slicing"),
        _node(60, 2, "mps"),
        *(_pod(f"ts{k}", 0, 60, f"GPU-ts::{k}") for k in range(10)),
        *(_pod(f"mps{k}", 60, 120, f"GPU-ts::{k}") for k in range(2)),
        *_samples("ts1", {"GPU-ts": 0}, {}),
    ]
    _write(warehouse, events)
    _step(warehouse, isolated_settings)
    per_job: dict[str, float] = defaultdict(float)
    per_window: dict[Any, float] = defaultdict(float)
    for _, window, _, kind, job, _, seconds in _facts(warehouse):
        per_window[window] += seconds
        if kind == "allocated":
            per_job[job] += seconds
    assert dict(per_job) == {
        **{f"ml/ts{k}": pytest.approx(360.0) for k in range(10)},
        **{f"ml/mps{k}": pytest.approx(1800.0) for k in range(2)},
    }
    assert len(per_window) >= 180 and sorted(per_window.values()) == pytest.approx([60.0] * len(per_window))
    rows = warehouse.client.query("SELECT job_id, gpu_seconds FROM job_attempts FINAL").result_rows
    attempts = {str(job): float(seconds) for job, seconds in rows}
    assert attempts == {job: pytest.approx(seconds) for job, seconds in per_job.items()}
