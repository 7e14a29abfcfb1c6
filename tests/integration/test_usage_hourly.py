"""The hourly rollup against the facts-level answer, on the real ClickHouse endpoint.

``gpu_hours`` (whole hours from ``gpu_usage_hourly``, partial edge hours from ``resolved_facts``)
must equal ``gpu_hours_facts`` (every window from ``resolved_facts``) for every grouping and range,
after corrections that drop owners, org versions starting mid-hour and arriving retroactively.
"""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from clickhouse_connect.driver.client import Client

from pipelines.times import as_utc
from sql import load_query
from streams.rollup import (
    chunks,
    group_stale,
    group_written,
    hour_span,
    merge_written,
    rebuild_hours,
    rebuild_since,
    rebuild_stale,
    rebuild_written,
    request_rebuild,
    window_hours,
    work_requests,
)

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 1, 0, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)
HOUR = timedelta(hours=1)
TOL_H = 1e-9  # GPU-hours per value
BYS = ("team", "business_unit", "namespace", "account", "job", "node", "failure_reason", "cluster", "user", "all")
RANGES = [  # (start, end) in minutes from T0
    (0, 180),  # whole hours only
    (13, 161),  # partial hours at both edges around one whole hour
    (5, 50),  # inside one hour
    (40, 80),  # two partial hours, no whole hour
    (60, 61),  # one window
    (-120, 300),  # wider than the data
]


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def fact(cluster: str, node: str, minute: int, owner: str, seconds: float, **dims: Any) -> dict[str, Any]:
    row = {
        "fact_id": f"{owner}-{minute}",
        "cluster": cluster,
        "window_start": at(minute),
        "window_seconds": 60,
        "node": node,
        "gpu_uuid": f"GPU-{owner}",
        "slot": f"GPU-{owner}",
        "gpu_model": "H100",
        "kind": "allocated",
        "scheduler": "kubernetes",
        "job_id": owner,
        "logical_job": f"ns/{owner}",
        "attempt": 1,
        "namespace": "",
        "account": "",
        "user": "",
        "queue": "",
        "workload_kind": "training",
        "team_label": "",
        "model": "m",
        "gpu_seconds": seconds,
        "busy_seconds": seconds * 0.4,
        "unobserved_seconds": seconds * 0.1,
        "energy_joules": seconds * (300.0 + minute % 7 * 25),
    }  # a draw that varies by window
    row.update(dims)
    return row


def capacity(cluster: str, node: str, minute: int, kind: str, seconds: float) -> dict[str, Any]:
    return fact(
        cluster,
        node,
        minute,
        f"{kind}-{node}",
        seconds,
        kind=kind,
        scheduler="",
        job_id="",
        logical_job="",
        attempt=0,
        workload_kind="",
        model="",
        busy_seconds=0.0,
        unobserved_seconds=0.0,
    )


def mapping(effective: datetime, kind: str, key: str, value: str) -> dict[str, Any]:
    # "*": ingested without --cluster, so it applies to both clusters of these tests
    return {
        "event_id": f"{effective:%d%H%M}-{kind}-{key}",
        "cluster": "*",
        "effective_from": effective,
        "kind": kind,
        "key": key,
        "value": value,
    }


def org_version(effective: datetime, ns_team: str, units: dict[str, str]) -> list[dict[str, Any]]:
    """A full org version: namespace ns-a → ``ns_team``, account acct → hpc, teams → units."""
    return [
        mapping(effective, "namespace_team", "ns-a", ns_team),
        mapping(effective, "account_team", "acct", "hpc"),
        *(mapping(effective, "team_business_unit", team, unit) for team, unit in units.items()),
    ]


UNITS = {"llm": "research", "vision": "research", "hpc": "science"}


