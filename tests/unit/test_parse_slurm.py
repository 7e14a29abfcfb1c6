"""Slurm parser: hostlists, value shapes of data_parser v0.0.39–v0.0.42, job records -> events."""

from __future__ import annotations

import copy
import gc
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from pipelines.events import AllocationEvent, NodeStateEvent
from pipelines.parsers import slurm
from pipelines.parsers import slurm_fields as f
from pipelines.parsers.base import NotThisFormat
from pipelines.parsers.hostlist import HostlistError, expand, expand_ranges

FIXTURES = Path(__file__).parent.parent / "fixtures" / "slurm"
T0 = 1772438400  # 2026-03-02T08:00:00Z


def at(seconds: int) -> datetime:
    return datetime.fromtimestamp(T0 + seconds, tz=UTC)


def load(name: str, **hints: Any) -> list[AllocationEvent]:
    result = slurm.parse((FIXTURES / name).read_bytes(), cluster="c1", origin=name, **hints)
    assert result.dead_letters == []
    return result.events  # type: ignore[return-value]


def find(
    events: list[AllocationEvent], event_type: str, job_id: str, attempt: int = 1, node: str | None = None
) -> AllocationEvent:
    hits = [
        e
        for e in events
        if e.type == event_type and e.data.job_id == job_id and e.data.attempt == attempt and e.data.node == node
    ]
    assert len(hits) == 1, f"{event_type} {job_id}#{attempt}@{node}: {len(hits)} events"
    return hits[0]


# --------------------------------------------------------------------------------- hostlists
@pytest.mark.parametrize(
    "hostlist, hosts",
    [
        ("gpu001", ["gpu001"]),
        ("gpu[001-004]", ["gpu001", "gpu002", "gpu003", "gpu004"]),
        ("gpu[001-002,010],cpu05", ["gpu001", "gpu002", "gpu010", "cpu05"]),
        ("a[1-2]b[3-4]", ["a1b3", "a1b4", "a2b3", "a2b4"]),
        ("rack[1-2]-ib", ["rack1-ib", "rack2-ib"]),
        ("n[8-10]", ["n8", "n9", "n10"]),
        ("n[08-10]", ["n08", "n09", "n10"]),
        ("gpu[1,3],gpu[5-6]", ["gpu1", "gpu3", "gpu5", "gpu6"]),
        (" gpu1 , gpu2 ", ["gpu1", "gpu2"]),
        ("", []),
    ],
)
def test_hostlist_expansion(hostlist: str, hosts: list[str]) -> None:
    assert expand(hostlist) == hosts


@pytest.mark.parametrize(
    "hostlist", ["gpu[1-2", "gpu1-2]", "gpu[a-b]", "gpu[4-1]", "gpu[[1]]", "gpu[]", "gpu[0-99999999]", "gpu 1"]
)
def test_hostlist_errors(hostlist: str) -> None:
    with pytest.raises(HostlistError):
        expand(hostlist)


@pytest.mark.parametrize("ranges, numbers", [("0-3", [0, 1, 2, 3]), ("0,2,4-5", [0, 2, 4, 5]), ("7", [7])])
def test_index_ranges(ranges: str, numbers: list[int]) -> None:
    assert expand_ranges(ranges) == numbers


# --------------------------------------------------------------------------------- value shapes
@pytest.mark.parametrize(
    "value, expected",
    [
        (7, 7),
        ({"set": True, "infinite": False, "number": 7}, 7),
        ({"set": False, "infinite": False, "number": 7}, None),
        ({"set": True, "infinite": True, "number": 0}, None),
        (None, None),
        ("42", 42),
    ],
)
def test_number_shapes(value: Any, expected: int | None) -> None:
    assert f.number(value) == expected


