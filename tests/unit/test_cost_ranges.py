"""The idle options of a costed report (OpenCost's: idle as its own row, or shared weighted or
evenly) on hand-computed examples, and how a range is cut into the parts the daily rule costs."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from decimal import Decimal

import pytest

from dagster_project.defs.costs.allocation import PLATFORM, SharePolicy, UsageSegment, allocate_day
from dagster_project.defs.costs.ranges import IDLE_ROW, PLATFORM_ROW, day_parts, owner_dimensions, row_key
from tests.unit.test_cost_model import MAR16, A, B, alloc, book, by, day, free


@pytest.mark.parametrize(
    ("idle", "policy", "want"),
    [
        # 30 idle GPU-h of H100 at 2.50 = 75.00; A used 60 GPU-h, B 30 (A100: by_allocation leaves it out)
        ("policy", "spread", {"research": Decimal(50), "product": Decimal(25)}),
        ("policy", "platform", {PLATFORM: Decimal(75)}),
        ("weighted", "platform", {"research": Decimal(50), "product": Decimal(25)}),
        ("even", "spread", {"research": Decimal("37.5"), "product": Decimal("37.5")}),
        ("separate", "spread", {PLATFORM: Decimal(75)}),
    ],
)
def test_idle_options_override_the_policy(idle: str, policy: str, want: dict[str, Decimal]) -> None:
    usage = [alloc(A, 60), alloc(B, 30, model="A100"), free(30)]
    result = allocate_day(*day(MAR16), usage, book(policy), SharePolicy(), idle_share=idle)  # type: ignore[arg-type]
    assert by(result.lines, "idle") == want
    assert sum(ln.cost for ln in result.lines) == result.total == Decimal(150 + 48 + 75)


def test_a_range_is_cut_at_each_utc_midnight() -> None:
    a, b = MAR16 + timedelta(hours=13), MAR16 + timedelta(days=2, hours=2)
    assert day_parts(a, b) == [
        (a, MAR16 + timedelta(days=1)),
        (MAR16 + timedelta(days=1), MAR16 + timedelta(days=2)),
        (MAR16 + timedelta(days=2), b),
    ]
    assert day_parts(MAR16, MAR16 + timedelta(days=1)) == [(MAR16, MAR16 + timedelta(days=1))]


def test_a_partial_day_carries_its_seconds_of_the_shared_costs() -> None:
    # 3100 a month of 31 days: 100 a day, 25 for six hours; all to the only user
    six = (MAR16, MAR16 + timedelta(hours=6))
    result = allocate_day(*six, [alloc(A, 6)], book(network="3100"), SharePolicy())
    assert by(result.lines, "network") == {"research": Decimal(25)}


def test_lines_go_to_the_rows_of_the_report() -> None:
    owner = owner_dimensions(["namespace", "team"])
    assert owner == ("business_unit", "team", "model", "namespace")
    assert owner_dimensions(["namespace", "team"], "even") == ("namespace", "team")
    segment = UsageSegment("H100", MAR16, "allocated", ("bu", "t", "m", "ns"), 3600.0)
    line = allocate_day(*day(MAR16), [segment], book(), SharePolicy()).lines[0]
    assert row_key(line, ["namespace", "team"], owner) == "ns\x1ft"
    platform = allocate_day(*day(MAR16), [free(2)], book(network="31"), SharePolicy()).lines
    assert {row_key(ln, ["team"], owner) for ln in platform} == {IDLE_ROW, PLATFORM_ROW}


def test_the_cost_rule_imports_without_dagster() -> None:
    """``report gpu-hours`` and ``gpuledger serve`` price rows with it in installs without the
    dagster extra (a meta-path finder here refuses Dagster as a missing package)."""
    code = (
        "import sys\n"
        "class NoDagster:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'dagster':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, NoDagster())\n"
        "import dagster_project.defs.costs.ranges, gpuledger.reports\n"
        "assert 'dagster' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
