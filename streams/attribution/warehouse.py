"""What the attribution reads from and writes to the warehouse, through ``streams.store.Warehouse``.

Rows come back as named records (:class:`PendingNode`, :class:`PlacementRow`, :class:`AttemptStart`,
:class:`Quarantine`, ``SampleColumns``, ``NodeInputs``); the rules that turn them into attribution
inputs live in ``inputs.py``, the facts' rows in ``rows.py``.

Facts are written many nodes per insert: facts, then ``fact_windows``, then the rebuild of the
hours they touch in the hourly rollup (``streams.rollup``), then the progress rows; a crash in
between leaves progress behind, so the range is computed and written again. A step writes each
group behind (``write_behind``): on a second thread and client, one group at a time and in order,
while it reads and computes the next group.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

import orjson

from pipelines.settings import Settings
from pipelines.times import as_utc, from_epoch
from streams import rollup
from streams.attribution.attempts import AttemptFact, Checkpoint
from streams.attribution.node_range import InventoryGpu, NodeInputs, NodeState, SampleColumns
from streams.attribution.rows import NodeFacts, fact_rows
from streams.store import Warehouse, now_seq


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


class AttributionWarehouse(Warehouse):
    """The warehouse as the attribution steps and the attempt records use it."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self._writer: AttributionWarehouse | None = None  # its own client, used only by its thread
        self._executor: ThreadPoolExecutor | None = None
        self._writes: list[Future[None]] = []
        # on the writer: the hours and progress of groups written behind, rebuilt and recorded together
        self._deferred: list[rollup.Written] = []
        self._deferred_progress: list[dict[str, Any]] = []

    def close(self) -> None:
        """Close the clients (the write behind finishes first, its deferred rollup and progress
        written; a failure of it still raises in ``written``: a retry closes the client too, and
        must not swallow it)."""
        if self._executor is not None:
            if self._writer is not None:
                self._writes.append(self._executor.submit(self._writer.flush_deferred))
            self._executor.shutdown(wait=True)
            self._executor = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        super().close()

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

    def write_fact_batch(self, batch: Sequence[NodeFacts], defer: bool = False) -> None:
        """Facts, every window's capacity row, the hours' rollup, then progress, for many nodes at once:
        one insert per table (rows from ``attribution.rows``).

        All rows of one call share a version. A crash between the inserts leaves progress behind,
        so the ranges are computed and written again (same fact ids, a higher version). ``defer``:
        the rollup and progress wait for ``flush_deferred`` (a step's groups written behind: their
        hours rebuilt together), or for a day of hours to gather.
        """
        if not batch:
            return
        rows = fact_rows(batch, now_seq())
        self.insert_arrow("gpu_usage_facts", rows.facts)
        self.insert("fact_windows", rows.windows)
        if rows.conflicts:
            self.insert("attribution_conflicts", rows.conflicts)
        written = [(item.cluster, item.node, *rollup.window_hours(item.windows)) for item in batch if item.windows]
        if defer:
            self._deferred += written
            self._deferred_progress += rows.progress
            spans = [w[2] for w in self._deferred] + [w[3] for w in self._deferred]
            if spans and max(spans) - min(spans) >= rollup.CHUNK:
                self.flush_deferred()
            return
        self._retry("rebuild of the hourly rollup", lambda: rollup.rebuild_written(self.client, written))
        self.insert("attribution_progress", rows.progress)

    def flush_deferred(self) -> None:
        """The rollup of every deferred group's hours (one rebuild per run of touching hours,
        ``rollup.rebuild_merged``), then their progress; dropped if that fails (their ranges are
        computed again)."""
        written, progress = self._deferred, self._deferred_progress
        self._deferred, self._deferred_progress = [], []
        if written:
            self._retry("rebuild of the hourly rollup", lambda: rollup.rebuild_merged(self.client, written))
        if progress:
            self.insert("attribution_progress", progress)

    def write_behind(self, batch: Sequence[NodeFacts]) -> None:
        """``write_fact_batch`` on a second thread and client, once the previous one has finished
        (so writes keep their order and one batch at most waits in memory): the caller reads and
        computes its next group meanwhile. The rollup and progress of these groups are written by
        ``written`` (or ``close``). A failed write raises here or in ``written``."""
        self._wait()
        if not batch:
            return
        if self._executor is None or self._writer is None:
            self._writer = AttributionWarehouse(self.settings)
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="facts-writer")
        self._writes.append(self._executor.submit(self._writer.write_fact_batch, batch, True))

    def written(self) -> None:
        """Wait for the writes behind, then write their rollup and progress (raising the first
        failure of either)."""
        self._wait()
        if self._executor is not None and self._writer is not None:
            self._executor.submit(self._writer.flush_deferred).result()

    def _wait(self) -> None:
        pending, self._writes = self._writes, []
        failure: BaseException | None = None
        for write in pending:
            try:
                write.result()
            except BaseException as exc:  # every write awaited; the first failure raised
                failure = failure or exc
        if failure is not None:
            raise failure

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
