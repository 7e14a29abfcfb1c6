"""gpuledger's batch side: a Dagster code location (``dagster dev -m dagster_project``).

It turns the attributed facts in ClickHouse into what finance and platform leads decide with:
daily usage, idle and failure waste, queue time, cost allocation; monthly unit cost, chargeback
(FinOps FOCUS 1.2 files per business unit), capacity plan; and fabric health from NCCL runs.
"""

from __future__ import annotations

from dagster_project.definitions import defs

__all__ = ["defs"]
