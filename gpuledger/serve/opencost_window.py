"""OpenCost's query words, parsed as OpenCost parses them (``core/pkg/opencost/window.go``), in UTC:
``window`` (``today``, ``yesterday``, ``week``, ``lastweek``, ``month``, ``lastmonth``, ``30m``,
``24h``, ``7d``, ``2w``, ``<start>,<end>`` as RFC3339 or unix seconds), ``step`` durations,
booleans, and ``aggregate`` properties mapped to gpuledger's report dimensions."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from gpuledger.reports import DIMENSIONS, BadRequest
from pipelines.times import as_utc, floor_day, floor_to, from_epoch, month_start, parse_rfc3339

_DURATION = re.compile(r"^(\d+)([mhdw])$")
_UNIX_PAIR = re.compile(r"^(\d+)[,-](\d+)$")
_RFC3339 = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})"
_RFC_PAIR = re.compile(rf"^({_RFC3339}),({_RFC3339})$")
UNITS = {"m": timedelta(minutes=1), "h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}
# OpenCost's property names (and gpuledger's own) -> report dimension
PROPERTIES = {
    "namespace": "namespace",
    "cluster": "cluster",
    "node": "node",
    "team": "team",
    "model": "model",
    "business_unit": "business_unit",
    "businessunit": "business_unit",
    "department": "business_unit",
    "job": "job",
    "pod": "job",
    "account": "account",
    "user": "user",
    "queue": "queue",
    "gpu_model": "gpu_model",
    "workload_kind": "workload_kind",
    "controllerkind": "workload_kind",
}


def window(text: str, now: datetime) -> tuple[datetime, datetime]:
    """[start, end) of an OpenCost window; a window reaching past ``now`` ends at ``now``."""
    word = text.strip().lower()
    now = as_utc(now)
    today = floor_day(now)
    sunday = today - timedelta(days=(today.weekday() + 1) % 7)
    first = month_start(today)
    words = {
        "today": (today, today + timedelta(days=1)),
        "yesterday": (today - timedelta(days=1), today),
        "week": (sunday, now),
        "lastweek": (sunday - timedelta(days=7), sunday),
        "month": (first, now),
        "lastmonth": (month_start(first - timedelta(days=1)), first),
    }
    if word in words:
        start, end = words[word]
    elif match := _DURATION.match(word):
        n, unit = int(match.group(1)), match.group(2)
        if unit == "w":
            end = today + timedelta(days=1)
            start = floor_day(now - n * UNITS["w"]) + timedelta(days=1)
        else:
            end = floor_to(now, UNITS[unit]) + UNITS[unit]
            start = end - n * UNITS[unit]
    elif match := _UNIX_PAIR.match(word):
        start, end = (from_epoch(int(match.group(i))) for i in (1, 2))
    elif match := _RFC_PAIR.match(text.strip()):
        start, end = (parse_rfc3339(match.group(i)) for i in (1, 2))
    else:
        raise BadRequest(
            f"illegal window: {text!r} (today, yesterday, week, lastweek, month, lastmonth, a duration such as "
            "30m, 24h, 7d or 2w, or <start>,<end> as RFC3339 or unix seconds)"
        )
    end = min(end, now)
    if end <= start:
        raise BadRequest(f"window {text!r} is empty or in the future")
    return start, end


def step(text: str | None, span: timedelta) -> timedelta:
    """A set's duration (``1h``, ``1d``, ``1w``); the whole window when not given."""
    if text is None or not text.strip():
        return span
    match = _DURATION.match(text.strip().lower())
    if not match or int(match.group(1)) == 0:
        raise BadRequest(f"illegal step: {text!r} (a duration such as 1h, 1d or 1w)")
    return int(match.group(1)) * UNITS[match.group(2)]


def boolean(name: str, text: str | None, default: bool) -> bool:
    if text is None or text == "":
        return default
    value = text.strip().lower()
    if value in ("true", "1", "t", "yes"):
        return True
    if value in ("false", "0", "f", "no"):
        return False
    raise BadRequest(f"illegal {name}: {text!r} (true or false)")


def aggregate(text: str | None) -> list[str]:
    """Report dimensions of ``aggregate`` (``namespace``, ``team,model``, ``label:<key>``: the
    attempt's pod label ``<key>``, as its allocation events carried it)."""
    items = [a.strip() for a in (text or "job").split(",") if a.strip()]
    out: list[str] = []
    for item in items:
        if item.lower().startswith("label:"):
            key = item.split(":", 1)[1].strip()
            if not key:
                raise BadRequest(f"illegal aggregate: {item!r} (label:<key>)")
            dim = f"label:{key}"
        else:
            found = PROPERTIES.get(item.lower().replace("-", "_"), item if item in DIMENSIONS else None)
            if found is None:
                raise BadRequest(
                    f"illegal aggregate: {item!r} (one or several of {', '.join(sorted(PROPERTIES))}, or label:<key>)"
                )
            dim = found
        if dim not in out:
            out.append(dim)
    return out
