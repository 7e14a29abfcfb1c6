"""Freshness under a steady paced load: sample acknowledged by Kafka → queryable in ClickHouse.

A poller thread counts ``gpu_samples`` rows per sample time; a round (one scrape of every node)
is queryable when all its GPU rows are. Freshness of a round = the wall time the poller first saw
it complete − the wall time Kafka acknowledged it. The poll interval (0.2 s plus the query) bounds
the resolution from above.
"""

from __future__ import annotations

import math
import threading
import time
from datetime import datetime
from typing import Any

from bench.load import Load, publish_paced
from pipelines.settings import Settings
from pipelines.times import as_utc
from sql.client import get_client

POLL_S = 0.2


class Poller(threading.Thread):
    def __init__(self, settings: Settings, load: Load) -> None:
        super().__init__(daemon=True)
        self._settings = settings
        self._load = load
        self.seen: dict[datetime, float] = {}
        self.stop_at = math.inf
        self.expected = 0
        self._stop_now = threading.Event()

    def run(self) -> None:
        client = get_client(self._settings)
        sql = (
            "SELECT time, count() FROM gpu_samples WHERE time >= {t0:DateTime64(3, 'UTC')} "
            "AND startsWith(node, {prefix:String}) GROUP BY time"
        )
        params = {"t0": self._load.start, "prefix": self._load.node_prefix + "-"}
        try:
            while not self._stop_now.is_set() and time.time() < self.stop_at:
                rows = client.query(sql, parameters=params).result_rows
                now = time.time()
                for t, count in rows:
                    key = as_utc(t)
                    if count >= self._load.samples_per_round and key not in self.seen:
                        self.seen[key] = now
                if self.expected and len(self.seen) >= self.expected:
                    return
                time.sleep(POLL_S)
        finally:
            client.close()

    def halt(self) -> None:
        self._stop_now.set()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    rank = min(max(math.ceil(q / 100 * len(ordered)) - 1, 0), len(ordered) - 1)
    return ordered[rank]


def measure(settings: Settings, load: Load, rate: float, seconds: float, drain_s: float = 60.0) -> dict[str, Any]:
    """Publish at ``rate`` GPU-samples/s for ``seconds`` and report p50/p99 freshness in seconds."""
    poller = Poller(settings, load)
    poller.start()
    acked = publish_paced(settings, load, rate, seconds)
    poller.expected = len(acked)
    poller.stop_at = time.time() + drain_s
    poller.join(timeout=drain_s + 30)
    poller.halt()
    delays = [
        max(poller.seen[load.round_time(i)] - at, 0.0) for i, at in acked.items() if load.round_time(i) in poller.seen
    ]
    missing = len(acked) - len(delays)
    delays += [drain_s] * missing  # never seen in time: counted at the drain limit, never dropped
    gap = load.samples_per_round / rate
    span = max(acked.values()) - min(acked.values()) + gap
    achieved = len(acked) * load.samples_per_round / span
    return {
        "freshness_rate_target": rate,
        "freshness_rate_achieved": round(achieved, 1),
        "freshness_rounds": len(acked),
        "freshness_rounds_missing": missing,
        "freshness_p50_s": round(percentile(delays, 50), 3),
        "freshness_p99_s": round(percentile(delays, 99), 3),
    }
