"""What every parser returns, and the one error that means "this is not my format at all".

Parsers are pure functions ``parse(text_or_bytes, *, cluster, origin, ...) -> ParseResult``:
no Kafka, no I/O beyond the input they are given. A record that is malformed becomes a
:class:`~pipelines.events.DeadLetter` with a one-line reason and its raw text; the parser keeps
going. Only input that is not that source's format at all raises :class:`NotThisFormat` (the CLI
turns it into exit code 2 with its one-line message).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pipelines.events import DeadLetter, Envelope, InvalidEvent
from pipelines.wire import validate

BULK_BYTES = 1 << 20


@contextmanager
def gc_paused(data: object) -> Iterator[None]:
    """Pause the cyclic garbage collector while a large input (≥ 1 MiB) is parsed.

    Parsing builds millions of small acyclic objects that stay alive until the result is returned;
    the collector would traverse them again and again (measured: 3/4 of the time of a 60k-job
    sacct file, 2/3 of the decoding of a query_range answer). Nothing parsed here forms reference
    cycles, so pausing changes no result; the previous state is restored on exit.

    On exit what the parse built (the result, tens of thousands of lists of numbers) is moved to
    the oldest generation as it is (``gc.freeze`` then ``gc.unfreeze``: two list splices), not
    traversed by the young collection the first allocation after ``gc.enable`` would start (7 ms of
    a 46,080-sample query_range answer's 110, spent to find no garbage). Anything else young goes
    with it and is collected with the oldest generation. Skipped when the process keeps objects
    frozen (the stream worker freezes its startup objects): unfreezing would release them."""
    size = len(data) if isinstance(data, bytes | bytearray | str) else 0
    pause = size >= BULK_BYTES and gc.isenabled()
    if pause:
        gc.disable()
    try:
        yield
    finally:
        if pause:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


class NotThisFormat(ValueError):
    """The input is not the expected source format at all (not merely a bad record)."""


@dataclass
class ParseResult:
    events: list[Envelope] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    # why records of the input gave no event although nothing was wrong with them (a CPU-only job,
    # a metric gpuledger does not read): one line each, shown by `gpuledger ingest`
    notes: list[str] = field(default_factory=list)

    def extend(self, other: ParseResult) -> None:
        self.events.extend(other.events)
        self.dead_letters.extend(other.dead_letters)
        self.notes.extend(n for n in other.notes if n not in self.notes)

    def note(self, text: str) -> None:
        """Say once why part of the input gave no event."""
        if text not in self.notes:
            self.notes.append(text)

    def add(
        self, obj: dict[str, object], *, topic: str, source: str, raw: str | bytes, origin: str | None = None
    ) -> None:
        """Validate ``obj`` into an event, or dead-letter it with the validation reason."""
        try:
            self.events.append(validate(obj))
        except InvalidEvent as exc:
            self.reject(topic=topic, source=source, reason=str(exc), raw=raw, origin=origin)

    def reject(self, *, topic: str, source: str, reason: str, raw: str | bytes, origin: str | None = None) -> None:
        self.dead_letters.append(DeadLetter.build(topic=topic, source=source, reason=reason, raw=raw, origin=origin))


def json_lines(
    text: str,
    record: Callable[[str, int], tuple[dict[str, Any] | None, str]],
    *,
    topic: str,
    source: str,
    origin: str | None,
) -> ParseResult:
    """Every non-blank line through ``record(line, lineno)``: its event object, or ``None`` and the
    one-line reason it becomes a dead letter."""
    result = ParseResult()
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        obj, reason = record(line, lineno)
        if obj is None:
            result.reject(topic=topic, source=source, reason=reason, raw=line, origin=origin)
        else:
            result.add(obj, topic=topic, source=source, raw=line, origin=origin)
    return result


def json_object(parent: Any, key: str) -> dict[str, Any]:
    """``parent[key]`` of a decoded JSON document: {} when absent, an error when not an object."""
    value = parent.get(key) if isinstance(parent, dict) else None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{key} is not an object")
    return value


def json_list(value: Any) -> list[Any]:
    """A decoded JSON list: [] when absent, an error when not a list."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError("expected a list")
    return value
