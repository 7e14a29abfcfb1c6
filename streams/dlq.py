"""Re-drive dead letters once their cause is fixed (``gpuledger dlq replay``).

A dead letter keeps the raw record and the reason it was rejected. Replaying validates the raw
record again with today's contract (and the future-time tolerance): one that is now a valid event
is published to its topic again — keyed as the producer keys it, so it reaches the same partition
and node — and recorded in ``dead_letter_replays``; one that still fails is left where it is and
counted with today's reason. Events keep their ids, so a replay sent twice changes nothing.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from pipelines import events as ev
from pipelines import wire
from pipelines.producer import EventProducer
from pipelines.settings import Settings
from pipelines.times import EPOCH
from streams.ingest.sink import check_not_future
from streams.store import Warehouse


@dataclass
class ReplayReport:
    replayed: int = 0
    still_invalid: Counter[str] = field(default_factory=Counter)  # today's reason -> letters


def replay_dead_letters(
    settings: Settings, topic: str = "", since: datetime | None = None, again: bool = False, dry_run: bool = False
) -> ReplayReport:
    report = ReplayReport()
    wh = Warehouse(settings)
    try:
        rows = wh.query(
            "dead_letters_to_replay",
            {"topic": topic, "since": since or EPOCH, "again": int(again)},
        )
        not_after = datetime.now(UTC) + timedelta(seconds=settings.future_tolerance_seconds)
        valid: list[tuple[str, ev.Envelope]] = []
        for letter_id, _topic, _reason, raw, _time in rows:
            try:
                event = wire.decode(str(raw).encode())
                check_not_future(event, not_after)
            except ev.InvalidEvent as exc:
                report.still_invalid[str(exc)] += 1
                continue
            valid.append((str(letter_id), event))
        if valid and not dry_run:
            with EventProducer(settings) as producer:
                for _, event in valid:
                    producer.publish(event)
            now = datetime.now(UTC)
            wh.insert(
                "dead_letter_replays",
                [{"id": letter_id, "replayed_at": now, "event_id": event.id} for letter_id, event in valid],
            )
        report.replayed = len(valid)
    finally:
        wh.close()
    return report
