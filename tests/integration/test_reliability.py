"""Failures that must not spread, against the real local services: one node's poisoned input
quarantines that node only; events from the future are dead letters and close no window; a
replay from Kafka that would lose history is refused; `ingest --wait` with no worker fails fast."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition

from bench.load import CLUSTER, Load, encode
from infra import services
from infra.kafka.broker import ensure_topics
from infra.services import apply_migrations, status
from pipelines import events as ev
from pipelines.producer import EventProducer
from pipelines.settings import Settings
from pipelines.topics import GPU_METRICS, physical_name
from streams import replay
from streams.attribution import step
from streams.attribution.warehouse import AttributionWarehouse
from streams.dlq import replay_dead_letters
from streams.ingest.rows import dead_letter_row
from streams.ingest.sink import Message, write_batch
from streams.progress import current_lag, end_offsets
from streams.store import now_seq
from tests.conftest import drop_database

pytestmark = pytest.mark.integration


def _dropped(letters: list[ev.DeadLetter]) -> None:
    """Dead letters are not published in these tests (the warehouse rows are what they check)."""


FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "dcgm" / "k8s_mapped.prom"


def _ingest(wh: AttributionWarehouse, load: Load, first: int, rounds: int) -> list[ev.DeadLetter]:
    dead: list[ev.DeadLetter] = []
    batch = [Message(topic, 0, i, value) for i, (topic, _, value) in enumerate(encode(load, first, rounds))]
    for i in range(0, len(batch), 2000):
        write_batch(wh, batch[i : i + 2000], publish_dead_letters=dead.extend)
    return dead


def _windows(wh: AttributionWarehouse) -> dict[str, int]:
    rows = wh.client.query("SELECT node, uniqExact(window_start) FROM current_facts GROUP BY node").result_rows
    return {str(n): int(c) for n, c in rows}


def _poison(wh: AttributionWarehouse, node: str, profile: str, at: datetime) -> None:
    """A stored allocation on ``node`` that today's contract rejects (as an older version wrote it)."""
    payload = ev.AllocationData(
        scheduler="kubernetes",
        job_id="ml/poisoned",
        node=node,
        state="running",
        start_time=at,
        gpus=[ev.GpuRequest(kind="mig", count=1, profile="1g.10gb", gpu_type="A100-SXM4-80GB")],
    ).model_dump(mode="json")
    payload["gpus"][0]["profile"] = profile
    wh.insert(
        "raw_scheduler_allocations",
        [
            {
                "event_id": f"poison-{profile}",
                "type": "allocation.running",
                "source": "kubernetes",
                "schema_version": 1,
                "time": at,
                "cluster": CLUSTER,
                "scheduler": "kubernetes",
                "job_id": "ml/poisoned",
                "attempt": 1,
                "node": node,
                "state": "running",
                "start_time": at,
                "end_time": None,
                "payload": orjson.dumps(payload).decode(),
            }
        ],
    )
    wh.insert(
        "node_activity",
        [{"cluster": CLUSTER, "node": node, "min_time": at, "max_time": at, "allocations": True, "seq": now_seq()}],
    )


