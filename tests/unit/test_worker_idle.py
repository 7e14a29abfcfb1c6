"""What an idle worker does between messages: Faust's livelock check.

Every 2.5 commit intervals Faust's consumer checks that each assigned partition still makes progress;
before each partition it yielded to the event loop through mode's ``sleep(0)`` (a ``wait_for`` on
the service's stop event: a task and a timer), about 30 of them every 2.5 s for nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import faust
import pytest
from faust.types import TP

from pipelines.settings import Settings
from streams.app import StreamConsumer, create_app


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