@pytest.mark.parametrize(
    "value, expected",
    [
        (T0, at(0)),
        ({"set": True, "infinite": False, "number": T0}, at(0)),
        (0, None),
        ({"set": False, "infinite": False, "number": 0}, None),
    ],
)
def test_epoch_shapes(value: Any, expected: datetime | None) -> None:
    assert f.epoch(value) == expected


@pytest.mark.parametrize(
    "value, expected",
    [
        ("COMPLETED", ("COMPLETED",)),  # v0.0.39
        (["COMPLETED"], ("COMPLETED",)),  # v0.0.40+
        (["RUNNING", "REQUEUED"], ("RUNNING", "REQUEUED")),
        ("CANCELLED by 1234", ("CANCELLED",)),
    ],
)
def test_state_shapes(value: Any, expected: tuple[str, ...]) -> None:
    assert f.states(value) == expected


@pytest.mark.parametrize(
    "value, expected",
    [
        ({"status": "SUCCESS", "return_code": 0, "signal": {"signal_id": 0, "name": ""}}, (0, None)),  # v0.0.39
        ({"status": "SIGNALED", "return_code": 0, "signal": {"signal_id": 9, "name": "KILL"}}, (0, 9)),
        (
            {
                "status": ["FAILED"],
                "return_code": {"set": True, "infinite": False, "number": 2},
                "signal": {"id": {"set": False, "infinite": False, "number": 0}, "name": ""},
            },
            (2, None),
        ),  # v0.0.40+
        (
            {
                "status": ["SIGNALED"],
                "return_code": {"set": False, "infinite": False, "number": 0},
                "signal": {"id": {"set": True, "infinite": False, "number": 15}, "name": "TERM"},
            },
            (None, 15),
        ),
        (None, (None, None)),
        # squeue --json of Slurm 22.05 (v0.0.38): the wait status — exit 3, killed by SIGKILL, success
        (768, (3, None)),
        (9, (0, 9)),
        (0, (0, None)),
    ],
)
def test_exit_code_shapes(value: Any, expected: tuple[int | None, int | None]) -> None:
    assert f.exit_info(value) == expected


def _tres(*entries: tuple[str, str, int]) -> list[dict[str, Any]]:
    return [
        {"type": kind, "name": name, "id": 1000 + i, "count": count} for i, (kind, name, count) in enumerate(entries)
    ]


@pytest.mark.parametrize(
    "value, expected",
    [
        (_tres(("gres", "gpu", 8), ("gres", "gpu:h100", 8)), (8, "h100")),  # typed beside plain: once
        (_tres(("gres", "gpu:h100", 8), ("gres", "gpu", 8)), (8, "h100")),  # order does not matter
        (_tres(("gres", "gpu:a100", 2), ("gres", "gpu:h100", 4)), (6, "h100")),  # only typed: summed
        (_tres(("cpu", "", 64), ("gres", "gpumem", 81920), ("gres", "gpu", 2)), (2, None)),  # gpumem is no GPU
        ("cpu=16,mem=64G,node=1,billing=16,gres/gpu=8,gres/gpu:h100=8", (8, "h100")),  # squeue string
        ("cpu=16,mem=64G,node=1", (0, None)),
        ([], (0, None)),
    ],
)
def test_gpu_tres_counts_typed_and_plain_once(value: Any, expected: tuple[int, str | None]) -> None:
    assert f.gpu_tres(value) == expected


@pytest.mark.parametrize(
    "detail, count, gpu_type, indices",
    [
        ("gpu:h100:4(IDX:0-3)", 4, "h100", [0, 1, 2, 3]),
        ("gpu:h100:4(IDX:0,2,4-5)", 4, "h100", [0, 2, 4, 5]),
        ("gpu:2(IDX:6-7)", 2, None, [6, 7]),
        ("gpu:h100:2(IDX:N/A)", 2, "h100", []),
        ("gpu(IDX:1)", 1, None, [1]),
        ("gpu:h100:2(IDX:0-1),mps:100(0/100)", 2, "h100", [0, 1]),
        ("mps:100", 0, None, []),
    ],
)
def test_gres_detail(detail: str, count: int, gpu_type: str | None, indices: list[int]) -> None:
    (node,) = f.gres_detail([detail]) or []
    assert (node.count, node.gpu_type, node.indices) == (count, gpu_type, indices)


