"""The one Faust app of gpuledger's stream workers.

Agents are thin glue (the maths lives in ``streams.attribution``):

* one raw-sink agent over every data and dead-letter topic: batches of messages → validated rows
  in the warehouse, topic by topic, invalid messages → dead letters; acknowledged only after the
  insert (at-least-once);
* a task that closes and corrects attribution windows for the nodes whose partitions this
  worker owns (``gpu.metrics`` and ``scheduler.allocations`` are co-partitioned by ``cluster/node``),
  one step a second, or at once when a backlog nodes wait for has been written whole.

Warehouse calls never run on the event loop: the raw sinks prepare rows on one thread and client
and store them on another (a batch's next part is prepared while the one before is stored), the
attribution steps run on a third, so a long attribution step never delays ingestion (freshness)
and no clickhouse-connect client is shared between threads. Delivery is at-least-once with
idempotent, versioned facts; Faust's exactly_once mode is not used.

Settings are read when the worker process starts (``create_app``); ``faust -A streams.app worker``
works too, through the module attribute ``app`` created on first access.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import logging
import math
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import faust
import pyarrow as pa
from faust.transport.drivers import aiokafka as faust_kafka
from kafka.partitioner.default import murmur2

from pipelines import events as ev
from pipelines import process_metrics
from pipelines.producer import EventProducer
from pipelines.settings import Settings, get_settings
from pipelines.topics import DATA_TOPICS, GPU_METRICS, node_key, physical_name
from sql.errors import describe, is_schema_error, is_transient
from streams.attribution.step import StepState, run_step
from streams.attribution.warehouse import AttributionWarehouse
from streams.ingest.rows import dead_letter_row
from streams.ingest.sink import (
    BatchResult,
    Message,
    Prepared,
    prepare_batch,
    store_batch,
    write_batch,
    write_dead_letters,
)
from streams.progress import CONSUMER_GROUP, committed_offsets

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
# a batch is written in parts of at most this many bytes of messages (at least one message each):
# 2,000 scrapes of one node each are one part, 2,000 messages of a node's history (``gpu.sample``
# version 3, hundreds of rows each) several, so what a write decodes at once stays bounded
PART_BYTES = 2 * 1024 * 1024
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
        self.warehouse = AttributionWarehouse(settings)

    async def run(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)


class InputPosition:
    """How far the worker's sinks have written their partitions: the offset after each one's last
    written message. Drained when every partition assigned to the worker is written up to the
    newest offset the consumer knows of (the attribution steps then stop waiting for more of a
    backlog, ``StepState.drained``). A partition nothing was written from since the worker started
    counts from the group's committed offset (written by an earlier worker), asked at most every
    ``COMMITTED_EVERY_S``."""

    COMMITTED_EVERY_S = 5.0

    def __init__(self) -> None:
        self.next: dict[tuple[str, int], int] = {}
        self.asked_at = -math.inf

    def wrote(self, topic: str, partition: int, offset: int) -> None:
        key = (topic, partition)
        self.next[key] = max(self.next.get(key, 0), offset + 1)

    async def drained(self, assignment: Any, highwater: Any, committed: Any) -> bool:
        """``highwater(tp)``: the consumer's newest known end of a partition (None before its first
        fetch); ``committed()`` (awaited): the group's committed offsets by (topic, partition)."""
        unseen: list[tuple[tuple[str, int], int]] = []
        for tp in assignment:
            end = highwater(tp)
            if end is None:
                return False  # not fetched yet: unknown
            key = (tp.topic, tp.partition)
            done = self.next.get(key)
            if done is None:
                if end:
                    unseen.append((key, end))
            elif done < end:
                return False
        if unseen:
            if time.monotonic() - self.asked_at < self.COMMITTED_EVERY_S:
                return False
            self.asked_at = time.monotonic()
            offsets = await committed()
            for key, _ in unseen:
                if key in offsets:
                    self.next[key] = max(self.next.get(key, 0), offsets[key])
            if any(self.next.get(key, 0) < end for key, end in unseen):
                return False
        return True


class _Backoff:
    """After a failed step, wait twice as long before the next one (1 s … 60 s); reset by a success."""

    def __init__(self) -> None:
        self.delay = 0.0
        self.next_at = 0.0

    def due(self) -> bool:
        return time.monotonic() >= self.next_at

    def failed(self) -> float:
        self.delay = min(max(self.delay * 2, STEP_INTERVAL_S), 60.0)
        self.next_at = time.monotonic() + self.delay
        return self.delay

    def succeeded(self) -> None:
        self.delay = 0.0


