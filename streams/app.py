"""The one Faust app of gpuledger's stream workers.

Agents are thin glue (the maths lives in ``streams.attribution``):

* one raw-sink agent per data topic: batches of messages → validated rows in the warehouse,
  invalid messages → dead letters; acknowledged only after the insert (at-least-once);
* a timer that closes and corrects attribution windows for the nodes whose partitions this
  worker owns (``gpu.metrics`` and ``scheduler.allocations`` are co-partitioned by ``cluster/node``).

Warehouse calls never run on the event loop: the raw sinks use one thread and client, the
attribution timer another, so a long attribution step never delays ingestion (freshness) and no
clickhouse-connect client is shared between threads. Delivery is at-least-once with
idempotent, versioned facts; Faust's exactly_once mode is not used.

Settings are read when the worker process starts (``create_app``); ``faust -A streams.app worker``
works too, through the module attribute ``app`` created on first access.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import faust
from clickhouse_connect.driver.exceptions import OperationalError
from kafka.partitioner.default import murmur2

from pipelines import events as ev
from pipelines.producer import EventProducer
from pipelines.settings import Settings, get_settings
from pipelines.topics import DATA_TOPICS, GPU_METRICS, node_key, physical_name
from streams.attribution.step import run_step
from streams.ingest.rows import dead_letter_row
from streams.ingest.sink import Message, write_batch, write_dead_letters
from streams.progress import CONSUMER_GROUP
from streams.store import Warehouse

log = logging.getLogger("gpuledger.streams")


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:  # not glibc (macOS, musl): nothing to trim
        return None


_LIBC = _glibc()
BATCH_MAX = 2000
BATCH_WITHIN_S = 0.5
STEP_INTERVAL_S = 1.0


def release_free_memory() -> None:
    """Give memory freed after a large step back to the system (glibc keeps it otherwise).

    Without it the worker's resident size stays at the high-water mark of its largest backlog.
    """
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def partition_of(key: bytes, partitions: int) -> int:
    """Kafka's default partitioner (murmur2), as the producer used it."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


class _Lane:
    """One thread with its own warehouse client: what runs there never waits for another lane."""

    def __init__(self, name: str, settings: Settings) -> None:
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self.warehouse = Warehouse(settings)

    async def run(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)


def create_app(settings: Settings) -> faust.App:
    app = faust.App(
        settings.topic_prefix + CONSUMER_GROUP,
        broker=[f"kafka://{s}" for s in settings.bootstrap_servers.split(",")],
        store="memory://",
        datadir=str((settings.home / "faust").resolve()),
        web_enabled=False,
        topic_allow_declare=False,
        topic_disable_leader=True,
        consumer_auto_offset_reset="earliest",
        broker_commit_every=BATCH_MAX,
        broker_commit_interval=1.0,
        stream_wait_empty=False,
        producer_compression_type="lz4",
        # bounded prefetch: a backlog costs the same memory as live traffic (one batch in the
        # agent, one batch buffered per stream, 256 KiB fetched per partition)
        stream_buffer_maxsize=BATCH_MAX,
        consumer_max_fetch_size=256 * 1024,
    )
    sink, attribution = _Lane("sink", settings), _Lane("attribution", settings)
    warehouse = sink.warehouse
    dlq_producer: list[EventProducer] = []

    def publish_dead_letters(letters: list[ev.DeadLetter]) -> None:
        if not dlq_producer:
            dlq_producer.append(EventProducer(settings))
        for letter in letters:
            dlq_producer[0].dead_letter(letter)
        dlq_producer[0].flush()

    def quarantine(message: Message, reason: str) -> None:
        letter = ev.DeadLetter.build(topic=message.topic.removesuffix(".dlq"), source="streams", reason=reason,
                                     raw=message.value, origin=f"{message.topic}:{message.partition}:{message.offset}")
        warehouse.insert("dead_letters", [dead_letter_row(letter)])
        if not message.topic.endswith(".dlq"):
            publish_dead_letters([letter])

    for topic in DATA_TOPICS:
        _register_sink(app, topic.name, physical_name(topic, settings), sink.run,
                       functools.partial(write_batch, warehouse, publish_dead_letters=publish_dead_letters),
                       quarantine)
        _register_sink(app, topic.dlq, physical_name(topic, settings, dlq=True), sink.run,
                       functools.partial(write_dead_letters, warehouse), quarantine)

    metrics_topic = physical_name(GPU_METRICS, settings)

    def owns(cluster: str, node: str) -> bool:
        assigned = {tp.partition for tp in app.consumer.assignment() if tp.topic == metrics_topic}
        return partition_of(node_key(cluster, node), GPU_METRICS.partitions) in assigned

    @app.timer(interval=STEP_INTERVAL_S)
    async def attribution_timer() -> None:
        try:
            report = await attribution.run(run_step, attribution.warehouse, settings, owns)
            if report.facts:
                release_free_memory()
        except Exception:  # a failed step is retried on the next tick; facts are idempotent
            log.exception("attribution step failed; retrying next tick")
            return
        if report.windows:
            log.info("attributed %d windows on %d nodes (%d facts)", report.windows, report.nodes, report.facts)

    return app


async def _write_with_isolation(run: Any, write: Any, messages: list[Message], logical: str,
                                quarantine: Any) -> None:
    """Write a batch; retry while the warehouse is unreachable; isolate a message that breaks processing.

    Connection errors keep the batch unacknowledged and retry with back-off (nothing is lost). Any
    other error is a defect triggered by some message: the batch is written one message at a time
    and each message that still fails becomes a dead letter with the error as its reason, so one
    message can never stop the worker.
    """
    delay = 1.0
    while True:
        try:
            await run(write, messages)
            return
        except OperationalError:
            log.warning("warehouse unreachable while writing %s; retrying in %.0fs", logical, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 30.0)
        except Exception:
            log.exception("a %s batch failed; isolating the message that breaks it", logical)
            break
    for message in messages:
        try:
            await run(write, [message])
        except OperationalError:
            await _write_with_isolation(run, write, [message], logical, quarantine)
        except Exception as exc:
            await run(quarantine, message, f"processing failed: {type(exc).__name__}: {exc}")


def _register_sink(app: faust.App, logical: str, physical: str, run: Any, write: Any, quarantine: Any) -> None:
    topic = app.topic(physical, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")

    async def sink(stream: faust.StreamT) -> None:
        async for batch in stream.take_events(BATCH_MAX, within=BATCH_WITHIN_S):  # type: ignore[attr-defined]
            messages = [Message(logical, e.message.partition, e.message.offset, e.message.value) for e in batch]
            await _write_with_isolation(run, write, messages, logical, quarantine)

    sink.__name__ = f"sink_{logical.replace('.', '_')}"
    app.agent(topic, name=f"gpuledger.sink.{logical}")(sink)


_lazy: dict[str, faust.App] = {}


def __getattr__(name: str) -> Any:
    """``faust -A streams.app worker``: the app is built (and settings read) on first access."""
    if name == "app":
        if "app" not in _lazy:
            _lazy["app"] = create_app(get_settings())
        return _lazy["app"]
    raise AttributeError(name)
