"""A sink batch is written in parts of bounded bytes, in order, each message in exactly one part;
the worker's Arrow buffers come from the heap it trims."""

from __future__ import annotations

from streams.app import parts
from streams.ingest.sink import Message


def _batch(sizes: list[int]) -> list[Message]:
    return [Message("gpu.metrics", 0, i, b"x" * n) for i, n in enumerate(sizes)]


def test_small_messages_are_one_part_and_large_ones_are_cut_in_order() -> None:
    small = _batch([700] * 2000)
    assert parts(small, 4 << 20) == [small]
    large = _batch([40_000] * 250)
    cut = parts(large, 1_000_000)
    assert [len(p) for p in cut] == [25] * 10
    assert [m for p in cut for m in p] == large
    assert all(sum(len(m.value) for m in p) <= 1_000_000 for p in cut)


def test_a_message_larger_than_the_limit_is_a_part_of_its_own() -> None:
    batch = _batch([10, 5_000, 10, 10])
    assert [[m.offset for m in p] for p in parts(batch, 100)] == [[0], [1], [2, 3]]
    assert parts([], 100) == []


def test_the_worker_takes_arrow_buffers_from_the_trimmed_heap() -> None:
    import pyarrow as pa

    from streams.app import use_system_allocator_for_arrow

    before = pa.default_memory_pool()
    try:
        use_system_allocator_for_arrow()
        assert pa.default_memory_pool().backend_name == "system"
    finally:
        pa.set_memory_pool(before)
