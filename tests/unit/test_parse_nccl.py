"""nccl-tests stdout across layouts: 2.10 ``error`` column, 2.13+ ``root``/``#wrong``, multi-run logs."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pipelines.events import BenchmarkRunEvent, event_id
from pipelines.parsers import nccl
from pipelines.parsers.base import NotThisFormat

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"
T = datetime(2025, 11, 2, 8, 0, tzinfo=UTC)


def run(name: str, **hints: object) -> tuple[list[BenchmarkRunEvent], list[str]]:
    result = nccl.parse((FIX / name).read_bytes(), cluster="c1", origin=name, **hints)
    assert all(isinstance(e, BenchmarkRunEvent) for e in result.events)
    return result.events, [d.reason for d in result.dead_letters]  # type: ignore[return-value]


def header_sizes(text: str) -> tuple[int, int]:
    m = re.search(r"minBytes (\d+) maxBytes (\d+)", text)
    assert m
    return int(m.group(1)), int(m.group(2))


def footer_avg(text: str) -> float:
    m = re.search(r"Avg bus bandwidth\s*:\s*(\S+)", text)
    assert m
    return float(m.group(1))


@pytest.mark.parametrize(
    ("name", "hints", "collective", "hosts", "ranks", "tests_version", "nccl_version", "oob", "wrong", "ok"),
    [
        (
            "all_reduce_2_10_error.log",
            {"collective": "all_reduce"},
            "all_reduce",
            ["gpu001", "gpu002"],
            8,
            None,
            "2.10.3+cuda11.4",
            0,
            0,
            True,
        ),
        (
            "all_reduce_2_13_root.log",
            {},
            "all_reduce",
            ["h100-a01", "h100-a02"],
            16,
            "2.13.8",
            "2.19.3+cuda12.3",
            0,
            0,
            True,
        ),
        (
            "all_gather_2_18.log",
            {"collective": "ignored"},
            "all_gather",
            ["gh200-n017"],
            8,
            "2.18.3",
            "2.27.3",
            0,
            0,
            True,
        ),  # version decoded from nccl-library=22703
        ("broadcast_old.log", {"collective": "broadcast"}, "broadcast", ["dgx-a100-3"], 8, None, None, 0, 0, True),
        (
            "all_reduce_wrong.log",
            {},
            "all_reduce",
            ["gpu-c11"],
            8,
            "2.13.8",
            "2.19.3",
            2,
            16 + int(float("1.04858e+06")),
            False,
        ),  # "%5g" prints 1048576 wrong elements as 1.04858e+06
        (
            "all_reduce_degraded.log",
            {},
            "all_reduce",
            ["h100-a01", "h100-a03"],
            16,
            "2.13.8",
            "2.19.3+cuda12.3",
            0,
            0,
            True,
        ),  # slow is not wrong
    ],
)
def test_single_run_fixtures(
    name: str,
    hints: dict[str, object],
    collective: str,
    hosts: list[str],
    ranks: int,
    tests_version: str | None,
    nccl_version: str | None,
    oob: int,
    wrong: int,
    ok: bool,
) -> None:
    (event,), reasons = run(name, time=T, **hints)
    text = (FIX / name).read_text()
    d = event.data
    assert reasons == []
    assert (d.collective, d.hosts, d.ranks, len(d.devices)) == (collective, hosts, ranks, ranks)
    assert (d.tests_version, d.nccl_version) == (tests_version, nccl_version)
    assert (d.out_of_bounds, d.wrong_total, d.ok) == (oob, wrong, ok)
    assert d.avg_busbw_gbps == pytest.approx(footer_avg(text))
    lo, hi = header_sizes(text)
    sizes = [r.size_bytes for r in d.results]
    assert sizes[0] == lo and sizes[-1] == hi
    assert all(b == 2 * a for a, b in zip(sizes, sizes[1:], strict=False))  # step: 2(factor)
    assert (event.time, d.started) == (T, T)
    assert event.id == event_id("benchmark.run", "c1", d.run_id)
    assert (event.source, event.type) == ("nccl", "benchmark.run")


@pytest.mark.parametrize(
    ("name", "redop", "root", "wrong"),
    [
        ("all_reduce_2_10_error.log", "sum", None, None),  # old: no root column, error instead of #wrong
        ("all_reduce_2_13_root.log", "sum", None, 0),  # new: root -1
        ("all_gather_2_18.log", None, None, 0),  # new: redop none
        ("broadcast_old.log", None, 0, None),  # old: root column, no redop
    ],
)
def test_layout_columns(name: str, redop: str | None, root: int | None, wrong: int | None) -> None:
    (event,), _ = run(name, time=T)
    first = event.data.results[0]
    assert (first.redop, first.root) == (redop, root)
    assert (first.out_of_place_wrong, first.in_place_wrong) == (wrong, wrong)
    assert first.dtype == "float" and first.count >= 1


def test_first_row_values_are_read_in_column_order() -> None:
    (event,), _ = run("all_reduce_2_13_root.log", time=T)
    # 8589934592  2147483648  float  sum  -1  88520  97.04  181.95  0  88521  97.04  181.95  0
    row = event.data.results[-1]
    assert (row.size_bytes, row.count) == (8589934592, 2147483648)
    assert (row.out_of_place_time_us, row.out_of_place_algbw_gbps, row.out_of_place_busbw_gbps) == (
        88520.0,
        97.04,
        181.95,
    )
    in_place = (row.in_place_time_us, row.in_place_algbw_gbps, row.in_place_busbw_gbps)
    assert in_place == (88521.0, 97.04, 181.95)


def test_devices() -> None:
    (old,), _ = run("all_reduce_2_10_error.log", time=T)
    (new,), _ = run("all_gather_2_18.log", time=T)
    d0 = old.data.devices[5]
    assert (d0.rank, d0.host, d0.pid, d0.device, d0.bus_id, d0.name) == (
        5,
        "gpu002",
        41235,
        1,
        "0x0f",
        "NVIDIA A100-SXM4-80GB",
    )
    n7 = new.data.devices[7]
    assert (n7.rank, n7.host, n7.device) == (7, "gh200-n017", 7)
    assert (n7.bus_id, n7.name) == ("0000:db:00", "NVIDIA H200")


def test_multi_run_log() -> None:
    events, reasons = run("multi_run_sendrecv_alltoall.log")
    assert reasons == []
    assert [e.data.collective for e in events] == ["sendrecv", "alltoall"]
    # the wrapper's "Started:" lines
    assert [e.time for e in events] == [
        datetime(2025, 11, 2, 11, 16, 43, tzinfo=UTC),
        datetime(2025, 11, 2, 11, 19, 3, tzinfo=UTC),
    ]
    assert [e.data.devices[0].pid for e in events] == [13291, 13770]
    assert len({e.id for e in events}) == 2
    alltoall = events[1].data
    assert all(r.in_place_wrong is None and r.out_of_place_wrong == 0 for r in alltoall.results)  # N/A
    assert alltoall.ok and alltoall.avg_busbw_gbps == pytest.approx(13.9295)
    named = nccl.parse((FIX / "multi_run_sendrecv_alltoall.log").read_text(), cluster="c1", run_id="bench-7")
    assert [e.data.run_id for e in named.events] == ["bench-7#1", "bench-7#2"]


def test_time_comes_from_hint_or_log_else_dead_letter() -> None:
    (stamped,), _ = run("all_gather_2_18.log")
    assert stamped.time == datetime(2025, 11, 2, 9, 30, tzinfo=UTC)  # the date line before the run
    result = nccl.parse((FIX / "all_reduce_2_13_root.log").read_text(), cluster="c1")
    assert result.events == [] and len(result.dead_letters) == 1
    assert "gpuledger ingest nccl --time" in result.dead_letters[0].reason


def test_run_id_is_deterministic_and_content_bound() -> None:
    text = (FIX / "all_reduce_2_13_root.log").read_text()
    a = nccl.parse(text, cluster="c1", time=T).events[0]
    b = nccl.parse(text.encode(), cluster="c1", time=T).events[0]
    c = nccl.parse(text.replace("181.95", "181.96"), cluster="c1", time=T).events[0]
    d = nccl.parse(text, cluster="c1", time=T, run_id="nightly-42").events[0]
    assert a.id == b.id and a.id != c.id
    assert d.data.run_id == "nightly-42" and d.id == event_id("benchmark.run", "c1", "nightly-42")


def test_collective_sources() -> None:
    text = (FIX / "all_reduce_2_13_root.log").read_text()
    for hint in ("all_reduce", "all_reduce_perf", "/opt/nccl-tests/build/all_reduce_perf_mpi"):
        hinted = nccl.parse(text, cluster="c1", time=T, collective=hint).events[0]
        assert hinted.data.collective == "all_reduce"
    with_cmd = "mpirun -np 16 /opt/nccl-tests/build/reduce_scatter_perf_mpi -b 8 -e 8G -f 2\n" + text
    assert nccl.parse(with_cmd, cluster="c1", time=T).events[0].data.collective == "reduce_scatter"


OLD_HEADER = (
    "# nThread 1 nGpus 2 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 validation: 1 \n"
    "#   Rank  0 Pid   4000 on       n1 device  0 [0x07] Tesla V100-SXM2-32GB\n"
    "#   Rank  1 Pid   4000 on       n1 device  1 [0x08] Tesla V100-SXM2-32GB\n"
    "#       size         count      type   redop    root     time   algbw   busbw  error"
    "     time   algbw   busbw  error\n"
)
FOOTER = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0.5 \n"


@pytest.mark.parametrize(
    ("dtype", "error", "ok"),
    [
        ("float", "0e+00", True),
        ("float", "2e-05", False),
        ("half", "1e-02", True),
        ("half", "9e-02", False),
        ("double", "1e-13", True),
        ("int32", "1e+00", False),
        ("float", "N/A", True),
    ],
)
def test_old_error_column_limit(dtype: str, error: str, ok: bool) -> None:
    rows = "".join(
        f"{s:12d}  {s // 4:12d}  {dtype:>8}     sum       0    10.00    0.50    0.50  {error}"
        f"    10.00    0.50    0.50  0e+00\n"
        for s in (8, 16)
    )
    (event,) = nccl.parse(OLD_HEADER + rows + FOOTER, cluster="c1", time=T).events
    assert event.data.ok is ok
    assert event.data.collective == "reduce"  # old layout with both redop and root columns
    assert event.data.results[0].root == 0 and event.data.wrong_total == 0


ROW8 = "        8             2     float     sum      -1"


@pytest.mark.parametrize(
    ("mutate", "ok", "dead"),
    [
        (lambda t: t, True, 0),
        (lambda t: t.split("# Out of bounds")[0], False, 0),  # cut short: no footer
        (lambda t: t.replace(": 71.9863 ", ": 71.9863 FAILED"), False, 0),  # NCCL_TESTS_MIN_BW missed
        (lambda t: t.replace(ROW8, "        8             2"), False, 1),
        (lambda t: t.replace(ROW8, "        8  2  float  sum  xx", 1), False, 1),
        (lambda t: re.sub(r"(?m)^\s+\d+\s+\d+\s+float.*\n", "", t), False, 0),  # no result rows at all
    ],
)
def test_ok_rules(mutate: object, ok: bool, dead: int) -> None:
    text = mutate((FIX / "all_reduce_2_13_root.log").read_text())  # type: ignore[operator]
    result = nccl.parse(text, cluster="c1", time=T)
    (event,) = result.events
    assert event.data.ok is ok
    assert len(result.dead_letters) == dead
    assert all(d.reason and "\n" not in d.reason for d in result.dead_letters)


def test_no_datacheck_and_cputime_header() -> None:
    lines = []
    for line in (FIX / "all_reduce_2_13_root.log").read_text().split("\n"):
        tokens = line.split()
        if len(tokens) == 13 and tokens[0].isdigit():  # -c 0: nothing checked, both #wrong print N/A
            tokens[8] = tokens[12] = "N/A"
            line = "  ".join(tokens)
        lines.append(line)
    text = "\n".join(lines).replace("     time   algbw   busbw #wrong", "  cputime   algbw   busbw #wrong")
    (event,) = nccl.parse(text, cluster="c1", time=T).events
    assert all(r.out_of_place_wrong is None and r.in_place_wrong is None for r in event.data.results)
    assert event.data.ok and len(event.data.results) == 31


@pytest.mark.parametrize(
    "text",
    [
        "",
        "random words\n",
        'DCGM_FI_DEV_GPU_TEMP{gpu="0"} 40\n',
        "# just a comment\n#\n",
        "     8     2  float  sum  -1  1.0  1.0  1.0  0  1.0  1.0  1.0  0\n",
    ],
)
def test_not_nccl_input(text: str) -> None:
    with pytest.raises(NotThisFormat) as err:
        nccl.parse(text, cluster="c1", time=T)
    assert "\n" not in str(err.value)


# ------------------------------------------------------------------------------------------
# public logs real runs wrote (tests/unit/realworld.py)
# ------------------------------------------------------------------------------------------
def realworld_run(name: str, **hints: object) -> tuple[list[BenchmarkRunEvent], list[str]]:
    from tests.unit.realworld import realworld_file

    result = nccl.parse(realworld_file(name).read_bytes(), cluster="c1", origin=name, time=T, **hints)
    return result.events, [d.reason for d in result.dead_letters]  # type: ignore[return-value]


def test_open_mpi_tag_output_prefixes_are_stripped() -> None:
    events, reasons = realworld_run("nccl_all_reduce_t4_efa_mpirun_tagged_output.log")
    assert reasons == []
    (run,) = events
    assert run.data.hosts == ["test-nccl-efa-worker-0", "test-nccl-efa-worker-1"]
    assert run.data.ranks == 2 and run.data.nccl_version == "2.12.7+cuda11.4"
    assert len(run.data.results) == 31 and run.data.avg_busbw_gbps == pytest.approx(1.15327)
    assert run.data.ok and run.data.collective == "all_reduce"


@pytest.mark.parametrize(
    "name", ["nccl_all_reduce_a800_24ranks_12pods.log", "nccl_all_reduce_h100_16ranks_mpijob_launcher.log"]
)
def test_all_reduce_without_binary_name_is_inferred_from_the_table(name: str) -> None:
    events, reasons = realworld_run(name)
    assert reasons == []
    assert [e.data.collective for e in events] == ["all_reduce"]


def test_collective_inference_by_sizes() -> None:
    head = (
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 64 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n"
        "#  Rank  0 Group  0 Pid  1 on a device  0 [0x19] GPU\n"
        "#  Rank  1 Group  0 Pid  2 on b device  0 [0x19] GPU\n"
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
        "   busbw #wrong\n"
    )
    foot = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1.0\n"

    def collective(rows: str, **hints: str) -> str:
        (event,) = nccl.parse(head + rows + foot, cluster="c1", time=T, **hints).events
        assert isinstance(event, BenchmarkRunEvent)
        return event.data.collective

    row = "{size} {count} {type} {op} {root} 1.0 1.0 1.0 0 1.0 1.0 1.0 0\n"
    assert collective(row.format(size=64, count=16, type="float", op="sum", root=-1)) == "all_reduce"
    assert collective(row.format(size=64, count=16, type="half", op="sum", root=-1)) == "reduce_scatter"
    assert collective(row.format(size=64, count=8, type="double", op="none", root=0)) == "broadcast"
    assert collective(row.format(size=64, count=8, type="float", op="none", root=-1)) == "unknown"
    assert (
        collective(row.format(size=64, count=8, type="float", op="none", root=-1), collective="all_gather_perf")
        == "all_gather"
    )


def test_a_run_that_died_of_a_cuda_failure_is_one_failed_run() -> None:
    events, reasons = realworld_run("nccl_alltoall_h800_2_17_cuda_failure_issue355.log")
    (run,) = events
    assert run.data.collective == "alltoall" and run.data.ranks == 16 and not run.data.ok
    assert run.data.results == [] and run.data.tests_version == "2.17.6"
    assert len(reasons) <= 1
    assert reasons and "Test CUDA failure" in reasons[0] and "illegal memory access" in reasons[0]
    assert "fields" not in reasons[0]


def test_a_run_that_died_before_its_table_says_why() -> None:
    log = (
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 64 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n"
        "#  Rank  0 Group  0 Pid  1 on a device  0 [0x19] GPU\n"
        "a: Test NCCL failure common.cu:1279 'unhandled system error (run with NCCL_DEBUG=INFO for details)'\n"
        " .. a pid 1: Test failure common.cu:1131\n"
    )
    result = nccl.parse(log, cluster="c1", time=T)
    (event,) = result.events
    assert isinstance(event, BenchmarkRunEvent) and not event.data.ok and event.data.results == []
    assert [d.reason for d in result.dead_letters] == [
        "nccl-tests run died: Test NCCL failure common.cu:1279 'unhandled system error (run with NCCL_DEBUG=INFO "
        "for details)'"
    ]
