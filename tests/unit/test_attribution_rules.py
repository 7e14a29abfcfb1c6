"""Which GPU, owner dimensions, attempts, windows and watermarks — the rules around the core."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pipelines import events as ev
from pipelines import wire
from pipelines.settings import Settings
from streams.attribution.attempts import Checkpoint, attempt_fact
from streams.attribution.node_range import SampleRow, fact_id
from streams.attribution.ranges import compute_range
from streams.attribution.resolve import SlotMeta, model_of, to_placement
from streams.attribution.step import CHUNK_S, MAX_NODES_PER_QUERY, NODE_SECONDS_PER_QUERY, Plan, groups, plan
from streams.ingest.rows import as_rows, rows_for
from streams.ingest.sink import Message, attempts_from_snapshots, decode_batch

T0 = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)


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


SLOTS = {
    "GPU-a": SlotMeta("GPU-a", index=0, namespaces_pods={("ns", "p")}),
    "GPU-b": SlotMeta("GPU-b", index=1, hpc_jobs={"77"}),
    "GPU-c/mig3": SlotMeta("GPU-c", mig_instance=3, mig_profile="2g.20gb", index=2, namespaces_pods={("ns", "nb")}),
}


@pytest.mark.parametrize(
    ("data", "expected", "unbound"),
    [
        # device ids win
        (alloc(device_ids=["GPU-z"]), [("GPU-z", 1.0, "GPU-z")], 0.0),
        (
            alloc(device_ids=["MIG-GPU-c/3"], gpus=[{"kind": "mig", "count": 1, "profile": "2g.20gb"}]),
            [("GPU-c", 2 / 7, "GPU-c/mig3")],
            0.0,
        ),
        (
            alloc(device_ids=["GPU-a::1"], gpus=[{"kind": "shared", "count": 1, "replicas": 4}]),
            [("GPU-a", 0.25, "GPU-a::1")],
            0.0,
        ),
        # Slurm gres_detail indices, mapped to UUIDs by the samples
        (
            alloc(scheduler="slurm", job_id="77", gpu_indices=[1, 0], gpus=[{"kind": "gpu", "count": 2}]),
            [("GPU-b", 1.0, "GPU-b"), ("GPU-a", 1.0, "GPU-a")],
            0.0,
        ),
        # dcgm-exporter labels: namespace/pod, hpc_job
        (alloc(), [("GPU-a", 1.0, "GPU-a")], 0.0),
        (alloc(scheduler="slurm", job_id="77", gpus=[{"kind": "gpu", "count": 2}]), [("GPU-b", 1.0, "GPU-b")], 1.0),
        (
            alloc(job_id="ns/nb", gpus=[{"kind": "mig", "count": 1, "profile": "2g.20gb"}]),
            [("GPU-c", 2 / 7, "GPU-c/mig3")],
            0.0,
        ),
        # nobody says which GPU: counted exactly, unbound
        (alloc(job_id="ns/other", gpus=[{"kind": "gpu", "count": 3}]), [], 3.0),
        # a MIG instance UUID (PodResources form) names no series: labels decide, else unbound
        (
            alloc(
                job_id="ns/x", device_ids=["MIG-1234-abcd"], gpus=[{"kind": "mig", "count": 1, "profile": "3g.40gb"}]
            ),
            [],
            3 / 7,
        ),
    ],
)
def test_which_gpu(data: ev.AllocationData, expected: list[tuple[str, float, str]], unbound: float) -> None:
    p = to_placement(data, 0.0, None, SLOTS)
    assert [(b.uuid, pytest.approx(b.share), b.slot) for b in p.bindings] == expected
    assert p.unbound_gpus == pytest.approx(unbound)


@pytest.mark.parametrize(
    ("owner", "model"),
    [
        ({"labels": {"model": "llama3"}, "comment": "model=other", "wckey": "wk"}, "llama3"),
        ({"comment": "kind=training model=mixtral-8x7b", "wckey": "wk"}, "mixtral-8x7b"),
        ({"wckey": "bert"}, "bert"),
        ({}, "unknown"),
    ],
)
def test_model_resolution_order(owner: dict[str, Any], model: str) -> None:
    assert model_of(alloc(owner=owner)) == model


def _ended(
    attempt: int,
    start: int,
    end: int,
    outcome: str = "failure",
    reason: str | None = "oom",
    node: str = "n1",
    gpus: int = 2,
) -> ev.AllocationData:
    return alloc(
        job_id="j",
        attempt=attempt,
        node=node,
        state="ended",
        submit_time=T0,
        start_time=T0 + timedelta(minutes=start),
        end_time=T0 + timedelta(minutes=end),
        outcome=outcome,
        failure_reason=reason if outcome == "failure" else None,
        gpus=[{"kind": "gpu", "count": gpus}],
        requested_gpus=2 * gpus,
    )


def test_failed_attempt_loses_only_work_after_last_checkpoint() -> None:
    placements = [_ended(1, 10, 70), _ended(1, 10, 70, node="n2")]
    ckpts = [
        Checkpoint("j", 1, T0 + timedelta(minutes=40)),
        Checkpoint("j", 1, T0 + timedelta(minutes=30)),
        Checkpoint("j", 2, T0 + timedelta(minutes=65)),
        Checkpoint("j", None, T0 + timedelta(minutes=90)),
    ]
    fact = attempt_fact(placements, None, ckpts, None)
    assert fact.outcome == "failure" and fact.failure_reason == "oom"
    assert fact.gpu_seconds == pytest.approx(2 * 2 * 3600)  # 2 nodes × 2 GPUs × 60 min
    assert fact.last_checkpoint == T0 + timedelta(minutes=40)
    assert fact.lost_gpu_seconds == pytest.approx(2 * 2 * 30 * 60)
    assert fact.queue_seconds == pytest.approx(600) and fact.queue_gpu_seconds == pytest.approx(600 * 4)
    assert fact.nodes == ("n1", "n2")


def test_without_checkpoints_the_whole_attempt_is_lost_and_success_loses_nothing() -> None:
    assert attempt_fact([_ended(1, 0, 30)], None, [], None).lost_gpu_seconds == pytest.approx(2 * 1800)
    ok = attempt_fact([_ended(1, 0, 30, outcome="success")], None, [], None)
    assert (ok.outcome, ok.failure_reason, ok.lost_gpu_seconds) == ("success", "", 0.0)


def test_retry_queue_time_counts_from_the_previous_attempt_end() -> None:
    snaps = [
        (T0, _ended(1, 10, 20)),
        (T0, _ended(2, 25, 40, outcome="success")),
        (T0, alloc(job_id="j", attempt=2, state="running", start_time=T0 + timedelta(minutes=25))),
    ]
    facts = attempts_from_snapshots(snaps, [])
    assert [(f.attempt, f.outcome) for f in facts] == [(1, "failure"), (2, "success")]  # ended beats running
    assert facts[1].queue_seconds == pytest.approx(300)


def _samples(uuid: str, util: float, start: float, n: int, step: float = 30.0) -> list[SampleRow]:
    return [SampleRow(start + i * step, uuid, None, 0, "H100", "", util, 0, "", "", "", step) for i in range(n)]


def test_compute_range_splits_windows_and_conserves_each() -> None:
    t = T0.timestamp()
    data = alloc(
        device_ids=["GPU-a"],
        start_time=T0 + timedelta(seconds=90),
        state="ended",
        end_time=T0 + timedelta(seconds=150),
        outcome="success",
    )
    facts = compute_range("c", "n1", t, t + 180, 60, _samples("GPU-a", 0.5, t - 30, 8), [data])
    by_window: dict[Any, float] = {}
    for f in facts:
        by_window[f["window_start"]] = by_window.get(f["window_start"], 0.0) + float(f["gpu_seconds"])
    assert sorted(by_window.values()) == pytest.approx([60.0, 60.0, 60.0])
    allocated = sum(f["gpu_seconds"] for f in facts if f["kind"] == "allocated")
    assert allocated == pytest.approx(60.0)
    assert len({f["fact_id"] for f in facts}) == len(facts)


def test_rows_and_activity_from_a_batch() -> None:
    sample = wire.validate(
        {
            "id": "s" * 16,
            "source": "dcgm",
            "type": "gpu.sample",
            "time": T0.isoformat(),
            "cluster": "c",
            "data": {"node": "n1", "gpus": [{"uuid": "GPU-a", "model": "NVIDIA H100 80GB HBM3", "gpu_util": 0.4}]},
        }
    )
    placement = wire.validate(
        {
            "id": "a" * 16,
            "source": "slurm",
            "type": "allocation.running",
            "time": T0.isoformat(),
            "cluster": "c",
            "data": alloc(start_time=T0 - timedelta(hours=2)).model_dump(mode="json"),
        }
    )
    tables, activity = rows_for([sample, placement])
    [row] = as_rows(tables["gpu_samples"])
    assert row["gpu_model"] == "H100" and row["utilization"] == 0.4 and row["node"] == "n1"
    act = activity[("c", "n1")]
    assert act.min_time == T0 - timedelta(hours=2) and act.max_time == T0 and act.allocations


def test_invalid_messages_become_dead_letters_and_duplicates_collapse() -> None:
    good = wire.validate(
        {
            "id": "g" * 16,
            "source": "dcgm",
            "type": "gpu.sample",
            "time": T0.isoformat(),
            "cluster": "c",
            "data": {"node": "n1", "gpus": []},
        }
    ).to_bytes()
    msgs = [Message("gpu.metrics", 0, i, v) for i, v in enumerate([good, good, b"{not json", b'{"type":"x"}'])]
    events, dead = decode_batch(msgs)
    assert len(events) == 1
    assert [d.origin for d in dead] == ["gpu.metrics:0:2", "gpu.metrics:0:3"]
    assert all(d.reason and d.topic == "gpu.metrics" for d in dead)


def _row(
    max_min: float, last_seq_age_s: float, closed: float | None, pending: int, dirty: float
) -> tuple[tuple[Any, ...], float, int]:
    """A node's pending row with times in minutes after ``base`` (two hours before the wall clock)."""
    now = 60 * 166_666_666.0  # minute-aligned
    base = now - 7200

    def dt(x: float) -> datetime:
        return datetime.fromtimestamp(x, tz=UTC)

    row = (
        "c",
        "n",
        dt(base - 3600),
        dt(base + max_min * 60),
        int((now - last_seq_age_s) * 1e9),
        pending,
        dt(base + dirty * 60),
        dt(base + closed * 60) if closed is not None else dt(0),
        0,
    )
    return row, base, int(now * 1e9)


