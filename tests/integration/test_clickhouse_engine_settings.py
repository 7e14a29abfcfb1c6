"""A session's URL settings on the embedded engine: set once while every query asks for the same ones
(clickhouse-connect sends its settings with every query), put back as soon as a query asks for other
ones or none. Runs the real chdb engine in a child process (chdb opens one data path per process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, sys
from pathlib import Path
from infra.clickhouse.engine import Engine

engine = Engine(Path(sys.argv[1]))
sets = []
real = engine._query
def counted(handle, sql, fmt="TabSeparated", params=None):
    if sql.startswith("SET "):
        sets.append(sql)
    return real(handle, sql, fmt, params)
engine._query = counted

def ask(settings, sql="SELECT getSetting('max_block_size')"):
    with engine.handle("s1", 60.0, False, False) as handle:
        return engine.run(handle, sql, "TabSeparated", settings=settings).body.decode().strip()

out = {}
out["baseline"] = ask({})
same = {"max_block_size": "4321", "date_time_input_format": "best_effort"}
out["same"] = [ask(same) for _ in range(3)]
out["sets_for_three"] = len(sets)
out["without"] = ask({})
out["sets_after_without"] = len(sets)
out["other"] = ask({"max_block_size": "777"})
out["user_set"] = ask({"date_time_input_format": "best_effort"}, "SET max_block_size = 555")
out["after_user_set"] = ask({})
out["with_after_user_set"] = ask(same)
out["back"] = ask({})
print(json.dumps(out))
engine.close()
"""


def test_a_sessions_url_settings_are_set_once_and_put_back_when_a_query_asks_for_others(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "data")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    out = json.loads(done.stdout.strip().splitlines()[-1])
    baseline = out["baseline"]
    assert baseline != "4321"
    assert out["same"] == ["4321"] * 3
    assert out["sets_for_three"] == 1  # one SET for three queries with the same settings
    assert out["without"] == baseline  # put back before a query without them
    assert out["sets_after_without"] == 2
    assert out["other"] == "777"
    # a SET statement (sent with other URL settings, as clients send it) changes the session's
    # baseline; the URL settings of later queries do not overwrite it
    assert out["after_user_set"] == "555"
    assert out["with_after_user_set"] == "4321"
    assert out["back"] == "555"