def use_system_allocator_for_arrow() -> None:
    """Arrow's buffers (the sink's blocks, the steps' columns) from glibc's heap, which
    ``release_free_memory`` trims, instead of Arrow's default mimalloc pool, which keeps freed pages:
    with it a worker's resident size stayed tens of MiB above its working set after a backlog."""
    pa.set_memory_pool(pa.system_memory_pool())


class StreamWorker(faust.Worker):
    """Faust's worker, with the root logger left at the level asked for: for its start-up spinner
    (at the WARN level and above) Faust puts the root logger at DEBUG and filters in its handler, so
    every debug call of aiokafka (one per partition in each fetch), Faust and mode built a record
    that no handler wrote (about 3 % of a live worker's busy Python samples)."""

    def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
        super().on_setup_root_logger(logger, level)
        if isinstance(level, int) and level > 0:
            logger.setLevel(level)


FETCHER_POLL_S = 1.5  # = the fetch wait Faust gives aiokafka: a fetch in flight answers before the poll


class _ConsumerThread(faust_kafka.AIOKafkaConsumerThread):
    def _create_worker_consumer(self, transport: faust_kafka.Transport) -> Any:
        consumer = super()._create_worker_consumer(transport)
        # aiokafka's ``consumer_timeout_ms`` (read by start() for its fetcher), which Faust does not pass
        consumer._consumer_timeout = FETCHER_POLL_S
        return consumer


class StreamConsumer(faust_kafka.Consumer):
    """Faust's aiokafka consumer, cheaper when there is nothing to read (tests/unit/test_worker_idle.py).

    aiokafka's fetcher looks at every assigned partition each ``consumer_timeout_ms``, 200 ms by
    default, although a fetch answered, a batch consumed, a partition resumed or the assignment
    lost each wake it anyway: here it looks every ``FETCHER_POLL_S``. Faust's livelock check (every
    2.5 commit intervals) yields to the event loop before each partition, a ``wait_for`` each time:
    here it checks them all after one yield."""

    def _new_consumer_thread(self) -> faust_kafka.AIOKafkaConsumerThread:
        return _ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    async def verify_all_partitions_active(self) -> None:
        now = time.monotonic()
        await self.sleep(0)
        if not self.should_stop:
            for tp in self.assignment():
                self.verify_event_path(now, tp)


class _Transport(faust_kafka.Transport):
    Consumer = StreamConsumer


class StreamApp(faust.App):
    """The app on ``_Transport``: Faust's Kafka transport with ``StreamConsumer``."""

    def _new_transport(self) -> faust_kafka.Transport:
        return _Transport(self.conf.broker_consumer, self)


