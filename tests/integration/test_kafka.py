"""Round trips through the real broker: the producer (librdkafka), kafka-python consumers and a Faust agent."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import NewTopic
from kafka.partitioner.default import murmur2

from infra.kafka.broker import end_offsets, ensure_topics
from pipelines import events as ev
from pipelines import producer as producer_module
from pipelines import wire
from pipelines.errors import PublishError
from pipelines.producer import EventProducer
from pipelines.settings import Settings
from pipelines.topics import GPU_METRICS, SCHEDULER_ALLOCATIONS, all_physical_topics, physical_name

pytestmark = pytest.mark.integration


def _sample_event(node: str, minute: int) -> ev.Envelope:
    t = datetime(2026, 11, 2, 10, 0, tzinfo=UTC) + timedelta(minutes=minute)
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
                "gpus": [{"uuid": f"GPU-{node}-{i}", "index": i, "gr_engine_active": 0.5} for i in range(8)],
            },
        }
    )


def _consume_all(
    settings: Settings, topic: str, expected: int, timeout_s: float = 30.0, proc: subprocess.Popen[bytes] | None = None
) -> list[object]:
    consumer = KafkaConsumer(
        topic,
        **settings.kafka_client_config(),
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=2000,
    )
    got: list[object] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(got) < expected and time.monotonic() < deadline:
            got.extend(consumer)
            if proc is not None and proc.poll() is not None:
                break
    finally:
        consumer.close()
    return got


def test_topics_created_with_registry_partitions(isolated_settings: Settings) -> None:
    created = ensure_topics(isolated_settings)
    assert set(created) == {name for name, _, _ in all_physical_topics(isolated_settings)}
    assert ensure_topics(isolated_settings) == []  # idempotent
    consumer = KafkaConsumer(**isolated_settings.kafka_client_config())
    try:
        for name, partitions, _ in all_physical_topics(isolated_settings):
            assert len(consumer.partitions_for_topic(name) or ()) == partitions, name
    finally:
        consumer.close()
    # co-partitioning: the two joined topics have the same partition count
    assert GPU_METRICS.partitions == SCHEDULER_ALLOCATIONS.partitions


def test_produce_consume_events_and_dead_letters(isolated_settings: Settings) -> None:
    ensure_topics(isolated_settings)
    sent = [_sample_event(f"gpu{n:03d}", m) for n in range(4) for m in range(25)]
    with EventProducer(isolated_settings) as producer:
        for event in sent:
            producer.publish(event)
        producer.dead_letter(
            ev.DeadLetter.build(topic="gpu.metrics", source="dcgm", reason="ratio 1.7 > 1", raw=b"\xff broken")
        )
    topic = physical_name(GPU_METRICS, isolated_settings)
    records = _consume_all(isolated_settings, topic, len(sent))
    decoded = {wire.decode(r.value).id: r for r in records}  # type: ignore[attr-defined]
    assert set(decoded) == {e.id for e in sent}
    # per-node key: every message of a node is in one partition
    by_node: dict[bytes, set[int]] = {}
    for r in records:
        by_node.setdefault(r.key, set()).add(r.partition)  # type: ignore[attr-defined]
    assert all(len(p) == 1 for p in by_node.values()) and len(by_node) == 4
    # ... and it is the partition Java clients (and kafka-python, and the stream workers) pick for the key
    partitions = GPU_METRICS.partitions
    assert {key: {(murmur2(key) & 0x7FFFFFFF) % partitions} for key in by_node} == by_node
    dlq = _consume_all(isolated_settings, physical_name(GPU_METRICS, isolated_settings, dlq=True), 1)
    letter = ev.DeadLetter.model_validate_json(dlq[0].value)  # type: ignore[attr-defined]
    assert letter.reason == "ratio 1.7 > 1" and letter.raw.startswith("\\xff")
    assert end_offsets(isolated_settings)[topic] == len(sent)


def test_an_unreachable_broker_is_one_clear_publish_error(
    isolated_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    nowhere = isolated_settings.model_copy(update={"kafka_bootstrap_servers": f"127.0.0.1:{port}"})
    monkeypatch.setattr(producer_module, "CONNECT_TIMEOUT_S", 2.0)
    began = time.monotonic()
    with pytest.raises(PublishError) as caught:
        EventProducer(nowhere)
    assert time.monotonic() - began < 10
    message = str(caught.value)
    assert f"Kafka at 127.0.0.1:{port} did not answer within 2s" in message and "\n" not in message


def test_faust_agent_round_trip(isolated_settings: Settings, tmp_path: Path) -> None:
    source = physical_name("echo.in", isolated_settings)
    sink = physical_name("echo.out", isolated_settings)
    admin = KafkaAdminClient(**isolated_settings.kafka_client_config())
    try:
        admin.create_topics([NewTopic(source, 2, 1), NewTopic(sink, 2, 1)])
    finally:
        admin.close()
    env = {
        **os.environ,
        "ECHO_BROKER": isolated_settings.bootstrap_servers,
        "ECHO_IN": source,
        "ECHO_OUT": sink,
        "ECHO_DATADIR": str(tmp_path / "faust"),
    }
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "faust",
            "-A",
            "tests.integration.faust_echo_app",
            "worker",
            "-l",
            "warn",
            "--without-web",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        producer = EventProducer(isolated_settings)
        for i in range(100):
            producer.send_raw(source, f"k{i % 7}".encode(), f"m{i}".encode())
        producer.flush()
        producer.close()
        records = _consume_all(isolated_settings, sink, 100, timeout_s=90.0, proc=worker)
    finally:
        worker.terminate()
        try:
            output = worker.communicate(timeout=30)[0].decode(errors="replace")
        except subprocess.TimeoutExpired:
            worker.kill()
            output = worker.communicate()[0].decode(errors="replace")
    values = sorted(r.value for r in records)  # type: ignore[attr-defined]
    assert values == sorted(f"echo:m{i}".encode() for i in range(100)), output[-2000:]
