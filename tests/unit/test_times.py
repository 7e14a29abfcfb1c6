"""``pipelines.times``: every parse, format, floor and calendar bound, table by table.

The expected values are written out by hand from the calendar and the formats' rules (RFC 3339,
ISO 8601, Unix time), not computed with the module's own helpers.
"""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import pytest

from pipelines import times
from pipelines.times import MissingOffset

T = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
PLUS2 = timezone(timedelta(hours=2))
MINUS5 = timezone(timedelta(hours=-5))


# --- parse -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "want"),
    [
        (datetime(2026, 11, 2, 10, 0), T),  # naive = UTC
        (T, T),
        (datetime(2026, 11, 2, 12, 0, tzinfo=PLUS2), T),
        (datetime(2026, 11, 2, 5, 0, tzinfo=MINUS5), T),
        (datetime(2026, 11, 2, 12, 0, tzinfo=PLUS2), datetime(2026, 11, 2, 10, 0, tzinfo=UTC)),
    ],
)
def test_as_utc(value: datetime, want: datetime) -> None:
    got = times.as_utc(value)
    assert got == want and got.tzinfo is UTC


@pytest.mark.parametrize(
    ("seconds", "want"),
    [
        (0, datetime(1970, 1, 1, tzinfo=UTC)),
        (1793613600, T),
        (1793613600.25, T.replace(microsecond=250000)),
        (-86400, datetime(1969, 12, 31, tzinfo=UTC)),
        (253402300799, datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)),
    ],
)
def test_from_epoch(seconds: float, want: datetime) -> None:
    assert times.from_epoch(seconds) == want
    assert times.from_epoch_or_none(seconds) == want
    assert times.time_hint(seconds) == want


@pytest.mark.parametrize("seconds", [math.nan, math.inf, -math.inf, 1e20, -1e20, 253402300800])
def test_epoch_out_of_range_or_not_finite(seconds: float) -> None:
    with pytest.raises(ValueError, match="out of range"):
        times.from_epoch(seconds)
    assert times.from_epoch_or_none(seconds) is None
    with pytest.raises(ValueError, match="time hint out of range"):
        times.time_hint(seconds)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("2026-11-02T10:00:00Z", T),
        ("2026-11-02T10:00:00z", T),
        ("2026-11-02t10:00:00Z", T),
        ("2026-11-02 10:00:00Z", T),
        ("2026-11-02T10:00:00+00:00", T),
        ("2026-11-02T12:00:00+02:00", T),
        ("2026-11-02T05:00:00-05:00", T),
        ("2026-11-02T10:00:00", T),  # naive = UTC
        ("2026-11-02T10:00", T),
        ("  2026-11-02T10:00:00Z\n", T),
        ("2026-11-02", datetime(2026, 11, 2, tzinfo=UTC)),
        ("2026-11-02T10:00:00.5Z", T.replace(microsecond=500000)),
        ("2026-11-02T10:00:00.123Z", T.replace(microsecond=123000)),
        ("2026-11-02T10:00:00.123456789Z", T.replace(microsecond=123456)),  # nanoseconds cut
        ("2026-11-02T00:30:00+01:00", datetime(2026, 11, 1, 23, 30, tzinfo=UTC)),  # the day before in UTC
        ("2024-02-29T00:00:00Z", datetime(2024, 2, 29, tzinfo=UTC)),
    ],
)
def test_parse_iso(text: str, want: datetime) -> None:
    got = times.parse_iso(text)
    assert got == want and got.tzinfo is UTC
    assert times.optional_time(text) == want
    assert times.time_hint(text) == want


