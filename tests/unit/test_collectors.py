"""Live collectors: the protocol and run loop, Prometheus windows, exporter scrapes, Slurm commands, CLI.

Sources are played by real local stand-ins, never by mocks of our own code: Prometheus and the
exporters by small HTTP servers on 127.0.0.1 serving fixture answers (the client libraries —
prometheus-api-client, requests — are real), Slurm by a tiny script run as a real subprocess that
prints a fixture. (The Kubernetes collector has its own module: test_collectors_kubernetes.py.)
"""

from __future__ import annotations

import json
import shlex
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpuledger.cli import collect_cmd
from gpuledger.cli.main_errors import UsageFailure
from pipelines.collectors import dcgm as dcgm_collector
from pipelines.collectors import storage as storage_collector
from pipelines.collectors.base import Batch, Deduplicated, collect_into, run
from pipelines.collectors.prometheus import RangeCursor, selector
from pipelines.collectors.slurm import SlurmCommands
from pipelines.errors import PublishError, SourceUnavailable
from pipelines.events import DeadLetter, event_id
from pipelines.parsers import dcgm, slurm, storage
from pipelines.parsers.base import NotThisFormat, ParseResult
from pipelines.wire import validate

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
T0 = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


# ------------------------------------------------------------------------------------------
# local HTTP stand-ins
# ------------------------------------------------------------------------------------------
Reply = tuple[int, bytes]


@pytest.fixture
def http() -> Iterator[Callable[[Callable[[str, dict[str, list[str]]], Reply]], str]]:
    """Start servers answering GETs with ``reply(path, query) -> (status, body)``; yields a starter."""
    servers: list[ThreadingHTTPServer] = []

    def start(reply: Callable[[str, dict[str, list[str]]], Reply]) -> str:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                url = urlparse(self.path)
                status, body = reply(url.path, parse_qs(url.query))
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return None

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


CLOSED_PORT_URL = "http://127.0.0.1:9"  # the discard port: nothing listens there


# ------------------------------------------------------------------------------------------
# RangeCursor and the query
# ------------------------------------------------------------------------------------------
def _windows(cursor: RangeCursor, now: float) -> list[tuple[float, float]]:
    out = []
    while (window := cursor.next_window(now)) is not None:
        out.append((window.start.timestamp(), window.end.timestamp()))
        cursor.advance(window)
    return out


B = T0.timestamp()  # a multiple of 60


@pytest.mark.parametrize(
    ("kwargs", "now", "want"),
    [
        # closed range, aligned outwards-in to the step, split by max_points
        ({"step_s": 5, "start": at(7), "end": at(21), "max_points": 2}, B + 999, [(B + 10, B + 15), (B + 20, B + 20)]),
        # an open range stops at now - lag (default lag: 2 steps)
        ({"step_s": 10, "start": at(0)}, B + 47, [(B + 0, B + 20)]),
        ({"step_s": 10, "start": at(0), "lag_s": 0}, B + 47, [(B + 0, B + 40)]),
        # no start: one step of backfill before now - lag
        ({"step_s": 15}, B + 100, [(B + 60, B + 60)]),
        ({"step_s": 15, "backfill_s": 45}, B + 100, [(B + 30, B + 60)]),
        # a range whose end is still in the future is read only as far as it has settled
        ({"step_s": 30, "start": at(0), "end": at(600)}, B + 95, [(B + 0, B + 30)]),
        ({"step_s": 30, "start": at(61), "end": at(89)}, B + 999, []),  # no multiple of 30 inside
    ],
)
def test_range_cursor_windows(kwargs: dict[str, object], now: float, want: list[tuple[float, float]]) -> None:
    assert _windows(RangeCursor(**kwargs), now) == want  # type: ignore[arg-type]


