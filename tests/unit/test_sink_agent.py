"""The worker's raw sink: one agent over every data and dead-letter topic, a batch written topic by
topic in the order the topics appear, each topic's messages in batch order."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faust

from pipelines.settings import Settings
from pipelines.topics import DATA_TOPICS, physical_name
from streams.app import Writer, _register_sink, by_topic, create_app


@dataclass
class _Msg:
    topic: str
    offset: int
    partition: int = 0
    value: Any = None


@dataclass
class _Event:
    message: _Msg


def test_a_batch_is_split_by_topic_keeping_the_order() -> None:
    batch = [_Event(_Msg(t, o)) for t, o in [("b", 0), ("a", 0), ("b", 1), ("c", 0), ("a", 1), ("b", 2)]]
    got = [(topic, [e.message.offset for e in events]) for topic, events in by_topic(batch)]
    assert got == [("b", [0, 1, 2]), ("a", [0, 1]), ("c", [0])]
    assert by_topic([]) == []


def test_one_sink_agent_reads_every_data_and_dead_letter_topic(tmp_path: Path) -> None:
    settings = Settings(topic_prefix="unit-sink.", home=tmp_path)
    app = create_app(settings)
    sinks = [a for a in app.agents.values() if a.name.startswith("gpuledger.sink")]
    assert len(sinks) == 1  # each agent's batching timer wakes the event loop, input or not
    wanted = {physical_name(t, settings) for t in DATA_TOPICS} | {
        physical_name(t, settings, dlq=True) for t in DATA_TOPICS
    }
    assert set(sinks[0].channel.topics) == wanted


@dataclass(eq=False)
class _Value:
    """A message's value that a weak reference can watch (bytes cannot be watched)."""

    size: int

    def __len__(self) -> int:
        return self.size


def test_a_written_batch_is_not_held_while_the_agent_waits_for_the_next(tmp_path: Path) -> None:
    """The agent's last batch (a backlog's last: up to 2,000 messages, tens of MiB) is let go once
    written and acknowledged, not kept until the next batch comes."""
    app = faust.App("unit-sink-release", broker="kafka://127.0.0.1:1", store="memory://", datadir=str(tmp_path))
    written: list[int] = []

    async def write_parts(parts: list[list[Any]]) -> None:
        written.append(sum(len(p) for p in parts))

    async def after(batch: list[Any]) -> None:
        pass

    _register_sink(app, {"t": Writer("gpu.metrics", write_parts)}, after)
    agent = next(a for a in app.agents.values() if a.name == "gpuledger.sink")
    watched: list[weakref.ref[Any]] = []
    more = asyncio.Event()

    class _Stream:
        async def take_events(self, max_: int, within: float) -> AsyncIterator[list[_Event]]:
            batch = [_Event(_Msg("t", i, value=_Value(100))) for i in range(3)]
            watched.extend(weakref.ref(x) for e in batch for x in (e, e.message, e.message.value))
            yield batch
            del batch
            await more.wait()  # the agent now waits for the next batch

    async def run() -> None:
        task = asyncio.ensure_future(agent.fun(_Stream()))
        for _ in range(50):
            await asyncio.sleep(0)
        gc.collect()
        alive = [r() for r in watched if r() is not None]
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert written == [3]
        assert alive == []

    asyncio.run(run())