@pytest.mark.parametrize(
    "value, expected",
    [
        ("model=llama3", "model=llama3"),
        ({"administrator": "x", "job": "model=llama3", "system": "y"}, "model=llama3"),
        ({"administrator": None, "job": None, "system": None}, None),
        ("", None),
    ],
)
def test_comment_shapes(value: Any, expected: str | None) -> None:
    assert f.comment(value) == expected


@pytest.mark.parametrize(
    "value, expected", [("llm", "llm"), ({"wckey": "llm", "flags": []}, "llm"), ({"wckey": "", "flags": []}, None)]
)
def test_wckey_shapes(value: Any, expected: str | None) -> None:
    assert f.wckey(value) == expected


# --------------------------------------------------------------------------------- sacct v0.0.39
def test_v0039_completed_job_spread_over_nodes() -> None:
    events = load("sacct_v0039.json")
    pending = find(events, "allocation.pending", "1001")
    assert pending.time == at(0) and pending.data.state == "pending" and pending.data.requested_gpus == 8
    for node in ("gpu001", "gpu002"):
        running = find(events, "allocation.running", "1001", node=node)
        ended = find(events, "allocation.ended", "1001", node=node)
        assert running.time == at(300) and running.data.end_time is None and running.data.outcome is None
        assert ended.time == at(3900) and ended.data.start_time == at(300)
        assert [(g.kind, g.count, g.gpu_type) for g in ended.data.gpus] == [("gpu", 4, "h100")]
        assert (ended.data.outcome, ended.data.failure_reason, ended.data.exit_code) == ("success", None, 0)
    owner = find(events, "allocation.ended", "1001", node="gpu001").data.owner
    assert (owner.account, owner.user, owner.queue, owner.wckey) == ("llm", "alice", "h100", "llm-pretrain")
    assert owner.comment == "model=llama3 kind=training" and owner.workload_kind == "training"


def test_v0039_other_records() -> None:
    events = load("sacct_v0039.json")
    oom = find(events, "allocation.ended", "1002", node="gpu003").data
    assert (oom.failure_reason, oom.exit_code, oom.owner.comment, oom.owner.workload_kind) == (
        "oom",
        1,
        "model=mistral",
        "batch",
    )
    assert [e.type for e in events if e.data.job_id == "1003"] == ["allocation.pending"]  # pending only
    assert find(events, "allocation.pending", "1003").data.requested_gpus == 16  # typed+plain once
    array = find(events, "allocation.ended", "1100_7", node="gpu004").data
    assert (array.failure_reason, array.signal, array.gpus[0].count, array.gpus[0].gpu_type) == (
        "timeout",
        15,
        2,
        "a100",
    )
    assert not [e for e in events if e.data.job_id == "1200"]  # CPU-only job: no GPU-seconds


