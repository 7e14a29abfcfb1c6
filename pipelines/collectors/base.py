"""The one small protocol of the live collectors, the wrapper that dedupes, and the run loop.

A collector reads one live source (Prometheus, a dcgm-exporter, the Kubernetes API, Slurm
commands) and hands back what it read, already parsed by that source's parser::

    collector.poll() -> Batch       what the source says since the previous poll
    Batch.result                    events + dead letters (pipelines.parsers.base.ParseResult)
    Batch.more                      poll again right away: a time range read in chunks, a watch
                                    that has already waited, a re-list after an expired watch
    Batch.final                     the source is exhausted (a closed time range was read)
    Batch.commit                    run once the sink has published the batch: a collector saves
                                    its cursor (collectors.state) only for what the broker has
    collector.close()               release connections

Cross-cutting behaviour is added by wrapping a collector, not by each collector:
:class:`Deduplicated` drops events (and dead letters) whose id this process already handed on,
so follow mode does not republish an unchanged squeue line or pod every poll. Ids are
deterministic (natural keys), so a duplicate that slips through — after a restart, say — is
harmless downstream; the wrapper only saves the broker the traffic.

:func:`run` drives a collector: poll → sink (publish, then flush: the broker has acknowledged a
batch before the next poll starts) → wait ``interval_s`` (follow mode) → poll … Failure behaviour:

* ``SourceUnavailable`` — once: raised. Follow mode: reported as a warning and retried at the
  next interval; raised after ``max_failures`` failed polls in a row. Nothing was read, so
  nothing is lost (collectors advance their cursors only after a successful read).
* ``PublishError`` (from the sink) — raised: the run ends. Run it again; ids are deterministic.
* ``NotThisFormat`` — raised: the source answers, but not in its format (exit code 2).
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from pipelines.errors import SourceUnavailable
from pipelines.parsers.base import ParseResult


@dataclass
class Batch:
    result: ParseResult = field(default_factory=ParseResult)
    more: bool = False
    final: bool = False
    note: str = ""  # what was read ("2026-11-02T10:00:00Z..10:05:00Z", "watch from rv 1234")
    warnings: list[str] = field(default_factory=list)  # partial failures (one exporter of many down)
    commit: Callable[[], None] | None = None  # after the sink published the batch (saves cursors)


class Collector(Protocol):
    source: str

    def poll(self) -> Batch:
        """Read what is new since the previous poll; raise SourceUnavailable when unreachable."""
        ...

    def close(self) -> None: ...


Sink = Callable[[ParseResult], None]
MAX_WARNINGS = 100  # a collector that follows for months keeps only the latest


class Publisher(Protocol):
    """What :func:`producer_sink` needs of :class:`pipelines.producer.EventProducer`."""

    def publish_result(self, result: ParseResult) -> None: ...

    def flush(self, timeout_s: float = 60.0) -> None: ...


class Deduplicated:
    """Drops events and dead letters whose id was already handed on by this process.

    Remembers at most ``capacity`` ids (least recently seen forgotten first), so a collector that
    follows for months keeps bounded memory; a forgotten id that comes back is published again,
    which downstream deduplicates by id anyway.
    """

    def __init__(self, inner: Collector, capacity: int = 100_000) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.inner = inner
        self.source = inner.source
        self.capacity = capacity
        self._seen: OrderedDict[str, None] = OrderedDict()
        self.dropped = 0

    def poll(self) -> Batch:
        batch = self.inner.poll()
        events = [e for e in batch.result.events if self._first(e.id)]
        letters = [d for d in batch.result.dead_letters if self._first(d.id)]
        self.dropped += len(batch.result.events) + len(batch.result.dead_letters) - len(events) - len(letters)
        return replace(batch, result=ParseResult(events, letters))

    def _first(self, event_id: str) -> bool:
        if event_id in self._seen:
            self._seen.move_to_end(event_id)
            return False
        self._seen[event_id] = None
        if len(self._seen) > self.capacity:
            self._seen.popitem(last=False)
        return True

    def close(self) -> None:
        self.inner.close()


@dataclass
class RunStats:
    polls: int = 0
    failed_polls: int = 0
    events: int = 0
    dead_letters: int = 0
    by_type: Counter[str] = field(default_factory=Counter)
    dead_letter_reasons: Counter[str] = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)  # the last MAX_WARNINGS
    event_ids: list[str] = field(default_factory=list)  # kept only when run(keep_ids=True)

    def warn(self, *messages: str) -> None:
        self.warnings.extend(messages)
        del self.warnings[:-MAX_WARNINGS]

    def add(self, batch: Batch, keep_ids: bool) -> None:
        self.polls += 1
        self.events += len(batch.result.events)
        self.dead_letters += len(batch.result.dead_letters)
        self.by_type.update(e.type for e in batch.result.events)
        self.dead_letter_reasons.update(d.reason for d in batch.result.dead_letters)
        self.warn(*batch.warnings)
        if keep_ids:
            self.event_ids.extend(e.id for e in batch.result.events)


def run(
    collector: Collector,
    sink: Sink,
    *,
    follow: bool = False,
    interval_s: float = 30.0,
    stop: threading.Event | None = None,
    max_failures: int = 5,
    on_batch: Callable[[Batch, RunStats], None] | None = None,
    on_failure: Callable[[SourceUnavailable], None] | None = None,
    keep_ids: bool = False,
    max_polls: int | None = None,
) -> RunStats:
    """Poll ``collector`` and hand every batch to ``sink`` until done (see the module docstring).

    Without ``follow`` the loop ends after the first batch that does not ask for ``more``; with
    it, it waits ``interval_s`` between polls until ``stop`` is set or a batch is ``final``.
    ``max_polls`` ends it after that many successful polls whatever they say.
    """
    if interval_s < 0:
        raise ValueError("interval_s must not be negative")
    stop = stop or threading.Event()
    stats = RunStats()
    failures = 0
    while not stop.is_set():
        try:
            batch = collector.poll()
        except SourceUnavailable as exc:
            failures += 1
            stats.failed_polls += 1
            if not follow or failures >= max_failures:
                raise
            stats.warn(str(exc))
            if on_failure is not None:
                on_failure(exc)
            stop.wait(interval_s)
            continue
        failures = 0
        sink(batch.result)
        if batch.commit is not None:
            batch.commit()
        stats.add(batch, keep_ids)
        if on_batch is not None:
            on_batch(batch, stats)
        if batch.final or (max_polls is not None and stats.polls >= max_polls):
            break
        if batch.more:
            continue
        if not follow:
            break
        stop.wait(interval_s)
    return stats


def collect_into(result: ParseResult) -> Sink:
    """A sink that accumulates everything into ``result`` (dry runs and tests)."""
    return result.extend


def producer_sink(producer: Publisher) -> Sink:
    """A sink that publishes through :class:`pipelines.producer.EventProducer` and waits for the
    broker's acknowledgement of every batch (``flush`` raises ``PublishError`` otherwise)."""

    def sink(result: ParseResult) -> None:
        if result.events or result.dead_letters:
            producer.publish_result(result)
            producer.flush()

    return sink
