"""The stream workers' warehouse I/O: raw rows in, inputs for attribution out, facts in.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson
from clickhouse_connect.driver.client import Client

from pipelines.events import AllocationData
from pipelines.settings import Settings
from pipelines.times import as_utc, from_epoch
from sql import load_query
from sql.client import get_client
from sql.errors import describe, is_transient
from streams import rollup
from streams.attribution.attempts import AttemptFact, Checkpoint
from streams.attribution.node_range import InventoryGpu, NodeInputs, NodeState, SampleColumns
from streams.attribution.rows import NodeFacts, fact_rows

if TYPE_CHECKING:
    from collections.abc import Iterable

log = logging.getLogger(__name__)
RETRIES = 6


__all__ = ["NodeFacts", "PendingNode", "Quarantine", "Warehouse"]  # NodeFacts: attribution.rows


class PendingNode(NamedTuple):
    """One node's row of ``attribution_pending``: the extent of its data, its newest activity, and
    what its last computation covered (None before its first)."""

    cluster: str
    node: str
    first_time: datetime
    max_time: datetime
    last_seq: int  # its newest activity (ns)
    pending: int  # activity rows newer than ``processed_seq``
    dirty_from: datetime | None  # their earliest event time
    closed_until: datetime | None
    processed_seq: int

    @classmethod
    def from_row(cls, row: Iterable[Any]) -> PendingNode:
        """From a query row (or a plain tuple in that order): times as UTC, no progress as None."""
        c, n, first, max_time, seq, pending, dirty, closed, processed = row
        closed = as_utc(closed) if closed is not None else None
        closed = closed if closed is not None and closed.timestamp() > 0 else None
        dirty = as_utc(dirty) if dirty is not None and int(pending or 0) else None
        return cls(
            str(c),
            str(n),
            as_utc(first),
            as_utc(max_time),
            int(seq),
            int(pending or 0),
            dirty,
            closed,
            int(processed or 0),
        )


class PlacementRow(NamedTuple):
    """The latest stored snapshot of one placement (JSON of ``AllocationData``), on ``node``."""

    node: str
    payload: str | bytes


class AttemptStart(NamedTuple):
    """When an attempt of a job started (on any node)."""

    scheduler: str
    job_id: str
    attempt: int
    start: datetime


@dataclass(frozen=True)
class Quarantine:
    """A node whose attribution failed on its own input; ``reason`` '' takes it out again."""

    cluster: str
    node: str
    reason: str
    input_seq: int  # its newest activity when it failed: newer input is tried again
    since: datetime  # its first failure
    tried_seq: int = 0  # when it last failed (ns)


def now_seq() -> int:
    return time.time_ns()


class Warehouse:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._client: Client | None = None

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
        self._retry(
            f"insert into {table}", lambda: self.client.insert(table, data, column_names=names, column_oriented=True)
        )

    def query(self, name: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        sql = load_query(name)
        result = self._retry("query", lambda: self.client.query(sql, parameters=params or {}))
        return [tuple(r) for r in result.result_rows]

    # --- attribution inputs -----------------------------------------------------------------
    def pending_nodes(self) -> list[PendingNode]:
        """Every node with data: its extent, newest activity and progress (``attribution_pending``)."""
        return [PendingNode.from_row(row) for row in self.query("attribution_pending")]

    def quarantined(self) -> dict[tuple[str, str], Quarantine]:
        """The nodes in quarantine now, by (cluster, node)."""
        return {
            (str(c), str(n)): Quarantine(str(c), str(n), str(r), int(seq), as_utc(since), int(tried))
            for c, n, r, seq, since, tried in self.query("attribution_quarantine")
        }

    def write_quarantine(self, entries: Sequence[Quarantine]) -> None:
        """Put nodes into quarantine, or (reason '') take them out."""
        version = now_seq()
        self.insert(
            "attribution_quarantine",
            [
                {
                    "cluster": e.cluster,
                    "node": e.node,
                    "reason": e.reason,
                    "input_seq": e.input_seq,
                    "since": e.since,
                    "version": version,
                }
                for e in entries
            ],
        )

    def query_columns(self, name: str, params: dict[str, Any]) -> Sequence[Sequence[Any]]:
        sql = load_query(name)
        result = self._retry("query", lambda: self.client.query(sql, parameters=params))
        return result.result_columns

    def samples(self, cluster: str, nodes: Sequence[str], start: datetime, end: datetime) -> dict[str, SampleColumns]:
        """Samples of ``nodes`` in [start, end), per node, as columns in time order."""
        cols = self.query_columns(
            "attribution_samples", {"cluster": cluster, "nodes": list(nodes), "start": start, "end": end}
        )
        out: dict[str, SampleColumns] = {}
        if not cols or not len(cols[0]):
            return out
        node_col = cols[0]
        times = [ms / 1000 for ms in cols[1]]
        rest = cols[2:]
        bounds = [i for i in range(1, len(node_col)) if node_col[i] != node_col[i - 1]]
        for lo, hi in zip([0, *bounds], [*bounds, len(node_col)], strict=True):
            out[str(node_col[lo])] = SampleColumns((times[lo:hi], *(c[lo:hi] for c in rest)))
        return out

    def placements(
        self, cluster: str, nodes: Sequence[str], start: datetime, end: datetime, rejected: dict[str, str] | None = None
    ) -> dict[str, list[AllocationData]]:
        """The placements of ``nodes`` in force in [start, end), per node (``attribution.inputs.placements``)."""
        from streams.attribution import inputs  # the rules live there; it reads through this class

        return inputs.placements(self, cluster, nodes, start, end, rejected)

    def placement_rows(self, cluster: str, nodes: Sequence[str], start: datetime, end: datetime) -> list[PlacementRow]:
        """The latest snapshot of every placement on ``nodes`` that overlaps [start, end)."""
        params = {"cluster": cluster, "nodes": list(nodes), "start": start, "end": end}
        return [PlacementRow(str(node), payload) for node, payload in self.query("attribution_placements", params)]

    def attempt_starts(self, cluster: str, jobs: Sequence[str]) -> list[AttemptStart]:
        """When each attempt of ``jobs`` started, on any node."""
        if not jobs:
            return []
        rows = self.query("attribution_attempt_starts", {"cluster": cluster, "jobs": list(jobs)})
        return [AttemptStart(str(sch), str(job), int(att), as_utc(t)) for sch, job, att, t in rows]

    def node_replicas(self, cluster: str, nodes: Sequence[str]) -> dict[str, list[tuple[float, int]]]:
        """Per node, the replicas per GPU its node states declare (time-slicing or MPS), as ascending
        (epoch seconds, replicas) changes (``streams.attribution.attempts.NodeReplicas``)."""
        out: dict[str, list[tuple[float, int]]] = {}
        if not nodes:
            return out
        end = datetime(2200, 1, 1, tzinfo=UTC)
        for node, time_ms, payload in self.query(
            "attribution_node_states", {"cluster": cluster, "nodes": list(nodes), "end": end}
        ):
            replicas = orjson.loads(payload).get("gpu_replicas")
            if isinstance(replicas, int):
                out.setdefault(str(node), []).append((time_ms / 1000, replicas))
        return out

    def node_inputs(
        self,
        cluster: str,
        nodes: Sequence[str],
        start: datetime,
        end: datetime,
        loaded: Mapping[str, datetime],
        horizon_s: float,
    ) -> dict[str, NodeInputs]:
        """Per node: the GPUs it reported within ``horizon_s`` before ``start`` (state before
        ``loaded[node]``, the node's first loaded sample time), and its drained/down/up states up to ``end``."""
        since = from_epoch(start.timestamp() - horizon_s)
        inv = self.query(
            "attribution_inventory",
            {
                "cluster": cluster,
                "nodes": list(nodes),
                "since": since,
                "end": end,
                "loaded_ms": [round(loaded[n].timestamp() * 1000) for n in nodes],
            },
        )
        out: dict[str, NodeInputs] = {n: NodeInputs([], []) for n in nodes}
        for node, uuid, index, model, first_ms, last_ms, fatal_ms, clear_ms in inv:
            down = fatal_ms / 1000 if fatal_ms and fatal_ms > (clear_ms or 0) else None
            out[str(node)].inventory.append(  # type: ignore[attr-defined]
                InventoryGpu(str(uuid), index, str(model), first_ms / 1000, last_ms / 1000, down)
            )
        for node, time_ms, payload in self.query(
            "attribution_node_states", {"cluster": cluster, "nodes": list(nodes), "end": end}
        ):
            data = orjson.loads(payload)
            out[str(node)].states.append(  # type: ignore[attr-defined]
                NodeState(
                    time_ms / 1000,
                    str(data["state"]),
                    data.get("gpus"),
                    data.get("gpu_model"),
                    data.get("gpu_replicas"),
                )
            )
        return out

    def write_fact_batch(self, batch: Sequence[NodeFacts]) -> None:
        """Facts, every window's capacity row, the hours' rollup, then progress, for many nodes at once:
        one insert per table (rows from ``attribution.rows``).

        All rows of one call share a version. A crash between the inserts leaves progress behind,
        so the ranges are computed and written again (same fact ids, a higher version).
        """
        if not batch:
            return
        rows = fact_rows(batch, now_seq())
        self.insert("gpu_usage_facts", rows.facts)
        self.insert("fact_windows", rows.windows)
        if rows.conflicts:
            self.insert("attribution_conflicts", rows.conflicts)
        written = [(item.cluster, item.node, *rollup.window_hours(item.windows)) for item in batch if item.windows]
        self._retry("rebuild of the hourly rollup", lambda: rollup.rebuild_written(self.client, written))
        self.insert("attribution_progress", rows.progress)

    def request_rollup_rebuild(self, since: datetime, cluster: str = "") -> None:
        """An org mapping version arrived: every hour of ``cluster`` ('': every cluster) from its start
        may carry another org version; the attribution steps rebuild them (``rollup.work_requests``)."""
        self._retry("request of a rollup rebuild", lambda: rollup.request_rebuild(self.client, cluster, since))

    def work_rollup_rebuilds(self) -> int:
        """Work off requested rollup rebuilds, bounded; returns how many are still pending."""
        return int(self._retry("rebuild of the hourly rollup", lambda: rollup.work_requests(self.client)))

    # --- attempts ---------------------------------------------------------------------------
    def attempt_inputs(self, cluster: str, job_ids: Sequence[str]) -> tuple[list[tuple[Any, ...]], list[Checkpoint]]:
        rows = self.query("attempt_snapshots", {"cluster": cluster, "jobs": list(job_ids)})
        ckpts = self.query("attempt_checkpoints", {"cluster": cluster, "jobs": list(job_ids)})
        return [(as_utc(t), payload) for t, payload in rows], [Checkpoint(j, a, as_utc(f)) for (j, a, f) in ckpts]

    def write_attempts(self, cluster: str, facts: Sequence[AttemptFact]) -> None:
        version = now_seq()
        self.insert("job_attempts", [_attempt_row(cluster, f, version) for f in facts])

    def insert_arrow(self, table: str, data: Any) -> None:
        """Insert a ``pyarrow.Table`` whose column names are the table's (one Arrow block, the bulk path)."""
        if data.num_rows:
            self._retry(f"insert into {table}", lambda: self.client.insert_arrow(table, data))


def _attempt_row(cluster: str, f: AttemptFact, version: int) -> dict[str, Any]:
    row = dict(f.__dict__)
    row["nodes"] = list(f.nodes)
    row["cluster"] = cluster
    row["version"] = version
    return row