# --------------------------------------------------------------------------------- sacct v0.0.41
@pytest.mark.parametrize(
    "job_id, attempt, nodes, start, end, outcome, reason, state",
    [
        ("2001", 1, ["gpu001", "gpu002"], 60, 1800, "failure", "node_failure", "REQUEUED"),
        ("2001", 2, ["gpu005"], 1900, 2500, "failure", "unknown", "REQUEUED"),
        ("2001", 3, ["gpu003", "gpu004"], 2600, 6000, "success", None, "COMPLETED"),
        ("2002", 1, ["gpu003", "gpu004", "gpu010"], 100, 900, "failure", "node_failure", "NODE_FAIL"),
        ("2003", 1, ["gpu006"], 200, 1200, "failure", "preempted", "PREEMPTED"),
        ("2004", 1, ["gpu007"], 300, 1500, "failure", "cancelled", "CANCELLED"),
        ("2005", 1, ["gpu008"], 400, 450, "failure", "app_error", "FAILED"),
        ("2007", 1, ["gpu011"], 500, 3000, "failure", "timeout", "DEADLINE"),
        ("2008", 1, ["gpu012"], 600, 600, "failure", "node_failure", "BOOT_FAIL"),
        ("2012", 1, ["gpu013"], 100, 200, "success", None, "COMPLETED"),
    ],
)
def test_v0041_attempts_and_failure_classes(
    job_id: str, attempt: int, nodes: list[str], start: int, end: int, outcome: str, reason: str | None, state: str
) -> None:
    events = load("sacct_v0041.json")
    ended = [
        e for e in events if e.type == "allocation.ended" and e.data.job_id == job_id and e.data.attempt == attempt
    ]
    assert sorted(str(e.data.node) for e in ended) == sorted(nodes)
    for event in ended:
        data = event.data
        assert (data.start_time, data.end_time, event.time) == (at(start), at(end), at(end))
        assert (data.outcome, data.failure_reason, data.scheduler_state) == (outcome, reason, state)


def test_v0041_exit_codes_signals_and_typed_only_gpus() -> None:
    events = load("sacct_v0041.json")
    node_fail = find(events, "allocation.ended", "2002", node="gpu010").data
    assert (node_fail.exit_code, node_fail.gpus[0].count, node_fail.gpus[0].gpu_type) == (1, 2, "a100")
    preempted = find(events, "allocation.ended", "2003", node="gpu006").data
    assert (preempted.exit_code, preempted.signal) == (None, 15)
    cancelled = find(events, "allocation.ended", "2004", node="gpu007").data
    assert (cancelled.signal, cancelled.owner.wckey, cancelled.owner.user) == (9, "vit", "bob")


def test_requeued_running_job_and_object_times() -> None:
    events = [e for e in load("sacct_v0041.json") if e.data.job_id == "2006"]
    assert [(e.type, e.data.attempt) for e in events] == [("allocation.pending", 3), ("allocation.running", 3)]
    assert events[1].data.start_time == at(800) and events[1].data.owner.workload_kind == "notebook"


def test_job_cancelled_before_start_is_pending_only() -> None:
    events = [e for e in load("sacct_v0041.json") if e.data.job_id == "2010"]
    assert [e.type for e in events] == ["allocation.pending"]
    assert events[0].data.requested_gpus == 4


def test_requeue_queue_time_per_attempt() -> None:
    pendings = {
        e.data.attempt: e.time
        for e in load("sacct_v0041.json")
        if e.type == "allocation.pending" and e.data.job_id == "2001"
    }
    assert pendings == {1: at(0), 2: at(1800), 3: at(2500)}


# --------------------------------------------------------------------------------- squeue v0.0.40
def test_squeue_gres_detail_indices_per_node() -> None:
    events = load("squeue_v0040.json")
    first = find(events, "allocation.running", "3001", node="gpu001").data
    second = find(events, "allocation.running", "3001", node="gpu002").data
    assert (first.gpu_indices, second.gpu_indices) == ([0, 1, 2, 3], [0, 2, 4, 5])
    assert first.gpus[0].gpu_type == "h100" and first.owner.workload_kind == "inference"
    assert not [e for e in events if e.type == "allocation.ended"]  # squeue end_time is an expectation


def test_squeue_arrays_and_pending_requeue() -> None:
    events = load("squeue_v0040.json")
    assert find(events, "allocation.pending", "3002_[1-10]").data.requested_gpus == 2
    task = find(events, "allocation.running", "3002_4", node="gpu007").data
    assert (task.gpu_indices, task.gpus[0].count) == ([6, 7], 2)
    requeued = [e for e in events if e.data.job_id == "3003"]
    assert [(e.type, e.data.attempt) for e in requeued] == [("allocation.pending", 2)]
    assert requeued[0].data.requested_gpus == 16  # tres_per_node gres/gpu:8 x 2 nodes