def test_windows_close_by_watermark_or_idle_and_late_activity_reopens_them() -> None:
    s = Settings(window_seconds=60, allowed_lateness_seconds=300)
    row, base, now_ns = _row(max_min=30, last_seq_age_s=0.1, closed=10, pending=1, dirty=20)
    assert plan(row, s, now_ns) == (base + 600, base + 1500)  # watermark: 30 min - 5 min lateness
    row, base, now_ns = _row(max_min=30, last_seq_age_s=10, closed=10, pending=1, dirty=20)
    assert plan(row, s, now_ns) == (base + 600, base + 1860)  # idle: close past the newest event
    row, base, now_ns = _row(max_min=30, last_seq_age_s=10, closed=31, pending=1, dirty=5)
    assert plan(row, s, now_ns) == (base + 300, base + 1860)  # late event: recompute from it
    row, base, now_ns = _row(max_min=30, last_seq_age_s=10, closed=31, pending=0, dirty=5)
    assert plan(row, s, now_ns) is None  # nothing new


def test_no_window_closes_before_it_ended_on_the_wall_clock() -> None:
    """Events up to 4 min ahead (within the future tolerance): the idle flush closes the windows that
    have ended, never the current one nor one that has not begun."""
    s = Settings(window_seconds=60, allowed_lateness_seconds=0)
    row, base, now_ns = _row(max_min=124, last_seq_age_s=10, closed=10, pending=1, dirty=20)
    now = now_ns / 1e9
    assert plan(row, s, now_ns) == (base + 600, now)
    row, base, now_ns = _row(max_min=124, last_seq_age_s=0.1, closed=10, pending=1, dirty=20)
    assert plan(row, s, now_ns) == (base + 600, now)  # the watermark is ahead too


