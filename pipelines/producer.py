"""The one module that publishes to Kafka.

librdkafka (confluent-kafka) with the idempotent producer (``enable.idempotence``, ``acks=all``,
retries until the delivery timeout), batching and lz4 compression. Events go to their type's
topic keyed by :func:`pipelines.events.message_key`; dead letters go to ``<topic>.dlq`` keyed by
their id. Keys are placed by murmur2, as Java clients and kafka-python place them, so a node's
messages stay in the partition they always went to. ``flush`` raises if any send failed, so a
collector never reports success for events the broker did not acknowledge.

librdkafka sends from its own thread and reports only failed deliveries
(``delivery.report.only.error``): a send costs a few microseconds, where kafka-python's pure
Python send cost about fifty (docs/BENCHMARKS.md).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from pipelines.errors import PublishError, kafka_auth_failed
from pipelines.events import TOPIC_OF_TYPE, DeadLetter, Envelope, message_key
from pipelines.parsers.base import ParseResult
from pipelines.settings import Settings
from pipelines.topics import physical_name

CONNECT_TIMEOUT_S = 20.0  # the broker must answer a metadata request within this at start
DELIVERY_TIMEOUT_MS = 120_000  # a message not acknowledged within this fails (Java's delivery.timeout.ms)
# librdkafka's log lines go to Python logging under kafka-python's logger, where the CLI listens
LOG = logging.getLogger("kafka.librdkafka")


@dataclass
class PublishCounts:
    events: Counter[str] = field(default_factory=Counter)  # per topic
    dead_letters: Counter[str] = field(default_factory=Counter)  # per data topic

    @property
    def total_events(self) -> int:
        return sum(self.events.values())

    @property
    def total_dead_letters(self) -> int:
        return sum(self.dead_letters.values())


@dataclass
class _Failures:
    """What librdkafka reported from its thread: failed deliveries and connection errors."""

    deliveries: int = 0
    first_delivery: str | None = None
    auth: str | None = None  # the broker's rejection of our credentials
    last: str | None = None  # the latest client error (e.g. every broker down)

    def delivered(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.deliveries += 1
            self.first_delivery = self.first_delivery or f"{msg.topic()}: {err.str()}"

    def error(self, err: KafkaError) -> None:
        if err.code() in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED):
            self.auth = err.str()
        self.last = err.str()


class EventProducer:
    def __init__(self, settings: Settings, config: dict[str, Any] | None = None) -> None:
        """``config``: librdkafka settings over the defaults (e.g. ``{"linger.ms": 0}``)."""
        self._settings = settings
        self._failures = _Failures()
        options: dict[str, Any] = {
            **settings.librdkafka_config(),
            "acks": "all",
            "enable.idempotence": True,
            "message.timeout.ms": DELIVERY_TIMEOUT_MS,
            "request.timeout.ms": 30_000,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "compression.type": "lz4",
            "message.max.bytes": 8 * 1024 * 1024,
            "partitioner": "murmur2_random",  # Java's placement of keyed messages
            "queue.buffering.max.messages": 1_000_000,
            "delivery.report.only.error": True,
            "on_delivery": self._failures.delivered,
            "error_cb": self._failures.error,
            "logger": LOG,
            "log.connection.close": False,
        }
        options.update(config or {})
        self._producer = Producer(options)
        self._connect()
        self.counts = PublishCounts()

    def _connect(self) -> None:
        """Wait until the broker answers (a clear error now rather than a failed flush later)."""
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while True:
            try:
                self._producer.list_topics(timeout=1.0)
                return
            except KafkaException as exc:
                reason = exc.args[0].str() if exc.args and isinstance(exc.args[0], KafkaError) else str(exc)
            self._producer.poll(0)  # serves the error callback
            self._raise_on_auth()
            if time.monotonic() > deadline:
                raise PublishError(
                    f"Kafka at {self._settings.bootstrap_servers} did not answer within {CONNECT_TIMEOUT_S:.0f}s: "
                    f"{self._failures.last or reason}"
                )

    def _raise_on_auth(self) -> None:
        if self._failures.auth is not None:
            raise PublishError(kafka_auth_failed(self._failures.auth))

    def publish(self, event: Envelope) -> None:
        topic = physical_name(TOPIC_OF_TYPE[event.type], self._settings)
        self._send(topic, message_key(event), event.to_bytes())
        self.counts.events[topic] += 1

    def dead_letter(self, letter: DeadLetter) -> None:
        topic = physical_name(letter.topic, self._settings, dlq=True)
        self._send(topic, letter.id.encode(), letter.to_bytes())
        self.counts.dead_letters[letter.topic] += 1

    def publish_result(self, result: ParseResult) -> None:
        for event in result.events:
            self.publish(event)
        for letter in result.dead_letters:
            self.dead_letter(letter)

    def send_raw(self, topic: str, key: bytes | None, value: bytes) -> None:
        """Publish pre-encoded bytes (tests and benchmarks that need malformed messages)."""
        self._send(topic, key, value)

    def _send(self, topic: str, key: bytes | None, value: bytes) -> None:
        while True:
            try:
                self._producer.produce(topic, value, key)
                return
            except BufferError:  # the local queue is full: let the broker acknowledge some first
                self._producer.poll(0.1)
                self._raise_on_auth()
            except KafkaException as exc:
                raise PublishError(f"publishing to {topic} failed: {exc.args[0].str()}") from None

    def flush(self, timeout_s: float = 60.0) -> None:
        """Wait until the broker acknowledged everything sent; raise on any failure."""
        deadline = time.monotonic() + timeout_s
        left = self._producer.flush(min(timeout_s, 1.0))
        while left and time.monotonic() < deadline:
            self._raise_on_auth()
            left = self._producer.flush(min(max(deadline - time.monotonic(), 0.0), 1.0))
        self._raise_on_auth()
        if left:
            raise PublishError(
                f"{left} messages were not acknowledged within {timeout_s:.0f}s: "
                f"{self._failures.last or 'Kafka did not answer'}"
            )
        if self._failures.deliveries:
            failed, first = self._failures.deliveries, self._failures.first_delivery
            self._failures.deliveries, self._failures.first_delivery = 0, None
            raise PublishError(f"{failed} messages were not acknowledged: {first}")

    def close(self) -> None:
        self.flush()

    def __enter__(self) -> EventProducer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None:
            self.close()
        else:
            self._producer.flush(5)  # what is queued still goes, as far as it can; the error is the caller's