def test_running_event_same_id_and_content_in_squeue_and_later_sacct() -> None:
    squeue_job = orjson.loads((FIXTURES / "squeue_v0040.json").read_bytes())["jobs"][0]
    sacct_job = {
        "job_id": 3001,
        "name": "serve-vit",
        "account": "vision",
        "user": "bob",
        "partition": "h100",
        "comment": {"administrator": "", "job": "model=vit-h kind=inference", "system": ""},
        "wckey": {"wckey": "", "flags": []},
        "nodes": "gpu[001-002]",
        "restart_cnt": 0,
        "array": {"job_id": 0, "task": "", "task_id": {"set": False, "infinite": False, "number": 0}},
        "state": {"current": ["COMPLETED"], "reason": "None"},
        "time": {"submission": T0, "start": T0 + 300, "end": T0 + 7200},
        "exit_code": {"status": ["SUCCESS"], "return_code": {"set": True, "infinite": False, "number": 0}},
        "tres": {
            "allocated": _tres(("gres", "gpu", 8), ("gres", "gpu:h100", 8)),
            "requested": _tres(("gres", "gpu", 8)),
        },
        "gres_detail": squeue_job["gres_detail"],
    }
    polled = slurm.parse(orjson.dumps({"jobs": [squeue_job]}), cluster="c1").events
    later = slurm.parse(orjson.dumps({"jobs": [sacct_job]}), cluster="c1").events
    running_then = {e.id: e for e in polled if e.type != "allocation.ended"}
    running_later = {e.id: e for e in later if e.type != "allocation.ended"}
    assert running_then.keys() == running_later.keys() and len(running_then) == 3
    assert all(running_then[k].data == running_later[k].data for k in running_then)
    ended_ids = {e.id for e in later if e.type == "allocation.ended"}
    assert len(ended_ids) == 2 and not ended_ids & running_then.keys()


# --------------------------------------------------------------------------------- node states
def test_scontrol_node_states() -> None:
    result = slurm.parse((FIXTURES / "scontrol_nodes_v0040.json").read_bytes(), cluster="c1")
    states = {(e.data.node, e.data.state, e.time) for e in result.events if isinstance(e, NodeStateEvent)}
    assert states == {
        ("gpu001", "up", datetime.fromtimestamp(1772442600, tz=UTC)),  # the document's last_update
        ("gpu002", "drained", datetime.fromtimestamp(1772440000, tz=UTC)),
        ("gpu003", "down", datetime.fromtimestamp(1772441000, tz=UTC)),
        ("gpu004", "drained", datetime.fromtimestamp(1772442000, tz=UTC)),
    }


def test_node_states_with_poll_time_include_up_nodes() -> None:
    polled = at(4000)
    for name, expected in [
        ("scontrol_nodes_v0040.json", {"gpu001": "up", "gpu002": "drained", "gpu003": "down", "gpu004": "drained"}),
        ("sinfo_v0041.json", {"gpu010": "drained", "gpu011": "drained", "gpu012": "up"}),
    ]:
        result = slurm.parse((FIXTURES / name).read_bytes(), cluster="c1", observed_at=polled.isoformat())
        assert {e.data.node: e.data.state for e in result.events} == expected
        assert {e.time for e in result.events} == {polled} and result.dead_letters == []


# --------------------------------------------------------------------------------- hints, ids, errors
def test_workload_kind_hint_is_the_default_and_comment_wins() -> None:
    events = load("sacct_v0039.json", workload_kind="benchmark")
    kinds = {e.data.job_id: e.data.owner.workload_kind for e in events}
    assert kinds == {"1001": "training", "1002": "benchmark", "1003": "benchmark", "1100_7": "benchmark"}