def window_facts(cluster: str, node: str, minute: int) -> list[dict[str, Any]]:
    """One window of a node: a labelled team, a namespace-mapped job whose attempt changes at 1h30,
    an account-mapped Slurm job, unallocated and (from 2h00 to 2h30) unavailable capacity."""
    rows = [
        fact(cluster, node, minute, f"vis-{node}", 60, team_label="vision", user="ana"),
        fact(
            cluster,
            node,
            minute,
            "train-1" if minute < 90 else "train-2",
            30,
            namespace="ns-a",
            attempt=1 if minute < 90 else 2,
            user="bo",
        ),
        fact(cluster, node, minute, f"slurm-{node}", 20.5, scheduler="slurm", account="acct", queue="gpu"),
        capacity(cluster, node, minute, "unallocated", 9.5),
    ]
    if 120 <= minute < 150:
        rows.append(capacity(cluster, node, minute, "unavailable", 60))
    return rows


def insert_rows(client: Client, table: str, rows: list[dict[str, Any]]) -> None:
    if rows:
        client.insert(table, [list(r.values()) for r in rows], column_names=list(rows[0]))


def write_facts(client: Client, cluster: str, node: str, windows: list[datetime], rows: list[dict[str, Any]]) -> None:
    """A facts write as the stream workers make it (facts, then every window's row in fact_windows,
    one new version), without the rollup: the tests decide when to rebuild."""
    version = time.time_ns()
    insert_rows(client, "gpu_usage_facts", [{**r, "version": version} for r in rows])
    insert_rows(
        client,
        "fact_windows",
        [
            {
                "cluster": cluster,
                "node": node,
                "window_start": w,
                "version": version,
                "capacity_seconds": sum(r["gpu_seconds"] for r in rows if r["window_start"] == w),
                "rows": sum(1 for r in rows if r["window_start"] == w),
            }
            for w in windows
        ],
    )


def write_history(client: Client, minutes: range, nodes: tuple[tuple[str, str], ...]) -> None:
    """Each node's windows written in one facts write, as the attribution step writes a range."""
    for cluster, node in nodes:
        rows = [r for minute in minutes for r in window_facts(cluster, node, minute)]
        write_facts(client, cluster, node, [at(m) for m in minutes], rows)


def attempts() -> list[dict[str, Any]]:
    base = {"cluster": "c", "scheduler": "kubernetes", "version": 1, "failure_reason": ""}
    return [
        {
            **base,
            "job_id": "train-1",
            "attempt": 1,
            "logical_job": "ns/train-1",
            "outcome": "failure",
            "failure_reason": "oom",
        },
        {**base, "job_id": "train-2", "attempt": 2, "logical_job": "ns/train-2", "outcome": "success"},
        {
            **base,
            "scheduler": "slurm",
            "job_id": "slurm-n1",
            "attempt": 1,
            "logical_job": "ns/slurm-n1",
            "outcome": "failure",
            "failure_reason": "",
        },
    ]


def report(
    client: Client, query: str, by: str, start: datetime, end: datetime, cluster: str = ""
) -> tuple[list[str], list[tuple[Any, ...]]]:
    result = client.query(load_query(query), parameters={"by": by, "start": start, "end": end, "cluster": cluster})
    return list(result.column_names), [tuple(r) for r in result.result_rows]


def assert_equal_to_facts(
    client: Client, bys: tuple[str, ...] = BYS, ranges: list[tuple[int, int]] = RANGES, cluster: str = ""
) -> int:
    """gpu_hours == gpu_hours_facts for every (by, range); returns the number of non-empty answers."""
    non_empty = 0
    for by in bys:
        for a, b in ranges:
            cols, got = report(client, "gpu_hours", by, at(a), at(b), cluster)
            ref_cols, want = report(client, "gpu_hours_facts", by, at(a), at(b), cluster)
            assert cols == ref_cols and "energy_kwh" in cols
            assert [r[0] for r in got] == [r[0] for r in want], (by, a, b)
            for g, w in zip(got, want, strict=True):
                assert g[1:] == pytest.approx(w[1:], abs=TOL_H, rel=0), (by, a, b, g[0])
            non_empty += bool(want)
    return non_empty