@pytest.mark.parametrize(
    "text",
    ["", " ", "yesterday", "2026-13-01T00:00:00Z", "2026-02-29T00:00:00Z", "2026-11-02T25:00:00Z", "1793613600x"],
)
def test_parse_iso_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="bad timestamp"):
        times.parse_iso(text)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("2026-11-02T10:00:00Z", T),
        ("2026-11-02t10:00:00z", T),
        ("2026-11-02 10:00:00Z", T),
        ("2026-11-02T12:00:00+02:00", T),
        ("2026-11-02T10:00:00.250Z", T.replace(microsecond=250000)),
        ("2026-11-02T10:00:00Z ", T),
    ],
)
def test_parse_rfc3339(text: str, want: datetime) -> None:
    got = times.parse_rfc3339(text)
    assert got == want and got.tzinfo is UTC


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        ("2026-11-02T10:00:00", MissingOffset, "without offset"),
        ("2026-11-02 10:00", MissingOffset, "without offset"),
        ("2026-11-02", ValueError, "not an RFC 3339 time"),  # a date alone names no instant
        ("20261102T100000Z", ValueError, "not an RFC 3339 time"),  # ISO 8601 basic format
        (" 2026-11-02T10:00:00Z", ValueError, "not an RFC 3339 time"),
        ("2026-11-02T10:00:00+25:00", ValueError, "not an RFC 3339 time"),
        (1793613600, ValueError, "not an RFC 3339 time"),
        (None, ValueError, "not an RFC 3339 time"),
    ],
)
def test_parse_rfc3339_refuses(value: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        times.parse_rfc3339(value)


@pytest.mark.parametrize(
    ("value", "want"),
    [
        (None, None),
        ("", None),
        (datetime(2026, 11, 2, 10, 0), T),
        (datetime(2026, 11, 2, 12, 0, tzinfo=PLUS2), T),
        ("2026-11-02T10:00:00Z", T),
    ],
)
def test_optional_time(value: object, want: datetime | None) -> None:
    assert times.optional_time(value) == want


@pytest.mark.parametrize(("value", "match"), [(1793613600, "must be a string"), ([], "must be a string"), (" ", "bad")])
def test_optional_time_refuses(value: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        times.optional_time(value)


@pytest.mark.parametrize(
    ("value", "want"),
    [
        (None, None),
        (T, T),
        (datetime(2026, 11, 2, 10, 0), T),
        (1793613600, T),
        (1793613600.5, T.replace(microsecond=500000)),
        ("1793613600", T),
        (" 1793613600.5 ", T.replace(microsecond=500000)),
        ("2026-11-02T10:00:00Z", T),
        ("2026-11-02T10:00:00", T),
    ],
)
def test_time_hint(value: object, want: datetime | None) -> None:
    assert times.time_hint(value) == want


@pytest.mark.parametrize(("value", "match"), [(True, "unsupported"), ([T], "unsupported"), ("soon", "bad timestamp")])
def test_time_hint_refuses(value: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        times.time_hint(value)


def test_parse_day() -> None:
    assert times.parse_day("2026-03-01") == date(2026, 3, 1)
    with pytest.raises(ValueError):
        times.parse_day("2026-02-30")


# --- format ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text", "iso"),
    [
        (T, "2026-11-02T10:00:00Z", "2026-11-02T10:00:00Z"),
        (datetime(2026, 11, 2, 10, 0), "2026-11-02T10:00:00Z", "2026-11-02T10:00:00Z"),  # naive = UTC
        (datetime(2026, 11, 2, 12, 0, tzinfo=PLUS2), "2026-11-02T10:00:00Z", "2026-11-02T10:00:00Z"),
        (T.replace(microsecond=999999), "2026-11-02T10:00:00Z", "2026-11-02T10:00:00.999999Z"),  # cut, not rounded
        (T.replace(microsecond=250000), "2026-11-02T10:00:00Z", "2026-11-02T10:00:00.250000Z"),
    ],
)
def test_format(value: datetime, text: str, iso: str) -> None:
    assert times.utc_text(value) == text
    assert times.utc_iso(value) == iso
    assert times.parse_rfc3339(iso) == times.as_utc(value)  # what utc_iso writes reads back exactly


# --- floor -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("t", "w", "slack", "floor", "ceil"),
    [
        (125.0, 60, 0.0, 120, 180),
        (120.0, 60, 0.0, 120, 120),
        (-1.0, 60, 0.0, -60, 0),
        (0.0, 60, 0.0, 0, 0),
        (1793613659.999, 60, 0.0, 1793613600, 1793613660),
        (299.99999999999994, 60, 0.0, 240, 300),  # a float error short of 300: the plain floor
        (299.99999999999994, 60, 1e-9, 300, 300),  # with slack it counts as on the boundary
        (300.00000000000006, 60, 1e-9, 300, 300),
    ],
)
def test_floor_and_ceil_seconds(t: float, w: int, slack: float, floor: float, ceil: float) -> None:
    assert times.floor_seconds(t, w, slack) == floor
    assert times.ceil_seconds(t, w, slack) == ceil


@pytest.mark.parametrize(
    ("t", "hour", "day"),
    [
        (datetime(2026, 11, 2, 10, 59, 59, 999999, tzinfo=UTC), T, datetime(2026, 11, 2, tzinfo=UTC)),
        (datetime(2026, 11, 2, 10, 30), T, datetime(2026, 11, 2, tzinfo=UTC)),  # naive = UTC
        (
            datetime(2026, 11, 2, 0, 30, tzinfo=PLUS2),  # 22:30 UTC the day before
            datetime(2026, 11, 1, 22, 0, tzinfo=UTC),
            datetime(2026, 11, 1, tzinfo=UTC),
        ),
        (
            datetime(2026, 11, 2, 5, 45, tzinfo=timezone(timedelta(minutes=330))),  # 00:15 UTC
            datetime(2026, 11, 2, 0, tzinfo=UTC),
            datetime(2026, 11, 2, tzinfo=UTC),
        ),
    ],
)
def test_floor_hour_and_day(t: datetime, hour: datetime, day: datetime) -> None:
    assert times.floor_hour(t) == hour and times.floor_hour(t).tzinfo is UTC
    assert times.floor_to(t, timedelta(hours=1)) == hour
    assert times.floor_day(t) == day
    assert times.floor_to(t, timedelta(days=1)) == day


@pytest.mark.parametrize(
    ("step", "want"),
    [
        (timedelta(minutes=15), datetime(2026, 11, 2, 10, 30, tzinfo=UTC)),
        (timedelta(weeks=1), datetime(2026, 10, 29, tzinfo=UTC)),  # weeks counted from the epoch, a Thursday
        (timedelta(seconds=1), datetime(2026, 11, 2, 10, 44, 59, tzinfo=UTC)),
    ],
)
def test_floor_to(step: timedelta, want: datetime) -> None:
    assert times.floor_to(datetime(2026, 11, 2, 10, 44, 59, 500000, tzinfo=UTC), step) == want


# --- calendar ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("t", "start", "end"),
    [
        (date(2026, 3, 15), datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 4, 1, tzinfo=UTC)),
        (date(2026, 1, 31), datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 2, 1, tzinfo=UTC)),
        (date(2026, 12, 31), datetime(2026, 12, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC)),  # December
        (date(2026, 2, 1), datetime(2026, 2, 1, tzinfo=UTC), datetime(2026, 3, 1, tzinfo=UTC)),  # 28 days
        (date(2024, 2, 29), datetime(2024, 2, 1, tzinfo=UTC), datetime(2024, 3, 1, tzinfo=UTC)),  # leap year
        (date(2000, 2, 10), datetime(2000, 2, 1, tzinfo=UTC), datetime(2000, 3, 1, tzinfo=UTC)),
        (date(9999, 11, 30), datetime(9999, 11, 1, tzinfo=UTC), datetime(9999, 12, 1, tzinfo=UTC)),
        (
            datetime(2026, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
            datetime(2026, 12, 1, tzinfo=UTC),
            datetime(2027, 1, 1, tzinfo=UTC),
        ),
        (datetime(2026, 3, 1, 0, 0), datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 4, 1, tzinfo=UTC)),  # naive
        (
            datetime(2026, 3, 1, 0, 30, tzinfo=PLUS2),  # still February in UTC
            datetime(2026, 2, 1, tzinfo=UTC),
            datetime(2026, 3, 1, tzinfo=UTC),
        ),
    ],
)
def test_month_bounds(t: date, start: datetime, end: datetime) -> None:
    assert times.month_bounds(t) == (start, end)
    assert times.month_start(t) == start and times.next_month(t) == end


def test_month_lengths_over_a_leap_cycle() -> None:
    lengths = {2024: 29, 2025: 28, 2100: 28, 2000: 29}
    for year, february in lengths.items():
        start, end = times.month_bounds(date(year, 2, 1))
        assert (end - start).days == february
    days = [(lambda b: (b[1] - b[0]).days)(times.month_bounds(date(2026, m, 1))) for m in range(1, 13)]
    assert days == [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]


@pytest.mark.parametrize(
    ("day", "start", "end"),
    [
        (date(2026, 3, 1), datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 3, 2, tzinfo=UTC)),
        (date(2024, 2, 28), datetime(2024, 2, 28, tzinfo=UTC), datetime(2024, 2, 29, tzinfo=UTC)),
        (date(2026, 12, 31), datetime(2026, 12, 31, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC)),
        (
            datetime(2026, 3, 1, 0, 30, tzinfo=PLUS2),
            datetime(2026, 2, 28, tzinfo=UTC),
            datetime(2026, 3, 1, tzinfo=UTC),
        ),
    ],
)
def test_day_bounds(day: date, start: datetime, end: datetime) -> None:
    assert times.day_bounds(day) == (start, end)
    assert times.day_start(day) == start
