"""The workers' warehouse I/O against the real ClickHouse endpoint: an insert is one request once a
table's column types are known (not a DESCRIBE before every insert), and its rows arrive whole."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from streams.store import Warehouse

pytestmark = pytest.mark.integration


def _activity(node: str, seq: int) -> dict[str, Any]:
    t = datetime(2026, 11, 1, tzinfo=UTC)
    return {"cluster": "c", "node": node, "min_time": t, "max_time": t, "allocations": 0, "seq": seq}


def test_a_tables_column_types_are_asked_once_not_before_every_insert(
    warehouse: Warehouse, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []
    client = warehouse.client
    real = client.create_insert_context

    def counted(table: str, names: Any = None, database: Any = None, types: Any = None, *args: Any, **kw: Any) -> Any:
        if types is None and (args[0] if args else kw.get("column_type_names")) is None:  # asked of the server
            asked.append(table)
        return real(table, names, database, types, *args, **kw)

    monkeypatch.setattr(client, "create_insert_context", counted)
    for i in range(3):
        warehouse.insert("node_activity", [_activity(f"n{i}", i + 1)])
    warehouse.insert("node_activity", {"cluster": ["c"], "node": ["n9"], "seq": [9]})  # other columns: asked again
    assert asked == ["node_activity", "node_activity"]
    rows = warehouse.client.query("SELECT node, seq, allocations FROM node_activity ORDER BY seq").result_rows
    assert rows == [("n0", 1, 0), ("n1", 2, 0), ("n2", 3, 0), ("n9", 9, 0)]
    warehouse.close()  # a new client (after a transient error) keeps what it learnt
    monkeypatch.setattr(warehouse.client, "create_insert_context", counted)
    warehouse.insert("node_activity", [_activity("n3", 4)])
    assert asked == ["node_activity", "node_activity"]
    assert warehouse.client.query("SELECT count() FROM node_activity").result_rows == [(5,)]