VIEW_SUMS = """
SELECT cluster, node, team, business_unit, outcome, failure_reason, kind, round(sum(gpu_seconds), 6),
       round(sum(busy_seconds), 6), round(sum(unobserved_seconds), 6)
FROM {view}
WHERE {time} >= {{a:DateTime64(3, 'UTC')}} AND {time} < {{b:DateTime64(3, 'UTC')}}
GROUP BY ALL ORDER BY ALL
"""


def assert_views_agree(client: Client, start: datetime, end: datetime) -> int:
    """resolved_hourly summed over whole hours == resolved_facts summed over their windows."""
    params = {"a": start, "b": end}
    hourly = client.query(VIEW_SUMS.format(view="resolved_hourly", time="hour"), parameters=params).result_rows
    facts = client.query(VIEW_SUMS.format(view="resolved_facts", time="window_start"), parameters=params).result_rows
    assert hourly == facts
    return len(hourly)


def hours_by_key(client: Client, by: str, start: datetime, end: datetime) -> dict[str, float]:
    """GPU-seconds (the `gpu_hours` column × 3600) per key, from the rollup-backed query."""
    return {r[0]: round(r[-1] * 3600, 6) for r in report(client, "gpu_hours", by, start, end)[1]}


NODES = (("c", "n1"), ("c", "n2"), ("d", "n1"))


@pytest.mark.parametrize(
    ("start", "end", "hours"),
    [
        (T0, T0 + HOUR, (T0, T0 + HOUR)),
        (T0 + 13 * MIN, T0 + 61 * MIN, (T0, T0 + 2 * HOUR)),
        (T0 + timedelta(seconds=1), T0 + 2 * MIN, (T0, T0 + HOUR)),
        (T0 + 59 * MIN, T0 + 60 * MIN, (T0, T0 + HOUR)),
        (T0 + HOUR, T0 + HOUR, (T0 + HOUR, T0 + HOUR)),  # empty range: nothing to rebuild
        (T0 + 2 * HOUR, T0 + HOUR, (T0 + 2 * HOUR, T0 + 2 * HOUR)),
        (datetime(2026, 11, 1, 3, 30), datetime(2026, 11, 1, 5, 0), (T0 + 3 * HOUR, T0 + 5 * HOUR)),  # naive = UTC
    ],
)
def test_hour_span_covers_every_overlapping_hour(
    start: datetime, end: datetime, hours: tuple[datetime, datetime]
) -> None:
    assert hour_span(start, end) == hours


@pytest.mark.parametrize(
    ("windows", "hours"),
    [
        ([at(5)], (T0, T0 + HOUR)),
        ([at(59), at(0), at(60)], (T0, T0 + 2 * HOUR)),  # any order; a window at 1h00 lies in hour 1
        ([datetime(2026, 11, 1, 2, 30)], (T0 + 2 * HOUR, T0 + 3 * HOUR)),  # naive = UTC
    ],
)
def test_window_hours_hold_every_window_start(windows: list[datetime], hours: tuple[datetime, datetime]) -> None:
    assert window_hours(windows) == hours


def test_window_hours_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="no windows"):
        window_hours([])


def test_chunks_tile_the_range() -> None:
    pieces = list(chunks(T0, T0 + timedelta(days=2, hours=5)))
    assert pieces[0] == (T0, T0 + timedelta(days=1))
    assert pieces[-1] == (T0 + timedelta(days=2), T0 + timedelta(days=2, hours=5))
    assert all(a2 == b1 for (_, b1), (a2, _) in zip(pieces, pieces[1:], strict=False))
    assert list(chunks(T0, T0)) == []


def test_writes_of_one_step_group_into_one_rebuild_per_cluster_and_span() -> None:
    written = [
        ("c", "n2", at(30), at(31)),
        ("c", "n1", at(5), at(6)),
        ("c", "n3", at(50), at(70)),
        ("d", "n1", at(5), at(6)),
        ("c", "n1", at(120), at(120)),
        ("c", "n1", at(7), at(8)),
    ]
    assert group_written(written) == [
        ("c", ["n1", "n2"], T0, T0 + HOUR),
        ("c", ["n3"], T0, T0 + 2 * HOUR),
        ("d", ["n1"], T0, T0 + HOUR),
    ]
    assert group_written([]) == []


