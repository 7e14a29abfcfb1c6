"""SQL shipped with gpuledger: ordered DDL migrations and named queries.

Queries are loaded by name (``load_query("gpu_hours_by")``) and always run with ClickHouse
server-side parameters (``{name:Type}`` placeholders), never with values formatted into the text.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

SQL_DIR = Path(__file__).resolve().parent
DDL_DIR = SQL_DIR / "ddl"
QUERY_DIR = SQL_DIR / "queries"


@cache
def load_query(name: str) -> str:
    path = QUERY_DIR / f"{name}.sql"
    if not path.is_file():
        raise KeyError(f"no query named {name!r} in {QUERY_DIR}")
    return path.read_text()


def ddl_files() -> list[Path]:
    """Migrations in order: ``NNNN_<name>.sql``."""
    return sorted(p for p in DDL_DIR.glob("[0-9][0-9][0-9][0-9]_*.sql"))


def split_statements(text: str) -> list[str]:
    """Split a DDL file on ``;`` at line ends, dropping ``--`` comment-only lines."""
    statements: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        if line.strip().startswith("--") and not current:
            continue
        current.append(line)
        if line.rstrip().endswith(";"):
            stmt = "\n".join(current).strip().rstrip(";").strip()
            if stmt:
                statements.append(stmt)
            current = []
    tail = "\n".join(current).strip()
    if tail and not all(ln.strip().startswith("--") or not ln.strip() for ln in current):
        statements.append(tail)
    return statements
