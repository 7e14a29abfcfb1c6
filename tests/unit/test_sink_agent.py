"""The worker's raw sink: one agent over every data and dead-letter topic, a batch written topic by
topic in the order the topics appear, each topic's messages in batch order."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pipelines.settings import Settings
from pipelines.topics import DATA_TOPICS, physical_name
from streams.app import by_topic, create_app


@dataclass
class _Msg:
    topic: str
    offset: int


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
