"""Time in gpuledger, in one place: parse, format, floor and calendar bounds, all in UTC.

Every time gpuledger keeps is an aware ``datetime`` in UTC; a naive one (a ClickHouse value, a YAML
date-time, a hint typed without an offset) is read as UTC, never as the machine's local time.

Parse
    ``as_utc``              a datetime in UTC (naive = UTC)
    ``from_epoch``          Unix seconds → UTC; non-finite or out of range: ``ValueError``
    ``from_epoch_or_none``  the same, ``None`` instead of the error (hot parse loops test a value)
    ``parse_iso``           lenient ISO 8601 / RFC 3339 text; naive = UTC
    ``parse_rfc3339``       strict RFC 3339: a date, a time and an offset (``MissingOffset`` without)
    ``optional_time``       a record's time field: absent/empty → ``None``, a datetime, or ISO text
    ``time_hint``           a caller's hint: datetime, Unix seconds (number or digits) or ISO text
    ``parse_day``           ``YYYY-MM-DD`` → a ``date``
Format
    ``utc_text``            ``YYYY-MM-DDTHH:MM:SSZ`` (whole seconds: reports, exports, file formats)
    ``utc_iso``             ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z`` (the fraction kept: query windows, logs)
Floor
    ``floor_seconds`` / ``ceil_seconds``   Unix seconds to a window of ``w`` seconds
    ``floor_to``            a datetime to a step counted from the epoch
    ``floor_hour`` / ``floor_day``         a datetime to its UTC hour / day
Calendar
    ``day_start`` / ``day_bounds``          a UTC day as ``[start, end)``
    ``month_start`` / ``next_month`` / ``month_bounds``   a UTC calendar month as ``[start, end)``

Module-specific rules stay with their module as thin wrappers (Slurm's "0 means unset", a report's
``BadRequest``, a Prometheus scrape's whole milliseconds); they call these functions.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, date, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
MICROSECOND = timedelta(microseconds=1)  # ``delta // MICROSECOND``: whole microseconds

_RFC3339_START = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}")
_EPOCH_DIGITS = re.compile(r"\d+(?:\.\d+)?")


class MissingOffset(ValueError):
    """An RFC 3339 time without ``Z`` or ``±HH:MM``: which instant it names is unknown."""


# --- parse -------------------------------------------------------------------------------------


def as_utc(t: datetime) -> datetime:
    """``t`` in UTC; a naive ``t`` is taken as UTC (as ClickHouse and YAML hand it back)."""
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def from_epoch(seconds: float) -> datetime:
    """The UTC time of Unix ``seconds``; NaN, infinities and years outside 1..9999 raise ``ValueError``."""
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError) as exc:
        raise ValueError(f"timestamp {seconds!r} out of range") from exc


def from_epoch_or_none(seconds: float) -> datetime | None:
    """``from_epoch`` that answers ``None`` instead of raising: for parse loops that turn a bad
    sample time into a dead letter by testing the value (the Prometheus text and JSON formats)."""
    if not math.isfinite(seconds):
        return None
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def parse_iso(text: str) -> datetime:
    """Lenient ISO 8601 / RFC 3339 text as UTC: surrounding blanks ignored, ``T``/``t``/space between
    date and time, ``Z``/``z`` or an offset, any fraction (beyond microseconds cut), a bare date is
    its midnight; without an offset the time is UTC. Anything else raises ``ValueError``."""
    try:
        moment = datetime.fromisoformat(text)  # the common case, at the price of one call
    except (TypeError, ValueError):
        moment = _fromiso(text, f"bad timestamp {str(text)[:40]!r}")
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def parse_rfc3339(text: str) -> datetime:
    """Strict RFC 3339 as UTC: ``YYYY-MM-DD[Tt ]HH:MM…`` with ``Z``/``z`` or an offset. Stricter than
    ``parse_iso`` on purpose: where a format says RFC 3339 (the wire contract, job and checkpoint
    records, nccl logs) a time without an offset is a bad record (``MissingOffset``), not UTC."""
    if not isinstance(text, str) or not _RFC3339_START.match(text):
        raise ValueError(f"not an RFC 3339 time: {str(text)[:40]!r}")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        moment = _fromiso(text, f"not an RFC 3339 time: {text[:40]!r}")
    if moment.tzinfo is None:
        raise MissingOffset(f"RFC 3339 time without offset: {text[:40]!r}")
    return moment.astimezone(UTC)


def _fromiso(text: object, error: str) -> datetime:
    """``datetime.fromisoformat`` after what it does not take itself: blanks around, a lowercase ``z``."""
    if not isinstance(text, str):
        raise ValueError(error)
    value = text.strip()
    if value[-1:] == "z":
        value = value[:-1] + "Z"
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(error) from None


def optional_time(value: object) -> datetime | None:
    """A record's optional time field (Kubernetes timestamps, reference-file dates): ``None`` or
    ``""`` → ``None``; ``parse_iso`` text or a datetime (naive = UTC) → UTC; any other type raises
    ``ValueError``. Numbers are refused: in these fields they are a mistake, not Unix seconds."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return parse_iso(value)
    if isinstance(value, datetime):
        return as_utc(value)
    raise ValueError(f"timestamp must be a string, got {type(value).__name__}")


