"""``gpu_samples`` from Arrow blocks on the real ClickHouse endpoint: a version 1 and a version 2
message of one scrape give the same stored rows and node activity, and so does a version 3 message
of several scrapes; a bad array is a dead letter."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest

from infra.services import apply_migrations
from pipelines import events as ev
from pipelines import wire
from pipelines.gpu_columns import from_v1, pack
from pipelines.settings import Settings
from streams.attribution.warehouse import AttributionWarehouse
from streams.ingest.sink import Message, write_batch
from tests.conftest import Endpoints, fresh_settings
from tests.unit.test_gpu_columns import GPUS, v1_message
from tests.unit.test_gpu_scrapes import scrape, scrapes

pytestmark = pytest.mark.integration
ROWS = "SELECT * EXCEPT ingested_at FROM gpu_samples ORDER BY node, time, uuid, mig_instance"
ACTIVITY = "SELECT cluster, node, min_time, max_time, allocations FROM node_activity ORDER BY node"


@pytest.fixture
def two(
    endpoints: Endpoints, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[AttributionWarehouse, AttributionWarehouse]]:
    houses = []
    for _ in range(2):
        settings: Settings = fresh_settings(endpoints, tmp_path_factory)
        apply_migrations(settings)
        houses.append(AttributionWarehouse(settings))
    yield houses[0], houses[1]
    for wh in houses:
        wh.client.command(f"DROP DATABASE IF EXISTS {wh.settings.clickhouse_database}")
        wh.close()


def test_v1_and_v2_of_the_same_scrapes_store_the_same_rows(
    two: tuple[AttributionWarehouse, AttributionWarehouse],
) -> None:
    v1 = [orjson.dumps(v1_message(node=f"gpu{n:03d}")) for n in range(3)]
    v2 = [from_v1(wire.decode(raw)).to_bytes() for raw in v1]  # type: ignore[arg-type]
    assert all(orjson.loads(raw)["schema_version"] == 2 for raw in v2)
    first, second = two
    for wh, batch in ((first, v1), (second, v2)):
        dead: list[ev.DeadLetter] = []
        result = write_batch(wh, [Message("gpu.metrics", 0, i, raw) for i, raw in enumerate(batch)], dead.extend)
        assert result.events == 3 and dead == []
    rows = first.client.query(ROWS).result_rows
    assert len(rows) == 9 and rows == second.client.query(ROWS).result_rows
    assert first.client.query(ACTIVITY).result_rows == second.client.query(ACTIVITY).result_rows
    by_uuid = {(r[3], r[4]): r for r in rows}  # (node, uuid)
    busy = by_uuid[("gpu000", "GPU-a")]
    assert busy[7] == "H100" and busy[9] == pytest.approx(0.4) and busy[16] == "ml" and busy[17] == "train-0"


def test_a_message_of_several_scrapes_stores_the_rows_and_activity_of_its_scrapes(
    two: tuple[AttributionWarehouse, AttributionWarehouse],
) -> None:
    v2 = scrapes()
    first, second = two
    for wh, batch in ((first, [pack(v2).to_bytes()]), (second, [e.to_bytes() for e in v2])):
        dead: list[ev.DeadLetter] = []
        write_batch(wh, [Message("gpu.metrics", 0, i, raw) for i, raw in enumerate(batch)], dead.extend)
        assert dead == []
    rows = first.client.query(ROWS).result_rows
    assert len(rows) == 8 and rows == second.client.query(ROWS).result_rows
    assert first.client.query(ACTIVITY).result_rows == second.client.query(ACTIVITY).result_rows
    assert {r[0] for r in rows} == {e.id for e in v2}  # each row keeps its scrape's id


def test_a_bad_array_is_a_dead_letter_and_the_good_scrapes_are_stored(
    two: tuple[AttributionWarehouse, AttributionWarehouse],
) -> None:
    wh = two[0]
    good = from_v1(wire.decode(orjson.dumps(v1_message()))).to_bytes()  # type: ignore[arg-type]
    bad = orjson.loads(good)
    bad["data"]["node"], bad["data"]["power_w"] = "gpu999", [1.0, -5.0, None]
    dead: list[ev.DeadLetter] = []
    write_batch(wh, [Message("gpu.metrics", 0, 0, orjson.dumps(bad)), Message("gpu.metrics", 0, 1, good)], dead.extend)
    assert [d.reason for d in dead] == ["data.power_w: -5.0 is below 0"]
    assert wh.client.query("SELECT DISTINCT node FROM gpu_samples").result_rows == [("gpu001",)]


INVENTORY = (
    "SELECT cluster, node, hour, uuid, min(first_time), max(last_time), anyLast(gpu_index), anyLast(gpu_model), "
    "max(last_fatal), max(last_clear) FROM gpu_inventory GROUP BY cluster, node, hour, uuid ORDER BY node, hour, uuid"
)
FROM_SAMPLES = (
    "SELECT cluster, node, toStartOfHour(time) AS hour, uuid, min(time), max(time), anyLast(gpu_index), "
    "anyLast(toString(gpu_model)), maxIf(time, xid IN (48, 63, 64, 74, 79, 92, 94, 95, 119, 120)), "
    "maxIf(time, xid IS NOT NULL AND xid NOT IN (48, 63, 64, 74, 79, 92, 94, 95, 119, 120)) "
    "FROM gpu_samples GROUP BY cluster, node, hour, uuid ORDER BY node, hour, uuid"
)


def test_an_insert_of_a_node_s_history_writes_one_inventory_row_per_hour_and_gpu(
    two: tuple[AttributionWarehouse, AttributionWarehouse],
) -> None:
    """Two hours of a node (its scrapes 30 s apart, one GPU down with a fatal XID and back) in one
    version 3 message: the inventory gets one row per (hour, GPU) from the insert itself, holding
    what the samples give, whether or not the server merges an insert's rows by their key
    (``optimize_on_insert``)."""
    wh = two[0]
    wh.client.command("SYSTEM STOP MERGES gpu_inventory")  # what one insert writes, not what merges make of it
    wh.client.set_client_setting("optimize_on_insert", 0)  # nor what the server's merge on insert makes of it
    gpus = [dict(g) for g in GPUS[:2]]
    history = []
    for half in range(240):  # 10:00 to 11:59:30
        rows = [dict(g, xid=79 if (g is gpus[1] and half == 50) else 0 if half % 7 else None) for g in gpus]
        history.append(scrape(half / 2, rows))
    dead: list[ev.DeadLetter] = []
    write_batch(wh, [Message("gpu.metrics", 0, 0, pack(history).to_bytes())], dead.extend)
    assert dead == []
    assert wh.client.query("SELECT count() FROM gpu_samples").result_rows == [(480,)]
    assert wh.client.query("SELECT count() FROM gpu_inventory").result_rows == [(4,)]  # 2 hours × 2 GPUs
    stored = wh.client.query(INVENTORY).result_rows
    assert stored == wh.client.query(FROM_SAMPLES).result_rows
    fatal = [r for r in stored if r[8].year > 1970]
    assert [(r[3], r[8].hour, r[8].minute) for r in fatal] == [(gpus[1]["uuid"], 10, 25)]
