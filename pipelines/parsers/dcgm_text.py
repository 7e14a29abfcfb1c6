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

from pipelines.events import event_id
from pipelines.gpu_columns import INTS, GpuColumns, build_event
from pipelines.parsers.base import ParseResult
from pipelines.parsers.dcgm_matrix import META, Array, Layout, floats, order_key
from pipelines.parsers.prom import MAX_LINE
from pipelines.times import from_epoch

_LABELS = r'(?:\{(?:[a-zA-Z_][a-zA-Z0-9_]*="[^"\\\n]*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="[^"\\\n]*")*,?)?\})?'
_LINE = r"[a-zA-Z_:][a-zA-Z0-9_:]*" + _LABELS + r" [^ \t\n]+(?: -?\d{1,19})?"
# the whole text in one match (linear: no search from every position): blank, comment or sample lines
_PLAIN = re.compile(r"(?:(?:#[^\n]*|" + _LINE + r")?\n)*(?:#[^\n]*|" + _LINE + r")?")
# the sample lines of DCGM metrics, found by their literal prefix (the text is given a leading newline)
_DCGM = re.compile(r"\n(DCGM_FI_[a-zA-Z0-9_:]*)(" + _LABELS + r") ([^ \t\n]+)(?: (-?\d{1,19}))?(?=\n|\Z)")
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
    blank: Callable[[str, Array], Array],
    convert: Callable[[str, float], tuple[Any, str | None]],
) -> ParseResult | None:
    """Events of clean exposition text, or ``None`` (let the line-by-line reader read it)."""
    if "\r" in text or (len(text) > MAX_LINE and max(map(len, text.split("\n"))) > MAX_LINE):
        return None
    if _PLAIN.fullmatch(text) is None:
        return None  # a line in another form (spaces, escapes, a malformed line): the slow path says why
    matches = _DCGM.findall("\n" + text)
    series: dict[tuple[str, str], tuple[list[str], list[str]]] = {}
    for name, labels, value, ts in matches:
        if name in fields:
            times, values = series.setdefault((name, labels), ([], []))
            times.append(ts)
            values.append(value)
    stamped = [bool(ts) for times, _ in series.values() for ts in times]
    if not stamped or (not all(stamped) and (any(stamped) or scrape_time is None)):
        return None
    if scrape_time is not None and not stamped[0]:  # one scrape: few points, plain Python is quicker than numpy
        return _one_scrape(series, scrape_time, cluster, node, interval_s, fields, describe, convert)
    layout = Layout(node, fields, describe, blank)
    parsed: dict[str, tuple[tuple[str, str], ...] | None] = {}
    for (name, labels), (times, values) in series.items():
        pairs = parsed.get(labels, ())
        if pairs == ():
            pairs = parsed[labels] = _pairs(labels)
        seconds = [int(t) / 1000.0 for t in times] if times[0] else [0.0] * len(times)
        if pairs is None or not layout.place(name, pairs, seconds, values):
            return None
    return layout.result(cluster, interval_s, from_epoch)  # in range: checked before


def _one_scrape(
    series: dict[tuple[str, str], tuple[list[str], list[str]]],
    when: datetime,
    cluster: str,
    hint: str | None,
    interval_s: float | None,
    fields: dict[str, tuple[str, str]],
    describe: Callable[[dict[str, str], str | None], Any],
    convert: Callable[[str, float], tuple[Any, str | None]],
) -> ParseResult | None:
    """The GPUs of lines without timestamps, all at ``when``: one event per node."""
    if not floats([v for _, values in series.values() for v in values]):
        return None
    infos: dict[str, Any] = {}
    nodes: dict[str, dict[tuple[str, int | None], tuple[Any, dict[str, Any]]]] = {}
    for (name, labels), (_, values) in series.items():
        info = infos.get(labels)
        if info is None:
            pairs = _pairs(labels)
            info = infos[labels] = describe(dict(pairs), hint) if pairs is not None else "repeated label"
        if isinstance(info, str):
            return None
        gpus = nodes.setdefault(info.host, {})
        described, cell = gpus.setdefault((info.uuid, info.gi), (info, {}))
        if described is not info:
            return None  # two label sets for one device (shared, or relabelled): the slow path merges
        key, kind = fields[name]
        for text in values:
            value, reason = convert(kind, float(text))
            if reason or (key == "xid" and value is not None and value > INTS["xid"]):
                return None
            if value is not None and cell.get(key) is None:
                cell[key] = value
    result = ParseResult()
    for host in sorted(nodes):
        gpus = nodes[host]
        ordered = sorted(gpus, key=lambda k: order_key(gpus[k][0].meta, k))
        columns: dict[str, list[Any]] = {"uuid": [k[0] for k in ordered], "mig_instance": [k[1] for k in ordered]}
        for name in META:
            columns[name] = [gpus[k][0].meta[name] for k in ordered]
        for key in dict.fromkeys(key for _, cell in gpus.values() for key in cell):
            columns[key] = [gpus[k][1].get(key) for k in ordered]
        data = GpuColumns(host, interval_s, columns)
        result.events.append(build_event(event_id("gpu.sample", cluster, host, when), "dcgm", when, cluster, data))
    return result


def _pairs(labels: str) -> tuple[tuple[str, str], ...] | None:
    """A label set ``{k="v",…}`` as sorted pairs; None when a label repeats."""
    pairs = _PAIR.findall(labels)
    if len({k for k, _ in pairs}) != len(pairs):
        return None
    return tuple(sorted(pairs))
