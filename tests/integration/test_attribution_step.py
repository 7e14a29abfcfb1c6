"""The attribution step against the real ClickHouse endpoint: many nodes per query, long ranges in
chunks, and the same facts as computing each node alone over its whole range."""

from __future__ import annotations

import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta

import pytest

from bench.load import CLUSTER, GPUS_PER_NODE, Load, encode
from pipelines.settings import Settings
from pipelines.times import as_utc, from_epoch
from sql import load_query
from streams.attribution import inputs, step
from streams.attribution.ranges import compute_range
from streams.attribution.warehouse import AttributionWarehouse
from streams.ingest.sink import Message, write_batch

pytestmark = pytest.mark.integration

HOURS = 14  # many rounds of CHUNK_S (1 h)


def _ingest(wh: AttributionWarehouse, load: Load, rounds: int) -> None:
    batch = [Message(topic, 0, i, value) for i, (topic, _, value) in enumerate(encode(load, 0, rounds))]
    for i in range(0, len(batch), 2000):
        write_batch(wh, batch[i : i + 2000], publish_dead_letters=lambda letters: None)


def test_one_step_attributes_every_node_in_chunks_like_one_node_at_a_time(
    warehouse: AttributionWarehouse, isolated_settings: Settings
) -> None:
    load = Load(nodes=3, interval_s=60)
    rounds = load.rounds_for(HOURS)
    _ingest(warehouse, load, rounds)
    time.sleep(step.IDLE_FLUSH_S + 0.2)  # bounded input: the idle flush closes every window
    report = step.run_step(warehouse, isolated_settings, lambda cluster, node: True)
    windows = HOURS * 60
    assert report.nodes == 3 and report.windows == 3 * windows

    rows = warehouse.client.query(
        "SELECT node, window_start, fact_id, kind, gpu_seconds, busy_seconds FROM current_facts"
    ).result_rows
    capacity: dict[tuple[str, object], float] = defaultdict(float)
    for node, window, _, _, seconds, _ in rows:
        capacity[(node, window)] += seconds
    assert len(capacity) == 3 * windows
    assert all(c == pytest.approx(60.0 * GPUS_PER_NODE, abs=1e-6) for c in capacity.values())

    # node-0001 alone, over its whole range at once: the same fact rows, to the last bit
    start = load.start.timestamp()
    samples = warehouse.samples(
        CLUSTER, ["node-0001"], from_epoch(start - step.LOOKBACK_S), from_epoch(start + HOURS * 3600)
    )["node-0001"]
    placements = inputs.placements(
        warehouse, CLUSTER, ["node-0001"], from_epoch(start), from_epoch(start + HOURS * 3600)
    )
    alone = compute_range(CLUSTER, "node-0001", start, start + HOURS * 3600, 60, samples, placements["node-0001"])
    stepped = {(r[2], r[4], r[5]) for r in rows if r[0] == "node-0001"}
    mine = {(f["fact_id"], f["gpu_seconds"], f["busy_seconds"]) for f in alone}

    assert mine == stepped
    assert any(f["kind"] == "allocated" and f["busy_seconds"] > 0 for f in alone)

    progress = warehouse.pending_nodes()
    assert {r[1] for r in progress} == {"node-0000", "node-0001", "node-0002"}
    assert all(r[5] == 0 and r[7] == load.start + timedelta(hours=HOURS) for r in progress)
    assert step.run_step(warehouse, isolated_settings, lambda cluster, node: True).nodes == 0  # nothing due


def test_a_write_that_fails_behind_the_computation_fails_the_step_and_the_next_step_writes_it_all(
    warehouse: AttributionWarehouse, isolated_settings: Settings
) -> None:
    """Groups are written behind (a second thread and client) while the next is computed: a write
    that fails there still fails the step, before any progress of it is recorded, and the next
    step writes the whole range, rollup included."""
    load = Load(nodes=3, interval_s=60)
    _ingest(warehouse, load, load.rounds_for(3))
    time.sleep(step.IDLE_FLUSH_S + 0.2)
    warehouse.client.command("RENAME TABLE gpu_usage_hourly TO gpu_usage_hourly_away")
    with pytest.raises(Exception, match="gpu_usage_hourly"):
        step.run_step(warehouse, isolated_settings, lambda cluster, node: True)
    assert all(r.pending and r.closed_until is None for r in warehouse.pending_nodes())
    warehouse.client.command("RENAME TABLE gpu_usage_hourly_away TO gpu_usage_hourly")
    report = step.run_step(warehouse, isolated_settings, lambda cluster, node: True)
    assert report.nodes == 3 and report.windows == 3 * 3 * 60
    facts, hourly = warehouse.client.query(
        "SELECT (SELECT sum(gpu_seconds) FROM current_facts), (SELECT sum(gpu_seconds) FROM current_hourly)"
    ).result_rows[0]
    assert facts == pytest.approx(3 * 3 * 3600 * GPUS_PER_NODE) and hourly == pytest.approx(facts, rel=1e-12)
    assert all(not r.pending for r in warehouse.pending_nodes())


