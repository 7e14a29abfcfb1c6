"""Series from a Prometheus server over time, window by window (``/api/v1/query_range``).

Shared by the dcgm and storage collectors. One query per window selects every metric the
source's parser reads — ``{__name__=~"A|B|…", <extra matchers>}`` — with ``step`` = the scrape
interval, through ``prometheus-api-client``'s ``PrometheusConnect.custom_query_range``.

Which evaluation times are asked for (:class:`RangeCursor`, pure):

* Times are multiples of the step (Unix-epoch aligned), so two polls that cover the same time ask
  for the same instants and produce the same event ids; the cursor never asks for a time twice.
* A window holds at most ``max_points`` steps (Prometheus refuses more than 11,000 points per
  series; smaller windows also keep answers small). A long range is read in several polls.
* Nothing later than ``now − lag`` is asked for: the value at instant *t* is final only once
  every scrape stamped before *t* has been written, which takes up to a scrape timeout (≤ the
  step). The default lag is two steps.
* Without a start, reading begins ``backfill`` (default one step) before ``now − lag``; without an
  end it never finishes (follow mode keeps polling).

Prometheus answers instant *t* with the latest sample at or before *t* within its lookback
(5 min). When a target stops answering, Prometheus writes staleness markers, so the series
disappears at once rather than repeating its last value: a dead exporter leaves a gap
(unobserved time), not invented samples. Only an outage of Prometheus itself repeats values for
up to the lookback.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import requests
from urllib3.util.retry import Retry

from pipelines.collectors.base import Batch
from pipelines.errors import SourceUnavailable
from pipelines.parsers.base import ParseResult
from pipelines.times import ceil_seconds, floor_seconds, from_epoch, utc_iso

MAX_POINTS = 11_000  # Prometheus' own limit per series and query


@dataclass(frozen=True)
class Window:
    start: datetime  # first evaluation instant (inclusive)
    end: datetime  # last evaluation instant (inclusive)

    def __str__(self) -> str:
        return f"{utc_iso(self.start)}..{utc_iso(self.end)}"


class RangeCursor:
    """Which step-aligned evaluation instants to read next (see the module docstring)."""

    def __init__(
        self,
        *,
        step_s: int,
        start: datetime | None = None,
        end: datetime | None = None,
        lag_s: float | None = None,
        max_points: int = 360,
        backfill_s: float | None = None,
    ) -> None:
        if isinstance(step_s, bool) or not isinstance(step_s, int) or step_s < 1:
            raise ValueError(f"the query step must be a whole number of seconds ≥ 1, got {step_s!r}")
        if not 1 <= max_points <= MAX_POINTS:
            raise ValueError(f"max_points must be within 1..{MAX_POINTS}, got {max_points}")
        if start is not None and end is not None and end < start:
            raise ValueError("the range ends before it starts")
        self.step_s = step_s
        self.lag_s = 2.0 * step_s if lag_s is None else float(lag_s)
        self.max_points = max_points
        self.backfill_s = float(step_s) if backfill_s is None else float(backfill_s)
        self._end = None if end is None else self._down(end.timestamp())
        self._cursor: float | None = None if start is None else self._up(start.timestamp())

    def _up(self, t: float) -> float:
        return ceil_seconds(t, self.step_s, slack=1e-9)

    def _down(self, t: float) -> float:
        return floor_seconds(t, self.step_s, slack=1e-9)

    def _limit(self, now: float) -> float:
        settled = self._down(now - self.lag_s)
        return settled if self._end is None else min(settled, self._end)

    def next_window(self, now: float) -> Window | None:
        """The next window to read at wall time ``now``, or None when nothing new has settled."""
        if self._cursor is None:
            self._cursor = self._up(now - self.lag_s - self.backfill_s)
        limit = self._limit(now)
        if self._cursor > limit:
            return None
        last = min(limit, self._cursor + (self.max_points - 1) * self.step_s)
        return Window(from_epoch(self._cursor), from_epoch(last))

    def advance(self, window: Window) -> None:
        """Mark ``window`` as read (call only after a successful read)."""
        self._cursor = window.end.timestamp() + self.step_s

    def more(self, now: float) -> bool:
        return self._cursor is not None and self._cursor <= self._limit(now)

    def finished(self) -> bool:
        return self._end is not None and self._cursor is not None and self._cursor > self._end


def selector(metrics: Iterable[str], match: str | None = None) -> str:
    """``{__name__=~"A|B", <match>}``: every metric of interest in one query."""
    names = "|".join(re.escape(m) for m in sorted(set(metrics)))
    extra = (match or "").strip().strip("{}").strip().strip(",")
    return "{" + f'__name__=~"{names}"' + (f", {extra}" if extra else "") + "}"


ParseAnswer = Callable[[list[Any], Window], ParseResult]


class PrometheusRange:
    """A collector reading one query over a :class:`RangeCursor`'s windows."""

    def __init__(
        self,
        *,
        source: str,
        url: str,
        query: str,
        cursor: RangeCursor,
        parse: ParseAnswer,
        timeout_s: float = 30.0,
        client: Any = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.source = source
        self.url = url.rstrip("/")
        self.query = query
        self.cursor = cursor
        self._parse = parse
        self._timeout_s = timeout_s
        self._clock = clock
        self._client = client if client is not None else connect(self.url, timeout_s)

    def poll(self) -> Batch:
        now = self._clock()
        window = self.cursor.next_window(now)
        if window is None:
            return Batch(final=self.cursor.finished(), note="nothing new has settled yet")
        answer = self._fetch(window)
        result = self._parse(answer, window)
        self.cursor.advance(window)
        return Batch(result, more=self.cursor.more(now), final=self.cursor.finished(), note=str(window))

    def _fetch(self, window: Window) -> list[Any]:
        from prometheus_api_client import PrometheusApiClientException

        try:
            answer = self._client.custom_query_range(
                self.query, start_time=window.start, end_time=window.end, step=str(self.cursor.step_s)
            )
        except requests.exceptions.JSONDecodeError as exc:
            raise SourceUnavailable(f"{self.url} did not answer like a Prometheus API: {_short(exc)}") from None
        except requests.exceptions.RequestException as exc:
            raise SourceUnavailable(f"Prometheus at {self.url} is unreachable: {_short(exc)}") from None
        except PrometheusApiClientException as exc:
            raise _api_error(self.url, self.query, str(exc)) from None
        except (ValueError, KeyError, TypeError) as exc:  # not JSON, or JSON without data.result
            raise SourceUnavailable(f"{self.url} did not answer like a Prometheus API: {_short(exc)}") from None
        if not isinstance(answer, list):
            raise SourceUnavailable(f"{self.url} answered query_range without a result list")
        return answer

    def close(self) -> None:
        close = getattr(self._client, "close", None)
        if callable(close):
            close()


def range_collector(
    url: str,
    *,
    source: str,
    metrics: Iterable[str],
    parse: Callable[[list[Any], str], ParseResult],
    step_s: int = 30,
    start: datetime | None = None,
    end: datetime | None = None,
    lag_s: float | None = None,
    match: str | None = None,
    max_points: int = 360,
    backfill_s: float | None = None,
    timeout_s: float = 30.0,
    client: Any = None,
    clock: Callable[[], float] = time.time,
) -> PrometheusRange:
    """One ``query_range`` over ``metrics``, window by window; ``parse(answer, origin)`` makes the events."""
    cursor = RangeCursor(step_s=step_s, start=start, end=end, lag_s=lag_s, max_points=max_points, backfill_s=backfill_s)
    origin = url.rstrip("/") + "/api/v1/query_range"

    def parse_window(answer: list[Any], window: Window) -> ParseResult:
        return parse(answer, f"{origin} {window}")

    return PrometheusRange(
        source=source,
        url=url,
        query=selector(metrics, match),
        cursor=cursor,
        parse=parse_window,
        timeout_s=timeout_s,
        client=client,
        clock=clock,
    )


def connect(url: str, timeout_s: float = 30.0) -> Any:
    """A ``PrometheusConnect`` that fails fast: two quick retries instead of the library's three
    with second-long back-offs, only on connection errors and gateway/overload answers."""
    from prometheus_api_client import PrometheusConnect

    retry = Retry(
        total=2, connect=2, read=0, backoff_factor=0.2, status_forcelist=[429, 502, 503, 504], raise_on_status=False
    )
    return PrometheusConnect(url=url, retry=retry, timeout=timeout_s)


def _api_error(url: str, query: str, message: str) -> Exception:
    """A 4xx answer is a bad query (not retryable); anything else means Prometheus is unwell."""
    match = re.search(r"HTTP Status Code (\d{3})", message)
    status = int(match.group(1)) if match else 0
    detail = _short(message.replace("\\n", " "))
    if 400 <= status < 500 and status != 429:
        return ValueError(f"Prometheus at {url} rejected the query {query}: {detail}")
    return SourceUnavailable(f"Prometheus at {url} failed: {detail}")


def _short(exc: object, limit: int = 240) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"
