"""Scraping exporters' ``/metrics`` directly (dcgm-exporter, node_exporter), the way Prometheus does.

Each poll GETs every URL once; the sample time of lines without a timestamp is the moment the
request was sent (milliseconds, UTC), like a Prometheus scrape. The node is whatever the series'
labels say (``Hostname``/``hostname``/…); the ``node`` given, else the URL's host name, is only
the fallback for series that carry none.

One exporter down out of several is a warning on that poll (the others are still read); all of
them down is ``SourceUnavailable``. An exporter that answers something that is not its format
counts as down, with the parser's reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from urllib.parse import urlparse

import requests

from pipelines.collectors.base import Batch
from pipelines.errors import SourceUnavailable
from pipelines.parsers.base import NotThisFormat, ParseResult
from pipelines.times import from_epoch

ACCEPT = "text/plain;version=0.0.4;q=1,*/*;q=0.1"  # the classic text exposition, not OpenMetrics
ParseScrape = Callable[[bytes, datetime, str | None, str], ParseResult]  # body, time, node hint, origin


def scrape_time(seconds: float) -> datetime:
    """A wall-clock reading as a scrape timestamp: UTC, truncated to whole milliseconds."""
    return from_epoch(int(seconds * 1000) / 1000.0)


def url_host(url: str) -> str | None:
    return urlparse(url).hostname or None


class ExporterScrape:
    """A collector that scrapes one or more exporter endpoints per poll."""

    def __init__(
        self,
        *,
        source: str,
        urls: list[str],
        parse: ParseScrape,
        node: str | None = None,
        timeout_s: float = 10.0,
        clock: Callable[[], float] = time.time,
        session: requests.Session | None = None,
    ) -> None:
        if not urls:
            raise ValueError("at least one exporter URL is needed")
        for url in urls:
            if urlparse(url).scheme not in ("http", "https") or not url_host(url):
                raise ValueError(f"exporter URL must be http(s)://host[:port]/path, got {url!r}")
        self.source = source
        self.urls = list(urls)
        self._parse = parse
        self._node = node
        self._timeout_s = timeout_s
        self._clock = clock
        self._session = session or requests.Session()

    def poll(self) -> Batch:
        result = ParseResult()
        failures: list[str] = []
        for url in self.urls:
            when = scrape_time(self._clock())
            try:
                body = self._get(url)
                result.extend(self._parse(body, when, self._node or url_host(url), url))
            except SourceUnavailable as exc:
                failures.append(str(exc))
            except NotThisFormat as exc:
                failures.append(f"{url} is not {self.source} exporter output: {exc}")
        if len(failures) == len(self.urls):
            more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
            raise SourceUnavailable(failures[0] + more)
        note = f"scraped {len(self.urls) - len(failures)}/{len(self.urls)} exporters"
        return Batch(result, note=note, warnings=failures)

    def _get(self, url: str) -> bytes:
        try:
            response = self._session.get(url, timeout=self._timeout_s, headers={"Accept": ACCEPT})
        except requests.exceptions.RequestException as exc:
            reason = " ".join(str(exc).split())[:200] or type(exc).__name__
            raise SourceUnavailable(f"exporter {url} is unreachable: {reason}") from None
        with response:
            if response.status_code != 200:
                raise SourceUnavailable(f"exporter {url} answered HTTP {response.status_code}")
            return response.content

    def close(self) -> None:
        self._session.close()