def test_groups_share_a_query_only_within_a_cluster_a_size_and_a_time_span() -> None:
    def p(cluster: str, node: str, start: float, end: float) -> Plan:
        return Plan(cluster, node, start, end, 2, 1)

    many = [p("a", f"n{i:03d}", 0, 60) for i in range(MAX_NODES_PER_QUERY + 1)]
    far = p("a", "late", 3 * CHUNK_S, 3 * CHUNK_S + 60)
    other = p("b", "n000", 0, 60)
    got = groups([far, other, *reversed(many)])
    assert [len(g) for g in got] == [MAX_NODES_PER_QUERY, 1, 1, 1]
    assert [g[0].node for g in got[1:]] == [f"n{MAX_NODES_PER_QUERY:03d}", "late", "n000"]
    assert all(len({q.cluster for q in g}) == 1 for g in got)
    backlog = [p("a", f"n{i:03d}", 0, CHUNK_S) for i in range(40)]  # a round of a backlog: by amount
    sizes = [len(g) for g in groups(backlog)]
    assert sum(sizes) == 40 and max(sizes) * CHUNK_S <= NODE_SECONDS_PER_QUERY


def test_fact_ids_are_event_ids_of_the_natural_key() -> None:
    expected = ev.event_id("fact", "c", "n1", 1_700_000_040.0, "GPU-a", "allocated", "slurm", "77", 2)
    assert fact_id("c", "n1", 1_700_000_040, "GPU-a", "allocated", "slurm", "77", 2) == expected
    assert fact_id("c", "n1", 1_700_000_040.0, "GPU-a", "allocated", "slurm", "77", 2) == expected
    assert fact_id("c", "n1", 1_700_000_100.0, "GPU-a", "allocated", "slurm", "77", 2) != expected
