"""Time windows as people type them: ``7d``, ``24h``, ``90m``, ``today``, ``yesterday``,
``month-to-date``, ``last-month``, a month ``2026-11`` or a day ``2026-11-02`` — all in UTC,
as [start, end) with ``end`` exclusive. Used by every report, export and the HTTP API.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta

from pipelines.errors import PipelineError
from pipelines.times import as_utc, day_bounds, floor_day, month_bounds, month_start, next_month

WINDOW_HELP = "7d, 24h, 90m, today, yesterday, month-to-date, last-month, a month YYYY-MM or a day YYYY-MM-DD (UTC)"
_DURATION = re.compile(r"^(\d+)([dhm])$")
_MONTH = re.compile(r"^(\d{4})-(0[1-9]|1[0-2])$")
_DAY = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_UNITS = {"d": timedelta(days=1), "h": timedelta(hours=1), "m": timedelta(minutes=1)}


class BadWindow(PipelineError):
    """A window that is not one of the forms in ``WINDOW_HELP``."""


def parse_window(text: str, now: datetime | None = None) -> tuple[datetime, datetime]:
    """[start, end) of a window; relative ones end now (durations) or at a day/month boundary."""
    now = as_utc(now or datetime.now(UTC))
    today = floor_day(now)
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
        return month_bounds(date(int(match.group(1)), int(match.group(2)), 1))
    if match := _DAY.match(word):
        try:
            day = date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
        except ValueError:
            raise BadWindow(f"window {text!r} is not a calendar day") from None
        return day_bounds(day)
    raise BadWindow(f"window {text!r} is not one of: {WINDOW_HELP}")


def month_of(text: str, now: datetime | None = None) -> str:
    """``YYYY-MM`` of a window that lies inside one calendar month (last-month, month-to-date, a month)."""
    start, end = parse_window(text, now)
    if end > next_month(start):
        raise BadWindow(f"window {text!r} is not inside one calendar month")
    return f"{start:%Y-%m}"


def billing_month(
    period: str | None, window: str | None, default: str | None = None, spell: Callable[[str], str] = str
) -> str:
    """The ``YYYY-MM`` of a billing month: ``period`` exactly ``YYYY-MM``, or ``window`` inside one
    calendar month (last-month, month-to-date, 2026-11), not both; neither: the window ``default``,
    or refused without one. ``spell`` names an argument as the caller's users type it (``--period``)."""
    if period is not None and window is not None:
        raise BadWindow(f"give either {spell('period')} or {spell('window')}, not both")
    if period is not None:
        if not _MONTH.match(period):
            raise BadWindow(f"{spell('period')} must be YYYY-MM, got {period!r}")
        return period
    if window is None and default is None:
        raise BadWindow(f"give {spell('period')} YYYY-MM or {spell('window')} (last-month, month-to-date, YYYY-MM)")
    return month_of(window or str(default))
