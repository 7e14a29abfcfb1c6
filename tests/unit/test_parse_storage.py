"""Storage counters (node_exporter disk/NFS, mountstats, Lustre, GPFS) and checkpoint JSON lines."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pipelines.events import CheckpointEvent, Envelope, StorageEvent, event_id
from pipelines.parsers import checkpoint, storage
from pipelines.parsers.base import NotThisFormat

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "storage"
T = datetime(2025, 11, 2, 10, 0, tzinfo=UTC)
GiB = 1024**3


def run(name: str, **hints: object) -> tuple[list[StorageEvent], list[str]]:
    hints.setdefault("node", "gpu017")
    hints.setdefault("time", T)
    result = storage.parse((FIX / name).read_bytes(), cluster="c1", origin=name, **hints)
    return result.events, [d.reason for d in result.dead_letters]  # type: ignore[return-value]


def rows(event: Envelope) -> dict[tuple[str, str, str | None], tuple[float, float]]:
    assert isinstance(event, StorageEvent)
    return {(s.fs_type, s.device, s.job_id): (s.read_bytes, s.write_bytes) for s in event.data.samples}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "node_exporter_disk.prom",
            {
                ("disk", "nvme0n1", None): (1.2345678848e11, 9.8765432832e10),
                ("disk", "nvme1n1", None): (4.4040192e9, 2.2020096e9),
                ("disk", "sda", None): (7.73849088e8, 1.048576e9),
            },
        ),
        (
            "node_exporter_nfs.prom",
            {
                ("nfs", "10.20.0.5:/export/datasets", None): (512 * GiB, 2 * GiB),
                ("nfs", "10.20.0.6:/home", None): (10 * 2**20, 5 * 2**20),
            },
        ),
        (
            "mountstats.txt",
            {
                # nfs4 export mounted twice: (normal 512 GiB + direct 1 GiB) + (1 MiB) read, 2 GiB written
                ("nfs", "10.20.0.5:/export/datasets", None): (513 * GiB + 2**20, 2 * GiB),
                # nfs v3: 10 MiB normal read; 5 MiB normal + 1 MiB direct written
                ("nfs", "10.20.0.6:/home", None): (10 * 2**20, 6 * 2**20),
            },
        ),
        (
            "lustre.prom",
            {
                ("lustre", "scratch-OST0000", None): (4 * 1024 * GiB, 2 * 1024 * GiB),
                ("lustre", "scratch-OST0001", None): (3840 * GiB, 1920 * GiB),
                ("lustre", "scratch-OST0000", "4815162"): (8 * GiB, 128 * GiB),
                ("lustre", "scratch-OST0001", "4815162"): (7.5 * GiB, 128 * GiB),
                ("lustre", "scratch-OST0000", "4815170"): (2**20, 0),
            },
        ),
        ("gpfs.prom", {("gpfs", "project", None): (0, 0), ("gpfs", "scratch", None): (2.05607400434e11, 74839282351)}),
    ],
)
def test_single_scrape_fixtures(
    name: str,
    expected: dict[tuple[str, str, str | None], tuple[float, float]],
) -> None:
    (event,), reasons = run(name)
    assert reasons == []
    assert isinstance(event, StorageEvent)
    got = rows(event)
    assert got.keys() == expected.keys()
    for key, (read, write) in expected.items():
        assert got[key] == (pytest.approx(read), pytest.approx(write))
    assert (event.data.node, event.time) == ("gpu017", T)
    assert event.id == event_id("storage.counters", "c1", "gpu017", T)
    assert (event.source, event.type) == ("storage", "storage.counters")


def test_query_range_one_event_per_node_and_step() -> None:
    events, reasons = run("query_range_disk.json", node=None)
    assert reasons == []
    assert [(e.data.node, e.time.minute) for e in events] == [
        ("gpu017", 0),
        ("gpu017", 1),
        ("gpu017", 2),
        ("gpu018", 0),
        ("gpu018", 1),
    ]
    assert rows(events[-1]) == {("disk", "nvme0n1", None): (5000004096, 7100000000)}
    again, _ = run("query_range_disk.json", node=None)
    assert [e.id for e in again] == [e.id for e in events]


def _expo(*lines: str) -> str:
    return "\n".join(lines) + "\n"


def test_missing_half_is_zero_only_when_the_family_is_absent() -> None:
    reads_only = _expo('node_disk_read_bytes_total{device="sda"} 100', 'node_disk_read_bytes_total{device="sdb"} 5')
    (event,) = storage.parse(reads_only, cluster="c1", node="n1", time=T).events
    assert rows(event) == {("disk", "sda", None): (100, 0), ("disk", "sdb", None): (5, 0)}

    partial = reads_only + 'node_disk_written_bytes_total{device="sda"} 7\n'
    result = storage.parse(partial, cluster="c1", node="n1", time=T)
    (event,) = result.events
    assert rows(event) == {("disk", "sda", None): (100, 7)}
    (dead,) = result.dead_letters
    assert "sdb" in dead.reason and "node_disk_written_bytes_total" in dead.reason
    assert 'device="sdb"' in dead.raw


def test_a_non_number_point_loses_that_sample_not_the_counter() -> None:
    """A query_range series with one unreadable point: that device's sample at that time is a dead
    letter (its read half cannot stand alone), never a write counter that fell to 0 and jumped back."""

    def series(name: str, values: list[str]) -> dict[str, object]:
        return {
            "metric": {"__name__": name, "device": "nvme0n1", "instance": "n1:9100"},
            "values": [[T.timestamp() + 30 * k, v] for k, v in enumerate(values)],
        }

    answer = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                series("node_disk_read_bytes_total", ["100", "200", "300"]),
                series("node_disk_written_bytes_total", ["1000", "n/a", "3000"]),
            ],
        },
    }
    result = storage.parse(json.dumps(answer), cluster="c1")
    assert [(e.time.second, rows(e)) for e in result.events] == [
        (0, {("disk", "nvme0n1", None): (100, 1000)}),
        (0, {("disk", "nvme0n1", None): (300, 3000)}),
    ]
    assert [e.time for e in result.events] == [T, T.replace(minute=1)]
    reasons = [d.reason for d in result.dead_letters]
    assert len(reasons) == 2 and "without its node_disk_written_bytes_total" in reasons[1]


@pytest.mark.parametrize(
    ("value", "reasons"),
    [
        # the bad read is a dead letter, and so is the write it leaves without its read
        ("-1", ["not a non-negative number", "without its node_disk_read_bytes_total"]),
        ("+Inf", ["not a non-negative number", "without its node_disk_read_bytes_total"]),
        ("NaN", ["without its node_disk_read_bytes_total"]),  # NaN = not reported
    ],
)
def test_bad_counter_values(value: str, reasons: list[str]) -> None:
    text = _expo(
        f'node_disk_read_bytes_total{{device="sda"}} {value}',
        'node_disk_written_bytes_total{device="sda"} 1',
        'node_disk_read_bytes_total{device="sdb"} 3',
        'node_disk_written_bytes_total{device="sdb"} 4',
    )
    result = storage.parse(text, cluster="c1", node="n1", time=T)
    assert [rows(e) for e in result.events] == [{("disk", "sdb", None): (3, 4)}]
    got = [d.reason for d in result.dead_letters]
    assert len(got) == len(reasons) and all(r in g for r, g in zip(reasons, got, strict=True))


@pytest.mark.parametrize(
    ("labels", "hint", "node"),
    [
        ('hostname="h1",', None, "h1"),
        ('Hostname="h2",', "x", "h2"),
        ('nodename="h3",instance="10.1.1.1:9100",', None, "h3"),
        ('instance="gpu020:9100",', None, "gpu020"),
        ("", "h5", "h5"),
        ("", None, None),
    ],
)
def test_node_resolution(labels: str, hint: str | None, node: str | None) -> None:
    text = _expo(
        f'gpfs_perf_read_bytes_total{{{labels}fs="scratch"}} 1',
        f'gpfs_perf_write_bytes_total{{{labels}fs="scratch"}} 2',
    )
    result = storage.parse(text, cluster="c1", node=hint, time=T)
    assert [e.data.node for e in result.events] == ([node] if node else [])
    assert len(result.dead_letters) == (0 if node else 2)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('gpfs_fs_read_bytes_total{filesystem="fs1"} 1\ngpfs_fs_write_bytes_total{filesystem="fs1"} 2\n', None),
        ('gpfs_perf_read_bytes{fs="fs1"} 1\ngpfs_perf_write_bytes{fs="fs1"} 2\n', None),
        ('lustre_job_read_bytes_total{component="ost",target="t0"} 1\n', "jobid"),
        ('node_disk_read_bytes_total{major="259"} 1\n', "device"),
    ],
)
def test_label_variants(text: str, reason: str | None) -> None:
    result = storage.parse(text, cluster="c1", node="n1", time=T)
    if reason is None:
        (event,) = result.events
        assert rows(event) == {("gpfs", "fs1", None): (1, 2)}
    else:
        assert result.events == [] and reason in result.dead_letters[0].reason


def test_exposition_needs_a_time() -> None:
    result = storage.parse((FIX / "gpfs.prom").read_text(), cluster="c1", node="n1")
    assert result.events == [] and result.dead_letters
    assert all("--time" in d.reason and "scrape_time" not in d.reason for d in result.dead_letters)


def test_mountstats_needs_node_and_time() -> None:
    text = (FIX / "mountstats.txt").read_text()
    for hints, flags in (({"node": "n1"}, ["--time"]), ({"time": T}, ["--node"]), ({}, ["--node", "--time"])):
        result = storage.parse(text, cluster="c1", **hints)
        assert result.events == [] and len(result.dead_letters) == 1
        reason = result.dead_letters[0].reason
        assert [flag for flag in ("--node", "--time") if flag in reason] == flags and "node=" not in reason


def test_mountstats_bad_bytes_line_only_loses_that_mount() -> None:
    text = (
        (FIX / "mountstats.txt")
        .read_text()
        .replace("bytes:\t10485760 5242880 0 1048576 10485760 6291456 2560 1280", "bytes:\t10485760 5242880 0")
    )
    result = storage.parse(text, cluster="c1", node="n1", time=T)
    (event,) = result.events
    assert [s.device for s in event.data.samples] == ["10.20.0.5:/export/datasets"]
    (dead,) = result.dead_letters
    assert "10.20.0.6:/home" in dead.reason and "8 unsigned integers" in dead.reason


@pytest.mark.parametrize(
    "text",
    [
        "",
        "hello world\n",
        '{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": '
        '{"__name__": "DCGM_FI_DEV_GPU_TEMP"}, "values": [[1, "2"]]}]}}',
        'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-1"} 40\n',
        "device proc mounted on /proc with fstype proc\n",
    ],
)
def test_not_storage_input(text: str) -> None:
    if text.startswith("device proc"):  # mountstats without NFS mounts: the format, but nothing to report
        assert storage.parse(text, cluster="c1", node="n", time=T).events == []
        return
    with pytest.raises(NotThisFormat):
        storage.parse(text, cluster="c1", node="n", time=T)


# ------------------------------------------------------------------------------------------
# checkpoints
# ------------------------------------------------------------------------------------------
def test_checkpoint_fixture_via_storage_autodetect() -> None:
    result = storage.parse((FIX / "checkpoints.jsonl").read_bytes(), cluster="c1")
    assert result.dead_letters == []
    events = result.events
    assert all(isinstance(e, CheckpointEvent) for e in events)
    assert [(e.data.job_id, e.data.attempt, e.data.kind) for e in events] == [
        ("4815162", 1, "write"),
        ("4815162", 1, "write"),
        ("4815162", 2, "restore"),
        ("team-vision/resnet-finetune-7d9f8-x2kq", None, "write"),
    ]
    restore = events[2]
    assert restore.time == datetime(2025, 11, 2, 12, 21, 30, tzinfo=UTC)  # 13:21:30+01:00
    assert restore.data.started == datetime(2025, 11, 2, 12, 20, 5, tzinfo=UTC)
    assert restore.id == event_id(
        "checkpoint", "c1", "4815162", 2, "restore", "/lustre/scratch/llm-7b/run42/step-00012000", restore.time
    )
    assert [e.cluster for e in events] == ["c1", "c1", "c1", "k8s-east"]
    assert events[0].time == datetime(2025, 11, 2, 10, 16, 41, 250000, tzinfo=UTC)
    assert events[0].data.bytes == 128 * GiB and events[0].data.node == "gpu017"


def _line(**changes: object) -> str:
    rec: dict[str, object] = {
        "job_id": "77",
        "path": "/ckpt/a",
        "bytes": 10,
        "started": "2025-11-02T10:00:00Z",
        "finished": "2025-11-02T10:01:00Z",
    }
    rec.update(changes)
    return json.dumps({k: v for k, v in rec.items() if v is not None})


def test_same_instant_in_other_notation_is_the_same_checkpoint() -> None:
    a = checkpoint.parse(_line(), cluster="c1").events[0]
    b = checkpoint.parse(_line(finished="2025-11-02T11:01:00+01:00"), cluster="c1").events[0]
    c = checkpoint.parse(_line(job_id=77), cluster="c1").events[0]
    assert a.id == b.id == c.id and c.data.job_id == "77"


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"job_id": "1", "path": ', "invalid JSON"),
        ("[1, 2]", "not a JSON object"),
        (_line(path=None), "missing 'path'"),
        (_line(finished="2025-11-02T09:00:00Z"), "finished before it started"),
        (_line(started="2025-11-02T10:00:00"), "without offset"),
        (_line(started="yesterday"), "RFC 3339"),
        (_line(kind="delete"), "kind"),
        (_line(attempt=0), "attempt"),
        (_line(attempt=True), "attempt"),
        (_line(bytes=-1), "bytes"),
        (_line(bytes=1.5), "bytes"),
        (_line(job_id=["x"]), "job_id"),
        (_line(job_id=""), "job_id"),
        (_line(node=5), "node"),
        (_line(cluster=""), "cluster"),
    ],
)
def test_bad_checkpoint_lines(line: str, reason: str) -> None:
    result = checkpoint.parse(_line() + "\n" + line + "\n", cluster="c1")
    assert len(result.events) == 1  # the good line survives
    (dead,) = result.dead_letters
    assert reason in dead.reason and dead.raw == line and dead.reason.startswith("line 2:")


def test_not_checkpoint_input() -> None:
    for text in ("", '{"status": "success"}', "job_id,path\n1,/x\n"):
        with pytest.raises(NotThisFormat):
            checkpoint.parse(text, cluster="c1")


def test_series_without_a_host_name_the_node_flag() -> None:
    result = storage.parse(_expo('node_disk_read_bytes_total{device="sda"} 1'), cluster="c1", time=T)
    assert result.events == [] and ["--node" in d.reason for d in result.dead_letters] == [True]


# ------------------------------------------------------------------ public files (tests/unit/realworld.py)
@pytest.mark.parametrize(
    ("name", "fs_types"),
    [
        ("storage_node_exporter_e2e_output.prom", {"disk", "nfs"}),
        ("storage_mountstats_node_exporter_fixture.txt", {"nfs"}),
    ],
)
def test_public_storage_files(name: str, fs_types: set[str]) -> None:
    from tests.unit.realworld import realworld_file

    text = realworld_file(name).read_text()
    result = storage.parse(text, cluster="c1", node="node1", time="2026-11-10T01:00:00Z")
    assert result.dead_letters == []
    (event,) = result.events
    assert isinstance(event, StorageEvent) and event.data.node == "node1"
    assert {s.fs_type for s in event.data.samples} == fs_types
    bare = storage.parse(text, cluster="c1")
    assert bare.events == [] and bare.dead_letters
    assert all("--node" in d.reason or "--time" in d.reason for d in bare.dead_letters)
