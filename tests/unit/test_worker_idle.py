"""What an idle worker does between messages: the fetcher's poll and Faust's livelock check.

A worker with nothing to read still wakes: aiokafka's fetcher re-examines every assigned partition
each ``consumer_timeout_ms`` (200 ms unless given, and Faust does not give it) although a fetch in
flight, a consumed batch, a paused partition and a lost assignment each wake it anyway; Faust's
livelock detector yields to the event loop once per assigned partition, through a ``wait_for`` each
time. Together about a third of an idle worker's Python time."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import faust
import pytest
from faust.transport.drivers import aiokafka as faust_kafka
from faust.types import TP

from pipelines.settings import Settings
from streams.app import FETCHER_POLL_S, StreamConsumer, create_app


@pytest.fixture
def app(tmp_path: Path) -> Iterator[faust.App]:
    """The worker's app; afterwards its event loop and its consumer thread's (never started) closed."""
    app = create_app(Settings(topic_prefix="unit-idle.", home=tmp_path, kafka_bootstrap_servers="127.0.0.1:1"))
    try:
        yield app
    finally:
        if isinstance(app.consumer, StreamConsumer):
            app.consumer._thread.thread_loop.close()
        app.loop.close()


def test_the_fetcher_polls_once_per_fetch_wait_not_five_times_a_second(app: faust.App) -> None:
    consumer = app.consumer
    assert isinstance(consumer, StreamConsumer)

    thread, transport = consumer._thread, app.transport
    assert isinstance(transport, faust_kafka.Transport)

    async def timeouts() -> tuple[float, float]:  # aiokafka's consumer takes the running loop when it is made
        made = thread._create_worker_consumer(transport)
        try:  # the poll start() gives its fetcher, and the broker's longest wait on a fetch
            return made._consumer_timeout, made._fetch_max_wait_ms / 1000
        finally:
            await made.stop()

    poll_s, fetch_wait_s = asyncio.run(timeouts())
    assert poll_s == FETCHER_POLL_S >= 1.0
    assert fetch_wait_s <= FETCHER_POLL_S  # a fetch in flight answers before the poll


def test_the_livelock_check_looks_at_every_partition_and_yields_once(app: faust.App) -> None:
    consumer = app.consumer
    assert isinstance(consumer, StreamConsumer)  # the consumer the app's transport makes
    assigned = {TP("gpu.metrics", p) for p in range(24)} | {TP("scheduler.allocations", p) for p in range(6)}
    checked: list[TP] = []
    sleeps: list[float] = []

    async def sleep(n: float | str | timedelta) -> None:
        sleeps.append(n.total_seconds() if isinstance(n, timedelta) else float(n))

    consumer.assignment = lambda: assigned  # type: ignore[method-assign]
    consumer.verify_event_path = lambda now, tp: checked.append(tp)  # type: ignore[method-assign]
    consumer.sleep = sleep  # type: ignore[method-assign]
    asyncio.run(consumer.verify_all_partitions_active())
    assert sorted(checked) == sorted(assigned)
    assert sleeps == [0.0]
