"""The fast path of :func:`pipelines.parsers.dcgm.parse_exposition`: clean exposition text → columns.

The whole text is matched by regular expressions at once (no per-line Python parsing); the lines
of the metrics gpuledger reads are grouped per (metric, label set) into series and laid out by
:class:`pipelines.parsers.dcgm_matrix.Layout`, the same columns the ``query_range`` path builds.

Only text in the plain form exporters write is taken: every line blank, a ``#`` comment, or
``name{key="value",…} value [timestamp]`` with single spaces, label values without quotes,
backslashes or escapes, no repeated label, and either every read line with a timestamp or none
(then ``scrape_time`` stamps them). Anything else returns ``None`` and the line-by-line reader
runs, which dead-letters exactly what is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from pipelines.parsers.base import ParseResult
from pipelines.parsers.dcgm_matrix import Layout, unix_stamp
from pipelines.parsers.prom import MAX_LINE

_LABELS = r'(?:\{(?:[a-zA-Z_][a-zA-Z0-9_]*="[^"\\\n]*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="[^"\\\n]*")*,?)?\})?'
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(" + _LABELS + r") ([^ \t\n]+)(?: (-?\d{1,19}))?$", re.M)
_CONTENT = re.compile(r"^[^#\n]", re.M)  # lines that are neither blank nor comments (start included)
_PAIR = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"\\\n]*)"')


def read(
    text: str,
    *,
    cluster: str,
    scrape_time: datetime | None,
    node: str | None,
    interval_s: float | None,
    fields: dict[str, tuple[str, str]],
    describe: Callable[[dict[str, str], str | None], Any],
    blank: Callable[[str, float], bool],
) -> ParseResult | None:
    """Events of clean exposition text, or ``None`` (let the line-by-line reader read it)."""
    if "\r" in text or (len(text) > MAX_LINE and max(map(len, text.split("\n"))) > MAX_LINE):
        return None
    matches = _SAMPLE.findall(text)
    if len(matches) != len(_CONTENT.findall(text)):
        return None  # a line in another form (spaces, escapes, a malformed line): the slow path says why
    series: dict[tuple[str, str], tuple[list[str], list[str]]] = {}
    for name, labels, value, ts in matches:
        if name in fields:
            times, values = series.setdefault((name, labels), ([], []))
            times.append(ts)
            values.append(value)
    stamped = [bool(ts) for times, _ in series.values() for ts in times]
    if not stamped or (not all(stamped) and (any(stamped) or scrape_time is None)):
        return None
    layout = Layout(node, fields, describe, blank)
    parsed: dict[str, tuple[tuple[str, str], ...] | None] = {}
    for (name, labels), (times, values) in series.items():
        pairs = parsed.get(labels, ())
        if pairs == ():
            pairs = parsed[labels] = _pairs(labels)
        seconds = [int(t) / 1000.0 for t in times] if times[0] else [0.0] * len(times)
        if pairs is None or not layout.place(name, pairs, seconds, values):
            return None
    if scrape_time is not None and not stamped[0]:
        when = scrape_time
        return layout.result(cluster, interval_s, lambda _: when)
    return layout.result(cluster, interval_s, unix_stamp)


def _pairs(labels: str) -> tuple[tuple[str, str], ...] | None:
    """A label set ``{k="v",…}`` as sorted pairs; None when a label repeats."""
    pairs = _PAIR.findall(labels)
    if len({k for k, _ in pairs}) != len(pairs):
        return None
    return tuple(sorted(pairs))
