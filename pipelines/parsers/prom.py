"""Prometheus input shared by the metric parsers (dcgm, storage): exposition text and API answers.

Two shapes reach the parsers:

* **Exposition text** (what an exporter's ``/metrics`` serves, or a file of concatenated scrapes)::

      # HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).
      # TYPE DCGM_FI_DEV_GPU_TEMP gauge
      DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-…",Hostname="gpu001"} 41 1762077600000

  One sample per line: ``name[{label="value",…}] value [timestamp_ms]``. Label values escape
  ``\\``, ``\"`` and ``\n``; values are Go floats (``NaN``, ``+Inf``, ``-Inf`` included). The
  reader here is strict: a line that is not a comment, not blank and not exactly that shape is
  returned as a bad line with a reason, never guessed at.

  ``prometheus_client``'s parser (``text_string_to_metric_families``) is not used: it is slower and
  laxer. On one round of 32 dcgm-exporter bodies (5,376 samples; ``python -m bench.prom_parser``,
  best of 9 on the 2-core development machine) it reads 23,800 samples/s, :func:`read_exposition`
  77,500 (135,000 with ``wanted``, as dcgm's line-by-line path calls it) and dcgm's fast path
  (``dcgm.parse_exposition``) 240,000. It accepts lines the format refuses (``m 1 2 3``, fractional
  or NaN timestamps), renames a counter without ``_total`` (``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION``
  becomes ``…_total``) and raises at the first bad line, losing the rest of the scrape where this
  reader dead-letters that one line.

* **HTTP API answers** of ``/api/v1/query_range`` (``resultType: matrix``, ``values: [[t, "v"],…]``)
  and ``/api/v1/query`` (``resultType: vector``, ``value: [t, "v"]``), whole
  (``{"status":"success","data":{…}}``) or just the ``result`` list. Times are Unix seconds.

Both become :class:`Sample` rows (name, labels, value, time or ``None``, raw text). What the
samples mean is each source parser's business. Times are parsed by ``pipelines.times``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from pipelines.parsers.base import NotThisFormat
from pipelines.times import from_epoch_or_none

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?[ \t]+([^ \t]+)(?:[ \t]+(-?\d{1,19}))?[ \t]*$")
_LABEL = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\\n]|\\.)*)"[ \t]*(,|$)')
_FLOAT = re.compile(r"^[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[Ii]nf|NaN|nan)$")
_UNESCAPE = re.compile(r"\\(.)")
_INT = re.compile(r"-?[0-9]{1,18}")
MAX_LINE = 65536  # longer exposition lines are rejected unread (no real exporter writes them)


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float
    time: datetime | None  # None: an exposition line without timestamp
    raw: str


@dataclass
class Reading:
    samples: list[Sample] = field(default_factory=list)
    bad: list[tuple[str, str]] = field(default_factory=list)  # (raw, one-line reason)


def as_text(data: bytes | str) -> str:
    """Decode input bytes (undecodable bytes become U+FFFD) and drop a byte-order mark."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    return text.removeprefix("\ufeff")


def looks_like_json(text: str) -> bool:
    return text.lstrip()[:1] in ("{", "[")


# ------------------------------------------------------------------------------------------
# exposition text
# ------------------------------------------------------------------------------------------
def read_exposition(text: str, wanted: Iterable[str] | None = None) -> Reading:
    """Read exposition text; ``wanted`` (metric names) skips other samples cheaply."""
    names = frozenset(wanted) if wanted is not None else None
    out = Reading()
    for lineno, line in enumerate(text.split("\n"), 1):
        line = line.rstrip("\r")
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if len(stripped) > MAX_LINE:
            out.bad.append((line[:MAX_LINE], f"line {lineno}: line too long"))
            continue
        if names is not None:
            head = re.split(r"[{ \t]", stripped, maxsplit=1)[0]
            if head not in names and _LINE.match(stripped) is not None:
                continue  # a well-formed sample of no interest
        sample, reason = parse_line(stripped)
        if sample is None:
            out.bad.append((line, f"line {lineno}: {reason}"))
        elif names is None or sample.name in names:
            out.samples.append(sample)
    return out


def parse_line(line: str) -> tuple[Sample | None, str]:
    """One exposition sample line, or ``(None, reason)``."""
    m = _LINE.match(line)
    if m is None:
        return None, "malformed exposition line"
    name, body, value_text, ts_text = m.groups()
    labels: dict[str, str] = {}
    if body:
        pos = 0
        while pos < len(body):
            lm = _LABEL.match(body, pos)
            if lm is None or lm.end() == pos:
                return None, "malformed label set"
            key, raw_value, _ = lm.groups()
            if key in labels:
                return None, f"duplicate label {key!r}"
            labels[key] = _UNESCAPE.sub(lambda e: "\n" if e.group(1) == "n" else e.group(1), raw_value)
            pos = lm.end()
    if not _FLOAT.match(value_text):
        return None, f"not a number: {value_text[:40]!r}"
    time = None
    if ts_text is not None:
        time = from_epoch_or_none(int(ts_text) / 1000.0)
        if time is None:
            return None, f"timestamp out of range: {ts_text}"
    return Sample(name, labels, float(value_text), time, line), ""


