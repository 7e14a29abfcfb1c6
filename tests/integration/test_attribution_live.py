"""Live operation against the real ClickHouse endpoint: windows written once across steps, a step's
short look-back giving the facts of the whole range computed at once, the current window left open."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from bench.load import CLUSTER, Load, encode
from infra.services import apply_migrations
from pipelines.settings import Settings
from pipelines.times import from_epoch
from streams.attribution import inputs, step
from streams.attribution.ranges import compute_range
from streams.attribution.warehouse import AttributionWarehouse, PendingNode
from streams.ingest.sink import Message, write_batch

pytestmark = pytest.mark.integration


def _ingest(wh: AttributionWarehouse, load: Load, first: int, rounds: int) -> None:
    batch = [Message(topic, 0, i, value) for i, (topic, _, value) in enumerate(encode(load, first, rounds))]
    write_batch(wh, batch, publish_dead_letters=lambda letters: None)


def _step(wh: AttributionWarehouse, settings: Settings, state: step.StepState) -> step.StepReport:
    time.sleep(step.IDLE_FLUSH_S + 0.2)
    return step.run_step(wh, settings, lambda cluster, node: True, state)


def test_steps_write_each_window_once_with_the_facts_of_one_whole_range(
    warehouse: AttributionWarehouse, isolated_settings: Settings
) -> None:
    start = datetime(2026, 11, 3, 8, tzinfo=UTC)
    load = Load(nodes=2, interval_s=10, start=start, alloc_period_s=300)  # a pod every 5 min
    state = step.StepState()
    for first in (0, 60, 120):  # three deliveries of 10 minutes each, in order
        _ingest(warehouse, load, first, 60)
        state.touched()  # as the worker's sink does after each batch
        report = _step(warehouse, isolated_settings, state)
        assert report.nodes == 2 and report.windows == 2 * 10
        assert state.memory.lookback((CLUSTER, "node-0000")) == step.inputs.LOOKBACK_INTERVALS * 10
    versions = warehouse.client.query(
        "SELECT node, window_start, count() FROM fact_windows GROUP BY node, window_start"
    ).result_rows
    assert len(versions) == 2 * 30 and all(n == 1 for _, _, n in versions)  # every window written once

    end = start.timestamp() + 1800
    samples = warehouse.samples(
        CLUSTER, ["node-0001"], from_epoch(start.timestamp() - step.LOOKBACK_S), from_epoch(end)
    )
    placements = inputs.placements(warehouse, CLUSTER, ["node-0001"], start, from_epoch(end))["node-0001"]
    alone = compute_range(CLUSTER, "node-0001", start.timestamp(), end, 60, samples["node-0001"], placements)
    rows = warehouse.client.query(
        "SELECT fact_id, gpu_seconds, busy_seconds, energy_joules FROM current_facts WHERE node = 'node-0001'"
    ).result_rows
    assert {tuple(r) for r in rows} == {
        (f["fact_id"], f["gpu_seconds"], f["busy_seconds"], f["energy_joules"]) for f in alone
    }
    assert any(f["kind"] == "allocated" and float(f["busy_seconds"]) > 0 for f in alone)


def test_the_current_window_is_not_written_before_it_has_ended(
    warehouse: AttributionWarehouse, isolated_settings: Settings
) -> None:
    now = time.time()
    if now % 60 > 50:  # keep the scrapes and the step within one wall-clock minute
        time.sleep(61 - now % 60)
        now = time.time()
    current = math.floor(now / 60) * 60
    load = Load(nodes=1, interval_s=10, start=from_epoch(math.floor(now) - 170))  # 18 scrapes up to now
    assert load.round_time(17) >= from_epoch(current)  # the last scrape lies in the current window
    _ingest(warehouse, load, 0, 18)
    state = step.StepState()
    _step(warehouse, isolated_settings, state)
    written = {
        as_epoch
        for (as_epoch,) in warehouse.client.query("SELECT toUnixTimestamp(window_start) FROM fact_windows").result_rows
    }
    assert written and max(written) == current - 60  # every ended window, not the current one
    assert step.run_step(warehouse, isolated_settings, lambda c, n: True, state).windows == 0


class _Counting(AttributionWarehouse):
    """The real warehouse, counting how often the due nodes are read and statements run."""

    reads = 0
    statements = 0

    def pending_nodes(self) -> list[PendingNode]:
        self.reads += 1
        return super().pending_nodes()

    def query(self, name: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        self.statements += 1
        return super().query(name, params)

    def work_rollup_rebuilds(self) -> int:
        self.statements += 1
        return super().work_rollup_rebuilds()


def test_steps_with_nothing_written_and_nothing_come_due_read_nothing(isolated_settings: Settings) -> None:
    apply_migrations(isolated_settings)
    if time.time() % 60 > 45:  # no wall-clock window end while the steps run
        time.sleep(61 - time.time() % 60)
    wh = _Counting(isolated_settings)
    try:
        load = Load(nodes=1, interval_s=10, start=datetime(2026, 11, 3, 8, tzinfo=UTC))
        state = step.StepState()
        _ingest(wh, load, 0, 30)
        state.touched()
        assert _step(wh, isolated_settings, state).windows == 5
        for _ in range(3):  # the step computed every due range whole: nothing more is due, nothing is read
            assert state.nothing_due(time.time(), time.monotonic())  # the worker does not even start a step
            statements = wh.statements
            assert step.run_step(wh, isolated_settings, lambda c, n: True, state).nodes == 0
            assert wh.statements == statements
        assert wh.reads == 1
        _ingest(wh, load, 30, 6)
        state.touched()
        assert not state.nothing_due(time.time(), time.monotonic())
        assert _step(wh, isolated_settings, state).windows == 1 and wh.reads == 2
    finally:
        wh.close()


def test_live_scrapes_in_the_open_window_do_not_make_the_steps_read_the_due_nodes(isolated_settings: Settings) -> None:
    """A live node's scrapes of the window open at the last read cannot make anything due before
    that window ends: the steps after them read nothing; a scrape of an ended window (late) does."""
    apply_migrations(isolated_settings)
    now = time.time()
    if now % 60 > 20:  # the scrapes and steps below stay within one wall-clock minute
        time.sleep(61 - now % 60)
        now = time.time()
    current = math.floor(now / 60) * 60
    wh = _Counting(isolated_settings)
    try:
        load = Load(nodes=1, interval_s=10, start=from_epoch(current - 120))  # 2 ended windows, then live
        batch = [Message(t, 0, i, v) for i, (t, _, v) in enumerate(encode(load, 0, 12))]
        state = step.StepState()
        state.touched(write_batch(wh, batch, lambda letters: None).earliest)
        assert _step(wh, isolated_settings, state).windows == 2 and wh.reads == 1
        assert step.run_step(wh, isolated_settings, lambda c, n: True, state).nodes == 0 and wh.reads == 1
        live = [Message(t, 0, 100 + i, v) for i, (t, _, v) in enumerate(encode(load, 12, 1))]  # at current + 0 s
        written = write_batch(wh, live, lambda letters: None)
        assert written.earliest == current
        state.touched(written.earliest)
        assert step.run_step(wh, isolated_settings, lambda c, n: True, state).nodes == 0 and wh.reads == 1
        late = [Message(t, 0, 200 + i, v) for i, (t, _, v) in enumerate(encode(load, 11, 1))]  # current - 10 s
        state.touched(write_batch(wh, late, lambda letters: None).earliest)
        assert step.run_step(wh, isolated_settings, lambda c, n: True, state).nodes == 1 and wh.reads == 2
    finally:
        wh.close()