def create_app(settings: Settings) -> faust.App:
    use_system_allocator_for_arrow()
    app = StreamApp(
        settings.topic_prefix + CONSUMER_GROUP,
        broker=[f"kafka://{s}" for s in settings.bootstrap_servers.split(",")],
        broker_credentials=settings.faust_credentials(),
        store="memory://",
        datadir=str((settings.home / "faust").resolve()),
        web_enabled=False,
        topic_allow_declare=False,
        topic_disable_leader=True,
        consumer_auto_offset_reset="earliest",
        broker_commit_every=BATCH_MAX,
        broker_commit_interval=1.0,
        # a crashed worker's partitions go to the others once its session times out; heartbeats at
        # most a third of it apart, as Kafka advises
        broker_session_timeout=settings.stream_session_timeout_seconds,
        broker_heartbeat_interval=min(3.0, settings.stream_session_timeout_seconds / 3),
        stream_wait_empty=False,
        producer_compression_type="lz4",
        # bounded prefetch: a backlog costs the same memory as live traffic (one batch in the
        # agent, one batch buffered per stream, 256 KiB fetched per partition)
        stream_buffer_maxsize=BATCH_MAX,
        consumer_max_fetch_size=256 * 1024,
        Worker=StreamWorker,
    )
    sink, attribution = _Lane("sink", settings), _Lane("attribution", settings)
    store = _Lane("store", settings)  # writes a data topic's prepared parts while the sink lane prepares the next
    warehouse = sink.warehouse
    dlq_producer: list[EventProducer] = []

    dlq_lock = threading.Lock()  # the sink and store lanes both publish

    def publish_dead_letters(letters: list[ev.DeadLetter]) -> None:
        with dlq_lock:
            if not dlq_producer:
                dlq_producer.append(EventProducer(settings))
            for letter in letters:
                dlq_producer[0].dead_letter(letter)
            dlq_producer[0].flush()

    def dead_letter(message: Message, reason: str, wh: AttributionWarehouse = warehouse) -> None:
        letter = ev.DeadLetter.build(
            topic=message.topic.removesuffix(".dlq"),
            source="streams",
            reason=reason,
            raw=message.value,
            origin=f"{message.topic}:{message.partition}:{message.offset}",
        )
        wh.insert("dead_letters", [dead_letter_row(letter)])
        if not message.topic.endswith(".dlq"):
            publish_dead_letters([letter])
            process_metrics.DEAD_LETTERED.labels(letter.topic, process_metrics.reason_class(reason)).inc()

    step_state = StepState()  # what one step learnt for the next (scrape intervals, due nodes, rebuild checks)
    wake = asyncio.Event()  # a step now, not at the next tick
    position = InputPosition()

    async def committed() -> dict[tuple[str, int], int]:
        return await asyncio.get_running_loop().run_in_executor(None, committed_offsets, settings)

    async def after_batch(batch: list[Any]) -> None:
        """Record how far the batch's partitions are written; tell the steps once the input drained."""
        for e in batch:
            position.wrote(e.message.topic, e.message.partition, e.message.offset)
        consumer = app.consumer
        try:
            drained = await position.drained(consumer.assignment(), consumer.highwater, committed)
        except Exception as exc:  # only a hint to the steps: without it they wait IDLE_FLUSH_S as before
            log.debug("could not tell whether the input drained: %s", describe(exc))
            return
        if drained:
            step_state.drained()
            if step_state.waiting:  # nodes catching up wait for exactly this: step now
                wake.set()

    def told(written: BatchResult, messages: Sequence[Message]) -> BatchResult:
        # new node activity: the next step reads the due nodes unless all of it lies in the window
        # open at their last read (``StepState.touched``); a batch without any changes nothing due
        step_state.touched(written.earliest)
        if written.rebuild_requested:
            step_state.rebuild_requested()
        if sum(len(m.value) for m in messages) >= PART_BYTES // 2:  # a backlog's part: give its memory back
            release_free_memory()
        return written

    def write_and_tell(messages: list[Message]) -> BatchResult:  # on the store lane
        return told(write_batch(store.warehouse, messages, publish_dead_letters), messages)

    def store_and_tell(prepared: Prepared) -> BatchResult:  # on the store lane
        return told(store_batch(store.warehouse, prepared, publish_dead_letters), prepared.messages)

    def prepare(part: list[Message]) -> Prepared:  # on the sink lane
        return prepare_batch(warehouse, part)

    store_letter = functools.partial(dead_letter, wh=store.warehouse)
    writers: dict[str, Writer] = {}
    for topic in DATA_TOPICS:
        writers[physical_name(topic, settings)] = Writer(
            topic.name,
            functools.partial(
                write_overlapped,
                prepare=functools.partial(sink.run, prepare),
                run=store.run,
                store=store_and_tell,
                write=write_and_tell,
                logical=topic.name,
                dead_letter=store_letter,
            ),
        )
        writers[physical_name(topic, settings, dlq=True)] = Writer(
            topic.dlq,
            functools.partial(
                write_in_order,
                run=sink.run,
                write=functools.partial(write_dead_letters, warehouse),
                logical=topic.dlq,
                dead_letter=dead_letter,
            ),
        )
    _register_sink(app, writers, after_batch)

    metrics_topic = physical_name(GPU_METRICS, settings)

    partitions: dict[tuple[str, str], int] = {}

    def owner() -> Any:
        """This step's test of ownership: the assignment read once, each node's partition once."""
        assigned = frozenset(tp.partition for tp in app.consumer.assignment() if tp.topic == metrics_topic)
        step_state.owning(assigned)  # a rebalance: the next step reads the due nodes

        def owns(cluster: str, node: str) -> bool:
            part = partitions.get((cluster, node))
            if part is None:
                part = partitions[(cluster, node)] = partition_of(node_key(cluster, node), GPU_METRICS.partitions)
            return part in assigned

        return owns

    backoff = _Backoff()

    @app.task
    async def attribution_steps() -> None:
        """A step every ``STEP_INTERVAL_S``, or at once when the sinks found the input drained while
        nodes catching up wait for it (``after_batch``): a backlog's computation starts as soon as
        all of it is written. Live input never wakes it: its steps stay one a second."""
        while not app.should_stop:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), STEP_INTERVAL_S)
            wake.clear()
            await attribution_step()

    async def attribution_step() -> None:
        if not backoff.due():
            return
        began = time.perf_counter()
        try:
            owns = owner()  # a rebalance first: it makes the step due
            if step_state.nothing_due(time.time(), time.monotonic()):
                return  # no hand-off to the attribution thread and back for a step that would run nothing
            report = await attribution.run(run_step, attribution.warehouse, settings, owns, step_state)
            if report.facts:
                release_free_memory()
        except Exception as exc:  # facts are idempotent: the step is tried again, later each time
            if is_schema_error(exc):
                stop_loudly(
                    f"attribution step failed: {describe(exc)}; run `gpuledger migrate` or fix the "
                    "warehouse user's grants"
                )
            process_metrics.STEP_FAILURES.inc()
            delay = backoff.failed()
            if is_transient(exc):
                log.warning("attribution step: warehouse unavailable (%s); next try in %.0fs", describe(exc), delay)
            else:
                log.exception("attribution step failed; next try in %.0fs", delay)
            return
        backoff.succeeded()
        process_metrics.STEP_SECONDS.observe(time.perf_counter() - began)
        process_metrics.FACTS_WRITTEN.inc(report.facts)
        process_metrics.WINDOWS_WRITTEN.inc(report.windows)
        process_metrics.NODES_QUARANTINED.inc(report.quarantined)
        if report.windows:
            log.info("attributed %d windows on %d nodes (%d facts)", report.windows, report.nodes, report.facts)

    return app