def test_writes_of_a_step_s_groups_merge_into_runs_of_touching_hours_of_at_most_a_day() -> None:
    written = [
        ("c", "n1", at(0), at(60)),  # hour 0
        ("c", "n2", at(60), at(120)),  # hour 1: touches hour 0
        ("c", "n1", at(30), at(90)),  # hours 0-1
        ("c", "n3", at(300), at(360)),  # hour 5: a gap before it
        ("d", "n1", at(60), at(120)),
    ]
    assert merge_written(written) == [
        ("c", ["n1", "n2"], T0, T0 + 2 * HOUR),
        ("c", ["n3"], T0 + 5 * HOUR, T0 + 6 * HOUR),
        ("d", ["n1"], T0 + HOUR, T0 + 2 * HOUR),
    ]
    day = [("c", "n1", at(60 * h), at(60 * h + 60)) for h in range(30)]
    assert merge_written(day) == [("c", ["n1"], T0, T0 + 24 * HOUR), ("c", ["n1"], T0 + 24 * HOUR, T0 + 30 * HOUR)]
    assert merge_written([]) == []


@pytest.mark.parametrize(
    ("rows", "batches"),
    [
        (
            [
                ("c", "n1", T0),
                ("c", "n2", T0),
                ("c", "n2", T0 + HOUR),
                ("c", "n1", T0 + HOUR),
                ("c", "n1", T0 + 3 * HOUR),
                ("d", "n1", T0),
            ],
            [
                ("c", ["n1", "n2"], T0, T0 + 2 * HOUR),
                ("c", ["n1"], T0 + 3 * HOUR, T0 + 4 * HOUR),
                ("d", ["n1"], T0, T0 + HOUR),
            ],
        ),
        (
            [("c", "n1", T0 + h * HOUR) for h in range(30)],  # at most a day per rebuild
            [("c", ["n1"], T0, T0 + 24 * HOUR), ("c", ["n1"], T0 + 24 * HOUR, T0 + 30 * HOUR)],
        ),
        (
            [("c", "n1", T0), ("c", "n1", T0 + HOUR), ("c", "n2", T0 + HOUR)],  # other nodes: a new batch
            [("c", ["n1"], T0, T0 + HOUR), ("c", ["n1", "n2"], T0 + HOUR, T0 + 2 * HOUR)],
        ),
        ([], []),
    ],
)
def test_stale_hours_group_into_ranges(
    rows: list[tuple[str, str, datetime]], batches: list[tuple[str, list[str], datetime, datetime]]
) -> None:
    assert group_stale(rows) == batches


def max_version(client: Client, start: datetime, end: datetime) -> int:
    return int(
        client.query(
            "SELECT max(version) FROM gpu_usage_hourly WHERE hour >= {a:DateTime64(3, 'UTC')} "
            "AND hour < {b:DateTime64(3, 'UTC')}",
            parameters={"a": start, "b": end},
        ).result_rows[0][0]
    )


