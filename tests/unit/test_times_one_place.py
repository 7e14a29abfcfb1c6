"""Time is parsed, formatted, floored and cut into months in ``pipelines/times.py`` only.

An AST scan of every module of the code packages: none outside ``pipelines/times.py`` does what
that module does by hand. A new copy fails here with the file, the line and what it does; a
module that has a reason to keep its own text is listed in ``ALLOWED`` with the reason.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from pipelines import times

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("pipelines", "streams", "sql", "dagster_project", "infra", "bench")
HOME = "pipelines/times.py"

# (file, what) → why that file keeps its own text
ALLOWED: dict[tuple[str, str], str] = {
    ("pipelines/simulator/costs.py", "a month's end as (first + 32 days).replace(day=1)"): (
        "the simulator's cost ground truth: it must not share the calendar code of the cost assets "
        "it is checked against"
    ),
}

# the module's own names, and the names its copies had: no other module defines a function so named
NAMES = {name for name in vars(times) if not name.startswith("_") and callable(getattr(times, name))} | {
    "from_unix",
    "rfc3339",
    "to_utc",
    "unix_stamp",
    "scrape_stamp",
    "floor_window",
    "iso",
    "ts",
    "_utc",
    "_iso",
    "_to_utc",
    "_fromiso",
    "_hour",
    "_truncate",
}
NAMES -= {"MissingOffset", "date", "datetime", "timedelta"}


def _call(node: ast.AST) -> str | None:
    if not isinstance(node, ast.Call):
        return None
    if isinstance(node.func, ast.Name) and node.func.id == "timedelta":
        days = [k.value for k in node.keywords if k.arg == "days"]
        if days and isinstance(days[0], ast.Constant) and days[0].value == 32:
            return "a month's end as (first + 32 days).replace(day=1)"
        return None
    if not isinstance(node.func, ast.Attribute):
        return None
    attr = node.func.attr
    if attr in ("fromtimestamp", "utcfromtimestamp", "fromisoformat", "strptime"):
        return f"calls .{attr}()"
    args = [a.value for a in node.args if isinstance(a, ast.Constant)]
    if attr == "replace" and args in (["+00:00", "Z"], ["Z", "+00:00"]):
        return "swaps Z and +00:00"
    if attr == "replace" and {"minute", "second"} <= {k.arg for k in node.keywords}:
        return "floors a datetime with .replace(minute=0, second=0, …)"
    return None


def _window(node: ast.AST) -> str | None:
    """``floor(t / w) * w`` (or ``ceil``, with ``± slack`` inside)."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and isinstance(node.left, ast.Call)):
        return None
    name = ast.unparse(node.left.func)
    if name not in ("math.floor", "math.ceil", "floor", "ceil") or not node.left.args:
        return None
    inner = node.left.args[0]
    while isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Add | ast.Sub):
        inner = inner.left
    if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Div) and ast.dump(inner.right) == ast.dump(node.right):
        return f"rounds to a window with {name}(t / w) * w"
    return None


def _what(node: ast.AST) -> str | None:
    """What ``node`` does that only ``pipelines.times`` may do, or None."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in NAMES:
        return f"defines {node.name}()"
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and "%Y-%m-%dT%H:%M:%S" in node.value:
        return "formats YYYY-MM-DDTHH:MM:SS by hand"
    if isinstance(node, ast.IfExp) and "tzinfo is None" in ast.unparse(node.test):
        return "reads a naive datetime as UTC by hand"
    return _call(node) or _window(node)


def _findings() -> Iterator[tuple[str, int, str]]:
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel == HOME:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                what = _what(node)
                if what is not None:
                    yield rel, getattr(node, "lineno", 0), what


def test_no_module_outside_pipelines_times_handles_time_by_hand() -> None:
    found = [(rel, line, what) for rel, line, what in _findings() if (rel, what) not in ALLOWED]
    assert found == [], "use pipelines.times:\n" + "\n".join(f"{r}:{n}: {w}" for r, n, w in found)


def test_every_allowed_exception_is_still_needed() -> None:
    used = {(rel, what) for rel, _, what in _findings()}
    assert set(ALLOWED) <= used, f"no longer needed, remove from ALLOWED: {sorted(set(ALLOWED) - used)}"


def test_the_scan_sees_what_it_looks_for() -> None:
    """The scanner itself, on the shapes the old copies had."""
    copies = {
        "datetime.fromtimestamp(s, UTC)": "calls .fromtimestamp()",
        "datetime.fromisoformat(text)": "calls .fromisoformat()",
        'v.isoformat().replace("+00:00", "Z")': "swaps Z and +00:00",
        't.strftime("%Y-%m-%dT%H:%M:%SZ")': "formats YYYY-MM-DDTHH:MM:SS by hand",
        'f"{t:%Y-%m-%dT%H:%M:%SZ}"': "formats YYYY-MM-DDTHH:MM:SS by hand",
        "v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)": "reads a naive datetime as UTC by hand",
        "math.floor(t / w) * w": "rounds to a window with math.floor(t / w) * w",
        "math.ceil(t / step - 1e-9) * step": "rounds to a window with math.ceil(t / w) * w",
        "(start + timedelta(days=32)).replace(day=1)": "a month's end as (first + 32 days).replace(day=1)",
        "t.replace(minute=0, second=0, microsecond=0)": "floors a datetime with .replace(minute=0, second=0, …)",
    }
    for source, what in copies.items():
        seen = {_what(node) for node in ast.walk(ast.parse(source))}
        assert any(w is not None and w.split(" with ")[0] == what.split(" with ")[0] for w in seen), source
    assert _what(ast.parse("def floor_hour(t): return t").body[0]) == "defines floor_hour()"
