"""Writes that replace exactly one partition: delete its rows, then insert them again.

A re-run or a backfill of a day (or month) therefore leaves the same rows, never twice as many.
Table and column names are constants of the calling asset; values always travel as parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Any

from clickhouse_connect.driver.client import Client

from sql import load_query

SYNC = {"mutations_sync": 2}


def delete_partition(client: Client, table: str, column: str, value: date) -> None:
    client.command(
        f"ALTER TABLE {table} DELETE WHERE {column} = {{value:Date}}", parameters={"value": value}, settings=SYNC
    )


def replace_from_query(
    client: Client, table: str, column: str, value: date, columns: Sequence[str], query: str, params: dict[str, Any]
) -> int:
    """Rebuild ``table``'s rows where ``column = value`` from the named query's SELECT."""
    return replace_from_select(client, table, column, value, columns, load_query(query), params)


def replace_from_select(
    client: Client, table: str, column: str, value: date, columns: Sequence[str], select: str, params: dict[str, Any]
) -> int:
    """Rebuild ``table``'s rows where ``column = value`` from a SELECT (server-side parameters)."""
    delete_partition(client, table, column, value)
    client.command(f"INSERT INTO {table} ({', '.join(columns)})\n{select}", parameters=params)
    return count(client, table, column, value)


def replace_rows(
    client: Client, table: str, column: str, value: date, columns: Sequence[str], rows: Sequence[Sequence[Any]]
) -> int:
    """Rebuild ``table``'s rows where ``column = value`` from rows computed in Python."""
    delete_partition(client, table, column, value)
    if rows:
        client.insert(table, [list(r) for r in rows], column_names=list(columns))
    return len(rows)


def count(client: Client, table: str, column: str, value: date) -> int:
    result = client.query(f"SELECT count() FROM {table} WHERE {column} = {{value:Date}}", parameters={"value": value})
    return int(result.result_rows[0][0])


def rows(client: Client, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """The named query's rows as dicts."""
    result = client.query(load_query(query), parameters=params)
    names = list(result.column_names)
    return [dict(zip(names, r, strict=True)) for r in result.result_rows]
