"""Attribution under conditions every real cluster produces (docs/ATTRIBUTION.md), on the pure code.

Each test states the physical truth of a small node and checks that capacity is the physical
GPUs, per window, whatever the scheduler data says.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pipelines import events as ev
from streams.attribution.attempts import SUPERSEDED
from streams.attribution.node_range import InventoryGpu, NodeInputs, NodeState, SampleRow
from streams.attribution.ranges import compute_range, compute_range_full
from streams.ingest.sink import attempts_from_snapshots

T0 = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
t0 = T0.timestamp()
H100 = "NVIDIA H100 80GB HBM3"


def alloc(**kw: Any) -> ev.AllocationData:
    base: dict[str, Any] = {
        "scheduler": "kubernetes",
        "job_id": "ns/p",
        "node": "n1",
        "state": "running",
        "start_time": T0,
        "gpus": [{"kind": "gpu", "count": 1}],
    }
    base.update(kw)
    return ev.AllocationData.model_validate(base)


def samples(
    uuid: str,
    util: float | None,
    start: float,
    n: int,
    *,
    index: int = 0,
    model: str = H100,
    xid: int | None = 0,
    ns: str = "",
    pod: str = "",
    job: str = "",
    mig: int | None = None,
    profile: str = "",
) -> list[SampleRow]:
    return [
        SampleRow(start + 30 * i, uuid, mig, index, model, profile, util, xid, ns, pod, job, 30.0) for i in range(n)
    ]


def node_gpus(n: int, util: float = 0.0, start: float = t0 - 60, count: int = 12) -> list[SampleRow]:
    return [r for i in range(n) for r in samples(f"GPU-{i}", util, start, count, index=i)]


def totals(facts: list[dict[str, Any]]) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = defaultdict(float)
    for f in facts:
        out[(f["kind"], f["job_id"])] += f["gpu_seconds"]
    return dict(out)


def per_window(facts: list[dict[str, Any]]) -> list[float]:
    out: dict[Any, float] = defaultdict(float)
    for f in facts:
        out[f["window_start"]] += f["gpu_seconds"]
    return [out[k] for k in sorted(out)]


def test_time_sliced_replicas_of_plain_nvidia_gpu_sum_to_the_gpu() -> None:
    # GPU Operator default (renameByDefault: false): plain nvidia.com/gpu: 1, replica ids GPU-<uuid>::k
    pods = [alloc(job_id=f"ns/p{k}", device_ids=[f"GPU-0::{k}"]) for k in range(4)]
    assert all(p.gpu_equivalents == pytest.approx(0.25) for p in pods)
    facts = compute_range("c", "n1", t0, t0 + 120, 60, node_gpus(1, 0.8), pods)
    assert per_window(facts) == pytest.approx([60.0, 60.0])  # one GPU, not four
    got = totals(facts)
    assert all(got[("allocated", f"ns/p{k}")] == pytest.approx(30.0) for k in range(4))
    busy = [f["busy_seconds"] for f in facts if f["kind"] == "allocated"]
    assert sum(busy) == pytest.approx(0.8 * 120)


def test_unbound_claims_never_exceed_the_physical_gpus_and_the_excess_is_a_conflict() -> None:
    jobs = [alloc(scheduler="slurm", job_id=str(j), gpus=[{"kind": "gpu", "count": 8}]) for j in (1, 2, 3)]
    result = compute_range_full("c", "n1", t0, t0 + 60, 60, node_gpus(8), jobs)
    assert per_window(result.facts) == pytest.approx([8 * 60.0])
    physical, conflicts = result.windows[t0]
    assert physical == 8
    [conflict] = conflicts
    assert conflict.claimed_seconds == pytest.approx(16 * 60.0) and conflict.capacity_seconds == pytest.approx(0.0)
    assert conflict.owners == ("slurm:2#1", "slurm:3#1")


def test_overlapping_claims_on_one_gpu_are_reported() -> None:
    pods = [alloc(job_id=f"ns/p{k}", device_ids=["GPU-0"]) for k in range(2)]
    result = compute_range_full("c", "n1", t0, t0 + 60, 60, node_gpus(1), pods)
    [conflict] = result.windows[t0][1]
    assert (conflict.gpu_uuid, conflict.claimed_seconds, conflict.capacity_seconds) == ("GPU-0", 120.0, 60.0)
    assert conflict.owners == ("kubernetes:ns/p0#1", "kubernetes:ns/p1#1")


def test_labels_from_before_the_start_do_not_bind_and_never_more_than_requested() -> None:
    # GPU-0 carried the pod's name before it started (an earlier pod of that name); GPU-1..3 since
    rows = samples("GPU-0", 1.0, t0 - 60, 4, index=0, ns="ns", pod="p")  # until t0 + 30
    rows += samples("GPU-0", 1.0, t0 + 60, 2, index=0)
    for i in (1, 2, 3):
        rows += samples(f"GPU-{i}", 0.5, t0 + 60, 2, index=i, ns="ns", pod="p")
    pod = alloc(start_time=T0 + timedelta(seconds=60), gpus=[{"kind": "gpu", "count": 2}])
    facts = compute_range("c", "n1", t0 + 60, t0 + 120, 60, rows, [pod])
    held = sorted(f["gpu_uuid"] for f in facts if f["kind"] == "allocated")
    assert len(held) == 2 and "GPU-0" not in held
    assert per_window(facts) == pytest.approx([4 * 60.0])


def test_array_task_binds_by_its_unique_slurm_job_id() -> None:
    rows = samples("GPU-0", 0.6, t0 - 60, 6, job="4242") + samples("GPU-1", 0.0, t0 - 60, 6, index=1)
    task = alloc(scheduler="slurm", job_id="4200_7", aliases=["4242"])
    [fact] = [f for f in compute_range("c", "n1", t0, t0 + 60, 60, rows, [task]) if f["kind"] == "allocated"]
    assert (fact["gpu_uuid"], fact["busy_seconds"], fact["unobserved_seconds"]) == ("GPU-0", pytest.approx(36.0), 0.0)


def test_drained_and_down_nodes_make_unheld_capacity_unavailable() -> None:
    states = [NodeState(t0 - 3600, "up", 2), NodeState(t0 + 30, "drained"), NodeState(t0 + 90, "up")]
    held = alloc(device_ids=["GPU-0"])
    facts = compute_range("c", "n1", t0, t0 + 120, 60, node_gpus(2, count=8), [held], NodeInputs((), states))
    got = totals(facts)
    assert got[("allocated", "ns/p")] == pytest.approx(120.0)  # allocation wins
    assert got[("unavailable", "")] == pytest.approx(60.0)  # GPU-1 from +30 s to +90 s
    assert got[("unallocated", "")] == pytest.approx(60.0)


def test_a_gpu_that_fell_off_the_bus_stays_in_capacity_as_unavailable() -> None:
    # GPU-1 showed XID 79 two hours ago and has not reported since; its samples are not loaded
    inventory = [
        InventoryGpu("GPU-0", 0, H100, t0 - 86_000, t0 + 60),
        InventoryGpu("GPU-1", 1, H100, t0 - 86_000, t0 - 7200, down_since=t0 - 7200),
    ]
    result = compute_range_full("c", "n1", t0, t0 + 60, 60, node_gpus(1), [], NodeInputs(inventory, ()))
    by_gpu = {(f["gpu_uuid"], f["kind"]): f["gpu_seconds"] for f in result.facts}
    assert by_gpu == {("GPU-0", "unallocated"): 60.0, ("GPU-1", "unavailable"): 60.0}
    assert result.windows[t0][0] == 2


def test_a_gpu_whose_exporter_went_away_is_unallocated_and_unobserved() -> None:
    inventory = [
        InventoryGpu("GPU-0", 0, H100, t0 - 86_000, t0 + 60),
        InventoryGpu("GPU-1", 1, H100, t0 - 86_000, t0 - 7200),
    ]
    facts = compute_range("c", "n1", t0, t0 + 60, 60, node_gpus(1), [], NodeInputs(inventory, ()))
    [gone] = [f for f in facts if f["gpu_uuid"] == "GPU-1"]
    assert (gone["kind"], gone["gpu_seconds"], gone["unobserved_seconds"]) == ("unallocated", 60.0, 60.0)


def test_declared_gpus_without_samples_are_capacity_on_the_node_slot() -> None:
    states = [NodeState(t0 - 60, "up", 4, "H100")]
    job = alloc(scheduler="slurm", job_id="9", gpus=[{"kind": "gpu", "count": 2}])
    result = compute_range_full("c", "n1", t0, t0 + 60, 60, node_gpus(1), [job], NodeInputs((), states))
    assert result.windows[t0][0] == 4
    assert per_window(result.facts) == pytest.approx([240.0])
    got = totals(result.facts)
    assert got[("allocated", "9")] == pytest.approx(120.0)
    assert got[("unallocated", "")] == pytest.approx(120.0)


def test_busy_on_a_gpu_nobody_holds_is_kept() -> None:
    facts = compute_range("c", "n1", t0, t0 + 60, 60, node_gpus(1, 0.9), [])
    [row] = facts
    assert (row["kind"], row["busy_seconds"], row["unobserved_seconds"]) == ("unallocated", pytest.approx(54.0), 0.0)


def test_a30_mig_instances_are_quarters_and_4g_is_the_whole_gpu() -> None:
    a30 = "NVIDIA A30"
    rows = samples("GPU-0", 0.5, t0 - 60, 6, model=a30, mig=1, profile="4g.24gb")
    rows += samples("GPU-1", 0.5, t0 - 60, 6, index=1, model=a30, mig=1, profile="1g.6gb")
    pods = [
        alloc(
            job_id=f"ns/{name}", device_ids=[f"MIG-GPU-{i}/1"], gpus=[{"kind": "mig", "count": 1, "profile": profile}]
        )
        for i, (name, profile) in enumerate((("big", "4g.24gb"), ("small", "1g.6gb")))
    ]
    assert pods[0].gpu_equivalents == 1.0 and pods[1].gpu_equivalents == 0.25
    got = totals(compute_range("c", "n1", t0, t0 + 60, 60, rows, pods))
    assert got[("allocated", "ns/big")] == pytest.approx(60.0)
    assert got[("allocated", "ns/small")] == pytest.approx(15.0)
    assert got[("unallocated", "")] == pytest.approx(45.0)


def test_unknown_mig_profile_is_rejected_by_the_contract() -> None:
    with pytest.raises(ValueError, match="MIG profile"):
        alloc(gpus=[{"kind": "mig", "count": 1, "profile": "9g.90gb"}])
    with pytest.raises(ValueError, match="not a MIG profile"):
        alloc(gpus=[{"kind": "mig", "count": 1}])


def _running(attempt: int, start_min: int, node: str = "n1", **kw: Any) -> tuple[datetime, ev.AllocationData]:
    start = T0 + timedelta(minutes=start_min)
    return start, alloc(
        scheduler="slurm",
        job_id="77",
        attempt=attempt,
        node=node,
        start_time=start,
        submit_time=T0,
        gpus=[{"kind": "gpu", "count": 2}],
        **kw,
    )


def test_an_attempt_without_an_end_ends_when_the_next_one_starts_as_failure_waste() -> None:
    facts = attempts_from_snapshots([_running(1, 0), _running(2, 45, node="n2")], [])
    first, second = facts
    assert (first.outcome, first.failure_reason, first.scheduler_state) == ("failure", "unknown", SUPERSEDED)
    assert first.end_time == T0 + timedelta(minutes=45)
    assert first.gpu_seconds == pytest.approx(2 * 45 * 60) and first.lost_gpu_seconds == pytest.approx(2 * 45 * 60)
    assert second.outcome == "running"


def test_a_pod_recreated_under_the_same_name_holds_its_gpu_again() -> None:
    old = alloc(job_id="db/db-0", uid="uid-a", state="ended", end_time=T0 + timedelta(minutes=10), outcome="success")
    new = alloc(job_id="db/db-0", uid="uid-b", start_time=T0 + timedelta(minutes=20))
    facts = compute_range("c", "n1", t0, t0 + 1800, 60, node_gpus(1, count=70), [old, new])
    assert sum(f["gpu_seconds"] for f in facts if f["kind"] == "allocated") == pytest.approx(600 + 600)


def test_a_placement_known_by_gpu_index_finds_a_gpu_that_went_silent() -> None:
    inventory = [
        InventoryGpu("GPU-0", 0, H100, t0 - 86_000, t0 + 60),
        InventoryGpu("GPU-1", 1, H100, t0 - 86_000, t0 - 7200, down_since=t0 - 7200),
    ]
    job = alloc(scheduler="slurm", job_id="9", gpu_indices=[1])
    facts = compute_range("c", "n1", t0, t0 + 60, 60, node_gpus(1), [job], NodeInputs(inventory, ()))
    [held] = [f for f in facts if f["kind"] == "allocated"]
    # allocation wins over the GPU's unavailability; no sample: all of it unobserved
    assert (held["gpu_uuid"], held["gpu_seconds"], held["unobserved_seconds"]) == ("GPU-1", 60.0, 60.0)
