"""Unit cost that reads right: per 1M tokens (per 1k of other outputs) beside the raw value, the
generated tokens as the default output unit, and chart axes readable at any magnitude."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest

from dagster_project.defs.costs.month_cents import scaled_unit_cost
from dagster_project.defs.costs.month_rollup import output_units
from gpuledger.dashboard import charts


@pytest.mark.parametrize(
    ("kind", "total", "units", "per", "scaled"),
    [
        ("output_events:tokens_generated", "1198.93", 8.05086e6 / 3, "1M tokens_generated", 446.76),
        ("output_events:tokens_prompt", "1198.93", 8.05086e6, "1M tokens_prompt", 148.92),
        ("output_events:images", "50.00", 20000.0, "1k images", 2.50),
        ("successful_runs", "1198.93", 7.0, "successful run", 171.28),
        ("successful_runs", "1198.93", 0.0, "successful run", None),
    ],
)
def test_a_unit_cost_is_shown_per_million_tokens_or_per_thousand_outputs(
    kind: str, total: str, units: float, per: str, scaled: float | None
) -> None:
    got = scaled_unit_cost(Decimal(total), units, kind)
    assert got["unit_cost_per"] == per
    assert got["unit_cost_scaled"] == (None if scaled is None else pytest.approx(scaled, abs=0.005))


def test_generated_tokens_are_the_default_output_unit_when_the_outputs_carry_them() -> None:
    rows = [  # as cost_output_units orders them: per cluster, the most reported unit first
        {"cluster": "a", "unit": "tokens_prompt", "quantity": 300.0},
        {"cluster": "a", "unit": "tokens_generated", "quantity": 100.0},
        {"cluster": "a", "unit": "samples", "quantity": 50.0},
        {"cluster": "b", "unit": "images", "quantity": 9.0},
        {"cluster": "b", "unit": "requests", "quantity": 4.0},
    ]
    assert output_units(rows) == {
        "a": (100.0, "output_events:tokens_generated"),
        "b": (9.0, "output_events:images"),
    }


def _ticks(svg: str) -> list[str]:
    return re.findall(r'text-anchor="end" font-size="11">([^<]*)</text>', svg)


@pytest.mark.parametrize("peak", [3.7e-7, 1.5e-4, 0.012, 0.9, 7.0, 420.0, 86_000.0, 3.2e7, 5.5e12])
def test_axis_ticks_are_distinct_round_and_readable_at_any_magnitude(peak: float) -> None:
    svg = charts.stacked_bars("t", ["x", "y"], {"s": [peak, peak / 3]}, "cost")
    ticks = _ticks(svg)
    assert len(ticks) >= 3 and len(set(ticks)) == len(ticks), ticks  # never every tick 0.00
    assert all(len(t) <= 6 for t in ticks), ticks
    values = [charts.parse_si(t) for t in ticks]
    assert values[0] == 0 and values == sorted(values) and values[-1] >= peak
    steps = {round(b - a, 15) for a, b in zip(values, values[1:], strict=False)}
    assert len({f"{s:.6g}" for s in steps}) == 1, ticks  # evenly spaced
    assert f"{values[1]:.1e}"[0] in "125", ticks  # a round step: 1, 2 or 5 times a power of ten
    tops = [float(y) for y in re.findall(r'class="mark" x="[^"]*" y="([^"]*)"', svg)]
    grid = sorted(float(y) for y in re.findall(r'<line x1="[^"]*" x2="[^"]*" y1="([^"]*)"', svg))
    assert tops and min(tops) >= grid[0] - 0.1  # the tallest bar ends under the top tick, inside the plot
    assert min(tops) <= grid[1]  # and above the one below it: the axis fits the data


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0"),
        (0.00025, "250µ"),
        (0.0015, "1.5m"),
        (0.5, "0.5"),
        (12.0, "12"),
        (1500.0, "1.5k"),
        (2_000_000.0, "2M"),
        (7.5e9, "7.5G"),
        (3e12, "3T"),
        (4.2e-8, "42n"),
    ],
)
def test_si_labels(value: float, text: str) -> None:
    assert charts.si(value) == text
    assert charts.parse_si(text) == pytest.approx(value)
