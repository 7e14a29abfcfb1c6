"""The whole pipeline against the simulator's ground truth, through the real broker and warehouse.

simulate → parse every source file → Kafka → stream workers → facts in ClickHouse → reports,
compared with the ground truth the simulator computed from its own state (never with gpuledger's
attribution code). Then the same totals with two workers, after a SIGKILL mid-stream, and after
truncating the warehouse and replaying the topics from offset 0.
"""

from __future__ import annotations

import json
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pipelines import events as ev
from pipelines import wire
from pipelines.producer import EventProducer
from pipelines.settings import Settings
from sql.client import get_client
from sql.idle_causes import IDLE_CAUSE_RULES, IDLE_CAUSES
from streams import replay
from tests.integration.pipeline import Pipeline, wait_for

pytestmark = pytest.mark.integration

ALLOC_TOL_S = 0.1  # GPU-seconds per row
BUSY_REL_TOL = 0.005
ENERGY_REL_TOL = 0.001
CAUSE_TOL_S = 0.01  # GPU-seconds per owner and cause


def _truth(out: Path) -> dict:
    return json.loads((out / "truth.json").read_text())


def _span(truth: dict) -> tuple[datetime, datetime]:
    start = datetime.fromisoformat(truth["start"].replace("Z", "+00:00"))
    end = datetime.fromisoformat(truth["end"].replace("Z", "+00:00"))
    return start, end