# ------------------------------------------------------------------------------------------
# HTTP API answers
# ------------------------------------------------------------------------------------------
def read_api_answer(answer: Any) -> Reading:
    """Read a query / query_range answer (text, bytes or already-decoded JSON).

    Raises :class:`NotThisFormat` when the input is JSON of another shape, or text that is not
    JSON and shows no trace of a Prometheus answer. A truncated answer becomes one bad record.
    """
    if isinstance(answer, bytes | str):
        text = as_text(answer)
        try:
            answer = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            if '"resultType"' in text or '"metric"' in text:
                return Reading(bad=[(text, f"invalid JSON in a Prometheus answer: {exc}")])
            raise NotThisFormat(f"not JSON: {exc}") from None
    result = _result_list(answer)
    out = Reading()
    times: dict[float, datetime | None] = {}  # the series of one answer share their timestamps
    for series in result:
        _read_series(series, out, times)
    return out


def _result_list(answer: Any) -> list[Any]:
    if isinstance(answer, list):
        if all(isinstance(s, dict) and "metric" in s for s in answer):
            return answer
        raise NotThisFormat("JSON list is not a Prometheus result list (items need 'metric')")
    if not isinstance(answer, dict):
        raise NotThisFormat("JSON is not a Prometheus API answer")
    if answer.get("status") == "error":
        raise NotThisFormat(f"Prometheus error answer: {answer.get('errorType')}: {answer.get('error')}")
    data = answer.get("data")
    if not isinstance(data, dict) or "result" not in data:
        raise NotThisFormat("JSON object has no data.result: not a Prometheus API answer")
    if data.get("resultType") not in ("matrix", "vector"):
        raise NotThisFormat(f"unsupported resultType {data.get('resultType')!r} (need matrix or vector)")
    result = data["result"]
    if not isinstance(result, list):
        raise NotThisFormat("data.result is not a list")
    return result


def _read_series(series: Any, out: Reading, times: dict[float, datetime | None]) -> None:
    raw_series = _dump(series)
    if not isinstance(series, dict) or not isinstance(series.get("metric"), dict):
        out.bad.append((raw_series, "series without a 'metric' object"))
        return
    metric = series["metric"]
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in metric.items()):
        out.bad.append((raw_series, "series labels must be strings"))
        return
    labels = {k: v for k, v in metric.items() if k != "__name__"}
    name = metric.get("__name__", "")
    points = series.get("values") if "values" in series else [series.get("value")]
    if not isinstance(points, list):
        out.bad.append((raw_series, "series 'values' is not a list"))
        return
    prefix = '{"metric":' + _dump(metric) + ',"value":'
    for point in points:
        raw = prefix + _dump(point) + "}"
        sample, reason = _point(name, labels, point, raw, times)
        if sample is None:
            out.bad.append((raw, reason))
        else:
            out.samples.append(sample)


def _point(
    name: str, labels: dict[str, str], point: Any, raw: str, times: dict[float, datetime | None]
) -> tuple[Sample | None, str]:
    if not (isinstance(point, list) and len(point) == 2):
        return None, 'sample is not a [time, "value"] pair'
    ts, value_text = point
    if isinstance(ts, bool) or not isinstance(ts, int | float) or not isinstance(value_text, str):
        return None, 'sample is not a [time, "value"] pair'
    seconds = float(ts)
    time = times[seconds] if seconds in times else times.setdefault(seconds, from_epoch_or_none(seconds))
    if time is None:
        return None, f"timestamp out of range: {ts!r}"
    if not _FLOAT.match(value_text):
        return None, f"not a number: {value_text[:40]!r}"
    return Sample(name, labels, float(value_text), time, raw), ""


def _dump(obj: Any) -> str:
    try:
        return orjson.dumps(obj).decode()
    except TypeError:
        return repr(obj)


# ------------------------------------------------------------------------------------------
# labels and times
# ------------------------------------------------------------------------------------------
def small_int(text: str) -> int | None:
    """An ASCII decimal integer of at most 18 digits (fits int64), else None."""
    return int(text) if _INT.fullmatch(text) else None


def instance_host(instance: str) -> str:
    """``host:port`` / ``[v6]:port`` / ``host`` → host."""
    if instance.startswith("["):
        return instance[1:].split("]", 1)[0]
    if instance.count(":") == 1:
        return instance.split(":", 1)[0]
    return instance


def host_of(labels: dict[str, str], keys: tuple[str, ...] = ("Hostname", "hostname")) -> str | None:
    """The node a series belongs to: the first non-empty of ``keys``, else ``instance``'s host."""
    for key in keys:
        value = labels.get(key, "").strip()
        if value:
            return value
    instance = labels.get("instance", "").strip()
    return (instance_host(instance) or None) if instance else None


def min_step(times: Iterable[datetime]) -> float | None:
    """Smallest positive gap in seconds between distinct times (the scrape / query step)."""
    ordered = sorted(set(times))
    gaps = [(b - a).total_seconds() for a, b in zip(ordered, ordered[1:], strict=False)]
    positive = [g for g in gaps if g > 0]
    return min(positive) if positive else None
