"""Which closed partitions late data left stale.

The warehouse versions every write of the inputs (``late_changes.sql``): a facts write of one of a
day's windows, an attempt record for every day its run overlaps, each with the wall-clock time (ns)
of the write. A partition is **stale** when one of its inputs changed after the run that last
materialized it had *started*: that run may have read the warehouse before the change. The start
(not the end) of the run is the bound, so a change landing while a run reads counts as unseen; a
run never started is taken at its creation. A partition that one of its job's assets never
materialized is stale too: nothing built it from the current inputs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import dagster as dg


def stale(changes: Mapping[str, int], built: Mapping[str, int | None]) -> list[str]:
    """The partitions whose newest change (ns) is later than the start (ns) of the run that built
    them, or that were never built; sorted."""
    return sorted(key for key, changed in changes.items() if (at := built.get(key)) is None or changed > at)


def built_at(
    instance: dg.DagsterInstance | None, keys: Iterable[dg.AssetKey], partitions: Iterable[str]
) -> dict[str, int | None]:
    """For each partition, when the oldest of the runs that last materialized it for ``keys``
    started (ns); ``None`` when one of the assets has no materialization of it (or there is no
    instance to ask)."""
    keys = list(keys)
    started: dict[str, int] = {}
    out: dict[str, int | None] = {}
    for partition in partitions:
        out[partition] = None
        if instance is None:
            continue
        runs = []
        for key in keys:
            found = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition]), limit=1
            ).records
            if not found:
                break
            runs.append(found[0].run_id)
        else:
            for run_id in runs:
                if run_id not in started:
                    started[run_id] = _run_start_ns(instance, run_id)
            out[partition] = min(started[r] for r in runs) if runs else None
    return out


def _run_start_ns(instance: dg.DagsterInstance, run_id: str) -> int:
    record = instance.get_run_record_by_id(run_id)
    if record is None:  # the run was deleted: its materialization says nothing about when it read
        return 0
    seconds = record.start_time if record.start_time is not None else record.create_timestamp.timestamp()
    return int(seconds * 1_000_000_000)
