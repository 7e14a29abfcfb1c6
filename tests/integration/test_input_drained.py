"""The worker's input is drained once every assigned partition is written to the end the consumer
knows of, on the real broker with the consumer Faust runs on (aiokafka) and the group's real
committed offsets; a message handed over but not yet written keeps it not drained."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from pipelines.settings import Settings
from pipelines.topics import physical_name
from streams.app import InputPosition
from streams.progress import CONSUMER_GROUP, committed_offsets

pytestmark = pytest.mark.integration


def _produce(settings: Settings, topic: str, partition: int, count: int) -> None:
    producer = KafkaProducer(**settings.kafka_client_config())
    try:
        for i in range(count):
            producer.send(topic, f"m{i}".encode(), partition=partition)
        producer.flush()
    finally:
        producer.close()


async def _drained_steps(settings: Settings, topic: str) -> list[bool]:
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap_servers,
        group_id=settings.topic_prefix + CONSUMER_GROUP,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    steps: list[bool] = []
    try:
        consumer.assign([tp0, tp1])
        position = InputPosition()

        async def committed() -> dict[tuple[str, int], int]:
            return await asyncio.get_running_loop().run_in_executor(None, committed_offsets, settings)

        async def drained() -> bool:
            return await position.drained(consumer.assignment(), consumer.highwater, committed)

        steps.append(await drained())  # nothing fetched: unknown
        await consumer.commit({tp1: 3})  # partition 1 was written by an earlier worker
        consumer.seek(tp1, 3)
        got: list[object] = []
        deadline = time.monotonic() + 30
        while len(got) < 5 and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=1000)).values():
                got.extend(records)
        assert [r.partition for r in got] == [0] * 5  # type: ignore[attr-defined]
        for r in got[:4]:
            position.wrote(topic, 0, r.offset)  # type: ignore[attr-defined]
        steps.append(await drained())  # one message of partition 0 not written yet
        position.wrote(topic, 0, got[4].offset)  # type: ignore[attr-defined]
        steps.append(await drained())  # every message written, partition 1 by the earlier worker
        await asyncio.get_running_loop().run_in_executor(None, _produce, settings, topic, 1, 1)
        late: list[object] = []
        while not late and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=1000)).values():
                late.extend(records)
        steps.append(await drained())  # handed over, not written
        position.wrote(topic, 1, late[0].offset)  # type: ignore[attr-defined]
        steps.append(await drained())
    finally:
        await consumer.stop()
    return steps


def test_the_input_is_drained_once_every_partition_is_written_to_its_end(isolated_settings: Settings) -> None:
    topic = physical_name("drain.test", isolated_settings)
    admin = KafkaAdminClient(**isolated_settings.kafka_client_config())
    try:
        admin.create_topics([NewTopic(topic, 2, 1)])
    finally:
        admin.close()
    _produce(isolated_settings, topic, 0, 5)
    _produce(isolated_settings, topic, 1, 3)
    assert asyncio.run(_drained_steps(isolated_settings, topic)) == [False, False, True, False, True]