def test_full_hours_come_from_the_rollup_and_equal_the_facts(client: Client) -> None:
    write_history(client, range(0, 180), NODES)
    insert_rows(
        client,
        "org_mappings",
        org_version(T0 - HOUR, "llm", UNITS) + org_version(at(80), "llm", {**UNITS, "llm": "product"}),
    )
    insert_rows(client, "job_attempts", attempts())
    # before any rebuild the whole hours are absent (the report reads them from the rollup only);
    # partial hours come from the facts
    assert hours_by_key(client, "cluster", T0, T0 + 3 * HOUR) == {}
    assert hours_by_key(client, "cluster", at(30), at(59)) == {
        "c": 2 * 29 * 110.5,
        "d": 29 * 110.5,
        "__unallocated__": 3 * 29 * 9.5,
    }
    rebuild_hours(client, "c", ["n1", "n2"], T0, at(180))
    rebuild_hours(client, "d", ["n1"], at(30), at(31))  # only d's first hour
    assert hours_by_key(client, "cluster", T0, T0 + 3 * HOUR) == {
        "c": 2 * 180 * 110.5,
        "d": 60 * 110.5,
        "__unallocated__": (2 * 180 + 60) * 9.5,
        "__unavailable__": 2 * 30 * 60,
    }
    rebuild_hours(client, "d", ["n1"], at(60), at(180))
    assert assert_equal_to_facts(client, BYS[:8], RANGES[:2]) == 16
    assert assert_equal_to_facts(client, ("team", "business_unit", "all"), RANGES[2:]) == 12
    # per node: vision, hpc, unallocated, unavailable; llm split by unit (1h20) and attempt outcome
    # (1h30) on c's nodes (3 rows each), by unit only on d's (no attempts known there)
    assert assert_views_agree(client, T0, T0 + 3 * HOUR) == 3 * 4 + 3 + 3 + 2
    assert assert_equal_to_facts(client, ("team", "business_unit"), RANGES[:2], cluster="d") == 4
    assert hours_by_key(client, "team", T0, T0 + 3 * HOUR) == {
        "vision": 3 * 180 * 60,
        "llm": 3 * 180 * 30,
        "hpc": 3 * 180 * 20.5,
        "__unallocated__": 3 * 180 * 9.5,
        "__unavailable__": 3 * 30 * 60,
    }
    units = hours_by_key(client, "business_unit", T0, T0 + 3 * HOUR)  # llm moves at 1h20, mid-hour
    assert units["research"] == pytest.approx(3 * 180 * 60 + 3 * 80 * 30)
    assert units["product"] == pytest.approx(3 * 100 * 30)
    assert units["science"] == pytest.approx(3 * 180 * 20.5)
    failed = {r[0]: r[3] * 3600 for r in report(client, "gpu_hours", "failure_reason", T0, T0 + 3 * HOUR)[1]}
    assert failed["oom"] == pytest.approx(2 * 90 * 30)  # train-1 on c/n1 and c/n2; train-2 succeeded
    assert failed["unknown"] == pytest.approx(180 * 20.5)  # slurm-n1 of cluster c failed without a reason
    assert failed["none"] == 0.0


def test_a_rebuild_after_a_correction_drops_the_removed_owner(client: Client) -> None:
    write_history(client, range(0, 120), NODES[:1])
    rebuild_hours(client, "c", ["n1"], T0, at(120))
    before = hours_by_key(client, "job", T0, at(120))
    assert before["ns/vis-n1"] == 120 * 60
    # a late event: windows 61 and 62 now hold another job only; vis-n1's rows there must vanish
    late = [
        r
        for m in (61, 62)
        for r in (fact("c", "n1", m, "late", 60, namespace="ns-b"), capacity("c", "n1", m, "unallocated", 50))
    ]
    write_facts(client, "c", "n1", [at(61), at(62)], late)
    assert hours_by_key(client, "job", T0, at(120)) == before  # the rollup is stale until rebuilt
    assert rebuild_written(client, [("c", "n1", at(61), at(62)), ("c", "n1", at(62), at(63))]) == 1
    after = hours_by_key(client, "job", T0, at(120))
    assert after["ns/vis-n1"] == 118 * 60 and after["ns/late"] == 2 * 60
    assert after["ns/slurm-n1"] == 118 * 20.5 and after["__unallocated__"] == 118 * 9.5 + 2 * 50
    assert assert_equal_to_facts(client, ("job", "team"), RANGES[:4]) == 8
    # all of hour 1 written again with no facts at all: the rebuild's marker still supersedes it
    write_facts(client, "c", "n1", [at(m) for m in range(60, 120)], [])
    rebuild_hours(client, "c", ["n1"], at(60), at(120))
    assert hours_by_key(client, "all", at(60), at(120)) == {}
    assert hours_by_key(client, "all", T0, at(120))["all"] == 60 * 110.5
    assert assert_equal_to_facts(client, ("all", "job"), RANGES[:3]) == 6


