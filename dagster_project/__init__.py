"""gpuledger's batch side: a Dagster code location (``dagster dev -m dagster_project``).

It turns the attributed facts in ClickHouse into what finance and platform leads decide with:
daily usage, idle and failure waste, queue time, cost allocation; monthly unit cost, chargeback
(FinOps FOCUS 1.2 files per business unit), capacity plan; and fabric health from NCCL runs.

Without Dagster installed (a ``serve`` or ``stream`` install) the package still imports, without
``defs``: the pure cost rule under ``defs/costs``, which ``gpuledger report gpu-hours`` and
``gpuledger serve`` use too, needs no Dagster.
"""

from __future__ import annotations

try:
    from dagster_project.definitions import defs
except ModuleNotFoundError as exc:  # pragma: no cover - exercised in an install without the dagster extra
    if exc.name != "dagster":
        raise
else:
    __all__ = ["defs"]
