"""Time windows as people type them; API tokens and their scopes; report parameters."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpuledger import reports
from gpuledger.serve.tokens import BadTokens, Scope, Tokens, hashed_line
from gpuledger.windows import BadWindow, month_of, parse_window

NOW = datetime(2026, 12, 3, 6, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        ("7d", datetime(2026, 11, 26, 6, 30, tzinfo=UTC), NOW),
        ("24h", datetime(2026, 12, 2, 6, 30, tzinfo=UTC), NOW),
        ("90m", datetime(2026, 12, 3, 5, 0, tzinfo=UTC), NOW),
        ("today", datetime(2026, 12, 3, tzinfo=UTC), NOW),
        ("yesterday", datetime(2026, 12, 2, tzinfo=UTC), datetime(2026, 12, 3, tzinfo=UTC)),
        ("month-to-date", datetime(2026, 12, 1, tzinfo=UTC), NOW),
        ("last-month", datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC)),
        ("2026-11", datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC)),
        ("2026-12", datetime(2026, 12, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC)),
        ("2026-02-28", datetime(2026, 2, 28, tzinfo=UTC), datetime(2026, 3, 1, tzinfo=UTC)),
        (" Yesterday ", datetime(2026, 12, 2, tzinfo=UTC), datetime(2026, 12, 3, tzinfo=UTC)),
    ],
)
def test_windows(text: str, start: datetime, end: datetime) -> None:
    assert parse_window(text, NOW) == (start, end)


def test_last_month_in_january_is_december() -> None:
    assert parse_window("last-month", datetime(2027, 1, 15, tzinfo=UTC)) == (
        datetime(2026, 12, 1, tzinfo=UTC),
        datetime(2027, 1, 1, tzinfo=UTC),
    )


@pytest.mark.parametrize("text", ["fortnight", "0d", "2026-13", "2026-02-30", "7 days", ""])
def test_bad_windows_name_the_forms(text: str) -> None:
    with pytest.raises(BadWindow):
        parse_window(text, NOW)


def test_the_month_of_a_window() -> None:
    assert [month_of(w, NOW) for w in ("last-month", "month-to-date", "2026-02", "2026-11-02")] == [
        "2026-11",
        "2026-12",
        "2026-02",
        "2026-11",
    ]
    with pytest.raises(BadWindow, match="not inside one calendar month"):
        month_of("7d", NOW)  # 26 Nov – 3 Dec


def test_report_ranges_and_groupings() -> None:
    assert reports.time_range(window="yesterday", now=NOW) == (
        datetime(2026, 12, 2, tzinfo=UTC),
        datetime(2026, 12, 3, tzinfo=UTC),
    )
    with pytest.raises(reports.BadRequest, match="either a window or from/to"):
        reports.time_range("2026-11-01", None, "7d", now=NOW)
    with pytest.raises(reports.BadRequest, match="longer than 31 days"):
        reports.time_range("2026-09-01", "2026-11-01", now=NOW, max_days=31)
    gpu = reports.REPORTS["gpu-hours"]
    assert reports.parse_by(gpu, "team, model") == ["team", "model"]
    assert reports.parse_by(gpu, None) == ["team"]
    for bad in ("colour", "team,team", "team,"):
        with pytest.raises(reports.BadRequest):
            reports.parse_by(gpu, bad)
    with pytest.raises(reports.BadRequest, match="takes no grouping"):
        reports.parse_by(reports.REPORTS["queue"], "team")


def test_tokens_from_the_environment_and_from_a_file_of_hashes(tmp_path: Path) -> None:
    env = Tokens.from_env("t-admin=all, t-research=business_unit:Research")
    assert env.scope_of("t-admin") == Scope() and env.scope_of("t-research") == Scope("Research")
    assert env.scope_of("t-other") is None and env.scope_of("") is None
    path = tmp_path / "tokens"
    lines = ["# who", hashed_line("t-admin", "all"), "", hashed_line("t-research", "business_unit:Research")]
    path.write_text("\n".join(lines) + "\n")
    assert "t-admin" not in path.read_text()
    from_file = Tokens.from_file(path)
    assert from_file.scope_of("t-research") == Scope("Research") and from_file.scope_of("t-admin") == Scope()
    for text in ("t-admin", "t=everything", "t=business_unit:"):
        with pytest.raises(BadTokens):
            Tokens.from_env(text)
    path.write_text("plain-token all\n")
    with pytest.raises(BadTokens, match="sha256"):
        Tokens.from_file(path)


def test_stalled_nodes_are_those_whose_input_waits_too_long() -> None:
    from gpuledger.serve.health import stalled_nodes

    t = datetime(2026, 11, 2, tzinfo=UTC)
    now = 10_000 * 10**9
    rows = [
        ("c", "waiting", t, t, now - 700 * 10**9, 1, t, t, 0),  # new input 700 s ago, not computed
        ("c", "fresh", t, t, now - 10 * 10**9, 1, t, t, 0),  # new input 10 s ago
        ("c", "done", t, t, now - 900 * 10**9, 0, t, datetime(2026, 11, 3, tzinfo=UTC), 5),  # closed past it
        ("c", "held", t, t, now - 900 * 10**9, 1, t, t, 0),
    ]  # quarantined: reported as such
    assert stalled_nodes(rows, {("c", "held")}, 600, now) == [("c", "waiting")]


def test_a_token_in_the_file_may_carry_an_expiry(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text(
        f"{hashed_line('t-old', 'all')} expires=2026-11-30T00:00:00Z\n"
        f"{hashed_line('t-day', 'business_unit:Research')} expires=2026-12-01\n"
        f"{hashed_line('t-forever', 'all')}\n"
    )
    tokens = Tokens.from_file(path)
    before, after = datetime(2026, 11, 29, 23, 59, tzinfo=UTC), datetime(2026, 12, 1, 0, 0, 1, tzinfo=UTC)
    old = tokens.identify("t-old")
    assert old is not None and old.expires == datetime(2026, 11, 30, tzinfo=UTC)
    assert old.expired(before) is None
    reason = old.expired(after)
    assert reason is not None and "expired at 2026-11-30T00:00:00Z" in reason and "\n" not in reason
    assert "t-old" not in reason and old.id in reason
    day = tokens.identify("t-day")  # a date alone: midnight UTC at the start of that day
    assert day is not None and day.scope == Scope("Research") and day.expires == datetime(2026, 12, 1, tzinfo=UTC)
    forever = tokens.identify("t-forever")
    assert forever is not None and forever.expires is None and forever.expired(after) is None
    for bad in ("expires=soon", "expires=2026-13-01", "until=2026-12-01", "expires=2026-12-01 extra"):
        path.write_text(f"{hashed_line('t-x', 'all')} {bad}\n")
        with pytest.raises(BadTokens, match="tokens:1"):
            Tokens.from_file(path)
    path.write_text(f"{hashed_line('t-x', 'all')} expires=2026-12-01T00:00:00+02:00\n")
    x = Tokens.from_file(path).identify("t-x")
    assert x is not None and x.expires == datetime(2026, 11, 30, 22, tzinfo=UTC)
