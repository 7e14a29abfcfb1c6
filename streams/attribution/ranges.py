"""Attribute a node over a range of windows: what the stream workers run for every node and every
(re)computed range. A pure function of the raw rows, so any worker, after any crash, replaying in
any order, writes the same facts.

Ranges of at least ``VECTOR_MIN_WINDOWS`` windows take the vectorised path
(``streams/attribution/vector.py``), all windows at once; shorter ones, and the nodes that path
declines, take :func:`~streams.attribution.node_range.compute_range_scalar`, the reference.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipelines.events import AllocationData
from streams.attribution.node_range import NodeInputs, RangeResult, SampleColumns, SampleRow, compute_range_scalar
from streams.attribution.vector import compute_range_vector

VECTOR_MIN_WINDOWS = 8  # below this many windows one range is faster window by window


def compute_range(
    cluster: str,
    node: str,
    start: float,
    end: float,
    window_s: int,
    samples: SampleColumns | Sequence[SampleRow],
    placements: Sequence[AllocationData],
    inputs: NodeInputs | None = None,
) -> list[dict[str, Any]]:
    """Fact rows (as warehouse dicts) for every window of [start, end) on ``node``."""
    return compute_range_full(cluster, node, start, end, window_s, samples, placements, inputs).facts


def compute_range_full(
    cluster: str,
    node: str,
    start: float,
    end: float,
    window_s: int,
    samples: SampleColumns | Sequence[SampleRow],
    placements: Sequence[AllocationData],
    inputs: NodeInputs | None = None,
) -> RangeResult:
    """Fact rows, and per window the node's physical GPUs and conflicts, for [start, end) on ``node``.

    The vectorised path (``streams/attribution/vector.py``) computes the ranges of at least
    ``VECTOR_MIN_WINDOWS`` windows it covers, all windows at once; the others take
    :func:`compute_range_scalar`, the reference. Both give the same facts, bit for bit
    (``tests/unit/test_attribution_vector.py``), so the choice is only one of speed."""
    inputs = inputs or NodeInputs()
    cols = samples if isinstance(samples, SampleColumns) else SampleColumns.from_rows(samples)
    if end - start >= VECTOR_MIN_WINDOWS * window_s:
        result = compute_range_vector(cluster, node, start, end, window_s, cols, placements, inputs)
        if result is not None:
            return result
    return compute_range_scalar(cluster, node, start, end, window_s, cols, placements, inputs)
