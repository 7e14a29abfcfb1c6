"""A batch's parts are prepared (decoded, rows built) while the part before is stored, stored in
order one after the other, and every part whose prepared rows cannot be used is written whole."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError

from streams.app import WarehouseMismatch, write_overlapped
from streams.ingest.sink import Message


@dataclass
class FakePrepared:
    """What a prepare gives back: the part, and whether it compared allocations with placements."""

    messages: list[Message]
    reads_placements: bool = False


@dataclass
class Lanes:
    """Two single threads, as the worker's sink and store lanes, and what ran on them, in order."""

    log: list[tuple[str, int, float]] = field(default_factory=list)
    sink: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(1))
    store: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(1))
    lock: threading.Lock = field(default_factory=threading.Lock)
    bad_prepare: set[int] = field(default_factory=set)  # parts (first offset) whose prepare raises
    placements: set[int] = field(default_factory=set)  # parts that compare allocations with placements
    bad_store: set[int] = field(default_factory=set)  # offsets whose rows the warehouse rejects
    letters: list[int] = field(default_factory=list)

    def note(self, what: str, part: list[Message]) -> None:
        with self.lock:
            self.log.append((what, part[0].offset, time.monotonic()))

    def prepare(self, part: list[Message]) -> FakePrepared:
        self.note("prepare", part)
        time.sleep(0.05)
        if part[0].offset in self.bad_prepare:
            raise ValueError("cannot decode")
        self.note("prepared", part)
        return FakePrepared(part, part[0].offset in self.placements)

    def store_part(self, prepared: FakePrepared) -> None:
        self.note("store", prepared.messages)
        time.sleep(0.05)
        if any(m.offset in self.bad_store for m in prepared.messages):
            raise ValueError("rejected by the warehouse")
        self.note("stored", prepared.messages)

    def write(self, messages: list[Message]) -> None:
        self.note("write", messages)
        if any(m.offset in self.bad_store for m in messages):
            raise ValueError("rejected by the warehouse")
        self.note("written", messages)

    def dead_letter(self, message: Message, reason: str) -> None:
        self.letters.append(message.offset)

    async def run_on(self, pool: ThreadPoolExecutor, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)

    def write_parts(self, parts: list[list[Message]]) -> None:
        asyncio.run(
            write_overlapped(
                parts,
                prepare=lambda part: self.run_on(self.sink, self.prepare, part),
                run=lambda fn, *args: self.run_on(self.store, fn, *args),
                store=self.store_part,
                write=self.write,
                logical="gpu.metrics",
                dead_letter=self.dead_letter,
            )
        )

    def events(self, *kinds: str) -> list[tuple[str, int]]:
        return [(what, offset) for what, offset, _ in self.log if what in kinds]

    def at(self, what: str, offset: int) -> float:
        return next(t for w, o, t in self.log if (w, o) == (what, offset))


def _parts(count: int, size: int = 3) -> list[list[Message]]:
    return [[Message("gpu.metrics", 0, p * size + i, b"{}") for i in range(size)] for p in range(count)]


def test_the_next_part_is_prepared_while_the_part_before_is_stored_and_stores_keep_their_order() -> None:
    lanes = Lanes()
    lanes.write_parts(_parts(4))
    assert lanes.events("stored") == [("stored", 0), ("stored", 3), ("stored", 6), ("stored", 9)]
    assert lanes.events("write") == []
    for before, after in ((0, 3), (3, 6), (6, 9)):
        assert lanes.at("prepare", after) < lanes.at("stored", before)  # overlapped
        assert lanes.at("stored", before) <= lanes.at("store", after)  # one store at a time, in order


def test_a_part_that_cannot_be_prepared_or_read_placements_meanwhile_is_written_whole_after_the_one_before() -> None:
    lanes = Lanes(bad_prepare={3}, placements={0, 6})
    lanes.write_parts(_parts(3))
    # the first part had nothing before it: its placements were read after every earlier write
    assert lanes.events("stored", "written") == [("stored", 0), ("written", 3), ("written", 6)]
    assert lanes.at("stored", 0) <= lanes.at("write", 3) and lanes.at("written", 3) <= lanes.at("write", 6)


def test_a_part_the_warehouse_rejects_is_written_message_by_message_and_the_bad_one_is_a_dead_letter() -> None:
    lanes = Lanes(bad_store={4})
    lanes.write_parts(_parts(3))
    assert lanes.events("stored", "written") == [("stored", 0), ("written", 3), ("written", 5), ("stored", 6)]
    assert lanes.letters == [4]


def test_a_failure_that_stops_the_worker_leaves_nothing_behind() -> None:
    """A schema error (an operator has to act) stops the batch: no later part is stored."""
    lanes = Lanes()

    def schema_error(prepared: FakePrepared) -> None:
        lanes.note("store", prepared.messages)
        error = DatabaseError("Code: 60. DB::Exception: Table gpu_samples does not exist. (UNKNOWN_TABLE)")
        error.code = 60
        raise error

    with pytest.raises(WarehouseMismatch):
        asyncio.run(
            write_overlapped(
                _parts(3),
                prepare=lambda part: lanes.run_on(lanes.sink, lanes.prepare, part),
                run=lambda fn, *args: lanes.run_on(lanes.store, fn, *args),
                store=schema_error,
                write=lanes.write,
                logical="gpu.metrics",
                dead_letter=lanes.dead_letter,
            )
        )
    assert lanes.events("store") == [("store", 0)]
    assert lanes.events("prepared") == [("prepared", 0), ("prepared", 3)]  # the next part, then nothing
