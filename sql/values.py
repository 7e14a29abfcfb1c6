"""Warehouse values as Python wants them: aware UTC times, and JSON-ready values the same way for
every report, export and dashboard."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any


def as_utc(value: datetime) -> datetime:
    """ClickHouse DateTime64(…, 'UTC') values as aware UTC datetimes (a naive value, as the client
    may return it, is taken as UTC)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def plain(value: Any) -> Any:
    """Times as ``YYYY-MM-DDTHH:mm:ssZ`` (UTC), dates ISO, decimals as floats, arrays as lists."""
    if isinstance(value, datetime):
        return as_utc(value).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    return value
