"""``gc_paused``: the collector is paused for a large input only, enabled again afterwards, and what
the parse built is left in the oldest generation without a collection, unless the process keeps
objects frozen (those stay frozen)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from pipelines.parsers.base import BULK_BYTES, gc_paused


@pytest.fixture
def collector() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.enable()
    yield
    gc.unfreeze()
    if not enabled:
        gc.disable()


@pytest.mark.usefixtures("collector")
def test_a_large_input_is_parsed_paused_and_its_output_lands_in_the_oldest_generation() -> None:
    with gc_paused(b"x" * BULK_BYTES):
        assert not gc.isenabled()
        built = [[float(i)] for i in range(2000)]  # more than a young generation holds
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert gc.get_count()[0] < 100  # no collection pending for what was built
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert all(id(row) in oldest for row in built)


@pytest.mark.usefixtures("collector")
def test_a_small_input_is_parsed_with_the_collector_running() -> None:
    with gc_paused(b"x" * 100):
        assert gc.isenabled()
    assert gc.isenabled()


@pytest.mark.usefixtures("collector")
def test_objects_the_process_froze_stay_frozen() -> None:
    kept = [[1.0]]
    gc.freeze()
    frozen = gc.get_freeze_count()
    with gc_paused(b"x" * BULK_BYTES):
        built = [[2.0]]
    assert gc.isenabled() and gc.get_freeze_count() == frozen and kept and built
