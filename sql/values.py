"""Warehouse values JSON-ready the same way for every report, export and dashboard (a ClickHouse
time, naive or aware, is read with ``pipelines.times.as_utc``)."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from typing import Any

from pipelines.times import utc_text


def plain(value: Any) -> Any:
    """Times as ``YYYY-MM-DDTHH:mm:ssZ`` (UTC), dates ISO, decimals as floats, arrays as lists."""
    if isinstance(value, datetime):
        return utc_text(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    return value
