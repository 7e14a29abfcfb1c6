"""Warehouse values made JSON-ready, the same way for every report, export and dashboard."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any


def plain(value: Any) -> Any:
    """Times as ``YYYY-MM-DDTHH:mm:ssZ`` (UTC), dates ISO, decimals as floats, arrays as lists."""
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    return value
