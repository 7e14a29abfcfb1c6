"""The Slurm collector into the real Kafka broker, with fake squeue/sacct commands.

The commands are real subprocesses: a tiny script that logs its arguments and prints a fixture
(what ``squeue --json`` / ``sacct --json`` print). What is faked is only Slurm itself.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer

from infra.kafka.broker import ensure_topics
from pipelines import events as ev
from pipelines import wire
from pipelines.collectors.base import Deduplicated, RunStats, producer_sink, run
from pipelines.collectors.slurm import SlurmCommands
from pipelines.parsers import slurm
from pipelines.producer import EventProducer
from pipelines.settings import Settings
from pipelines.topics import SCHEDULER_ALLOCATIONS, physical_name

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "slurm"
SQUEUE = FIXTURES / "squeue_v0041_bad_records.json"
SACCT = FIXTURES / "sacct_v0041.json"
FAKE = """\
import json, pathlib, sys
log, fixture, *args = sys.argv[1:]
with open(log, "a") as f:
    f.write(json.dumps(args) + "\\n")
sys.stdout.buffer.write(pathlib.Path(fixture).read_bytes())
"""


def _command(tmp_path: Path, fixture: Path, log: str) -> str:
    script = tmp_path / "fake_slurm.py"
    script.write_text(FAKE)
    return shlex.join([sys.executable, str(script), str(tmp_path / log), str(fixture)])


def _collect(settings: Settings, tmp_path: Path) -> RunStats:
    collector = SlurmCommands(
        cluster="itest",
        squeue_cmd=_command(tmp_path, SQUEUE, "squeue.log"),
        sacct_cmd=_command(tmp_path, SACCT, "sacct.log"),
    )
    with EventProducer(settings) as producer:
        return run(Deduplicated(collector), producer_sink(producer), keep_ids=True)


def _consume(settings: Settings, topic: str, expected: int, timeout_s: float = 30.0) -> list[object]:
    consumer = KafkaConsumer(
        topic,
        **settings.kafka_client_config(),
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=1500,
    )
    got: list[object] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(got) < expected and time.monotonic() < deadline:
            got.extend(consumer)
    finally:
        consumer.close()
    return got


def test_slurm_collector_publishes_events_and_dead_letters(isolated_settings: Settings, tmp_path: Path) -> None:
    ensure_topics(isolated_settings)
    direct = slurm.parse(SQUEUE.read_bytes(), cluster="itest")
    direct.extend(slurm.parse(SACCT.read_bytes(), cluster="itest"))
    want_ids = {e.id for e in direct.events}

    first = _collect(isolated_settings, tmp_path)
    assert set(first.event_ids) == want_ids
    assert first.dead_letters == 2
    sacct_args = json.loads((tmp_path / "sacct.log").read_text().splitlines()[0])
    assert sacct_args[:2] == ["--duplicates", "-S"] and sacct_args[2].startswith("now-")
    assert sacct_args[3:] == ["-E", "now"]

    topic = physical_name(SCHEDULER_ALLOCATIONS, isolated_settings)
    records = _consume(isolated_settings, topic, len(want_ids))
    published = [wire.decode(r.value) for r in records]  # type: ignore[attr-defined]
    assert {e.id for e in published} == want_ids
    assert len(published) == len(want_ids)
    assert {e.cluster for e in published} == {"itest"}

    dlq = _consume(isolated_settings, physical_name(SCHEDULER_ALLOCATIONS, isolated_settings, dlq=True), 2)
    letters = [ev.DeadLetter.model_validate_json(r.value) for r in dlq]  # type: ignore[attr-defined]
    assert sorted(d.reason for d in letters) == [
        "job record is not an object",
        "slurm reported an error: Unable to contact slurm controller (connect failure)",
    ]
    assert all(d.topic == "scheduler.allocations" and d.source == "slurm" for d in letters)
    assert all(d.origin and d.origin.startswith("command:") and "fake_slurm.py" in d.origin for d in letters)
    assert "job record cut off by a broken pipe" in {d.raw for d in letters}

    second = _collect(isolated_settings, tmp_path)  # a new process would do the same
    assert sorted(second.event_ids) == sorted(first.event_ids)
    again = _consume(isolated_settings, topic, 2 * len(want_ids))
    ids = [wire.decode(r.value).id for r in again]  # type: ignore[attr-defined]
    assert len(ids) == 2 * len(want_ids) and set(ids) == want_ids  # the same ids, twice
