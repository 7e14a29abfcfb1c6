"""Time windows as people type them: ``7d``, ``24h``, ``90m``, ``today``, ``yesterday``,
``month-to-date``, ``last-month``, a month ``2026-11`` or a day ``2026-11-02`` — all in UTC,
as [start, end) with ``end`` exclusive. Used by every report, export and the HTTP API.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from pipelines.errors import PipelineError

WINDOW_HELP = "7d, 24h, 90m, today, yesterday, month-to-date, last-month, a month YYYY-MM or a day YYYY-MM-DD (UTC)"
_DURATION = re.compile(r"^(\d+)([dhm])$")
_MONTH = re.compile(r"^(\d{4})-(0[1-9]|1[0-2])$")
_DAY = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_UNITS = {"d": timedelta(days=1), "h": timedelta(hours=1), "m": timedelta(minutes=1)}


class BadWindow(PipelineError):
    """A window that is not one of the forms in ``WINDOW_HELP``."""


def month_start(t: datetime) -> datetime:
    return t.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def next_month(t: datetime) -> datetime:
    return month_start(month_start(t) + timedelta(days=32))


def parse_window(text: str, now: datetime | None = None) -> tuple[datetime, datetime]:
    """[start, end) of a window; relative ones end now (durations) or at a day/month boundary."""
    now = (now or datetime.now(UTC)).astimezone(UTC)
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    word = text.strip().lower()
    if match := _DURATION.match(word):
        amount = int(match.group(1))
        if amount == 0:
            raise BadWindow(f"window {text!r} is empty")
        return now - amount * _UNITS[match.group(2)], now
    if word == "today":
        return today, now
    if word == "yesterday":
        return today - timedelta(days=1), today
    if word == "month-to-date":
        return month_start(now), now
    if word == "last-month":
        this = month_start(now)
        return month_start(this - timedelta(days=1)), this
    if match := _MONTH.match(word):
        start = datetime(int(match.group(1)), int(match.group(2)), 1, tzinfo=UTC)
        return start, next_month(start)
    if match := _DAY.match(word):
        try:
            start = datetime(int(match.group(1)), int(match.group(2)), int(match.group(3)), tzinfo=UTC)
        except ValueError:
            raise BadWindow(f"window {text!r} is not a calendar day") from None
        return start, start + timedelta(days=1)
    raise BadWindow(f"window {text!r} is not one of: {WINDOW_HELP}")


def month_of(text: str, now: datetime | None = None) -> str:
    """``YYYY-MM`` of a window that lies inside one calendar month (last-month, month-to-date, a month)."""
    start, end = parse_window(text, now)
    if end > next_month(start):
        raise BadWindow(f"window {text!r} is not inside one calendar month")
    return f"{start:%Y-%m}"
