"""The stream workers' warehouse I/O: raw rows in, inputs for attribution out, facts in.

Flush order of the raw sink, and what each step's failure does:

1. **dedupe the batch** by event id (a redelivered message within one batch counts once);
2. **insert** raw rows, dead letters and ``node_activity`` (clickhouse-connect, retried with
   back-off on connection errors); a failure here raises, the batch is not acknowledged, and
   Kafka redelivers it — the tables are ReplacingMergeTree on the event id, so a partly
   written batch written again converges to the same rows;
3. **commit offsets** — Faust acknowledges the events only after step 2 returned.

Facts are written the same way: insert facts, then ``fact_windows``, then the progress row; a
crash in between leaves progress behind, so the range is simply computed and written again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import OperationalError

from pipelines.events import AllocationData
from pipelines.settings import Settings
from sql import load_query
from sql.client import get_client
from streams.attribution.attempts import AttemptFact, Checkpoint
from streams.attribution.compute import SampleRow

log = logging.getLogger(__name__)
RETRIES = 6


def now_seq() -> int:
    return time.time_ns()


class Warehouse:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._client: Client | None = None

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = get_client(self._settings)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _retry(self, what: str, fn: Any) -> Any:
        delay = 0.5
        for attempt in range(RETRIES):
            try:
                return fn()
            except OperationalError as exc:  # connection refused/reset: the endpoint restarts
                if attempt == RETRIES - 1:
                    raise
                log.warning("%s failed (%s); retrying in %.1fs", what, exc, delay)
                self.close()
                time.sleep(delay)
                delay = min(delay * 2, 10.0)
        return None

    def insert(self, table: str, rows: Sequence[dict[str, Any]]) -> None:
        if not rows:
            return
        columns = list(rows[0].keys())
        data = [[row[c] for row in rows] for c in columns]
        self._retry(f"insert into {table}",
                    lambda: self.client.insert(table, data, column_names=columns, column_oriented=True))

    def query(self, name: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        sql = load_query(name)
        result = self._retry("query", lambda: self.client.query(sql, parameters=params or {}))
        return [tuple(r) for r in result.result_rows]

    # --- attribution inputs -----------------------------------------------------------------
    def pending_nodes(self) -> list[tuple[Any, ...]]:
        """(cluster, node, first_time, max_time, last_seq, pending, dirty_from, closed_until, processed_seq)."""
        return [tuple(as_utc(v) if isinstance(v, datetime) else v for v in row)
                for row in self.query("attribution_pending")]

    def samples(self, cluster: str, node: str, start: datetime, end: datetime) -> list[SampleRow]:
        rows = self.query("attribution_samples", {"cluster": cluster, "node": node, "start": start, "end": end})
        return [SampleRow(as_utc(t).timestamp(), uuid, mig, idx, model, profile, util, xid, ns, pod, job, interval)
                for (t, uuid, mig, idx, model, profile, util, xid, ns, pod, job, interval) in rows]

    def placements(self, cluster: str, node: str, start: datetime, end: datetime) -> list[AllocationData]:
        rows = self.query("attribution_placements", {"cluster": cluster, "node": node, "start": start, "end": end})
        return [AllocationData.model_validate(orjson.loads(payload)) for (payload,) in rows]

    def write_facts(self, cluster: str, node: str, windows: Sequence[datetime], window_s: int,
                    facts: list[dict[str, Any]], closed_until: datetime, processed_seq: int) -> None:
        version = now_seq()
        for f in facts:
            f["version"] = version
        self.insert("gpu_usage_facts", facts)
        per_window: dict[datetime, float] = {w: 0.0 for w in windows}
        counts: dict[datetime, int] = {w: 0 for w in windows}
        for f in facts:  # every row is capacity: a node-level slot ("") holds exactly what it allocates
            per_window[f["window_start"]] = per_window.get(f["window_start"], 0.0) + float(f["gpu_seconds"])
            counts[f["window_start"]] = counts.get(f["window_start"], 0) + 1
        self.insert("fact_windows", [
            {"cluster": cluster, "node": node, "window_start": w, "version": version,
             "capacity_seconds": per_window[w], "rows": counts[w]} for w in sorted(per_window)])
        self.insert("attribution_progress", [{"cluster": cluster, "node": node, "closed_until": closed_until,
                                              "processed_seq": processed_seq, "version": version}])

    # --- attempts ---------------------------------------------------------------------------
    def attempt_inputs(self, cluster: str, job_ids: Sequence[str]) -> tuple[list[tuple[Any, ...]], list[Checkpoint]]:
        rows = self.query("attempt_snapshots", {"cluster": cluster, "jobs": list(job_ids)})
        ckpts = self.query("attempt_checkpoints", {"cluster": cluster, "jobs": list(job_ids)})
        return [(as_utc(t), payload) for t, payload in rows], [Checkpoint(j, a, as_utc(f)) for (j, a, f) in ckpts]

    def write_attempts(self, cluster: str, facts: Sequence[AttemptFact]) -> None:
        version = now_seq()
        self.insert("job_attempts", [_attempt_row(cluster, f, version) for f in facts])


def _attempt_row(cluster: str, f: AttemptFact, version: int) -> dict[str, Any]:
    row = dict(f.__dict__)
    row["nodes"] = list(f.nodes)
    row["cluster"] = cluster
    row["version"] = version
    return row


def as_utc(value: datetime) -> datetime:
    """ClickHouse DateTime64(…, 'UTC') values as aware UTC datetimes, whatever the client returned."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def to_utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)