def test_one_nodes_poisoned_allocation_quarantines_that_node_and_the_others_stay_current(
    warehouse: AttributionWarehouse, isolated_settings: Settings
) -> None:
    load = Load(nodes=3, interval_s=60)
    owns = lambda cluster, node: True  # noqa: E731
    _ingest(warehouse, load, 0, 60)
    _poison(warehouse, "node-0001", "9g.99gb", load.start + timedelta(minutes=10))
    time.sleep(step.IDLE_FLUSH_S + 0.2)

    report = step.run_step(warehouse, isolated_settings, owns)
    assert report.quarantined == 1
    assert _windows(warehouse) == {"node-0000": 60, "node-0002": 60}
    held = warehouse.quarantined()
    assert list(held) == [(CLUSTER, "node-0001")]
    assert "MIG profile with 9 compute slices on a 7-slice GPU: '9g.99gb'" in held[(CLUSTER, "node-0001")].reason
    shown = status(isolated_settings)["quarantined"]
    assert [(q["node"], "9g.99gb" in q["reason"]) for q in shown] == [("node-0001", True)]
    # `ingest --wait` does not wait for a quarantined node
    assert current_lag(isolated_settings, {}).nodes_pending == 0
    assert current_lag(isolated_settings, {}).quarantined == 1

    # the next hour arrives: the healthy nodes go on; the poisoned one is not retried without new input
    # soon after its failure, and fails again on its next try
    _ingest(warehouse, load, 60, 60)
    time.sleep(step.IDLE_FLUSH_S + 0.2)
    assert step.run_step(warehouse, isolated_settings, owns).quarantined == 0
    assert _windows(warehouse) == {"node-0000": 120, "node-0002": 120}
    time.sleep(step.QUARANTINE_RETRY_S)
    assert step.run_step(warehouse, isolated_settings, owns).quarantined == 1
    assert list(warehouse.quarantined()) == [(CLUSTER, "node-0001")]

    # the input is fixed (a later, valid snapshot of the same placement): the node resumes
    fixed = ev.AllocationEvent(
        id="fixed-poisoned",
        source="kubernetes",
        type="allocation.ended",
        cluster=CLUSTER,
        time=load.start + timedelta(minutes=40),
        data=ev.AllocationData(
            scheduler="kubernetes",
            job_id="ml/poisoned",
            node="node-0001",
            state="ended",
            start_time=load.start + timedelta(minutes=10),
            end_time=load.start + timedelta(minutes=40),
            outcome="success",
            gpus=[ev.GpuRequest(kind="mig", count=1, profile="1g.10gb", gpu_type="A100-SXM4-80GB")],
        ),
    )
    write_batch(warehouse, [Message("scheduler.allocations", 0, 0, fixed.to_bytes())], publish_dead_letters=_dropped)
    time.sleep(max(step.IDLE_FLUSH_S, step.QUARANTINE_RETRY_S) + 0.2)
    report = step.run_step(warehouse, isolated_settings, owns)
    assert report.quarantined == 0
    assert warehouse.quarantined() == {}
    assert _windows(warehouse) == {"node-0000": 120, "node-0001": 120, "node-0002": 120}
    assert status(isolated_settings)["quarantined"] == []


def test_an_event_from_the_future_is_a_dead_letter_and_closes_no_window(
    warehouse: AttributionWarehouse, isolated_settings: Settings
) -> None:
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    load = Load(nodes=1, interval_s=60, start=now - timedelta(minutes=30))
    assert _ingest(warehouse, load, 0, 20) == []
    ahead = Load(nodes=1, interval_s=60, start=now + timedelta(days=1))  # a node clock a day ahead
    dead = _ingest(warehouse, ahead, 0, 1)
    assert len(dead) == 1 and "in the future" in dead[0].reason
    assert warehouse.client.command("SELECT count() FROM gpu_samples WHERE time > now64() + 3600") == 0
    time.sleep(step.IDLE_FLUSH_S + 0.2)
    step.run_step(warehouse, isolated_settings, lambda cluster, node: True)
    newest = warehouse.client.query("SELECT max(window_start) FROM fact_windows").result_rows[0][0]
    assert newest.replace(tzinfo=UTC) < datetime.now(UTC)
    assert _windows(warehouse) == {"node-0000": 20}


def _publish(settings: Settings, load: Load, rounds: int) -> None:
    with EventProducer(settings) as producer:
        for topic, key, value in encode(load, 0, rounds):
            producer.send_raw(physical_name(topic, settings), key, value)


def test_a_replay_from_kafka_after_retention_moved_the_start_is_refused_and_changes_nothing(
    warehouse: AttributionWarehouse, isolated_settings: Settings
) -> None:
    ensure_topics(isolated_settings)
    load = Load(nodes=2, interval_s=60)
    _publish(isolated_settings, load, 10)
    _ingest(warehouse, load, 0, 10)
    time.sleep(step.IDLE_FLUSH_S + 0.2)
    step.run_step(warehouse, isolated_settings, lambda cluster, node: True)
    before = {t: warehouse.client.command(f"SELECT count() FROM {t}") for t in ("gpu_samples", "gpu_usage_facts")}
    assert all(before.values())
    replay.check_log_whole(isolated_settings)  # whole: no complaint

    topic = physical_name(GPU_METRICS, isolated_settings)
    admin = KafkaAdminClient(**isolated_settings.kafka_client_config())
    try:  # what retention does to an old segment
        partition = next(
            p for p in range(GPU_METRICS.partitions) if _end(isolated_settings, TopicPartition(topic, p)) > 1
        )
        admin.delete_records({TopicPartition(topic, partition): 1})
    finally:
        admin.close()
    with pytest.raises(replay.ReplayRefused, match=rf"{re.escape(topic)}\[{partition}\] starts at 1"):
        services.replay(isolated_settings, from_kafka=True)
    after = {t: warehouse.client.command(f"SELECT count() FROM {t}") for t in before}
    assert after == before
    assert not list(isolated_settings.run_dir.glob("worker-*.pid"))  # no worker started by the refusal