def time_hint(value: object) -> datetime | None:
    """A caller's time hint (``--time``, a scrape time, a collector's poll time): a datetime (naive =
    UTC), Unix seconds as a number or as digits, or ``parse_iso`` text. ``None`` stays ``None``; a
    bad hint, non-finite or out-of-range seconds raise ``ValueError``."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return as_utc(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        result = from_epoch_or_none(float(value))
        if result is None:
            raise ValueError(f"time hint out of range: {value!r}")
        return result
    if isinstance(value, str):
        text = value.strip()
        if _EPOCH_DIGITS.fullmatch(text):
            return time_hint(float(text))
        return parse_iso(text)
    raise ValueError(f"unsupported time hint: {value!r}")


def parse_day(text: str) -> date:
    """``YYYY-MM-DD`` (a partition key, a configured first day) as a ``date``; else ``ValueError``."""
    return date.fromisoformat(text)


# --- format ------------------------------------------------------------------------------------


def utc_text(t: datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SSZ`` in UTC (naive = UTC), the fraction dropped (not rounded): FOCUS
    and OpenCost times, JSON report values, Kubernetes ``metav1.Time``, messages."""
    return as_utc(t).strftime("%Y-%m-%dT%H:%M:%SZ")


def utc_iso(t: datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SS[.ffffff]Z`` in UTC (naive = UTC): ``utc_text`` with the microseconds
    kept when there are any, where an instant must read back exactly (query windows, expiries)."""
    return as_utc(t).isoformat().replace("+00:00", "Z")


# --- floor -------------------------------------------------------------------------------------


def floor_seconds(t: float, w: float, slack: float = 0.0) -> float:
    """The start of the ``w``-second window holding Unix time ``t`` (windows counted from the
    epoch). ``slack`` (in windows) lets a ``t`` a float error short of a boundary count as on it
    (the Prometheus step grid uses ``1e-9``); the attribution windows use none."""
    return math.floor(t / w + slack) * w


def ceil_seconds(t: float, w: float, slack: float = 0.0) -> float:
    """The first ``w``-second boundary at or after ``t`` (``slack`` as in ``floor_seconds``)."""
    return math.ceil(t / w - slack) * w


def floor_to(t: datetime, step: timedelta) -> datetime:
    """``t`` (naive = UTC) floored to a whole ``step`` counted from the epoch, in UTC."""
    return EPOCH + ((as_utc(t) - EPOCH) // step) * step


def floor_hour(t: datetime) -> datetime:
    """The start of ``t``'s UTC hour (naive = UTC)."""
    return as_utc(t).replace(minute=0, second=0, microsecond=0)


def floor_day(t: datetime) -> datetime:
    """The start of ``t``'s UTC day (naive = UTC)."""
    return as_utc(t).replace(hour=0, minute=0, second=0, microsecond=0)


# --- calendar ----------------------------------------------------------------------------------


def day_start(day: date) -> datetime:
    """Midnight UTC of a ``date``, or of a datetime's UTC day."""
    if isinstance(day, datetime):
        return floor_day(day)
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def day_bounds(day: date) -> tuple[datetime, datetime]:
    """The UTC day ``[start, end)`` of a ``date`` or of a datetime."""
    start = day_start(day)
    return start, start + DAY


def month_start(t: date) -> datetime:
    """Midnight UTC on the first day of the month holding ``t`` (a date, or a datetime's UTC month)."""
    if isinstance(t, datetime):
        t = as_utc(t)
    return datetime(t.year, t.month, 1, tzinfo=UTC)


def next_month(t: date) -> datetime:
    """The start of the month after the one holding ``t`` (December → January of the next year)."""
    start = month_start(t)
    return datetime(start.year + start.month // 12, start.month % 12 + 1, 1, tzinfo=UTC)


def month_bounds(t: date) -> tuple[datetime, datetime]:
    """The UTC calendar month holding ``t`` as ``[first day 00:00, next month's first day 00:00)``."""
    return month_start(t), next_month(t)