@pytest.mark.parametrize("name", ["sacct_v0039.json", "sacct_v0041.json", "squeue_v0040.json"])
def test_ids_are_deterministic_and_unique(name: str) -> None:
    first, second = load(name), load(name)
    assert [e.id for e in first] == [e.id for e in second]
    assert len({e.id for e in first}) == len(first)


def test_large_input_parses_the_same_and_leaves_the_collector_on() -> None:
    doc = orjson.loads((FIXTURES / "sacct_v0039.json").read_bytes())
    doc["jobs"] = [{**copy.deepcopy(doc["jobs"][0]), "job_id": 5000 + i} for i in range(700)]
    data = orjson.dumps(doc)
    assert len(data) > 1 << 20  # big enough to pause the cyclic collector while parsing
    result = slurm.parse(data, cluster="c1")
    assert gc.isenabled() and len(result.events) == 700 * 5 and result.dead_letters == []


def test_duplicate_record_parsed_once() -> None:
    doc = orjson.loads((FIXTURES / "sacct_v0039.json").read_bytes())
    doc["jobs"].append(copy.deepcopy(doc["jobs"][0]))
    events = slurm.parse(orjson.dumps(doc), cluster="c1").events
    assert len(events) == len(load("sacct_v0039.json"))


def _job(**overrides: Any) -> dict[str, Any]:
    job: dict[str, Any] = {
        "job_id": 9,
        "state": {"current": ["COMPLETED"], "reason": "None"},
        "nodes": "gpu1",
        "time": {"submission": T0, "start": T0 + 10, "end": T0 + 20},
        "tres": {"allocated": _tres(("gres", "gpu", 1))},
    }
    job.update(overrides)
    return job


@pytest.mark.parametrize(
    "bad, reason",
    [
        ({"job_id": None}, "job_id"),
        ({"state": {"current": 5}}, "job state"),
        ({"state": {"current": ["WIBBLE"]}}, "unknown job state"),
        ({"nodes": "gpu[1-"}, "unbalanced"),
        ({"time": {"submission": T0, "start": T0 + 10, "end": T0 + 5}}, "end_time before start_time"),
        ({"time": {"submission": T0, "start": T0 + 10, "end": 0}}, "without an end time"),
        ({"state": {"current": ["RUNNING"]}, "nodes": "None assigned"}, "without nodes"),
        ({"tres": {"allocated": [{"type": "gres", "name": "gpu", "count": -1}]}}, "TRES count"),
    ],
)
def test_bad_record_is_dead_lettered_and_the_rest_parsed(bad: dict[str, Any], reason: str) -> None:
    doc = {"jobs": [_job(**bad), _job(job_id=10)]}
    result = slurm.parse(orjson.dumps(doc), cluster="c1", origin="x.json")
    assert [d.reason for d in result.dead_letters if reason in d.reason], result.dead_letters
    assert len(result.dead_letters) == 1 and result.dead_letters[0].origin == "x.json"
    assert {e.data.job_id for e in result.events} == {"10"}


def test_slurm_reported_errors_become_dead_letters() -> None:
    doc = {"jobs": [], "errors": [{"description": "Unable to contact slurmdbd", "error_number": 1}]}
    result = slurm.parse(orjson.dumps(doc), cluster="c1")
    assert ["slurmdbd" in d.reason for d in result.dead_letters] == [True]


@pytest.mark.parametrize(
    "data", [b"", b"not json", b"[1, 2]", b'{"kind": "PodList", "items": []}', b"\xff\xfe", b'"jobs"']
)
def test_not_slurm(data: bytes) -> None:
    with pytest.raises(NotThisFormat):
        slurm.parse(data, cluster="c1")