EXIT_WAREHOUSE_MISMATCH = 70  # EX_SOFTWARE: an operator has to act before the worker can run


def stop_loudly(reason: str) -> None:
    """End the worker at once with a CRITICAL line: its unacknowledged batch is consumed again by
    the next worker (nothing is lost), and a supervisor sees a failed process, not a quiet one."""
    log.critical("%s: stopping the worker", reason)
    logging.shutdown()
    os._exit(EXIT_WAREHOUSE_MISMATCH)


class WarehouseMismatch(RuntimeError):
    """The warehouse does not match this version (a table, column or grant is missing)."""


async def _write_durably(run: Any, write: Any, messages: list[Message], logical: str, dead_letter: Any) -> None:
    """Write a batch; return only once its rows are durable (the caller then acknowledges it).

    Messages were validated before any I/O (``decode_batch``), so an I/O error is not a bad
    message: a transient one (``sql.errors.is_transient``: unreachable, overloaded, read-only,
    a proxy's 5xx) keeps the batch unacknowledged and retries with back-off for as long as it
    lasts; a schema error raises ``WarehouseMismatch`` and stops the worker — nothing can be
    written until an operator acts, and dead-lettering would only hide it. Any other error was
    caused by the request's content: the batch is written one message at a time and each message
    that still fails becomes a dead letter with the error as its reason.
    """
    delay = 1.0
    while True:
        try:
            await run(write, messages)
            return
        except Exception as exc:
            if is_transient(exc):
                log.warning(
                    "warehouse unavailable while writing %s (%s); retrying in %.0fs", logical, describe(exc), delay
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
                continue
            if is_schema_error(exc):
                raise WarehouseMismatch(
                    f"writing {logical} failed: {describe(exc)}; "
                    "run `gpuledger migrate` or fix the warehouse user's grants"
                ) from exc
            log.exception("a %s batch failed (%s); isolating the message that breaks it", logical, describe(exc))
            break
    for message in messages:
        try:
            await run(write, [message])
        except Exception as exc:
            if is_transient(exc) or is_schema_error(exc):
                await _write_durably(run, write, [message], logical, dead_letter)
            else:
                letter = functools.partial(dead_letter, reason=f"processing failed: {describe(exc)}")
                await _write_durably(run, lambda ms, letter=letter: letter(ms[0]), [message], logical, dead_letter)


def parts(messages: list[Message], limit: int) -> list[list[Message]]:
    """``messages`` in order, cut into runs of at most ``limit`` bytes of values (a larger message alone)."""
    out: list[list[Message]] = []
    size = limit
    for m in messages:
        if size + len(m.value) > limit:
            out.append([])
            size = 0
        out[-1].append(m)
        size += len(m.value)
    return out


async def write_in_order(parts: list[list[Message]], *, run: Any, write: Any, logical: str, dead_letter: Any) -> None:
    """Write a batch's parts one after the other, each durably."""
    for part in parts:
        await _write_durably(run, write, part, logical, dead_letter)


async def write_overlapped(
    parts: list[list[Message]],
    *,
    prepare: Any,
    run: Any,
    store: Any,
    write: Any,
    logical: str,
    dead_letter: Any,
) -> None:
    """Write a batch's parts in order, each durably, preparing each part (decoding and building its
    rows: the worker's CPU, ``prepare`` awaited) while the part before it is stored (``store`` on
    ``run``'s lane: mostly the warehouse's time). A part whose preparation failed, or whose
    allocation events were compared with placements while the part before was still being written
    (``Prepared.reads_placements``), is written whole by ``write`` instead, on the same lane after
    the part before, as is each message of a part whose write fails on its content
    (``_write_durably``). Returns once every part is stored; raises what storing raised."""
    storing: asyncio.Future[None] | None = None
    for index, part in enumerate(parts):
        preparing = asyncio.ensure_future(_prepared_or_none(prepare, part))
        if storing is not None:
            try:
                await storing
            except BaseException:
                await preparing  # never raises: nothing left behind
                raise
        prepared = await preparing

        def write_part(
            messages: list[Message], prepared: Any = prepared, part: list[Message] = part, overlapped: bool = index > 0
        ) -> Any:
            if prepared is not None and messages is part and not (overlapped and prepared.reads_placements):
                return store(prepared)
            return write(messages)

        storing = asyncio.ensure_future(_write_durably(run, write_part, part, logical, dead_letter))
    if storing is not None:
        await storing


async def _prepared_or_none(prepare: Any, part: list[Message]) -> Any:
    try:
        return await prepare(part)
    except Exception as exc:  # written whole after the part before, where a failure gets its handling
        log.debug("preparing a part failed (%s); it is written whole", describe(exc))
        return None


@dataclass(frozen=True)
class Writer:
    """How the sink writes one physical topic's messages: under its logical name, by ``write_parts``
    (awaited with the batch's parts of that topic, in order)."""

    logical: str
    write_parts: Any


def by_topic(batch: Sequence[Any]) -> list[tuple[str, list[Any]]]:
    """A batch's events per topic, topics in order of their first event, each topic's in batch order."""
    out: dict[str, list[Any]] = {}
    for e in batch:
        out.setdefault(e.message.topic, []).append(e)
    return list(out.items())


def _register_sink(app: faust.App, writers: dict[str, Writer], after: Any) -> None:
    """One agent over every data and dead-letter topic (``writers``, by physical name): a batch is
    written topic by topic, then acknowledged. One agent, not one per topic: each agent's batching
    timer wakes the event loop every ``BATCH_WITHIN_S`` with or without input, which was most of an
    idle worker's event-loop CPU with ten of them."""
    topic = app.topic(*writers, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")

    async def write(batch: list[Any]) -> None:
        for physical, events in by_topic(batch):
            writer = writers[physical]
            messages = [Message(writer.logical, e.message.partition, e.message.offset, e.message.value) for e in events]
            try:  # the batch is acknowledged once every part of every topic is written
                await writer.write_parts(parts(messages, PART_BYTES))
            except WarehouseMismatch as exc:
                stop_loudly(str(exc))
        await after(batch)

    async def sink(stream: faust.StreamT) -> None:
        async for batch in stream.take_events(BATCH_MAX, within=BATCH_WITHIN_S):  # type: ignore[attr-defined]
            await write(batch)
            # let the written batch go while waiting for the next: a backlog's last batch (up to
            # BATCH_MAX messages, tens of MiB) was otherwise held as long as the input stayed quiet
            del batch

    app.agent(topic, name="gpuledger.sink")(sink)


_lazy: dict[str, faust.App] = {}


def __getattr__(name: str) -> Any:
    """``faust -A streams.app worker``: the app is built (and settings read) on first access."""
    if name == "app":
        if "app" not in _lazy:
            _lazy["app"] = create_app(get_settings())
        return _lazy["app"]
    raise AttributeError(name)
