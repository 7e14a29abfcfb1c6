"""The cost terms: the one list (and order) of what a month's cost is made of.

    effective_cluster_unit_cost = (compute + network + storage + support + operations + idle + retries)
                                  / accepted workload units

The Dagster cost assets (``dagster_project/defs/costs/month_cents.py``), the unit-cost columns of the
exports and the CLI's breakdown all read :data:`TERMS` from here; it lives below every floor, so a
CLI command can name the terms without loading Dagster.
"""

from __future__ import annotations

TERMS: tuple[str, ...] = ("compute", "network", "storage", "support", "operations", "idle", "retries")