def test_closing_the_warehouse_does_not_swallow_a_failed_write_behind(
    warehouse: AttributionWarehouse, isolated_settings: Settings
) -> None:
    """A transient error on a read closes the client before retrying (``Warehouse._retry``): the
    write behind finishes, and its failure still fails the step."""
    load = Load(nodes=2, interval_s=60)
    _ingest(warehouse, load, load.rounds_for(1))
    time.sleep(step.IDLE_FLUSH_S + 0.2)
    due = step.plans(warehouse.pending_nodes(), isolated_settings, time.time_ns(), lambda c, n: True)
    assert len(due) == 2
    warehouse.client.command("RENAME TABLE gpu_usage_hourly TO gpu_usage_hourly_away")
    step._compute_group(warehouse, isolated_settings, due, step.StepReport(), {}, inputs.StepMemory(), behind=True)
    warehouse.close()
    with pytest.raises(Exception, match="gpu_usage_hourly"):
        warehouse.written()
    warehouse.written()  # raised once; nothing is left behind
    warehouse.client.command("RENAME TABLE gpu_usage_hourly_away TO gpu_usage_hourly")


def test_a_redelivered_sample_recomputes_its_node_from_its_time(
    warehouse: AttributionWarehouse, isolated_settings: Settings
) -> None:
    load = Load(nodes=2, interval_s=60)
    _ingest(warehouse, load, 120)
    time.sleep(step.IDLE_FLUSH_S + 0.2)
    step.run_step(warehouse, isolated_settings, lambda cluster, node: True)
    late = Load(nodes=1, interval_s=60)  # node-0000's first scrape again (same event id)
    _ingest(warehouse, late, 1)
    time.sleep(step.IDLE_FLUSH_S + 0.2)
    report = step.run_step(warehouse, isolated_settings, lambda cluster, node: True)
    assert report.nodes == 1  # only the node with new activity
    assert report.windows == 120  # recomputed from the dirty time (its first sample) to the end


def test_due_nodes_read_only_the_activity_after_progress(warehouse: AttributionWarehouse) -> None:
    """A long-running deployment: 100,000 processed activity rows of a node stay unread."""
    t = datetime(2026, 11, 1, tzinfo=UTC)
    processed = 100_000
    warehouse.insert(
        "node_activity",
        [
            {
                "cluster": "c",
                "node": "n1",
                "min_time": t,
                "max_time": t + timedelta(hours=1),
                "allocations": False,
                "seq": seq,
            }
            for seq in range(1, processed + 1)
        ],
    )
    warehouse.insert(
        "attribution_progress",
        [
            {
                "cluster": "c",
                "node": "n1",
                "closed_until": t + timedelta(hours=1),
                "processed_seq": processed,
                "version": 1,
            }
        ],
    )
    warehouse.insert(
        "node_activity",
        [
            {
                "cluster": "c",
                "node": "n1",
                "min_time": t + timedelta(minutes=30),
                "max_time": t + timedelta(hours=2),
                "allocations": True,
                "seq": processed + 1,
            }
        ],
    )

    def due() -> tuple[list[tuple[object, ...]], int]:
        result = warehouse.client.query(load_query("attribution_pending"))
        rows = sorted(tuple(as_utc(v) if isinstance(v, datetime) else v for v in r) for r in result.result_rows)
        return rows, int(result.summary["read_rows"])

    rows, read = due()
    n1 = (
        "c",
        "n1",
        t,
        t + timedelta(hours=2),
        processed + 1,
        1,
        t + timedelta(minutes=30),
        t + timedelta(hours=1),
        processed,
    )
    assert rows == [n1]
    assert read < 1_000  # not the 100,000 processed rows
    # a node never computed yet: all of its activity is pending (and, until it is computed, every
    # node's activity is read once per step)
    warehouse.insert(
        "node_activity",
        [{"cluster": "c", "node": "n2", "min_time": t, "max_time": t, "allocations": False, "seq": processed + 2}],
    )
    rows, read = due()
    assert rows == [n1, ("c", "n2", t, t, processed + 2, 1, t, datetime(1970, 1, 1, tzinfo=UTC), 0)]
    assert read > processed


def test_the_groups_of_a_step_rebuild_their_hours_of_the_rollup_together(
    warehouse: AttributionWarehouse, isolated_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step catching up writes its groups behind; their hours of the rollup are rebuilt in one
    statement per run of touching hours (a day at most), not one per group, and equal the facts."""
    from streams import rollup

    rebuilds: list[tuple[datetime, datetime]] = []
    rebuild = rollup._rebuild

    def counted(client: object, scope: dict[str, object], a: datetime, b: datetime) -> None:
        rebuilds.append((a, b))
        rebuild(client, scope, a, b)  # type: ignore[arg-type]

    monkeypatch.setattr(rollup, "_rebuild", counted)
    load = Load(nodes=3, interval_s=60)
    _ingest(warehouse, load, load.rounds_for(30))  # 30 rounds of an hour: more than a day of hours
    time.sleep(step.IDLE_FLUSH_S + 0.2)
    report = step.run_step(warehouse, isolated_settings, lambda cluster, node: True)
    assert report.nodes == 3 and report.windows == 3 * 30 * 60
    start = as_utc(load.start)
    assert rebuilds == [
        (start, start + timedelta(hours=24)),
        (start + timedelta(hours=24), start + timedelta(hours=30)),
    ]
    facts, hourly = warehouse.client.query(
        "SELECT (SELECT sum(gpu_seconds) FROM current_facts), (SELECT sum(gpu_seconds) FROM current_hourly)"
    ).result_rows[0]
    assert facts == pytest.approx(3 * 30 * 3600 * GPUS_PER_NODE) and hourly == pytest.approx(facts, rel=1e-12)
    assert all(not r.pending and r.closed_until == start + timedelta(hours=30) for r in warehouse.pending_nodes())