def _end(settings: Settings, tp: TopicPartition) -> int:
    consumer = KafkaConsumer(**settings.kafka_client_config())
    try:
        return int(consumer.end_offsets([tp])[tp])
    finally:
        consumer.close()


def test_ingest_wait_without_a_worker_fails_fast_naming_the_cause(isolated_settings: Settings, tmp_path: Path) -> None:
    apply_migrations(isolated_settings)
    ensure_topics(isolated_settings)
    env = {**os.environ, **isolated_settings.process_env()}
    started = time.monotonic()
    command = [
        sys.executable,
        "-m",
        "gpuledger.cli.main",
        "ingest",
        "dcgm",
        "-f",
        str(FIXTURE),
        "--node",
        "n1",
        "--time",
        "2026-11-02T10:00:00Z",
        "--wait",
        "--timeout",
        "600",
    ]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)
    took = time.monotonic() - started
    assert result.returncode != 0
    assert took < 30
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "no stream worker consumes the topics" in lines[0]


def test_dlq_replay_re_drives_the_letters_that_are_valid_now_once(
    warehouse: AttributionWarehouse, isolated_settings: Settings
) -> None:
    ensure_topics(isolated_settings)
    now = datetime.now(UTC)
    good = [
        m
        for m in encode(Load(nodes=2, interval_s=60, start=now - timedelta(hours=1)), 0, 2)
        if m[0] == GPU_METRICS.name
    ]
    letters = [
        ev.DeadLetter.build(
            topic=GPU_METRICS.name,
            source="streams",
            reason="processing failed: code 202",
            raw=value,
            origin=f"gpu.metrics:0:{i}",
        )
        for i, (_, _, value) in enumerate(good)
    ]
    letters.append(
        ev.DeadLetter.build(topic=GPU_METRICS.name, source="dcgm", reason="not a number", raw="gpu=x", origin="scrape")
    )
    letters.append(
        ev.DeadLetter.build(
            topic="scheduler.allocations",
            source="streams",
            reason="old",
            raw=good[0][2],
            origin="x",
            time=now - timedelta(days=3),
        )
    )
    warehouse.insert("dead_letters", [dead_letter_row(letter) for letter in letters])

    report = replay_dead_letters(isolated_settings, GPU_METRICS.name, since=now - timedelta(days=1))
    assert report.replayed == len(good)
    assert sum(report.still_invalid.values()) == 1
    consumer = KafkaConsumer(
        **isolated_settings.kafka_client_config(), auto_offset_reset="earliest", consumer_timeout_ms=5000
    )
    try:
        topic = physical_name(GPU_METRICS, isolated_settings)
        consumer.subscribe([topic])
        received = [(m.key, orjson.loads(m.value)["id"]) for m in consumer]
    finally:
        consumer.close()
    assert sorted(received) == sorted((key, orjson.loads(value)["id"]) for _, key, value in good)
    assert warehouse.client.command("SELECT count() FROM dead_letter_replays FINAL") == len(good)
    assert replay_dead_letters(isolated_settings, GPU_METRICS.name).replayed == 0  # not twice
    assert replay_dead_letters(isolated_settings, GPU_METRICS.name, again=True).replayed == len(good)


def _allocation(event_id: str, state: str, at: datetime, start: datetime, end: datetime | None) -> Message:
    data: dict[str, object] = {
        "scheduler": "slurm",
        "job_id": "7001",
        "node": "node-0000",
        "state": state,
        "start_time": start.isoformat(),
        "gpus": [{"kind": "gpu", "count": 4}],
        "gpu_indices": [0, 1, 2, 3],
        "owner": {"account": "physics"},
    }
    if end is not None:
        data.update(end_time=end.isoformat(), outcome="success")
    event = {
        "id": event_id,
        "source": "slurm",
        "type": f"allocation.{state}",
        "time": at.isoformat(),
        "cluster": CLUSTER,
        "data": data,
    }
    return Message("scheduler.allocations", 0, 0, orjson.dumps(event))