@pytest.fixture(scope="module")
def day_16(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pipelines.simulator import simulate

    out = tmp_path_factory.mktemp("sim16")
    simulate(nodes=16, hours=24, seed=11, out_dir=out)
    return out


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pipelines.simulator import simulate

    out = tmp_path_factory.mktemp("sim4")
    simulate(nodes=4, hours=4, seed=5, out_dir=out)
    return out


@pytest.fixture(scope="module")
def modern(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pipelines.simulator import simulate

    out = tmp_path_factory.mktemp("sim8modern")
    simulate(nodes=8, hours=4, seed=7, out_dir=out, modern_sharing=True)
    return out


@pytest.fixture
def pipeline(isolated_settings: Settings, tmp_path: Path):
    p = Pipeline(isolated_settings, tmp_path)
    yield p
    p.stop_all()


@pytest.fixture
def failover_pipeline(isolated_settings: Settings, tmp_path: Path):
    """Workers whose group gives a SIGKILLed member's partitions away after 10 s instead of 60 s: the
    takeover is what is tested, not how long the broker waits for a member that is gone."""
    p = Pipeline(isolated_settings.model_copy(update={"stream_session_timeout_seconds": 10.0}), tmp_path)
    yield p
    p.stop_all()


def _compare(pipeline: Pipeline, truth: dict, by: str) -> None:
    start, end = _span(truth)
    got = pipeline.gpu_hours(by, start, end)
    want = truth["by"][by]
    owners = {k: v for k, v in got.items() if not k.startswith("__")}
    expected = {k for k, v in want.items() if v["allocated_gpu_seconds"] > ALLOC_TOL_S}
    assert set(owners) == expected, f"{by}: groups differ"
    for key, row in owners.items():
        w = want[key]
        assert row["allocated_gpu_hours"] * 3600 == pytest.approx(w["allocated_gpu_seconds"], abs=ALLOC_TOL_S), key
        assert row["failed_gpu_hours"] * 3600 == pytest.approx(w["failed_gpu_seconds"], abs=ALLOC_TOL_S), key
        busy = w["busy_gpu_seconds"]
        assert row["busy_gpu_hours"] * 3600 == pytest.approx(busy, rel=BUSY_REL_TOL, abs=1.0), (by, key)
        # the simulator's power as held, from the counter between scrapes and the power reading at a
        # window's end: what one reading misses (a blank power value at a window's end) is noise
        energy = w["energy_joules"]
        assert energy > 0 or w["allocated_gpu_seconds"] < 1, (by, key)
        assert row["energy_kwh"] * 3.6e6 == pytest.approx(energy, rel=ENERGY_REL_TOL, abs=100.0), (by, key)
    unalloc = got.get("__unallocated__", {"gpu_hours": 0.0})["gpu_hours"] * 3600
    assert unalloc == pytest.approx(truth["unallocated_gpu_seconds"], abs=ALLOC_TOL_S * 10), _unallocated_diff(
        pipeline, truth
    )


def _unallocated_diff(pipeline: Pipeline, truth: dict) -> str:
    """Where unallocated capacity differs from the truth: the facts-level total, and per node and hour
    the facts against the hourly rollup (a failure message, to find the cause)."""
    start, end = _span(truth)
    facts = pipeline.query("gpu_hours_facts", {"by": "node", "start": start, "end": end, "cluster": ""})
    level = sum(r["gpu_hours"] for r in facts if r["key"] == "__unallocated__") * 3600
    client = get_client(pipeline.settings)
    try:
        rows = client.query(
            "SELECT f.node, f.hour, f.s, h.s FROM (SELECT node, toStartOfHour(window_start) AS hour, "
            "sum(gpu_seconds) AS s FROM current_facts WHERE kind = 'unallocated' GROUP BY node, hour) AS f "
            "FULL JOIN (SELECT node, hour, sum(gpu_seconds) AS s FROM current_hourly WHERE kind = 'unallocated' "
            "GROUP BY node, hour) AS h ON f.node = h.node AND f.hour = h.hour WHERE abs(f.s - h.s) > 1"
        ).result_rows
    finally:
        client.close()
    nodes = {n: v.get("unallocated_gpu_seconds") for n, v in truth["by"]["node"].items()}
    return f"facts-level unallocated {level}; facts vs rollup differ at {rows}; truth by node {nodes}"


def _idle_causes(pipeline: Pipeline, truth: dict, by: str) -> dict[str, dict[str, float]]:
    start, end = _span(truth)
    params = {"by": by, "start": start, "end": end, "cluster": "", **dict(IDLE_CAUSE_RULES)}
    got: dict[str, dict[str, float]] = {}
    for row in pipeline.query("idle_causes", params):
        got.setdefault(row["key"], {})[row["cause"]] = row["idle_gpu_hours"] * 3600
    return got


def _compare_causes(pipeline: Pipeline, truth: dict, by: str) -> None:
    """Each owner's idle GPU-seconds per cause as the simulator planted them (measured: equal to the
    millisecond on the 16-node day)."""
    got = _idle_causes(pipeline, truth, by)
    want = truth["idle_causes"][by]
    assert got, by
    for key in set(got) | set(want):
        causes = want.get(key, {})
        for cause in IDLE_CAUSES:
            assert got.get(key, {}).get(cause, 0.0) == pytest.approx(causes.get(cause, 0.0), abs=CAUSE_TOL_S), (
                by,
                key,
                cause,
                got.get(key),
                causes,
            )


def test_one_day_sixteen_nodes_matches_ground_truth(pipeline: Pipeline, day_16: Path) -> None:
    truth = _truth(day_16)
    pipeline.start_worker(0)
    pipeline.publish_dir(day_16)
    pipeline.wait(timeout_s=900)
    for by in ("team", "model", "business_unit", "failure_reason"):
        _compare(pipeline, truth, by)
    for by in ("team", "node"):
        _compare_causes(pipeline, truth, by)


def test_modern_gpu_sharing_matches_ground_truth(pipeline: Pipeline, modern: Path) -> None:
    """Time-slicing (10 replicas) and MPS (2) from the nodes' own labels, GPUs through DRA claims (whole,
    MIG, one device shared by one to three pods) and an exporter without NODE_NAME, against the
    simulator's ground truth."""
    truth = _truth(modern)
    roles = truth["modern_sharing"]
    assert {roles["mps"], roles["dra"], roles["time-slicing"]} <= set(truth["by"]["node"])
    pipeline.start_worker(0)
    pipeline.publish_dir(modern)
    pipeline.wait(timeout_s=600)
    for by in ("team", "model", "node"):
        _compare(pipeline, truth, by)


def _totals(pipeline: Pipeline, truth: dict) -> dict[str, tuple[float, float, float]]:
    start, end = _span(truth)
    return {
        k: (
            round(r["allocated_gpu_hours"] * 3600, 3),
            round(r["busy_gpu_hours"] * 3600, 3),
            round(r["failed_gpu_hours"] * 3600, 3),
        )
        for k, r in pipeline.gpu_hours("team", start, end).items()
    }


def test_same_facts_with_two_workers_after_a_kill_and_after_replay(failover_pipeline: Pipeline, small: Path) -> None:
    pipeline = failover_pipeline
    truth = _truth(small)
    # two workers in one group; one is SIGKILLed mid-stream and a new one takes over
    pipeline.start_worker(0)
    pipeline.start_worker(1)
    pipeline.publish_dir(small, limit=4000)
    time.sleep(3)
    pipeline.kill_worker(1, signal.SIGKILL)
    pipeline.publish_dir(small)  # everything (the first part again: duplicates change nothing)
    pipeline.start_worker(2)
    pipeline.wait(timeout_s=600)
    for by in ("team", "failure_reason"):
        _compare(pipeline, truth, by)
    first_digest = pipeline.facts_digest()
    first_totals = _totals(pipeline, truth)
    # truncate every derived table and replay the topics from offset 0 with a single worker
    pipeline.stop_all()
    pipeline.replay_from_zero()
    pipeline.start_worker(3)
    pipeline.wait(timeout_s=600)
    assert _totals(pipeline, truth) == first_totals
    assert pipeline.facts_digest() == first_digest
    attempts = pipeline.attempts_digest()
    # the default rebuild: from the raw tables alone (no Kafka), the same facts and attempts
    pipeline.stop_all()
    replay.rebuild_facts(pipeline.settings)
    assert pipeline.facts_digest() == []
    pipeline.start_worker(4)
    pipeline.wait(timeout_s=600)
    assert pipeline.facts_digest() == first_digest
    assert pipeline.attempts_digest() == attempts


def _sample(node: str, t: datetime) -> ev.Envelope:
    return wire.validate(
        {
            "id": ev.event_id("gpu.sample", "c1", node, t),
            "source": "dcgm",
            "type": "gpu.sample",
            "time": t.isoformat(),
            "cluster": "c1",
            "data": {
                "node": node,
                "interval_s": 30,
                "gpus": [{"uuid": "GPU-late-0", "index": 0, "model": "NVIDIA H100 80GB HBM3", "gr_engine_active": 0.5}],
            },
        }
    )


def test_late_allocation_beyond_lateness_is_applied_as_a_correction(pipeline: Pipeline) -> None:
    t0 = datetime(2026, 11, 3, 8, 0, tzinfo=UTC)
    pipeline.start_worker(0)
    with EventProducer(pipeline.settings) as producer:
        for i in range(40):  # 20 minutes of samples: the windows close
            producer.publish(_sample("late-node", t0 + timedelta(seconds=30 * i)))
    pipeline.wait(timeout_s=120)
    before = pipeline.gpu_hours("team", t0, t0 + timedelta(hours=1))
    assert set(before) == {"__unallocated__"}
    assert before["__unallocated__"]["gpu_hours"] == pytest.approx(20 / 60)
    late = wire.validate(
        {
            "id": ev.event_id("late-alloc"),
            "source": "kubernetes",
            "type": "allocation.ended",
            "time": (t0 + timedelta(minutes=10)).isoformat(),
            "cluster": "c1",
            "data": {
                "scheduler": "kubernetes",
                "job_id": "research/train-0",
                "node": "late-node",
                "state": "ended",
                "start_time": t0.isoformat(),
                "end_time": (t0 + timedelta(minutes=10)).isoformat(),
                "outcome": "failure",
                "failure_reason": "oom",
                "device_ids": ["GPU-late-0"],
                "gpus": [{"kind": "gpu", "count": 1}],
                "owner": {"namespace": "research", "labels": {"team": "llm"}},
            },
        }
    )
    with EventProducer(pipeline.settings) as producer:
        producer.publish(late)
    pipeline.wait(timeout_s=120)

    def corrected() -> bool:
        return "llm" in pipeline.gpu_hours("team", t0, t0 + timedelta(hours=1))

    wait_for(corrected, 30, "the correction")
    after = pipeline.gpu_hours("team", t0, t0 + timedelta(hours=1))
    assert after["llm"]["allocated_gpu_hours"] == pytest.approx(10 / 60)
    assert after["llm"]["failed_gpu_hours"] == pytest.approx(10 / 60)
    assert after["llm"]["busy_gpu_hours"] == pytest.approx(5 / 60)
    assert after["__unallocated__"]["gpu_hours"] == pytest.approx(10 / 60)
