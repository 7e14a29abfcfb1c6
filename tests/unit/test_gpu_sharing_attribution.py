"""Modern GPU sharing in the attribution (docs/ATTRIBUTION.md "Time-slicing and MPS", "DRA"): the node's
replicas per GPU, effective-dated from its node states, and devices held through DRA claims split
equally among the placements holding them at each instant. Capacity is always the physical GPUs."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines import events as ev
from streams.attribution.attempts import attempt_fact
from streams.attribution.node_range import NodeInputs, NodeState, SampleRow
from streams.attribution.ranges import compute_range_full

T0 = datetime(2026, 12, 4, 10, 0, tzinfo=UTC)
W0 = T0.timestamp()
W = 60


def pod(name: str, *, start: float = 0, end: float | None = None, **kw: Any) -> ev.AllocationData:
    base: dict[str, Any] = {
        "scheduler": "kubernetes",
        "job_id": f"ns/{name}",
        "node": "n1",
        "state": "running",
        "start_time": T0 + timedelta(seconds=start),
        "gpus": [{"kind": "gpu", "count": 1}],
    }
    if end is not None:
        base.update(state="ended", end_time=T0 + timedelta(seconds=end), outcome="success")
    base.update(kw)
    return ev.AllocationData.model_validate(base)


def samples(*uuids: str, util: float = 0.5) -> list[SampleRow]:
    return [
        SampleRow(W0 - 30 + 15 * i, u, None, n, "H100", "", util, 0, "", "", "", 15.0)
        for n, u in enumerate(uuids)
        for i in range(8)
    ]


def state(at: float, replicas: int | None, sharing: str = "", gpus: int | None = None) -> NodeState:
    del sharing  # documents the label; the attribution reads the replicas
    return NodeState(W0 + at, "up", gpus, "H100", replicas)


def run(
    placements: list[ev.AllocationData],
    rows: list[SampleRow],
    states: list[NodeState] = (),  # type: ignore[assignment]
) -> tuple[dict[str, float], dict[str, float], float]:
    """Allocated GPU-seconds per job and per slot (allocated or not) of the one window, and its physical GPUs."""
    result = compute_range_full("c1", "n1", W0, W0 + W, W, rows, placements, NodeInputs((), list(states)))
    per_job: dict[str, float] = defaultdict(float)
    per_gpu: dict[str, float] = defaultdict(float)
    for f in result.facts:
        if f["kind"] == "allocated":
            per_job[str(f["job_id"])] += float(f["gpu_seconds"])
        per_gpu[str(f["gpu_uuid"])] += float(f["gpu_seconds"])
    ((physical, conflicts),) = result.windows.values()
    assert conflicts == []
    return dict(per_job), dict(per_gpu), physical


def test_ten_replicas_from_the_node_label_give_each_pod_a_tenth() -> None:
    """``nvidia.com/gpu.replicas: "10"``, no annotation: ten pods with replica ids each hold 0.1 GPU."""
    pods = [pod(f"p{k}", device_ids=[f"GPU-a::{k}"]) for k in range(10)]
    per_job, per_gpu, physical = run(pods, samples("GPU-a"), [state(-3600, 10, "time-slicing", 1)])
    assert per_job == {f"ns/p{k}": pytest.approx(0.1 * W) for k in range(10)}
    assert physical == 1 and per_gpu == {"GPU-a": pytest.approx(W)}


def test_ten_replicas_without_device_ids_or_labels_are_a_tenth_each() -> None:
    """Plain ``nvidia.com/gpu: 1`` on a time-sliced node, no source naming the GPU: a tenth each, unbound."""
    pods = [pod(f"p{k}") for k in range(10)]
    per_job, per_gpu, physical = run(pods, samples("GPU-a", "GPU-b"), [state(-3600, 10, "time-slicing", 2)])
    assert per_job == {f"ns/p{k}": pytest.approx(0.1 * W) for k in range(10)}
    assert physical == 2 and sum(per_gpu.values()) == pytest.approx(2 * W)


def test_mps_with_two_replicas_gives_half_each_and_the_shared_request_too() -> None:
    pods = [pod("a", device_ids=["GPU-a::0"]), pod("b", device_ids=["GPU-a::1"], gpus=[{"kind": "shared", "count": 1}])]
    per_job, per_gpu, physical = run(pods, samples("GPU-a"), [state(-60, 2, "mps", 1)])
    assert per_job == {"ns/a": pytest.approx(W / 2), "ns/b": pytest.approx(W / 2)}
    assert physical == 1 and per_gpu == {"GPU-a": pytest.approx(W)}


def test_the_annotation_overrides_the_node_and_4_only_when_nothing_states_it() -> None:
    annotated = pod("a", device_ids=["GPU-a::0"], gpus=[{"kind": "shared", "count": 1, "replicas": 5}])
    per_job, _, _ = run([annotated], samples("GPU-a"), [state(-60, 10, "time-slicing", 1)])
    assert per_job == {"ns/a": pytest.approx(W / 5)}
    per_job, _, _ = run([pod("b", device_ids=["GPU-a::0"])], samples("GPU-a"))
    assert per_job == {"ns/b": pytest.approx(W / ev.DEFAULT_REPLICAS)}


def test_replicas_are_effective_dated_within_the_window() -> None:
    """Replicas 2 until 10:00:30, then 4 (relabelled): half a GPU for 30 s, a quarter for 30 s."""
    per_job, per_gpu, _ = run(
        [pod("a", device_ids=["GPU-a::0"])],
        samples("GPU-a"),
        [state(-60, 2, "time-slicing", 1), state(30, 4, "time-slicing", 1)],
    )
    assert per_job == {"ns/a": pytest.approx(30 / 2 + 30 / 4)}
    assert per_gpu == {"GPU-a": pytest.approx(W)}


def test_a_node_without_sharing_keeps_plain_requests_whole() -> None:
    per_job, _, _ = run([pod("a", device_ids=["GPU-a"])], samples("GPU-a"), [state(-60, 1, "none", 1)])
    assert per_job == {"ns/a": pytest.approx(W)}


def test_busy_is_credited_by_the_replica_share() -> None:
    result = compute_range_full(
        "c1",
        "n1",
        W0,
        W0 + W,
        W,
        samples("GPU-a", util=0.8),
        [pod("a", device_ids=["GPU-a::0"])],
        NodeInputs((), [state(-60, 10)]),
    )
    (row,) = [f for f in result.facts if f["kind"] == "allocated"]
    assert row["busy_seconds"] == pytest.approx(0.8 * W / 10)


# ---------------------------------------------------------------------------------------------
# DRA: devices held through ResourceClaims, split equally among their holders at each instant
# ---------------------------------------------------------------------------------------------
def dra(name: str, claim: str, devices: list[str], **kw: Any) -> ev.AllocationData:
    gpus = kw.pop("gpus", [{"kind": "gpu", "count": len(devices)}])
    return pod(name, device_ids=devices, claims=[f"ns/{claim}"], gpus=gpus, **kw)


def test_a_whole_gpu_claim_and_two_pods_sharing_one_claimed_gpu() -> None:
    pods = [dra("solo", "c-solo", ["GPU-a"]), dra("s1", "c-shared", ["GPU-b"]), dra("s2", "c-shared", ["GPU-b"])]
    per_job, per_gpu, physical = run(pods, samples("GPU-a", "GPU-b"))
    assert per_job == {"ns/solo": pytest.approx(W), "ns/s1": pytest.approx(W / 2), "ns/s2": pytest.approx(W / 2)}
    assert physical == 2 and per_gpu == {"GPU-a": pytest.approx(W), "GPU-b": pytest.approx(W)}


def test_the_split_follows_the_holders_over_time() -> None:
    """s2 ends at 10:00:20 and s3 starts at 10:00:40: k = 2, 1, 2."""
    pods = [dra("s1", "c", ["GPU-b"]), dra("s2", "c", ["GPU-b"], end=20), dra("s3", "c", ["GPU-b"], start=40)]
    per_job, per_gpu, _ = run(pods, samples("GPU-b"))
    assert per_job == {"ns/s1": pytest.approx(10 + 20 + 10), "ns/s2": pytest.approx(10), "ns/s3": pytest.approx(10)}
    assert per_gpu == {"GPU-b": pytest.approx(W)}


def test_busy_of_split_claims_follows_the_changing_share() -> None:
    pods = [dra("s1", "c", ["GPU-b"]), dra("s2", "c", ["GPU-b"], end=30)]
    result = compute_range_full("c1", "n1", W0, W0 + W, W, samples("GPU-b", util=1.0), pods)
    busy = {f["job_id"]: f["busy_seconds"] for f in result.facts if f["kind"] == "allocated"}
    assert busy == {"ns/s1": pytest.approx(15 + 30), "ns/s2": pytest.approx(15)}


def test_a_claimed_mig_instance_is_split_among_its_holders() -> None:
    mig = [{"kind": "mig", "count": 1, "profile": "3g.40gb"}]
    pods = [dra("m1", "c", ["MIG-GPU-c/2"], gpus=mig), dra("m2", "c", ["MIG-GPU-c/2"], gpus=mig)]
    per_job, per_gpu, physical = run(pods, samples("GPU-c"))
    assert per_job == {"ns/m1": pytest.approx(3 / 7 * W / 2), "ns/m2": pytest.approx(3 / 7 * W / 2)}
    assert physical == 1 and per_gpu == {"GPU-c": pytest.approx(W)}


def test_claims_are_not_replicas_on_a_time_sliced_node() -> None:
    """DRA devices are physical: the node's device-plugin replicas do not divide them."""
    per_job, _, _ = run([dra("solo", "c", ["GPU-a"])], samples("GPU-a"), [state(-60, 10, "time-slicing", 1)])
    assert per_job == {"ns/solo": pytest.approx(W)}


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["GPU-a", "GPU-b", "GPU-a::0", "GPU-a::1"]),
            st.booleans(),
            st.integers(-30, 50),
            st.integers(1, 90),
            st.sampled_from([None, 2, 3, 10]),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_capacity_is_the_physical_gpus_whatever_the_sharing(
    holders: list[tuple[str, bool, int, int, int | None]],
) -> None:
    """Claims, replicas and whole GPUs mixed, the node's replicas changing: every GPU's rows sum to the
    window, each holder gets at most its nominal share, and the window has its two physical GPUs."""
    pods, states = [], []
    for k, (device, claimed, start, length, replicas) in enumerate(holders):
        extra: dict[str, Any] = {"claims": ["ns/c"]} if claimed and "::" not in device else {}
        pods.append(pod(f"p{k}", start=start, end=start + length, device_ids=[device], **extra))
        states.append(state(start, replicas))
    result = compute_range_full(
        "c1", "n1", W0, W0 + W, W, samples("GPU-a", "GPU-b"), pods, NodeInputs((), sorted(states, key=lambda s: s.time))
    )
    per_gpu: dict[str, float] = defaultdict(float)
    for f in result.facts:
        per_gpu[str(f["gpu_uuid"])] += float(f["gpu_seconds"])
        assert float(f["busy_seconds"]) <= float(f["gpu_seconds"]) + 1e-9
    assert per_gpu == {"GPU-a": pytest.approx(W), "GPU-b": pytest.approx(W)}
    ((physical, _),) = result.windows.values()
    assert physical == 2


def test_attempt_records_count_replicas_as_the_facts_do() -> None:
    """A failed pod holding a replica on a node with 2 replicas, relabelled to 4 halfway: its attempt
    record holds what its facts hold (half a GPU for 30 s, a quarter for 30 s), lost work too."""
    failed = pod("a", device_ids=["GPU-a::0"], end=60)
    failed = failed.model_copy(update={"outcome": "failure", "failure_reason": "oom"})
    replicas = {"n1": [(W0 - 60, 2), (W0 + 30, 4)]}
    fact = attempt_fact([failed], None, [], None, replicas)
    assert fact.gpu_seconds == pytest.approx(30 / 2 + 30 / 4)
    assert fact.lost_gpu_seconds == pytest.approx(fact.gpu_seconds)
    assert fact.requested_gpus == pytest.approx(0.5)  # at its start
    per_job, _, _ = run([failed], samples("GPU-a"), [state(-60, 2), state(30, 4)])
    assert per_job == {"ns/a": pytest.approx(fact.gpu_seconds)}
    assert attempt_fact([failed], None, [], None).gpu_seconds == pytest.approx(W / ev.DEFAULT_REPLICAS)