def test_rebuilding_twice_changes_nothing(client: Client) -> None:
    write_history(client, range(0, 150), NODES[:2])
    insert_rows(client, "org_mappings", org_version(T0, "llm", UNITS))
    rebuild_hours(client, "c", ["n1", "n2"], T0, at(150))
    first = {by: report(client, "gpu_hours", by, T0, at(150)) for by in BYS[:5]}
    built = max_version(client, T0, at(180))
    rebuild_hours(client, "c", ["n2", "n1", "n1"], T0, at(150))
    rebuild_since(client, "c", T0)
    assert max_version(client, T0, at(180)) > built  # written again, with a newer version
    assert {by: report(client, "gpu_hours", by, T0, at(150)) for by in BYS[:5]} == first
    assert assert_equal_to_facts(client, ("team", "business_unit"), RANGES[:3]) == 6


def test_org_versions_mid_hour_and_retroactive(client: Client) -> None:
    write_history(client, range(-60, 180), NODES)
    insert_rows(client, "org_mappings", org_version(at(20), "llm", UNITS))  # windows before 0h20 have no version
    rebuild_since(client, "", T0 - 3 * HOUR)
    assert assert_equal_to_facts(client, ("team", "business_unit"), RANGES[:3]) == 6
    assert hours_by_key(client, "team", at(-60), T0)["unassigned"] == 3 * 60 * (30 + 20.5)
    early = max_version(client, T0 - HOUR, T0 + HOUR)
    # a reorg arrives late, effective at 1h35 (mid-hour, in the past): ns-a now maps to team nlp,
    # which has no business unit
    insert_rows(client, "org_mappings", org_version(at(95), "nlp", UNITS))
    stale = report(client, "gpu_hours", "team", T0, at(180))
    truth = report(client, "gpu_hours_facts", "team", T0, at(180))
    assert stale != truth  # the retroactive version changes the facts-level answer
    rebuild_since(client, "", at(95))
    assert max_version(client, T0 - HOUR, T0 + HOUR) == early  # hours before 1h00 were not rebuilt
    assert max_version(client, T0 + HOUR, T0 + 3 * HOUR) > early
    assert assert_equal_to_facts(client, ("team", "business_unit", "namespace"), RANGES[1:5]) == 12
    assert assert_views_agree(client, T0 - HOUR, T0 + 3 * HOUR) > 10
    assert hours_by_key(client, "team", T0, at(180)) == {
        "vision": 3 * 180 * 60,
        "hpc": 3 * 160 * 20.5,
        "llm": 3 * 75 * 30,
        "nlp": 3 * 85 * 30,
        "unassigned": 3 * 20 * (30 + 20.5),
        "__unallocated__": 3 * 180 * 9.5,
        "__unavailable__": 3 * 30 * 60,
    }
    units = hours_by_key(client, "business_unit", T0, at(180))
    assert units["unassigned"] == pytest.approx(3 * 20 * 110.5 + 3 * 85 * 30)


def random_window(rng: random.Random, node: str, minute: int) -> list[dict[str, Any]]:
    owners = [
        ("kubernetes", "ns-a", "", ""),
        ("kubernetes", "ns-x", "", "vision"),
        ("slurm", "", "acct", ""),
        ("slurm", "", "other", ""),
    ]
    rows = []
    for i in range(rng.randint(0, 3)):
        sched, ns, acc, label = rng.choice(owners)
        rows.append(
            fact(
                "c",
                node,
                minute,
                f"j{rng.randint(0, 5)}-{i}",
                rng.uniform(0, 60),
                scheduler=sched,
                namespace=ns,
                account=acc,
                team_label=label,
            )
        )
    return rows


