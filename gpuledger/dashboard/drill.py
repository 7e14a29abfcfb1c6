"""The served dashboard's table: GPU-hours (and cost, where the rows carry it) for one grouping,
inside the business unit and team the user drilled into, for one cluster and window.

Drilling is business unit → team → job: a business unit's row opens its teams, a team's row its
jobs. The rows come from ``gpuledger.reports.run`` (the same layer as ``/api/v1/gpu-hours`` and
``gpuledger report gpu-hours``) grouped by the drilled dimensions and the chosen one, and keep only
the drilled values; a business-unit scope is applied by that layer, on the server.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from gpuledger import reports
from pipelines.clusters import parse_cluster

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client

DRILL = ("business_unit", "team")  # the levels a row opens, in order; the last opens jobs
NEXT = {"business_unit": "team", "team": "job"}
EMPTY_NUMBERS = ("allocated_gpu_hours", "busy_gpu_hours", "failed_gpu_hours", "idle_gpu_hours", "gpu_hours")
BY_CHOICES = ("business_unit", "team", "model", "namespace", "job", "gpu_model", "node", "user", "queue", "cluster")


@dataclass(frozen=True)
class View:
    """What the page shows: cluster, window (or from/to), grouping and the drilled values."""

    cluster: str
    window: str
    by: str = "business_unit"
    filters: dict[str, str] = field(default_factory=dict)  # business_unit / team -> value

    def dims(self) -> list[str]:
        """The query's grouping: the drilled dimensions, then the chosen one."""
        return [*[d for d in DRILL if d in self.filters and d != self.by], self.by]

    def query(self, **change: str | None) -> dict[str, str]:
        """URL parameters of this view with ``change`` applied (None removes one)."""
        params = {"cluster": self.cluster, "window": self.window, "by": self.by, **self.filters}
        for key, value in change.items():
            if value is None:
                params.pop(key, None)
            else:
                params[key] = value
        return params


def rows(client: Client, view: View, start: datetime, end: datetime, business_unit: str | None) -> list[dict[str, Any]]:
    """The view's rows: one per value of ``view.by`` (capacity rows only at the top level), with the
    drilled dimensions as columns too."""
    if view.by not in BY_CHOICES:
        raise reports.BadRequest(f"by is one of {', '.join(BY_CHOICES)}, not {view.by!r}")
    dims = view.dims()
    result = reports.run(
        client,
        "gpu-hours",
        by=dims,
        start=start,
        end=end,
        cluster=parse_cluster(view.cluster),
        business_unit=business_unit,
    )
    out = []
    for record in result.records:
        row = dict(record)
        if "key" in row:  # one dimension: the report names it key
            row = {dims[0]: row.pop("key"), **row}
        if str(row[view.by]).startswith("__"):  # capacity: no owner, shown only when nothing is drilled
            if view.filters:
                continue
        elif any(row.get(d) != v for d, v in view.filters.items()):
            continue
        out.append(row)
    return out


def columns(found: list[dict[str, Any]], view: View) -> list[str]:
    """The dimensions, then the rows' numbers (an empty table keeps the GPU-hours columns)."""
    dims = view.dims()
    numbers = [c for c in found[0] if c not in dims] if found else list(EMPTY_NUMBERS)
    return [*dims, *numbers]


def as_csv(found: list[dict[str, Any]], view: View) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, columns(found, view), lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(found)
    return out.getvalue()