def test_range_cursor_follows_without_repeating_an_instant() -> None:
    cursor = RangeCursor(step_s=30, start=at(0), lag_s=0)
    assert _windows(cursor, B + 65) == [(B + 0, B + 60)]
    assert cursor.next_window(B + 85) is None and not cursor.more(B + 85) and not cursor.finished()
    assert _windows(cursor, B + 125) == [(B + 90, B + 120)]
    closed = RangeCursor(step_s=30, start=at(0), end=at(60), max_points=2)
    assert closed.more(B + 999) and not closed.finished()
    _windows(closed, B + 999)
    assert closed.finished() and not closed.more(B + 999)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"step_s": 0}, "whole number"),
        ({"step_s": 1.5}, "whole number"),
        ({"step_s": True}, "whole number"),
        ({"step_s": 30, "max_points": 20_000}, "max_points"),
        ({"step_s": 30, "start": at(60), "end": at(0)}, "ends before"),
    ],
)
def test_range_cursor_rejects_bad_settings(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RangeCursor(**kwargs)  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(step=st.integers(1, 120), start=st.integers(0, 10_000), length=st.integers(0, 20_000), points=st.integers(1, 50))
def test_range_cursor_covers_every_step_exactly_once(step: int, start: int, length: int, points: int) -> None:
    cursor = RangeCursor(step_s=step, start=at(start), end=at(start + length), max_points=points)
    windows = _windows(cursor, B + 10**6)
    instants = [t for a, b in windows for t in range(int(a), int(b) + 1, step)]
    want = [B + t for t in range(start, start + length + 1) if (B + t) % step == 0]
    assert instants == want
    assert all((b - a) / step + 1 <= points for a, b in windows)
    assert cursor.finished() or not want


def test_selector_asks_for_every_field_the_parser_reads() -> None:
    query = selector(dcgm_collector.METRICS, 'job="dcgm", cluster=~"c1|c2"')
    assert query.startswith('{__name__=~"') and query.endswith(', job="dcgm", cluster=~"c1|c2"}')
    assert set(query[len('{__name__=~"') : query.index('"', 12)].split("|")) == set(dcgm.FIELDS)
    assert selector(["a_total"], '{job="x"}') == '{__name__=~"a_total", job="x"}'
    assert selector(["a.b"]) == '{__name__=~"a\\.b"}'


# ------------------------------------------------------------------------------------------
# Deduplicated and the run loop (scripted collectors)
# ------------------------------------------------------------------------------------------
def _sample(node: str, second: int) -> dict[str, object]:
    time = at(second)
    return {
        "id": event_id("gpu.sample", "c1", node, time),
        "source": "dcgm",
        "type": "gpu.sample",
        "time": time,
        "cluster": "c1",
        "data": {"node": node, "gpus": [{"uuid": "GPU-1"}]},
    }


class Scripted:
    """A collector playing back batches, or raising what the script says."""

    source = "test"

    def __init__(self, script: list[Batch | Exception]) -> None:
        self.script = list(script)
        self.polls = 0
        self.closed = False

    def poll(self) -> Batch:
        self.polls += 1
        step = self.script.pop(0) if self.script else Batch()
        if isinstance(step, Exception):
            raise step
        return step

    def close(self) -> None:
        self.closed = True


def batch(*seconds: int, more: bool = False, final: bool = False, letters: int = 0) -> Batch:
    result = ParseResult([validate(_sample("n1", s)) for s in seconds])
    result.dead_letters += [
        DeadLetter.build(topic="gpu.metrics", source="dcgm", reason="bad", raw=f"raw {i}") for i in range(letters)
    ]
    return Batch(result, more=more, final=final)


@pytest.mark.parametrize(
    ("seconds", "capacity", "want"),
    [
        ([[1, 2], [2, 3], [1, 3, 4]], 100, [[1, 2], [3], [4]]),
        ([[1, 2], [3], [1]], 2, [[1, 2], [3], [1]]),  # 1 was forgotten (capacity 2) and passes again
        ([[5, 5, 6]], 100, [[5, 6]]),  # duplicates inside one batch too
    ],
)
def test_deduplicated_drops_ids_already_handed_on(
    seconds: list[list[int]], capacity: int, want: list[list[int]]
) -> None:
    wrapped = Deduplicated(Scripted([batch(*s) for s in seconds]), capacity=capacity)
    got = [[e.time for e in wrapped.poll().result.events] for _ in seconds]
    assert got == [[at(s) for s in w] for w in want]
    assert wrapped.dropped == sum(map(len, seconds)) - sum(map(len, want))


def test_deduplicated_also_drops_repeated_dead_letters() -> None:
    wrapped = Deduplicated(Scripted([batch(letters=2), batch(letters=3)]))
    assert len(wrapped.poll().result.dead_letters) == 2
    assert len(wrapped.poll().result.dead_letters) == 1


@pytest.mark.parametrize(
    ("script", "follow", "max_polls", "polls", "events"),
    [
        ([batch(1), batch(2)], False, None, 1, 1),  # once: one poll
        ([batch(1, more=True), batch(2, more=True), batch(3)], False, None, 3, 3),  # chunks without --follow
        ([batch(1), batch(2), batch(3, final=True), batch(4)], True, None, 3, 3),  # final ends --follow
        ([batch(1), batch(2), batch(3), batch(4)], True, 2, 2, 2),
        ([batch(1, more=True), batch(2, more=True)], False, 1, 1, 1),  # max_polls wins over more
        ([SourceUnavailable("down"), batch(1), SourceUnavailable("down"), batch(2, final=True)], True, None, 4, 2),
    ],
)
def test_run_loop(
    script: list[Batch | Exception], follow: bool, max_polls: int | None, polls: int, events: int
) -> None:
    collector = Scripted(script)
    collected = ParseResult()
    stats = run(collector, collect_into(collected), follow=follow, interval_s=0.0, max_polls=max_polls)
    assert collector.polls == polls
    assert stats.events == events == len(collected.events)
    assert stats.failed_polls == sum(isinstance(s, Exception) for s in script[:polls])


def test_run_raises_source_unavailable_once_or_after_max_failures() -> None:
    with pytest.raises(SourceUnavailable):
        run(Scripted([SourceUnavailable("down")]), collect_into(ParseResult()))
    failing = Scripted([SourceUnavailable(f"down {i}") for i in range(5)])
    seen: list[str] = []
    with pytest.raises(SourceUnavailable, match="down 2"):
        run(
            failing,
            collect_into(ParseResult()),
            follow=True,
            interval_s=0.0,
            max_failures=3,
            on_failure=lambda exc: seen.append(str(exc)),
        )
    assert seen == ["down 0", "down 1"] and failing.polls == 3


def test_run_stops_on_the_stop_event_and_propagates_publish_errors() -> None:
    stop = threading.Event()
    collector = Scripted([batch(i) for i in range(100)])
    timer = threading.Timer(0.2, stop.set)  # as the CLI's SIGTERM handler does, during the wait
    timer.start()
    began = time.monotonic()
    stats = run(collector, collect_into(ParseResult()), follow=True, interval_s=30.0, stop=stop)
    assert stats.polls == 1 and time.monotonic() - began < 5.0

    def broken(result: ParseResult) -> None:
        raise PublishError("2 messages were not acknowledged")

    with pytest.raises(PublishError):
        run(Scripted([batch(1)]), broken)


# ------------------------------------------------------------------------------------------
# Prometheus mode (a local stand-in answering /api/v1/query_range with a recorded answer)
# ------------------------------------------------------------------------------------------
QUERY_RANGE = (FIXTURES / "dcgm" / "query_range_two_labelsets.json").read_bytes()


def test_dcgm_prometheus_mode_reads_windows_and_parses_them(http: Callable[..., str]) -> None:
    asked: list[dict[str, list[str]]] = []

    def reply(path: str, query: dict[str, list[str]]) -> Reply:
        asked.append({"path": [path], **query})
        return 200, QUERY_RANGE

    url = http(reply)
    now = B + 125.0
    collector = dcgm_collector.prometheus_collector(
        url, cluster="c1", step_s=30, start=at(0), max_points=3, lag_s=5, clock=lambda: now
    )
    first, second, third = collector.poll(), collector.poll(), collector.poll()
    collector.close()
    assert first.more and not second.more and not first.final  # B+0..60, then B+90..120 (settled at B+120)
    assert [(q["start"], q["end"]) for q in asked] == [
        ([str(int(B))], [str(int(B + 60))]),
        ([str(int(B + 90))], [str(int(B + 120))]),
    ]
    assert third.result.events == [] and len(asked) == 2  # nothing new: Prometheus is not asked
    assert all(q["path"] == ["/api/v1/query_range"] and q["step"] == ["30"] for q in asked)
    assert asked[0]["query"] == [selector(dcgm_collector.METRICS)]
    direct = dcgm.parse_query_range(QUERY_RANGE, cluster="c1", interval_s=30.0)
    assert [e.id for e in first.result.events] == [e.id for e in direct.events] and direct.events
    assert all(e.data.interval_s == 30.0 for e in first.result.events)
    assert first.result.dead_letters == direct.dead_letters == []


@pytest.mark.parametrize(
    ("status", "body", "error", "message"),
    [
        (
            400,
            b'{"status":"error","errorType":"bad_data","error":"parse error at char 7"}',
            ValueError,
            "rejected the query",
        ),
        (503, b"overloaded", SourceUnavailable, "failed"),
        (200, b"<html>login</html>", SourceUnavailable, "did not answer like a Prometheus API"),
    ],
)
def test_prometheus_errors_are_one_line_and_do_not_advance(
    http: Callable[..., str], status: int, body: bytes, error: type[Exception], message: str
) -> None:
    calls: list[str] = []

    def reply(path: str, query: dict[str, list[str]]) -> Reply:
        calls.append(query["start"][0])
        return status, body

    collector = dcgm_collector.prometheus_collector(
        http(reply), cluster="c1", step_s=30, start=at(0), clock=lambda: B + 600
    )
    for _ in range(2):
        with pytest.raises(error, match=message) as caught:
            collector.poll()
        assert "\n" not in str(caught.value)
    collector.close()
    assert set(calls) == {str(int(B))}  # the failed window is asked for again


def test_unreachable_prometheus_is_source_unavailable() -> None:
    collector = storage_collector.prometheus_collector(CLOSED_PORT_URL, cluster="c1", step_s=30)
    with pytest.raises(SourceUnavailable, match="unreachable"):
        collector.poll()
    collector.close()


# ------------------------------------------------------------------------------------------
# direct scrapes of exporters
# ------------------------------------------------------------------------------------------
def _file_server(http: Callable[..., str], files: dict[str, bytes]) -> str:
    return http(lambda path, query: (200, files[path]) if path in files else (404, b"not found"))


def test_dcgm_exporter_scrape_stamps_the_scrape_time(http: Callable[..., str]) -> None:
    text = (FIXTURES / "dcgm" / "exporter_3x_hostname.prom").read_bytes()
    url = _file_server(http, {"/metrics": text, "/node": b"# HELP node_load1 x\nnode_load1 0.5\n"})
    clock = B + 12.3456789
    collector = dcgm_collector.exporter_collector(
        [url + "/metrics", url + "/missing", url + "/node"], cluster="c1", interval_s=15.0, clock=lambda: clock
    )
    got = collector.poll()
    collector.close()
    direct = dcgm.parse_exposition(text, cluster="c1", scrape_time=at(12.345), interval_s=15.0)
    assert [e.id for e in got.result.events] == [e.id for e in direct.events]
    event = got.result.events[0]
    assert event.time == at(12.345) and event.data.node == "gpu-h100-01"  # ms, and the Hostname label
    assert len(got.warnings) == 2
    assert "HTTP 404" in got.warnings[0] and "is not dcgm exporter output" in got.warnings[1]


def test_every_exporter_down_is_source_unavailable(http: Callable[..., str]) -> None:
    url = _file_server(http, {})
    collector = dcgm_collector.exporter_collector([url + "/metrics", CLOSED_PORT_URL + "/metrics"], cluster="c1")
    with pytest.raises(SourceUnavailable, match=r"HTTP 404 \(and 1 more\)"):
        collector.poll()
    collector.close()
    with pytest.raises(ValueError, match="http"):
        dcgm_collector.exporter_collector(["gpu001:9400"], cluster="c1")


def test_node_exporter_scrape_takes_the_node_from_the_option_or_the_url(http: Callable[..., str]) -> None:
    text = (FIXTURES / "storage" / "node_exporter_disk.prom").read_bytes()
    url = _file_server(http, {"/metrics": text})
    for node, want in (("gpu007", "gpu007"), (None, "127.0.0.1")):
        collector = storage_collector.exporter_collector([url + "/metrics"], cluster="c1", node=node, clock=lambda: B)
        events = collector.poll().result.events
        collector.close()
        direct = storage.parse_exposition(text, cluster="c1", scrape_time=T0, node=want)
        assert [e.data.node for e in events] == [want]
        assert events[0].data == direct.events[0].data and events[0].id == direct.events[0].id


# ------------------------------------------------------------------------------------------
# Slurm: a fake command (a real subprocess) that logs its arguments and prints a fixture
# ------------------------------------------------------------------------------------------
FAKE_COMMAND = """\
import json, pathlib, sys, time
log, what, *args = sys.argv[1:]
with open(log, "a") as f:
    f.write(json.dumps(args) + "\\n")
if what.startswith("FAIL:"):
    sys.stderr.write("squeue: error: first line\\n" + what[5:] + "\\n")
    sys.exit(3)
if what.startswith("SLEEP:"):
    time.sleep(float(what[6:]))
sys.stdout.buffer.write(pathlib.Path(what).read_bytes() if pathlib.Path(what).is_file() else what.encode())
"""
SQUEUE = FIXTURES / "slurm" / "squeue_v0040.json"
SACCT = FIXTURES / "slurm" / "sacct_v0041.json"
NODES = FIXTURES / "slurm" / "scontrol_nodes_v0040.json"


class FakeSlurm:
    def __init__(self, tmp_path: Path) -> None:
        self.dir = tmp_path
        self.script = tmp_path / "fake_slurm.py"
        self.script.write_text(FAKE_COMMAND)

    def command(self, name: str, what: str | Path) -> str:
        return shlex.join([sys.executable, str(self.script), str(self.dir / f"{name}.log"), str(what)])

    def calls(self, name: str) -> list[list[str]]:
        path = self.dir / f"{name}.log"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def fake(tmp_path: Path) -> FakeSlurm:
    return FakeSlurm(tmp_path)


def test_slurm_polls_squeue_and_sacct_with_a_moving_relative_window(fake: FakeSlurm) -> None:
    now = [B]
    collector = SlurmCommands(
        cluster="c1",
        squeue_cmd=fake.command("squeue", SQUEUE),
        sacct_cmd=fake.command("sacct", SACCT),
        overlap_s=60,
        clock=lambda: now[0],
    )
    first = collector.poll()
    now[0] += 30
    second = collector.poll()
    direct = slurm.parse(SQUEUE.read_bytes(), cluster="c1")
    direct.extend(slurm.parse(SACCT.read_bytes(), cluster="c1"))
    assert [e.id for e in first.result.events] == [e.id for e in direct.events]
    assert [e.id for e in second.result.events] == [e.id for e in direct.events]  # dedupe is the wrapper's job
    assert fake.calls("squeue") == [[], []]
    assert fake.calls("sacct") == [
        ["--duplicates", "-S", "now-3600", "-E", "now"],
        ["--duplicates", "-S", "now-90", "-E", "now"],
    ]
    assert not first.final and all(d.origin for d in first.result.dead_letters)


def test_slurm_closed_range_runs_sacct_once_and_finishes(fake: FakeSlurm) -> None:
    collector = SlurmCommands(
        cluster="c1",
        squeue_cmd=fake.command("squeue", SQUEUE),
        sacct_cmd=fake.command("sacct", SACCT),
        start=at(-7200),
        end=at(-3600),
        clock=lambda: B,
    )
    got = collector.poll()
    assert got.final and fake.calls("squeue") == []
    assert fake.calls("sacct") == [["--duplicates", "-S", "now-7200", "-E", "now-3600"]]
    verbatim = SlurmCommands(
        cluster="c1",
        squeue_cmd="",
        sacct_cmd=fake.command("raw", SACCT),
        sacct_args="-S 2026-03-01T00:00:00 -E 2026-03-02T00:00:00 --state=CD,F",
    )
    verbatim.poll()
    assert fake.calls("raw") == [
        ["--duplicates", "-S", "2026-03-01T00:00:00", "-E", "2026-03-02T00:00:00", "--state=CD,F"]
    ]


@pytest.mark.parametrize(
    ("what", "timeout", "error", "message"),
    [
        (
            "FAIL:squeue: error: Invalid user for SlurmUser",
            30.0,
            SourceUnavailable,
            "exited with code 3: squeue: error: Invalid user for SlurmUser",
        ),
        ("SLEEP:5", 0.5, SourceUnavailable, "did not finish within 0.5s"),
        ("squeue: unrecognized option '--json'", 30.0, NotThisFormat, "is not Slurm JSON"),
    ],
)
def test_slurm_command_failures(
    fake: FakeSlurm, what: str, timeout: float, error: type[Exception], message: str
) -> None:
    collector = SlurmCommands(cluster="c1", squeue_cmd=fake.command("squeue", what), sacct_cmd="", timeout_s=timeout)
    with pytest.raises(error, match=message) as caught:
        collector.poll()
    assert "fake_slurm.py" in str(caught.value) and "\n" not in str(caught.value)


def test_slurm_missing_command_and_empty_configuration() -> None:
    collector = SlurmCommands(cluster="c1", squeue_cmd="/nonexistent/bin/squeue --json", sacct_cmd="")
    with pytest.raises(SourceUnavailable, match="not found"):
        collector.poll()
    with pytest.raises(ValueError, match="nothing to run"):
        SlurmCommands(cluster="c1", squeue_cmd="", sacct_cmd="")


def test_slurm_node_states_pass_on_only_changes(fake: FakeSlurm) -> None:
    nodes = fake.dir / "nodes.json"
    nodes.write_bytes(NODES.read_bytes())
    now = [B]
    collector = SlurmCommands(
        cluster="c1", squeue_cmd="", sacct_cmd="", nodes_cmd=fake.command("nodes", nodes), clock=lambda: now[0]
    )
    states = []
    for change in (None, None, ("gpu002", '["IDLE", "DRAIN"]', '["IDLE"]')):
        if change:
            nodes.write_text(
                nodes.read_text().replace(
                    f'"name": "{change[0]}", "hostname": "{change[0]}", "state": {change[1]}',
                    f'"name": "{change[0]}", "hostname": "{change[0]}", "state": {change[2]}',
                )
            )
        now[0] += 30
        states.append([(e.data.node, e.data.state) for e in collector.poll().result.events])
    assert states[0] == [("gpu001", "up"), ("gpu002", "drained"), ("gpu003", "down"), ("gpu004", "drained")]
    assert states[1] == [] and states[2] == [("gpu002", "up")]


def test_slurm_follow_mode_publishes_each_event_once(fake: FakeSlurm) -> None:
    collector = Deduplicated(
        SlurmCommands(cluster="c1", squeue_cmd=fake.command("squeue", SQUEUE), sacct_cmd=fake.command("sacct", SACCT))
    )
    published = ParseResult()
    stats = run(collector, collect_into(published), follow=True, interval_s=0.01, max_polls=3, keep_ids=True)
    assert len(fake.calls("squeue")) == len(fake.calls("sacct")) == 3
    ids = [e.id for e in published.events]
    assert len(ids) == len(set(ids)) == stats.events > 0


# ------------------------------------------------------------------------------------------
# the CLI
# ------------------------------------------------------------------------------------------
@pytest.fixture
def cli() -> Callable[..., object]:
    app = typer.Typer()

    @app.callback()
    def root() -> None:
        """gpuledger"""

    collect_cmd.register(app)
    runner = CliRunner()
    return lambda *args: runner.invoke(app, ["collect", *args])


def test_cli_help_names_the_sources_and_options(cli: Callable[..., object]) -> None:
    result = cli("--help")
    assert all(name in result.output for name in ("dcgm", "kubernetes", "slurm", "storage"))  # type: ignore[attr-defined]
    options = {
        "dcgm": [
            "--prometheus",
            "--exporter",
            "--from",
            "--to",
            "--follow",
            "--interval",
            "--once",
            "--cluster",
            "--scrape-interval",
        ],
        "kubernetes": ["--kubeconfig", "--namespace", "--pod-resources", "--follow"],
        "slurm": ["--squeue-cmd", "--sacct-cmd", "--sacct-args", "--nodes-cmd", "--follow"],
        "storage": ["--prometheus", "--exporter", "--match"],
    }
    for command, names in options.items():
        text = cli(command, "--help").output  # type: ignore[attr-defined]
        assert all(name in text for name in names), command


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["dcgm", "--prometheus", "http://p:9090", "--exporter", "http://n:9400/metrics"], "not both"),
        (["dcgm", "--exporter", "http://n:9400/metrics", "--from", "2026-11-01T00:00:00Z"], "need --prometheus"),
        (["storage", "--prometheus", "http://p:9090", "--to", "2026-11-01T00:00:00Z"], "--to needs --from"),
        (["dcgm", "--prometheus", "http://p:9090", "--from", "yesterday"], "not an ISO 8601 time"),
        (["slurm", "--squeue-cmd", "", "--sacct-cmd", ""], "nothing to run"),
    ],
)
def test_cli_usage_errors_are_one_line(cli: Callable[..., object], args: list[str], message: str) -> None:
    result = cli(*args, "--dry-run")
    assert isinstance(result.exception, UsageFailure)  # type: ignore[attr-defined]
    assert message in str(result.exception) and "\n" not in str(result.exception)  # type: ignore[attr-defined]


def test_cli_slurm_dry_run_summary(cli: Callable[..., object], fake: FakeSlurm) -> None:
    result = cli(
        "slurm",
        "--squeue-cmd",
        fake.command("squeue", SQUEUE),
        "--sacct-cmd",
        "",
        "--cluster",
        "c1",
        "--dry-run",
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    summary = json.loads(result.stdout)  # type: ignore[attr-defined]
    direct = slurm.parse(SQUEUE.read_bytes(), cluster="c1")
    assert summary["events"] == len(direct.events) and summary["polls"] == 1 and summary["dry_run"] is True
    assert summary["by_type"] == {t: sum(e.type == t for e in direct.events) for t in summary["by_type"]}


def test_cli_unreachable_prometheus_is_source_unavailable(cli: Callable[..., object]) -> None:
    result = cli(
        "dcgm",
        "--prometheus",
        CLOSED_PORT_URL,
        "--from",
        "2026-11-01T00:00:00Z",
        "--to",
        "2026-11-01T00:10:00Z",
        "--dry-run",
    )
    assert isinstance(result.exception, SourceUnavailable)  # type: ignore[attr-defined]
    assert "unreachable" in str(result.exception)  # type: ignore[attr-defined]
