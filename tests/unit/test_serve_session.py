"""Browser sessions of ``gpuledger serve``: their lifetime, logout, and the trusted users' list; the
served dashboard's drill-down views."""

from __future__ import annotations

import time

import pytest

from gpuledger.dashboard.drill import View, as_csv, columns
from gpuledger.serve.session import SESSION_S, Sessions, trusted_users
from gpuledger.serve.tokens import BadTokens, Known, Scope


def test_a_session_ends_at_logout_or_after_its_lifetime() -> None:
    sessions = Sessions()
    who = Known("sha256:0123456789ab", Scope("research"))
    sid, other = sessions.open(who), sessions.open(who)
    assert sid != other and len(sid) >= 40 and sessions.get(sid) == who
    sessions.close(sid)
    assert sessions.get(sid) is None and sessions.get(other) == who
    sessions.live[other] = (who, time.time() - 1)  # its SESSION_S are over
    assert sessions.get(other) is None and other not in sessions.live
    assert sessions.get("no-such-session") is None and 3600 <= SESSION_S <= 12 * 3600
    stale = sessions.open(who)
    sessions.live[stale] = (who, time.time() - 1)
    fresh = sessions.open(who)  # opening one drops those whose time is over
    assert set(sessions.live) == {fresh}


def test_trusted_users_map_a_user_to_a_scope() -> None:
    users = trusted_users(" Finance@Example.com=all , lead@example.com=business_unit:Research,")
    assert users == {"finance@example.com": Scope(), "lead@example.com": Scope("Research")}
    assert trusted_users("") == {}
    for bad in ("finance@example.com", "=all", "x=everything"):
        with pytest.raises(BadTokens):
            trusted_users(bad)


def test_a_drilled_view_groups_by_the_drilled_dimensions_then_the_chosen_one() -> None:
    top = View("c1", "7d")
    assert top.dims() == ["business_unit"]
    teams = View("c1", "7d", "team", {"business_unit": "research"})
    assert teams.dims() == ["business_unit", "team"]
    jobs = View("c1", "7d", "job", {"business_unit": "research", "team": "llm"})
    assert jobs.dims() == ["business_unit", "team", "job"]
    assert jobs.query(by="team", team=None) == {
        "cluster": "c1",
        "window": "7d",
        "by": "team",
        "business_unit": "research",
    }
    rows = [{"business_unit": "research", "team": "llm", "job": "j,1", "allocated_gpu_hours": 1.5}]
    assert columns(rows, jobs) == ["business_unit", "team", "job", "allocated_gpu_hours"]
    assert as_csv(rows, jobs) == 'business_unit,team,job,allocated_gpu_hours\nresearch,llm,"j,1",1.5\n'
    assert as_csv([], jobs).startswith("business_unit,team,job,allocated_gpu_hours,") and "\n" not in as_csv(
        [], jobs
    ).rstrip("\n")
