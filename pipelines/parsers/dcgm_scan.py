"""A Prometheus ``query_range`` (matrix) answer's points read from its bytes without a Python object
per point, for :mod:`pipelines.parsers.dcgm_matrix`.

Every ``"values"`` array is cut out of the bytes; what is left (the labels) is decoded with orjson,
and the points, laid out as two-column CSV, are read by Arrow's CSV reader into two float arrays
on a thread of its own (it releases the GIL) while the text is checked and the labels decoded
and placed. Only points exactly in the form Prometheus writes are taken (``[<JSON number>,
"<float>"]``, no spaces, finite values, times datetime holds); for anything else the scan says
``None`` and the answer is decoded whole with orjson, which says what is wrong.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

import numpy as np

Array = np.ndarray[Any, np.dtype[Any]]
_T = TypeVar("_T")
_MIN_S, _MAX_S = -62135596800.0, 253402300799.0  # what datetime holds (years 1 to 9999)
# a series' points array (after ``{`` or ``,``, so never inside an escaped key) and the characters
# of a point's time and value
_POINTS = b'"values":['
_NUMBER = b"0123456789.eE+-NaIinf"
_SERIES = frozenset({"metric", "values"})
_BEFORE_POINTS = b"{,"
# the CSV: three newlines before each point (``],[`` between two points becomes ``\n\n\n`` in
# place; Arrow skips the empty lines), so a clean answer's points leave exactly this per point once
# the number characters are taken out
_SEP = b"\n\n\n"
_LINE = _SEP + b',""'
# the CSV is read in blocks of this size on the one thread that reads the points (:func:`start_scan`):
# not on Arrow's pool as well, whose threads took the cores from the checks and the labels running
# beside it (measured on two cores: 1 MiB blocks on Arrow's threads, 65 ms of scan and placing; on
# one, 60 ms)
_CSV_BLOCK = 1 << 20
_BRACKET, _COMMA, _OPEN, _DOT, _NEWLINE, _MINUS, _ZERO, _NINE = b"],[.\n-09"


def valid_times(times: Array) -> bool:
    return bool(np.isfinite(times).all() and times.min() >= _MIN_S and times.max() <= _MAX_S)


def scan(answer: bytes) -> tuple[Any, list[Array], list[Array]] | None:
    """A matrix answer as (the answer with every series' points left out, each series' times, each
    series' values): :func:`scan_flat` with the points split per series."""
    scanned = scan_flat(answer)
    if scanned is None:
        return None
    result, times, values, counts = scanned
    ends = np.cumsum(counts)[:-1]
    return result, np.split(times, ends), np.split(values, ends)


def scan_flat(answer: bytes) -> tuple[Any, Array, Array, Array] | None:
    """A matrix answer as (the answer with every series' points left out, the times and values of
    every series end to end, the points per series), with no Python object per point; ``None`` when
    any point is not exactly in the form Prometheus writes (``[<JSON number>,"<float>"]``, no
    spaces), a value is NaN or infinite, or the answer is not a matrix of ``{"metric", "values"}``
    series, and where pyarrow is not installed. Then the answer is decoded with orjson as a whole,
    which says what is wrong."""
    scanning = start_scan(answer)
    if scanning is None:
        return None
    result, points = scanning
    read = points()
    return None if read is None else (result, *read)


def start_scan(answer: bytes) -> tuple[list[Any], Callable[[], tuple[Array, Array, Array] | None]] | None:
    """:func:`scan_flat` in two steps: the series (points left out) at once, and a call that waits for
    their points (times, values, points per series; ``None`` when they are not as Prometheus writes
    them). Arrow reads the points on a thread of its own, without the GIL, while this thread checks
    the text and decodes the labels, and the caller places the series: on two cores the reading
    costs little more than the Python work beside it. ``None`` at once (the points are still waited
    for) when a check fails."""
    try:  # not in a collector-only install (the collect extra): orjson reads the answer there
        import pyarrow  # noqa: F401
    except ImportError:
        return None
    cut = _cut(answer)
    if cut is None:
        return None
    rest, text, starts, closes = cut  # each of the closes must be a "],[" between two points
    chars = np.frombuffer(text, dtype=np.uint8)  # over the bytearray: written in place
    if len(closes) and ((chars[closes + 1] != _COMMA).any() or (chars[closes + 2] != _OPEN).any()):
        return None
    chars[closes] = chars[closes + 1] = chars[closes + 2] = _NEWLINE
    reading = _in_background(lambda: _read_points(text))  # from here on the text is only read
    total = len(starts) + len(closes)
    counts = np.diff(np.searchsorted(closes, np.append(starts, len(chars)))) + 1
    result = _series_of(rest, len(counts))
    if result is None or text.translate(None, _NUMBER) != _LINE * total + _SEP:
        reading.result()
        return None
    if _not_json_time(chars, starts, closes + 3):
        reading.result()
        return None

    def points() -> tuple[Array, Array, Array] | None:
        read = reading.result()
        if read is None:
            return None
        times, values = read
        if len(times) != total or not np.isfinite(values).all() or not valid_times(times):
            return None
        return times, values, counts

    return result, points


def _series_of(rest: bytes, count: int) -> list[Any] | None:
    """The series of the answer without its points: ``count`` ``{"metric", "values": []}`` objects of a
    successful matrix answer, or ``None``."""
    import orjson

    try:
        obj = orjson.loads(rest)
    except orjson.JSONDecodeError:
        return None
    data = obj.get("data") if isinstance(obj, dict) and obj.get("status") == "success" else None
    result = data.get("result") if isinstance(data, dict) and data.get("resultType") == "matrix" else None
    if (
        not isinstance(result, list)
        or len(result) != count
        or not all(isinstance(series, dict) and series.keys() == _SERIES for series in result)
        or any(series["values"] != [] for series in result)
    ):
        return None
    return result


def _read_points(text: bytearray) -> tuple[Array, Array] | None:
    """The times and values of the CSV lines (Arrow's CSV reader); ``None`` when one is not a float."""
    import pyarrow as pa
    from pyarrow import ArrowException, csv

    try:
        table = csv.read_csv(
            pa.BufferReader(pa.py_buffer(text)),
            read_options=csv.ReadOptions(column_names=["t", "v"], block_size=_CSV_BLOCK, use_threads=False),
            convert_options=csv.ConvertOptions(
                column_types={"t": pa.float64(), "v": pa.float64()},
                null_values=[],
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    except ArrowException:
        return None
    if table.column("t").null_count or table.column("v").null_count:
        return None
    return _floats_of(table.column("t")), _floats_of(table.column("v"))


def _in_background(work: Callable[[], _T]) -> Future[_T]:
    """``work()`` on a new thread; its result (or exception) in the future."""
    future: Future[_T] = Future()

    def run() -> None:
        try:
            future.set_result(work())
        except BaseException as exc:  # handed to the caller, raised by future.result()
            future.set_exception(exc)

    threading.Thread(target=run, name="dcgm-scan-points", daemon=True).start()
    return future


def _cut(answer: bytes) -> tuple[bytes, bytearray, Array, Array] | None:
    """(the answer without the points, the points of every series as CSV lines, where each series'
    points start in it, where each ``]`` between two points is in it); ``None`` when a ``"values"``
    array is not one of points or there is none.

    Each series' points are what lies between ``"values":[[`` and the first ``]]`` after it: the
    ``]`` are found in one pass over the bytes, the ``"values"`` from the end of the previous series."""
    chars = np.frombuffer(answer, dtype=np.uint8)
    brackets = np.flatnonzero(chars == _BRACKET)
    pairs = brackets[:-1][np.diff(brackets) == 1].tolist()  # every "]]"
    firsts: list[int] = []  # per series: the "[" opening its points
    ends: list[int] = []  # per series: just after the "]]" closing them
    find, skip, k, n_pairs = answer.find, len(_POINTS) - 1, 0, len(pairs)
    at = find(_POINTS)
    while at >= 0:
        first = at + skip
        k = bisect_left(pairs, first, k)  # the series come in order
        if k == n_pairs or answer[first + 1] != _OPEN or at == 0 or answer[at - 1] not in _BEFORE_POINTS:
            return None
        firsts.append(first)
        ends.append(pairs[k] + 2)
        at = find(_POINTS, ends[-1])
    if not firsts:
        return None
    view = memoryview(answer)
    rest = b"[]".join([answer[s:f] for s, f in zip([0, *ends], firsts, strict=False)] + [answer[ends[-1] :]])
    text = bytearray(_SEP).join([b"", *(view[f + 2 : e - 2] for f, e in zip(firsts, ends, strict=True)), b""])
    low, high = np.array(firsts) + 2, np.array(ends) - 2  # each series' points in the answer
    starts = np.arange(len(_SEP), len(_SEP) * (len(low) + 1), len(_SEP)) + np.cumsum(high - low) - (high - low)
    below = np.searchsorted(brackets, low)
    inner = np.searchsorted(brackets, high) - below  # how many "]" among each series' points
    index = np.repeat(below - (np.cumsum(inner) - inner), inner) + np.arange(int(inner.sum()))
    return rest, text, starts, brackets[index] + np.repeat(starts - low, inner)  # moved to their place in text


def _floats_of(column: Any) -> Array:
    """An Arrow float64 column without nulls as one numpy array, read from its buffers
    (``to_numpy`` of a chunked column imports pandas: a quarter of a second the first time)."""
    parts = [
        np.frombuffer(chunk.buffers()[1], dtype=np.float64, count=len(chunk), offset=chunk.offset * 8)
        for chunk in column.chunks
    ]
    return np.concatenate(parts) if parts else np.empty(0)


def _not_json_time(chars: Array, *lines: Array) -> bool:
    """A point's time (each line ``<time>,"<value>"``, starting at the ``lines`` positions) in a form a
    float reader takes but a JSON number cannot have: +5, .5, -.5, 05, 5., 1.e5 (a value such as "5."
    or "1.e5", which Prometheus never writes, only costs the scan). Vectorised: the characters at
    those positions, and every dot and comma with its neighbour, in whole-text passes (no positions
    of the dots and commas: finding them cost more than all the rest)."""
    starts = np.concatenate(lines)
    starts += chars[starts] == _MINUS
    first = chars[starts]
    if not _digits(first).all() or _digits(chars[starts[first == _ZERO] + 1]).any():
        return True
    # a digit after each dot, before each comma (the text starts and ends with newlines); in two
    # buffers written over (each new array of the text's size costs its page faults)
    shifted = np.subtract(chars, _ZERO)
    other = np.greater(shifted, 9, out=shifted.view(bool))  # not a digit (uint8 wraps below "0")
    bad = np.equal(chars[:-1], _DOT)
    if np.logical_and(bad, other[1:], out=bad).any():
        return True
    np.equal(chars[1:], _COMMA, out=bad)
    return bool(np.logical_and(bad, other[:-1], out=bad).any())


def _digits(chars: Array) -> Array:
    return (chars >= _ZERO) & (chars <= _NINE)
