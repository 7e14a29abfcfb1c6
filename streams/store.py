"""The stream workers' warehouse I/O: queries by name, inserts with retries, rollup requests.

What the attribution reads and writes through it (its inputs, facts, attempts, quarantine) is
``streams.attribution.warehouse.AttributionWarehouse``, a subclass in the attribution package.

Flush order of the raw sink, and what each step's failure does:

1. **dedupe the batch** by event id (a redelivered message within one batch counts once);
2. **insert** raw rows, dead letters and ``node_activity`` (clickhouse-connect, retried with
   back-off on transient errors, ``sql.errors``); a failure here raises, the batch is not acknowledged, and
   Kafka redelivers it — the tables are ReplacingMergeTree on the event id, so a partly
   written batch written again converges to the same rows;
3. **commit offsets** — Faust acknowledges the events only after step 2 returned.

Facts are written the same way, many nodes per insert: facts, then ``fact_windows``, then the
rebuild of the hours they touch in the hourly rollup (``streams.rollup``), then the progress
rows; a crash in between leaves progress behind, so the range is computed and written again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from clickhouse_connect.datatypes.base import ClickHouseType
from clickhouse_connect.driver.client import Client

from pipelines.settings import Settings
from sql import load_query
from sql.client import get_client
from sql.errors import describe, is_transient
from streams import rollup

log = logging.getLogger(__name__)
RETRIES = 6


def now_seq() -> int:
    return time.time_ns()


class Warehouse:
    """One worker's ClickHouse client: named queries and inserts, retried on transient errors."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._client: Client | None = None
        # each (table, columns)' types, asked once: an insert then is one request, not a DESCRIBE and the insert
        self._types: dict[tuple[str, tuple[str, ...]], Sequence[ClickHouseType]] = {}

    @property
    def settings(self) -> Settings:
        return self._settings

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
            except Exception as exc:  # unreachable, restarting or overloaded: the same request succeeds later
                if not is_transient(exc) or attempt == RETRIES - 1:
                    raise
                log.warning("%s failed (%s); retrying in %.1fs", what, describe(exc), delay)
                self.close()
                time.sleep(delay)
                delay = min(delay * 2, 10.0)
        return None

    def insert(self, table: str, rows: Sequence[dict[str, Any]] | dict[str, list[Any]]) -> None:
        """Insert rows (dicts keyed by column) or columns (column -> values), column-oriented."""
        if not rows:
            return
        if isinstance(rows, dict):
            names, data = list(rows), list(rows.values())
        else:
            names = list(rows[0].keys())
            data = [[row[c] for row in rows] for c in names]
        if not data[0]:
            return
        key = (table, tuple(names))

        def insert() -> None:
            types = self._types.get(key)
            if types is None:
                types = self._types[key] = self.client.create_insert_context(table, names).column_types
            self.client.insert(table, data, column_names=names, column_types=types, column_oriented=True)

        self._retry(f"insert into {table}", insert)

    def query(self, name: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        sql = load_query(name)
        result = self._retry("query", lambda: self.client.query(sql, parameters=params or {}))
        return [tuple(r) for r in result.result_rows]

    def query_columns(self, name: str, params: dict[str, Any]) -> Sequence[Sequence[Any]]:
        sql = load_query(name)
        result = self._retry("query", lambda: self.client.query(sql, parameters=params))
        return result.result_columns

    def request_rollup_rebuild(self, since: datetime, cluster: str = "") -> None:
        """An org mapping version arrived: every hour of ``cluster`` ('': every cluster) from its start
        may carry another org version; the attribution steps rebuild them (``rollup.work_requests``)."""
        self._retry("request of a rollup rebuild", lambda: rollup.request_rebuild(self.client, cluster, since))

    def work_rollup_rebuilds(self) -> int:
        """Work off requested rollup rebuilds, bounded; returns how many are still pending."""
        return int(self._retry("rebuild of the hourly rollup", lambda: rollup.work_requests(self.client)))

    def insert_arrow(self, table: str, data: Any) -> None:
        """Insert a ``pyarrow.Table`` whose column names are the table's (one Arrow block, the bulk path)."""
        if data.num_rows:
            self._retry(f"insert into {table}", lambda: self.client.insert_arrow(table, data))