def test_the_end_of_a_seven_day_job_recomputes_only_the_windows_after_it(
    warehouse: AttributionWarehouse, isolated_settings: Settings
) -> None:
    load = Load(nodes=1, interval_s=300, alloc_period_s=10**9)  # samples only; the job comes below
    days = 7
    rounds = load.rounds_for(24 * days)
    start = load.start + timedelta(hours=1)
    owns = lambda cluster, node: True  # noqa: E731
    closed = load.round_time(rounds - 1) + timedelta(minutes=1)  # the idle flush closes past the last sample
    _ingest(warehouse, load, 0, rounds)
    write_batch(warehouse, [_allocation("job-7001-run", "running", start, start, None)], publish_dead_letters=_dropped)
    time.sleep(step.IDLE_FLUSH_S + 0.2)
    assert step.run_step(warehouse, isolated_settings, owns).windows == (closed - load.start) / timedelta(minutes=1)

    # the collector restarted and sent the same running snapshot again: nothing to recompute
    write_batch(
        warehouse,
        [_allocation("job-7001-run-again", "running", start + timedelta(days=6), start, None)],
        publish_dead_letters=_dropped,
    )
    time.sleep(step.IDLE_FLUSH_S + 0.2)
    assert step.run_step(warehouse, isolated_settings, owns).windows == 0

    # the job ends two hours before the data does: only those 120 windows change
    end = closed - timedelta(hours=2)
    write_batch(warehouse, [_allocation("job-7001-end", "ended", end, start, end)], publish_dead_letters=_dropped)
    time.sleep(step.IDLE_FLUSH_S + 0.2)
    assert step.run_step(warehouse, isolated_settings, owns).windows == 120
    held = warehouse.client.command(
        "SELECT sum(gpu_seconds) FROM current_facts WHERE job_id = '7001' AND kind = 'allocated'"
    )
    assert held == pytest.approx(4 * (end - start).total_seconds(), abs=1e-6)
    assert (
        warehouse.client.command(
            f"SELECT count() FROM current_facts WHERE job_id = '7001' AND window_start >= '{end:%Y-%m-%d %H:%M:%S}'"
        )
        == 0
    )


# infra.process.start leaves the worker's Popen handle behind on purpose (the pid file tracks it)
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_up_says_when_running_workers_have_other_settings_and_stops_extra_workers(isolated_settings: Settings) -> None:
    settings = isolated_settings
    other = settings.model_copy(
        update={
            "clickhouse_database": settings.clickhouse_database + "_b",
            "topic_prefix": settings.topic_prefix + "b.",
        }
    )
    first = services.up(settings, workers=1, stop_extra=True)
    try:
        assert first.started == ["worker-0"] and first.mismatched == {}
        second = services.up(other, workers=1, stop_extra=True)
        assert second.running == ["worker-0"]
        differ = second.mismatched["worker-0"]
        assert f"CLICKHOUSE_DATABASE: {settings.clickhouse_database} → {other.clickhouse_database}" in differ
        assert any(d.startswith("GPULEDGER_TOPIC_PREFIX") for d in differ)
        assert status(other)["services"]["worker-0"]["other_settings"] == differ
        assert "other_settings" not in status(settings)["services"]["worker-0"]
        third = services.up(settings, workers=0, stop_extra=True)
        assert third.stopped == ["worker-0"]
        assert not list(settings.run_dir.glob("worker-*.pid"))
    finally:
        services.down(settings)
        drop_database(other)


def test_a_waiting_poll_reads_the_warehouse_only_once_every_message_is_committed(
    isolated_settings: Settings, warehouse: AttributionWarehouse
) -> None:
    """While messages are uncommitted nothing can be reflected: a poll that knows the previous lag
    asks Kafka only, and leaves the warehouse the workers write to alone (here: nothing listens on
    the warehouse URL, so any read of it would fail)."""
    ensure_topics(isolated_settings)
    with EventProducer(isolated_settings) as producer:
        producer.dead_letter(
            ev.DeadLetter.build(topic="gpu.metrics", source="streams", reason="test", raw=b"{}", origin="test")
        )
    targets = {tp: end for tp, end in end_offsets(isolated_settings).items() if end}
    assert sum(targets.values()) == 1
    nowhere = isolated_settings.model_copy(update={"clickhouse_url": "http://127.0.0.1:9"})
    known = current_lag(isolated_settings, targets)
    assert known.messages == 1
    lag = current_lag(nowhere, targets, known=known)
    assert (lag.messages, lag.nodes_pending, lag.quarantined) == (1, known.nodes_pending, known.quarantined)
    with pytest.raises(Exception, match="(?i)connect|refused"):
        current_lag(nowhere, targets)  # without a known lag it reads the warehouse
