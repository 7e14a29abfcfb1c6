"""The raw sink: validate a batch of messages, write raw rows, dead letters and activity.

Runs in the worker's single warehouse thread (see ``streams.app``). Follows the flush order in
``streams.store``: dedupe → insert → (the agent) acknowledge. A message that fails validation is
a dead letter (warehouse table and ``<topic>.dlq``) with the reason; it never stops the batch.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import orjson
import pyarrow as pa

from pipelines import events as ev
from pipelines import process_metrics, wire
from pipelines.clusters import ClusterScope
from pipelines.times import as_utc, utc_text
from streams.attribution.attempts import (
    SUPERSEDED,
    AttemptFact,
    Checkpoint,
    NodeReplicas,
    attempt_fact,
    end_superseded,
    latest,
    next_starts,
)
from streams.attribution.warehouse import AttributionWarehouse
from streams.ingest.rows import Activity, Changed, Snapshot, Table, allocation_change, dead_letter_row, rows_for
from streams.store import now_seq


@dataclass(frozen=True)
class Message:
    topic: str  # logical topic name (without prefix)
    partition: int
    offset: int
    value: bytes


@dataclass
class BatchResult:
    events: int = 0
    dead_letters: list[ev.DeadLetter] | None = None
    earliest: float = math.inf  # epoch s: the earliest event time of its node activity (math.inf: it has none)
    rebuild_requested: bool = False  # it recorded a request to rebuild the hourly rollup (org versions)


def decode_batch(
    messages: Sequence[Message], not_after: datetime | None = None
) -> tuple[list[ev.Envelope], list[ev.DeadLetter]]:
    """Validate and dedupe by event id; invalid messages become dead letters, and so do events
    whose time is after ``not_after`` (now + the future tolerance: a node clock ahead would
    otherwise make windows close ahead of real time)."""
    seen: set[str] = set()
    good: list[ev.Envelope] = []
    bad: list[ev.DeadLetter] = []
    for m in messages:
        try:
            event = wire.decode(m.value)
            if not_after is not None:
                check_not_future(event, not_after)
        except ev.InvalidEvent as exc:
            bad.append(
                ev.DeadLetter.build(
                    topic=m.topic,
                    source="streams",
                    reason=str(exc),
                    raw=m.value,
                    origin=f"{m.topic}:{m.partition}:{m.offset}",
                )
            )
            continue
        if event.id not in seen:
            seen.add(event.id)
            good.append(event)
    return good, bad


def check_not_future(event: ev.Envelope, not_after: datetime) -> None:
    data = event.data
    times = [
        ("time", event.last_time),
        ("start_time", getattr(data, "start_time", None)),
        ("end_time", getattr(data, "end_time", None)),
    ]
    for name, value in times:
        if value is not None and value > not_after:
            raise ev.InvalidEvent(
                f"{name} {utc_text(value)} is in the future (later than {utc_text(not_after)}, now + the tolerance)"
            )


@dataclass
class Prepared:
    """A batch decoded and turned into rows (:func:`prepare_batch`), not written yet."""

    messages: Sequence[Message]
    events: list[ev.Envelope]
    dead: list[ev.DeadLetter]
    tables: dict[str, Table]
    activity: dict[tuple[str, str], Activity]

    @property
    def reads_placements(self) -> bool:
        """Its allocation events were compared with the placements stored before it: prepared
        while an earlier batch was still being written, it must be prepared again after that."""
        return bool(placed_jobs(self.events))


def write_batch(
    wh: AttributionWarehouse, messages: Sequence[Message], publish_dead_letters: Callable[[list[ev.DeadLetter]], None]
) -> BatchResult:
    return store_batch(wh, prepare_batch(wh, messages), publish_dead_letters)


def prepare_batch(wh: AttributionWarehouse, messages: Sequence[Message]) -> Prepared:
    """Validate and dedupe a batch (dead letters for what is invalid) and build its rows; reads only
    the placements its allocation events change."""
    not_after = datetime.now(UTC) + timedelta(seconds=wh.settings.future_tolerance_seconds)
    events, dead = decode_batch(messages, not_after)
    tables, activity = rows_for(events, placement_changes(wh, events))
    return Prepared(messages, events, dead, tables, activity)


def store_batch(
    wh: AttributionWarehouse, prepared: Prepared, publish_dead_letters: Callable[[list[ev.DeadLetter]], None]
) -> BatchResult:
    """Write a prepared batch: its rows, then its node activity (what makes the steps read them)."""
    events, dead, activity = prepared.events, prepared.dead, prepared.activity
    for table, rows in prepared.tables.items():
        if isinstance(rows, pa.Table):
            wh.insert_arrow(table, rows)
        else:
            wh.insert(table, rows)
    org_versions: dict[str, datetime] = {}
    for e in events:
        if isinstance(e, ev.OrgMappingEvent):
            since = org_versions.get(e.cluster)
            org_versions[e.cluster] = e.data.effective_from if since is None else min(since, e.data.effective_from)
    for cluster, since in sorted(org_versions.items()):  # a version applies from its start on, to its
        wh.request_rollup_rebuild(since, ClusterScope.from_stored(cluster).sql_value)  # cluster ('*': every one)
    if dead:  # to <topic>.dlq; the dead-letter sink copies every .dlq message into the warehouse
        publish_dead_letters(dead)
    jobs = _touched_jobs(events)
    for cluster, job_ids in jobs.items():
        for fact in refresh_attempts(wh, cluster, sorted(job_ids)):
            if fact.scheduler_state == SUPERSEDED and fact.end_time is not None:
                # a later attempt ended this one: its nodes' windows from then on are recomputed
                for node in fact.nodes:
                    if (cluster, node) in activity:
                        activity[(cluster, node)].add(fact.end_time, fact.end_time, True)
                    else:
                        activity[(cluster, node)] = Activity(fact.end_time, fact.end_time, True)
    if activity:
        seq = now_seq()
        wh.insert(
            "node_activity",
            [
                {
                    "cluster": c,
                    "node": n,
                    "min_time": a.min_time,
                    "max_time": a.max_time,
                    "allocations": a.allocations,
                    "seq": seq,
                }
                for (c, n), a in sorted(activity.items())
            ],
        )
    _count(prepared.messages, events, dead)  # once: only a batch that was written whole gets here
    earliest = min(a.min_time for a in activity.values()).timestamp() if activity else math.inf
    return BatchResult(len(events), dead, earliest, bool(org_versions))


def _count(messages: Sequence[Message], events: Sequence[ev.Envelope], dead: Sequence[ev.DeadLetter]) -> None:
    if messages:
        process_metrics.EVENTS_CONSUMED.labels(messages[0].topic).inc(len(events))
    for letter in dead:
        process_metrics.DEAD_LETTERED.labels(letter.topic, process_metrics.reason_class(letter.reason)).inc()


def placed_jobs(events: Sequence[ev.Envelope]) -> dict[str, set[str]]:
    """Per cluster, the jobs of the allocation events on a node: what :func:`placement_changes`
    compares with the stored placements."""
    jobs: dict[str, set[str]] = defaultdict(set)
    for e in events:
        if isinstance(e, ev.AllocationEvent) and e.data.node:
            jobs[e.cluster].add(e.data.job_id)
    return jobs


def placement_changes(wh: AttributionWarehouse, events: Sequence[ev.Envelope]) -> Changed:
    """What each allocation event of a batch changes, against the snapshots stored before it
    (``allocation_change``): an end marks windows dirty from the end on, a repeat marks nothing."""
    stored: dict[tuple[str, ...], Snapshot] = {}
    for cluster, job_ids in placed_jobs(events).items():
        for node, scheduler, job_id, attempt, uid, rank, payload in wh.query(
            "placement_snapshots", {"cluster": cluster, "jobs": sorted(job_ids)}
        ):
            stored[(cluster, str(node), str(scheduler), str(job_id), str(attempt), str(uid))] = (
                (int(rank[0]), as_utc(rank[1])),
                orjson.loads(payload),
            )

    def changed(e: ev.AllocationEvent) -> tuple[datetime, datetime] | None:
        d = e.data
        key = (e.cluster, d.node or "", d.scheduler, d.job_id, str(d.attempt), d.uid or "")
        span = allocation_change(stored.get(key), e)
        # later events of the same placement in this batch compare with this one
        if stored.get(key) is None or (2 if d.state == "ended" else 1, e.time) >= stored[key][0]:
            stored[key] = ((2 if d.state == "ended" else 1, e.time), d.model_dump(mode="json"))
        return span

    return changed


def write_dead_letters(wh: AttributionWarehouse, messages: Sequence[Message]) -> int:
    """Copy ``<topic>.dlq`` messages (from collectors and workers alike) into ``dead_letters``."""
    rows = []
    for m in messages:
        try:
            letter = ev.DeadLetter.model_validate_json(m.value)
        except ValueError as exc:  # not even a dead letter: keep it whole, with the reason
            letter = ev.DeadLetter.build(
                topic=m.topic.removesuffix(".dlq"),
                source="streams",
                reason=f"unreadable dead letter: {str(exc).splitlines()[0]}",
                raw=m.value,
                origin=f"{m.topic}:{m.partition}:{m.offset}",
            )
        rows.append(dead_letter_row(letter))
    wh.insert("dead_letters", rows)
    return len(rows)


def _touched_jobs(events: Sequence[ev.Envelope]) -> dict[str, set[str]]:
    jobs: dict[str, set[str]] = defaultdict(set)
    for e in events:
        if isinstance(e.data, ev.AllocationData | ev.CheckpointData):
            jobs[e.cluster].add(e.data.job_id)
    return jobs


def refresh_attempts(wh: AttributionWarehouse, cluster: str, job_ids: Sequence[str]) -> list[AttemptFact]:
    """Recompute the attempt facts of ``job_ids`` from all their raw events and checkpoints."""
    rows, checkpoints = wh.attempt_inputs(cluster, job_ids)
    snapshots = []
    for t, payload in rows:
        try:
            snapshots.append((t, ev.AllocationData.model_validate(orjson.loads(payload))))
        except ValueError:  # stored before today's contract: its node is quarantined by attribution
            continue
    replicas = wh.node_replicas(cluster, sorted({d.node for _, d in snapshots if d.node}))
    facts = attempts_from_snapshots(snapshots, checkpoints, replicas)
    wh.write_attempts(cluster, facts)
    return facts


def attempts_from_snapshots(
    snapshots: Sequence[tuple[datetime, ev.AllocationData]],
    checkpoints: Sequence[Checkpoint],
    replicas: NodeReplicas | None = None,
) -> list[AttemptFact]:
    """Group snapshots by (job, attempt, node), keep the latest of each, and build attempt facts
    (``replicas``: the replicas per GPU of their nodes over time)."""
    by_attempt: dict[tuple[str, str, int], dict[str, list[tuple[datetime, ev.AllocationData]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for t, data in snapshots:
        placement = f"{data.node}\x1f{data.uid or ''}" if data.node else ""  # a re-created pod is another placement
        by_attempt[(data.scheduler, data.job_id, data.attempt)][placement].append((t, data))
    later = next_starts(
        (d.scheduler, d.job_id, d.attempt, d.start_time) for _, d in snapshots if d.node and d.start_time is not None
    )
    ckpts_by_job: dict[str, list[Checkpoint]] = defaultdict(list)
    for c in checkpoints:
        ckpts_by_job[c.job_id].append(c)
    facts: list[AttemptFact] = []
    previous_end: dict[tuple[str, str], datetime | None] = {}
    for key in sorted(by_attempt):
        scheduler, job_id, attempt = key
        nodes = by_attempt[key]
        job_level = latest(nodes[""]) if "" in nodes else None
        placements = [end_superseded(latest(snaps), later.get(key)) for node, snaps in sorted(nodes.items()) if node]
        fact = attempt_fact(
            placements, job_level, ckpts_by_job.get(job_id, []), previous_end.get((scheduler, job_id)), replicas
        )
        previous_end[(scheduler, job_id)] = fact.end_time
        facts.append(fact)
    return facts
