"""The dashboard ``gpuledger serve`` shows a logged-in browser at ``/dashboard``.

Plain HTML, CSS and inline SVG, as the file dashboard (``html.py``): no script at all, no network.
The controls are a GET form (cluster, window, grouping), a row of the business-unit or team table
is a link that drills one level down (business unit → team → job), the breadcrumbs climb back, and
the CSV link downloads exactly the rows of the table (``/dashboard/export.csv`` with the same
parameters). A user with the scope ``all`` also sees the whole cluster's finance sections below.
"""

from __future__ import annotations

from html import escape
from typing import Any
from urllib.parse import urlencode

from gpuledger.dashboard import html
from gpuledger.dashboard.charts import grouped_bars
from gpuledger.dashboard.drill import BY_CHOICES, DRILL, NEXT, View, columns

WINDOWS = ("24h", "7d", "today", "yesterday", "month-to-date", "last-month")
EXTRA_CSS = """
form.controls{display:flex;gap:12px;align-items:end;flex-wrap:wrap;margin:12px 0}
form.controls label{display:flex;flex-direction:column;font-size:12px;color:#555}
.top{display:flex;justify-content:space-between;align-items:center} .crumbs{margin:8px 0}
.crumbs a,td a{color:#1a5fb4} .scope{color:#555;font-size:13px}
"""


def _select(name: str, choices: list[str], current: str) -> str:
    opts = "".join(
        f'<option value="{escape(c)}"{" selected" if c == current else ""}>{escape(c)}</option>' for c in choices
    )
    return f'<label>{name.replace("_", " ")}<select name="{name}" id="control-{name}">{opts}</select></label>'


def controls(view: View, clusters: list[str], months: list[str]) -> str:
    hidden = "".join(f'<input type="hidden" name="{escape(k)}" value="{escape(v)}">' for k, v in view.filters.items())
    windows = [*WINDOWS, *months] + ([] if view.window in (*WINDOWS, *months) else [view.window])
    return (
        '<form class="controls" method="get" action="/dashboard" id="controls">'
        f"{_select('cluster', sorted({*clusters, view.cluster}), view.cluster)}"
        f"{_select('window', windows, view.window)}"
        f"{_select('by', list(BY_CHOICES), view.by)}{hidden}"
        '<button type="submit" id="control-apply">Show</button></form>'
    )


def link(view: View, **change: str | None) -> str:
    return "/dashboard?" + urlencode(view.query(**change))


def crumbs(view: View, scoped: str | None) -> str:
    parts = []
    if scoped is None:
        parts.append(
            f'<a href="{escape(link(view, by="business_unit", business_unit=None, team=None))}">all business units</a>'
        )
    else:
        parts.append(f"business unit {escape(scoped)}")
    if "business_unit" in view.filters:
        bu = view.filters["business_unit"]
        parts.append(f'<a href="{escape(link(view, by="team", team=None))}">{escape(bu)}</a>')
    if "team" in view.filters:
        parts.append(f'<a href="{escape(link(view, by="job"))}">{escape(view.filters["team"])}</a>')
    return f'<div class="crumbs" id="crumbs">{" › ".join(parts)}</div>'


def drill_table(found: list[dict[str, Any]], view: View) -> str:
    cols = columns(found, view)
    head = "".join(f"<th>{escape(c)}</th>" for c in cols)
    body = []
    for row in found:
        cells = []
        for c in cols:
            value = row.get(c, "")
            text = (
                html._num(value)
                if isinstance(value, float | int) and not isinstance(value, bool)
                else escape(str(value))
            )
            if c == view.by and view.by in DRILL and not str(value).startswith("__"):
                target = link(view, by=NEXT[view.by], **{view.by: str(value)})
                text = f'<a class="drill" href="{escape(target)}">{text}</a>'
            cells.append(f'<td class="{"n" if isinstance(value, float | int) else ""}">{text}</td>')
        body.append(f"<tr>{''.join(cells)}</tr>")
    empty = '<p id="drill-empty">No GPU-hours in this window.</p>' if not found else ""
    return f'<table id="drill-table"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>{empty}'


def page(
    view: View,
    found: list[dict[str, Any]],
    *,
    who: str,
    scoped: str | None,
    clusters: list[str],
    months: list[str],
    span: tuple[str, str],
    full: dict[str, Any] | None,
) -> str:
    """The served dashboard: header with the user's scope and logout, controls, breadcrumbs, a chart
    and the table of ``found`` with its CSV link; ``full`` (scope all only) the cluster's sections."""
    owned = [r for r in found if not str(r[view.by]).startswith("__")]
    chart = grouped_bars(
        "drill",
        [str(r[view.by]) for r in owned],
        {k: [float(r.get(f"{k}_gpu_hours") or 0.0) for r in owned] for k in ("allocated", "busy", "idle")},
        "GPU-hours",
    )
    csv_link = "/dashboard/export.csv?" + urlencode(view.query())
    sections = html.sections(full) if full is not None else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>gpuledger — {escape(view.cluster)}</title>
<style>{html.CSS}{EXTRA_CSS}</style></head><body>
<div class="top"><h1>GPU cost and utilisation — cluster {escape(view.cluster)}</h1>
<form method="post" action="/logout" id="logout"><span class="scope" id="who">{escape(who)}</span>
<button type="submit" id="logout-submit">Log out</button></form></div>
{controls(view, clusters, months)}
<div class="sub" id="span">{escape(span[0])} – {escape(span[1])} (end exclusive, UTC)</div>
{crumbs(view, scoped)}
<h2 id="drill-title">GPU-hours by {escape(view.by.replace("_", " "))}</h2>
<div class="card" id="drill-chart">{chart}</div>
<p><a href="{escape(csv_link)}" id="download-csv" download>Download these rows as CSV</a></p>
{drill_table(found, view)}
{sections}
</body></html>
"""
