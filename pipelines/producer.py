"""The one module that publishes to Kafka.

Idempotent producer (``enable_idempotence``, ``acks=all``, retries) with batching and lz4
compression. Events go to their type's topic keyed by :func:`pipelines.events.message_key`;
dead letters go to ``<topic>.dlq`` keyed by their id. ``flush`` raises if any send failed, so a
collector never reports success for events the broker did not acknowledge.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from types import TracebackType

from kafka import KafkaProducer
from kafka.errors import KafkaError

from pipelines.errors import PublishError
from pipelines.events import TOPIC_OF_TYPE, DeadLetter, Envelope, message_key
from pipelines.parsers.base import ParseResult
from pipelines.settings import Settings
from pipelines.topics import physical_name


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


class EventProducer:
    def __init__(self, settings: Settings, **overrides: object) -> None:
        self._settings = settings
        config: dict[str, object] = {
            **settings.kafka_client_config(),
            "acks": "all",
            "enable_idempotence": True,
            "retries": 2_147_483_647,
            "max_in_flight_requests_per_connection": 5,
            "linger_ms": 20,
            "batch_size": 512 * 1024,
            "compression_type": "lz4",
            "max_request_size": 8 * 1024 * 1024,
            "request_timeout_ms": 30_000,
        }
        config.update(overrides)
        self._producer = KafkaProducer(**config)
        self._futures: list[object] = []
        self.counts = PublishCounts()

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
        try:
            self._futures.append(self._producer.send(topic, key=key, value=value))
        except KafkaError as exc:
            raise PublishError(f"publishing to {topic} failed: {exc}") from exc
        if len(self._futures) >= 50_000:
            self.flush()

    def flush(self, timeout_s: float = 60.0) -> None:
        """Wait until the broker acknowledged everything sent; raise on any failure."""
        try:
            self._producer.flush(timeout=timeout_s)
        except KafkaError as exc:
            raise PublishError(f"flushing to Kafka failed: {exc}") from exc
        failed = [f for f in self._futures if f.failed()]  # type: ignore[attr-defined]
        self._futures.clear()
        if failed:
            raise PublishError(f"{len(failed)} messages were not acknowledged: {failed[0].exception}")  # type: ignore[attr-defined]

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self._producer.close(timeout=10)

    def __enter__(self) -> EventProducer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None:
            self.close()
        else:
            self._producer.close(timeout=5)