# ------------------------------------------------------------------ public files (tests/unit/realworld.py)
def realworld_doc(name: str) -> dict[str, Any]:
    from tests.unit.realworld import realworld_file

    return orjson.loads(realworld_file(name).read_bytes())


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "slurm_sinfo_v0037_rivos.json",
            {
                "cs2.example.company.com": "up",
                "cs3.example.company.com": "up",
                "cs4.example.company.com": "up",
                "cs5.example.company.com": "down",
            },
        ),
        ("slurm_sinfo_N_v0039_rivos.json", {"localhost": "up"}),
    ],
)
def test_public_node_documents_give_every_node_at_the_time_hint(name: str, expected: dict[str, str]) -> None:
    result = slurm.parse(orjson.dumps(realworld_doc(name)), cluster="c1", time="2026-11-10T01:00:00Z")
    assert {e.data.node: e.data.state for e in result.events} == expected
    assert {e.time for e in result.events} == {datetime(2026, 11, 10, 1, tzinfo=UTC)}
    assert result.dead_letters == []


@pytest.mark.parametrize("last_update", [1685734600, {"set": True, "infinite": False, "number": 1685734600}])
def test_up_nodes_are_dated_by_the_documents_last_update(last_update: Any) -> None:
    doc = {**realworld_doc("slurm_sinfo_v0037_rivos.json"), "last_update": last_update}
    result = slurm.parse(orjson.dumps(doc), cluster="c1")
    up = {e.data.node for e in result.events if e.data.state == "up"}
    assert len(up) == 3 and {e.time for e in result.events if e.data.state == "up"} == {
        datetime.fromtimestamp(1685734600, tz=UTC)
    }


def test_undated_up_nodes_say_why_they_gave_nothing() -> None:
    result = slurm.parse(orjson.dumps(realworld_doc("slurm_sinfo_N_v0039_rivos.json")), cluster="c1")
    assert result.events == [] and result.dead_letters == []
    assert result.notes and "--time" in result.notes[0]


def test_cpu_only_jobs_say_why_they_gave_nothing() -> None:
    result = slurm.parse(orjson.dumps(realworld_doc("slurm_squeue_v0037_rivos.json")), cluster="c1")
    assert result.events == [] and result.dead_letters == []
    assert result.notes == ["2 job(s) hold no GPU: nothing to attribute"]


def test_pending_array_remainder_of_one_task_is_that_task() -> None:
    job = {
        "job_id": 4100,
        "array_job_id": {"set": True, "infinite": False, "number": 4100},
        "array_task_id": {"set": False, "infinite": False, "number": 0},
        "array_task_string": "2",
        "job_state": ["PENDING"],
        "submit_time": {"set": True, "infinite": False, "number": T0},
        "tres_req_str": "cpu=1,mem=1G,node=1,billing=1,gres/gpu=1",
        "partition": "gpu",
        "nodes": "",
        "restart_cnt": 0,
        "user_name": "u",
        "account": "a",
    }
    running = {
        **job,
        "job_id": 4100,
        "array_task_id": {"set": True, "infinite": False, "number": 2},
        "array_task_string": "",
        "job_state": ["RUNNING"],
        "nodes": "gpu1",
        "start_time": {"set": True, "infinite": False, "number": T0 + 60},
        "tres_alloc_str": "cpu=1,mem=1G,node=1,billing=1,gres/gpu=1",
    }
    for task_string in ("2", "[2]", "2%1"):
        (pending,) = slurm.parse(
            orjson.dumps({"jobs": [{**job, "array_task_string": task_string}]}), cluster="c1"
        ).events
        assert pending.data.job_id == "4100_2", task_string
    started = slurm.parse(orjson.dumps({"jobs": [running]}), cluster="c1").events
    assert {e.data.job_id for e in started} == {"4100_2"}
    assert [e.id for e in started if e.type == "allocation.pending"] == [
        pending.id
    ]  # the same placement, not a second job
    (several,) = slurm.parse(orjson.dumps({"jobs": [{**job, "array_task_string": "3-5"}]}), cluster="c1").events
    assert several.data.job_id == "4100_[3-5]"