def test_random_histories_with_corrections_equal_the_facts(client: Client) -> None:
    rng = random.Random(20261101)
    insert_rows(client, "org_mappings", org_version(at(17), "llm", UNITS) + org_version(at(133), "nlp", UNITS))
    for round_ in range(3):  # the first round writes every window, the later ones correct some
        for node in ("n1", "n2", "n3"):
            minutes = sorted(rng.sample(range(0, 200), 25)) if round_ else list(range(0, 200))
            rows = [r for m in minutes for r in random_window(rng, node, m)]
            windows = [at(m) for m in minutes]
            write_facts(client, "c", node, windows, rows)
            if node != "n3" or round_ == 0:  # n3's corrections are not rebuilt yet
                rebuild_hours(client, "c", [node], *window_hours(windows))
    ranges = [(0, 240), (7, 193), (61, 119), (rng.randint(0, 100), rng.randint(101, 200))]
    assert report(client, "gpu_hours", "node", T0, at(240)) != report(client, "gpu_hours_facts", "node", T0, at(240))
    rebuild_since(client, "c", T0)
    assert assert_equal_to_facts(client, ("team", "business_unit", "job", "node"), ranges) == 16


def test_stale_hours_are_found_and_rebuilt(client: Client) -> None:
    write_history(client, range(0, 180), NODES[:2])
    insert_rows(client, "org_mappings", org_version(T0 - HOUR, "llm", UNITS))
    assert rebuild_stale(client, T0 + HOUR) == 4  # never built; hour 0 is before `since`
    assert rebuild_stale(client, T0) == 2 and rebuild_stale(client, T0) == 0
    assert assert_equal_to_facts(client, ("team", "node"), RANGES[:2]) == 4
    # a worker stopped between a correction and its rebuild
    write_facts(client, "c", "n2", [at(70)], [fact("c", "n2", 70, "late", 60, namespace="ns-a")])
    assert rebuild_stale(client, T0) == 1
    assert hours_by_key(client, "job", T0, at(180))["ns/late"] == 60
    # an org version arrives (mid-hour, 1h40) and its rebuild never ran: hours 1 and 2 of both nodes
    insert_rows(client, "org_mappings", org_version(at(100), "nlp", UNITS))
    assert rebuild_stale(client, T0) == 4
    assert hours_by_key(client, "team", T0, at(180))["nlp"] == 2 * 80 * 30
    insert_rows(client, "org_mappings", org_version(at(100), "nlp", UNITS))  # the same version again: nothing new
    assert rebuild_stale(client, T0) == 0
    assert assert_equal_to_facts(client, ("team", "job"), RANGES[:3]) == 6


def test_an_org_version_is_rebuilt_by_the_steps_a_bounded_part_at_a_time(client: Client) -> None:
    """The raw sink only records the request; each step rebuilds at most its budget of hours and
    records how far it got, for the cluster the version applies to only."""
    for cluster in ("c", "other"):
        minutes = [day * 24 * 60 + m for day in range(3) for m in (0, 90)]
        write_facts(
            client,
            cluster,
            "n1",
            [at(m) for m in minutes],
            [fact(cluster, "n1", m, "j", 60.0, team_label="t") for m in minutes],
        )
    rebuild_since(client, "", T0)
    before = _hourly_versions(client)
    request_rebuild(client, "c", T0)
    assert work_requests(client, budget=timedelta(days=1)) == 1  # one day of three: still pending
    after_one = _hourly_versions(client)
    changed = {k for k in after_one if after_one[k] != before.get(k)}
    assert changed and all(cluster == "c" and hour < T0 + timedelta(days=1) for cluster, hour in changed)
    assert work_requests(client, budget=timedelta(days=7)) == 0
    done = _hourly_versions(client)
    assert {k for k in done if done[k] != before.get(k)} == {k for k in done if k[0] == "c"}
    assert work_requests(client) == 0  # nothing left, nothing redone


def _hourly_versions(client: Client) -> dict[tuple[str, datetime], int]:
    rows = client.query("SELECT cluster, hour, max(version) FROM gpu_usage_hourly GROUP BY cluster, hour").result_rows
    return {(str(c), as_utc(h)): int(v) for c, h, v in rows}
