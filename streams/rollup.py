"""Keep the hourly rollup (``gpu_usage_hourly``, sql/ddl/0007) equal to the current facts.

Each rebuild is server-side SQL (``sql/queries/usage_hourly_rebuild.sql``): one ``INSERT … SELECT``
that reads the base tables for the hours and nodes asked for and writes every (cluster, node, hour)
it covers again, all rows with one new ``version`` and a marker row, so readers see only the
latest rebuild. Nothing is deleted; ``ReplacingMergeTree`` folds repeated rebuilds of a row.

When to call what:

- ``rebuild_hours`` right after facts are written, with the nodes and the window range just
  written (the attribution step), so the hours of a correction are rebuilt with it;
- ``rebuild_since`` when an org mapping version arrives: each hour's rows carry the org version in
  force at each window, and a new version (possibly retroactive) changes that from its start on.
  The stream worker does not run it in its ingest thread: the raw sink records a request
  (``request_rebuild``) and each attribution step works requests off at most ``STEP_BUDGET`` of
  hours (``work_requests``), recording how far it got, so a crash resumes where it stopped;
- ``rebuild_written`` is ``rebuild_hours`` for one group of an attribution step (one INSERT per
  cluster and span of hours instead of one per node), ``rebuild_merged`` for the groups of a step
  catching up (one INSERT per run of touching hours, at most a day), ``rebuild_stale`` the repair after a worker stopped
  between a write and its rebuild (facts or org versions newer than the hour's latest rebuild).

Ordering: the version is taken (``time.time_ns()``, like ``streams.store.now_seq``) before the
rebuild reads anything, and callers rebuild only after their own write returned. So the rebuild
with the highest version of an hour has read every facts or org write that finished before it
started, and any write finishing later triggers a rebuild with a still higher version.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from clickhouse_connect.driver.client import Client

from pipelines.times import HOUR, as_utc, floor_hour
from sql import load_query

Written = tuple[str, str, datetime, datetime]  # (cluster, node, start, end) of one facts write
Batch = tuple[str, list[str], datetime, datetime]  # (cluster, nodes, hour_start, hour_end) of one rebuild

CHUNK = timedelta(days=1)  # rebuild_since writes at most this much per INSERT, to bound its memory
STEP_BUDGET = timedelta(days=7)  # hours of requested rebuilds one attribution step works off


def hour_span(start: datetime, end: datetime) -> tuple[datetime, datetime]:
    """The whole hours overlapping [start, end): (floor of start, ceiling of end); empty if end ≤ start."""
    s, e = as_utc(start), as_utc(end)
    a = floor_hour(s)
    if e <= s:
        return a, a
    b = floor_hour(e)
    return a, b if b == e else b + HOUR


def window_hours(windows: Iterable[datetime]) -> tuple[datetime, datetime]:
    """The whole hours holding these window starts, as [start, end) for ``rebuild_hours`` / ``Written``."""
    starts = [as_utc(w) for w in windows]
    if not starts:
        raise ValueError("no windows")
    return floor_hour(min(starts)), floor_hour(max(starts)) + HOUR


def chunks(start: datetime, end: datetime, size: timedelta = CHUNK) -> Iterator[tuple[datetime, datetime]]:
    """[start, end) cut into consecutive pieces of at most ``size``."""
    t = start
    while t < end:
        yield t, min(end, t + size)
        t += size


def rebuild_hours(client: Client, cluster: str, nodes: Sequence[str], start: datetime, end: datetime) -> None:
    """Rebuild every hour overlapping [start, end) of ``nodes`` in ``cluster``, with one INSERT … SELECT."""
    wanted = sorted(set(nodes))
    a, b = hour_span(start, end)
    if not wanted or b <= a:
        return
    _rebuild(client, {"cluster": cluster, "all_nodes": False, "nodes": wanted}, a, b)


def rebuild_since(client: Client, cluster: str, since: datetime) -> None:
    """Rebuild every hour from ``since``'s hour on, for every node with facts (one INSERT per day).

    ``cluster = ''`` rebuilds every cluster. An org version for one cluster changes only that
    cluster's windows (sql/ddl/0014), so it is followed by ``rebuild_since(client, cluster,
    effective_from)``; a version for every cluster ('*') by ``rebuild_since(client, "", …)``.
    """
    first_hour = floor_hour(since)
    params = {"cluster": cluster, "since": first_hour}
    row = client.query(load_query("usage_hourly_span"), parameters=params).result_rows[0]
    if not int(row[2]):
        return
    span_end = floor_hour(row[1]) + HOUR
    for a, b in chunks(max(first_hour, floor_hour(row[0])), span_end):
        _rebuild(client, {"cluster": cluster, "all_nodes": True, "nodes": []}, a, b)


def _rebuild(client: Client, scope: dict[str, Any], hour_start: datetime, hour_end: datetime) -> None:
    version = time.time_ns()  # taken before the rebuild reads: see the module docstring
    client.command(
        load_query("usage_hourly_rebuild"),
        parameters={**scope, "hour_start": hour_start, "hour_end": hour_end, "version": version},
    )


def group_written(written: Iterable[Written]) -> list[Batch]:
    """(cluster, node, start, end) of facts writes → one (cluster, nodes, hour_start, hour_end) per span of hours."""
    groups: dict[tuple[str, datetime, datetime], set[str]] = defaultdict(set)
    for cluster, node, start, end in written:
        a, b = hour_span(start, end)
        if b > a:
            groups[(cluster, a, b)].add(node)
    return [(c, sorted(nodes), a, b) for (c, a, b), nodes in sorted(groups.items())]


def rebuild_written(client: Client, written: Iterable[Written]) -> int:
    """Rebuild after one attribution step: one ``rebuild_hours`` per cluster and span of hours written."""
    batches = group_written(written)
    for cluster, nodes, a, b in batches:
        rebuild_hours(client, cluster, nodes, a, b)
    return len(batches)


def merge_written(written: Iterable[Written], size: timedelta = CHUNK) -> list[Batch]:
    """Writes of several groups → one (cluster, nodes, hour_start, hour_end) per run of touching or
    overlapping hours of a cluster, at most ``size`` long, with every node written in it: a run
    rebuilds a few (node, hour) pairs no group wrote, which is harmless (a rebuild is idempotent)
    and far cheaper than one rebuild per group (most of a rebuild's cost is fixed)."""
    out: list[Batch] = []
    for cluster, nodes, a, b in group_written(written):  # sorted by cluster, then start
        last = out[-1] if out else None
        if last and last[0] == cluster and a <= last[3] and max(b, last[3]) - last[2] <= size:
            out[-1] = (cluster, sorted(set(last[1]) | set(nodes)), last[2], max(b, last[3]))
        else:
            out.append((cluster, nodes, a, b))
    return out


def rebuild_merged(client: Client, written: Iterable[Written]) -> int:
    """``rebuild_hours`` for each run of ``merge_written``; returns how many INSERTs ran."""
    batches = merge_written(written)
    for cluster, nodes, a, b in batches:
        rebuild_hours(client, cluster, nodes, a, b)
    return len(batches)


def group_stale(rows: Iterable[tuple[str, str, datetime]], size: timedelta = CHUNK) -> list[Batch]:
    """Stale (cluster, node, hour) → (cluster, nodes, start, end): consecutive hours with the same nodes
    merged into one range of at most ``size``."""
    by_hour: dict[tuple[str, datetime], set[str]] = defaultdict(set)
    for cluster, node, hour in rows:
        by_hour[(cluster, floor_hour(hour))].add(node)
    out: list[Batch] = []
    for (cluster, hour), nodes in sorted(by_hour.items()):
        ordered = sorted(nodes)
        last = out[-1] if out else None
        if last and last[0] == cluster and last[1] == ordered and last[3] == hour and hour + HOUR - last[2] <= size:
            out[-1] = (cluster, ordered, last[2], hour + HOUR)
        else:
            out.append((cluster, ordered, hour, hour + HOUR))
    return out


def rebuild_stale(client: Client, since: datetime) -> int:
    """Rebuild every (cluster, node, hour) from ``since`` on that a facts write or an org version
    arrived after (e.g. a worker stopped between its write and the rebuild); returns how many."""
    rows = client.query(load_query("usage_hourly_stale"), parameters={"since": as_utc(since)}).result_rows
    for cluster, nodes, a, b in group_stale((str(c), str(n), as_utc(h)) for c, n, h in rows):
        rebuild_hours(client, cluster, nodes, a, b)
    return len(rows)


def request_rebuild(client: Client, cluster: str, since: datetime) -> None:
    """Ask for ``rebuild_since(cluster, since)`` to be done by the stream worker (``work_requests``)."""
    version = time.time_ns()
    first = floor_hour(since)
    client.insert(
        "rollup_rebuilds",
        [[cluster, version, first, first, 0, version]],
        column_names=["cluster", "requested", "since", "done_until", "finished", "version"],
    )


def work_requests(client: Client, budget: timedelta = STEP_BUDGET) -> int:
    """Rebuild at most ``budget`` of hours of the pending requests, oldest first, and record how far
    each got; returns how many requests are still pending afterwards."""
    left = budget
    remaining = 0
    for cluster, requested, since, done in client.query(load_query("rollup_rebuilds_pending")).result_rows:
        if left <= timedelta(0):
            remaining += 1
            continue
        first, last, windows = client.query(
            load_query("usage_hourly_span"), parameters={"cluster": cluster, "since": as_utc(done)}
        ).result_rows[0]
        start = max(as_utc(done), floor_hour(first)) if int(windows) else as_utc(done)
        end = floor_hour(last) + HOUR if int(windows) else start
        stop = min(end, start + left)
        for a, b in chunks(start, stop):
            _rebuild(client, {"cluster": cluster, "all_nodes": True, "nodes": []}, a, b)
        left -= stop - start
        remaining += int(stop < end)
        client.insert(
            "rollup_rebuilds",
            [[cluster, requested, as_utc(since), stop, int(stop >= end), time.time_ns()]],
            column_names=["cluster", "requested", "since", "done_until", "finished", "version"],
        )
    return remaining
