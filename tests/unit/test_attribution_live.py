"""Live operation: a window is written once, after it ended on the wall clock, and a step reads a
look-back of a few scrape intervals that gives the same facts as the longest one."""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime

from pipelines import events as ev
from pipelines.settings import Settings
from streams.attribution.inputs import LOOKBACK_INTERVALS, LOOKBACK_S, StepMemory, between, enough
from streams.attribution.node_range import SampleColumns, SampleRow
from streams.attribution.ranges import compute_range_full
from streams.attribution.state import REBUILD_CHECK_S, idle
from streams.attribution.step import IDLE_FLUSH_S, LINGER_S, RECHECK_S, StepState, plan, plans, recheck_at
from streams.attribution.warehouse import PendingNode

W = 60
NOW0 = 60 * 29_000_000.0  # minute-aligned


def _utc(t: float) -> datetime:
    return datetime.fromtimestamp(t, tz=UTC)


def _node(newest: float, sent: float, closed: float | None, pending: int, dirty: float | None) -> PendingNode:
    return PendingNode(
        "c",
        "n",
        _utc(NOW0 - 3600),
        _utc(newest),
        int(sent * 1e9),
        pending,
        _utc(dirty) if dirty is not None else None,
        _utc(closed) if closed is not None else None,
        0,
    )


def test_the_current_window_of_a_live_node_stays_open_until_it_has_ended() -> None:
    s = Settings(window_seconds=W, allowed_lateness_seconds=300)
    now = NOW0 + 37.0  # the last scrape (t = 30 s) came 7 s ago: the node is idle
    row = _node(newest=NOW0 + 30, sent=NOW0 + 30, closed=NOW0, pending=1, dirty=NOW0 + 30)
    assert (now - (NOW0 + 30)) >= IDLE_FLUSH_S
    assert plan(row, s, int(now * 1e9)) is None  # the window [NOW0, NOW0 + 60) has not ended
    assert plan(row, s, int((NOW0 + 60.5) * 1e9)) == (NOW0, NOW0 + 60)  # ended: written once
    # bounded input whose newest window ended long ago: the idle flush still closes it
    old = _node(newest=NOW0 - 3000, sent=NOW0 - 1, closed=None, pending=1, dirty=NOW0 - 3600)
    assert plan(old, s, int(now * 1e9)) == (NOW0 - 3600, NOW0 - 3000 + W - (NOW0 - 3000) % W)


def test_scrapes_every_10_s_write_each_window_exactly_once() -> None:
    """A node scraped every 10 s for 5 minutes, a step every second: every window is computed in
    exactly one step, the one after its end."""
    s = Settings(window_seconds=W, allowed_lateness_seconds=300)
    closed: float | None = None
    processed = 0
    computed: list[float] = []
    newest = sent = None
    for tick in range(1, 301):
        now = NOW0 + tick
        if tick % 10 == 0:
            newest, sent = now - 0.2, now  # the scrape stamped 0.2 s before it was written
        if newest is None or sent is None:
            continue
        pending = int(int(sent * 1e9) > processed)
        row = PendingNode(
            "c",
            "n",
            _utc(NOW0 + 9.8),
            _utc(newest),
            int(sent * 1e9),
            pending,
            _utc(newest) if pending else None,
            _utc(closed) if closed else None,
            processed,
        )
        span = plan(row, s, int(now * 1e9))
        if span is None:
            continue
        computed.extend(range(int(span[0]), int(span[1]), W))
        closed, processed = span[1], int(sent * 1e9)
    assert computed == [NOW0 + i * W for i in range(4)]  # the fifth window is still open at 300 s


def _history(seed: int, start: float, end: float, interval: float) -> list[SampleRow]:
    """Two GPUs scraped every ``interval`` with gaps, energy counters (one reset) and power."""
    rng = random.Random(seed)
    rows = []
    for uuid in ("GPU-a", "GPU-b"):
        t, energy = start, 1_000_000.0
        while t < end:
            energy = 0.0 if rng.random() < 0.02 else energy + rng.uniform(1e5, 5e5)
            power = rng.uniform(100, 700) if rng.random() < 0.5 else None
            util = rng.random() if rng.random() < 0.9 else None
            rows.append(
                SampleRow(
                    t,
                    uuid,
                    None,
                    0 if uuid == "GPU-a" else 1,
                    "H100",
                    "",
                    util,
                    None,
                    "ns",
                    "p" if uuid == "GPU-a" else "",
                    "",
                    interval,
                    power,
                    energy,
                )
            )
            t += interval * rng.choice((1, 1, 1, 2, 3, 5))  # gaps: held, and beyond the hold
    return sorted(rows, key=lambda r: r.time)


def test_a_look_back_of_a_few_intervals_gives_the_facts_of_the_longest() -> None:
    interval = 10.0
    w0 = NOW0
    samples = SampleColumns.from_rows(_history(7, w0 - 2 * LOOKBACK_S, w0 + 5 * W, interval))
    pod = ev.AllocationData.model_validate(
        {
            "scheduler": "kubernetes",
            "job_id": "ns/p",
            "node": "n",
            "state": "running",
            "start_time": _utc(w0 - 500),
            "gpus": [{"kind": "gpu", "count": 1}],
        }
    )
    memory = StepMemory()
    assert memory.lookback(("c", "n")) == LOOKBACK_S  # nothing known yet: the longest
    memory.saw(("c", "n"), samples)
    short = memory.lookback(("c", "n"))
    assert short == LOOKBACK_INTERVALS * interval < LOOKBACK_S
    for k in range(5):
        a, b = w0 + k * W, w0 + (k + 1) * W
        mine = compute_range_full("c", "n", a, b, W, between(samples, a - short, b), [pod])
        full = compute_range_full("c", "n", a, b, W, between(samples, a - LOOKBACK_S, b), [pod])
        assert mine.facts == full.facts and mine.facts
    assert any(f["energy_joules"] for f in full.facts) and any(f["busy_seconds"] for f in full.facts)


def test_a_longer_interval_than_assumed_reads_the_longest_look_back() -> None:
    rows = _history(3, NOW0 - 600, NOW0 + W, 60.0)
    samples = SampleColumns.from_rows(rows)
    assert not enough(samples, LOOKBACK_INTERVALS * 10.0)  # 60 s scrapes need 12 minutes
    assert enough(samples, LOOKBACK_S) and enough(samples, LOOKBACK_INTERVALS * 60.0)
    no_interval = SampleColumns.from_rows([r.__class__(**{**r.__dict__, "interval_s": None}) for r in rows])
    memory = StepMemory({("c", "n"): 10.0})
    memory.saw(("c", "n"), no_interval)  # estimated from the gaps: only the longest look-back is safe
    assert memory.lookback(("c", "n")) == LOOKBACK_S and not enough(no_interval, 120.0)


def test_a_step_reads_the_due_nodes_again_only_when_something_can_have_come_due() -> None:
    s = Settings(window_seconds=W)
    now = NOW0 + 31.0
    fresh = _node(newest=NOW0 + 30, sent=NOW0 + 30.5, closed=NOW0, pending=1, dirty=NOW0 + 30)
    idle = _node(newest=NOW0 + 20, sent=NOW0 + 20.5, closed=NOW0, pending=1, dirty=NOW0 + 20)
    assert recheck_at([idle], s, int(now * 1e9), lambda c, n: True) == NOW0 + W  # the window's end
    # a live node's newest scrape lies in the current window: its idle flush closes nothing before the end
    assert recheck_at([idle, fresh], s, int(now * 1e9), lambda c, n: True) == NOW0 + W
    # bounded input: newest data in an ended window, just written: its idle flush closes it
    batch = _node(newest=NOW0 - 90, sent=NOW0 + 30.5, closed=NOW0 - 3600, pending=1, dirty=NOW0 - 3600)
    assert recheck_at([idle, batch], s, int(now * 1e9), lambda c, n: True) == NOW0 + 30.5 + IDLE_FLUSH_S
    assert recheck_at([idle, batch], s, int(now * 1e9), lambda c, n: n != "n") == NOW0 + W  # not this worker's

    state = StepState(seen=0, recheck_at=NOW0 + W, read_at=now)
    assert state.may_skip(now + 1)
    assert not state.may_skip(NOW0 + W)  # the window ended
    assert not state.may_skip(now + RECHECK_S)  # read at least every RECHECK_S
    state.touched()  # the worker's sink wrote a batch
    assert not state.may_skip(now + 1)


def _catch_up(
    minutes_per_s: int, seconds: int, waiting: dict[tuple[str, str], float] | None, drains: bool = False
) -> tuple[list[tuple[float, float, float]], float]:
    """A backlog: ``minutes_per_s`` minutes of a node's history arrive every wall-clock second for
    ``seconds`` seconds, a day behind the wall clock, then nothing; a step every second. With
    ``drains`` the worker finds its input drained right after the last batch (and only then).
    Returns the computed ranges (wall time, start, end) and the first hour of the history."""
    s = Settings(window_seconds=W, allowed_lateness_seconds=300)
    hour0 = NOW0 - NOW0 % 3600 - 24 * 3600
    closed: float | None = None
    processed = 0
    computed: list[tuple[float, float, float]] = []
    for tick in range(1, seconds + 10):
        now = NOW0 + tick
        newest = hour0 + 60 * minutes_per_s * min(tick, seconds) + 25
        sent = NOW0 + min(tick, seconds) - 0.1
        pending = int(int(sent * 1e9) > processed)
        row = PendingNode(
            "c",
            "n",
            _utc(hour0),
            _utc(newest),
            int(sent * 1e9),
            pending,
            _utc(closed if closed is not None else hour0) if pending else None,
            _utc(closed) if closed is not None else None,
            processed,
        )
        drained = int((NOW0 + seconds) * 1e9) if drains and tick > seconds else None
        ingesting = tick <= seconds + IDLE_FLUSH_S and drained is None
        for p in plans(
            [row], s, int(now * 1e9), lambda c, n: True, waiting=waiting, ingesting=ingesting, drained_ns=drained
        ):
            computed.append((now, p.start, p.end))
            closed, processed = p.end, p.processed_seq
            due = plan(row, s, int(now * 1e9), drained)
            assert due is not None and p.whole == (p.end >= due[1])  # cut at an hour: not whole
    windows = [t for _, a, b in computed for t in range(int(a), int(b), W)]
    newest = hour0 + 60 * minutes_per_s * seconds + 25
    assert windows == list(range(int(hour0), int(newest - newest % W + W), W))  # each once, in order, to the newest
    return computed, hour0


def test_a_node_catching_up_on_history_is_computed_a_whole_hour_at_a_time() -> None:
    """Each step's due range of a node catching up is cut at its last hour boundary: every hour of
    the rollup is built once, from one computation, and every window is still computed exactly
    once; when the data stops (idle) the rest closes as before."""
    computed, _ = _catch_up(10, 30, None)  # each plan whole only when it reaches the due range's end
    assert len(computed) > 2
    assert all(a % 3600 == 0 and b % 3600 == 0 for _, a, b in computed[:-1])
    hours = [h for _, a, b in computed for h in range(int(a // 3600), int(-(-b // 3600)))]
    assert len(hours) == len(set(hours))  # no hour built twice


def test_a_node_catching_up_waits_for_its_input_to_pause_at_most_the_linger_time() -> None:
    """With a worker's memory, a backlog that arrives within ``LINGER_S`` is computed in one range
    once it has all arrived; a longer one every ``LINGER_S``, whole hours at a time."""
    waiting: dict[tuple[str, str], float] = {}
    computed, _ = _catch_up(10, 20, waiting)
    assert len(computed) == 1 and computed[0][0] >= NOW0 + 20 + IDLE_FLUSH_S
    assert waiting == {}
    computed, _ = _catch_up(10, 100, waiting)
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(computed)]
    assert len(computed) == 4 and all(g >= LINGER_S for g in gaps[:-1])
    assert all(a % 3600 == 0 and b % 3600 == 0 for _, a, b in computed[:-1])


def test_a_backlog_is_computed_as_soon_as_the_worker_finds_its_input_drained() -> None:
    """The worker's sinks have written every message up to the newest offsets the consumer knows:
    a node catching up is computed at once, in one range, without waiting ``IDLE_FLUSH_S`` (nor
    the linger time while another partition still arrives); the same windows, each once."""
    waiting: dict[tuple[str, str], float] = {}
    slow, _ = _catch_up(10, 20, waiting)
    fast, _ = _catch_up(10, 20, waiting, drains=True)
    assert len(fast) == 1 and NOW0 + 20 < fast[0][0] < NOW0 + 20 + IDLE_FLUSH_S <= slow[0][0]
    assert [(a, b) for _, a, b in fast] == [(a, b) for _, a, b in slow]


def test_a_drained_input_makes_only_history_written_before_it_idle() -> None:
    """Drained input closes a node's windows to its newest event only for history whose activity
    was written before the input was found drained; a live node's newest window still waits
    ``IDLE_FLUSH_S`` for a scrape slightly late, as does history written after it."""
    s = Settings(window_seconds=W, allowed_lateness_seconds=300)
    now = NOW0 + 0.5
    before, after = int((now - 0.2) * 1e9), int((now - 0.6) * 1e9)
    history = _node(newest=NOW0 - 7200 + 25, sent=now - 0.4, closed=NOW0 - 7200 - W, pending=1, dirty=None)
    live = _node(newest=NOW0 - 5, sent=now - 0.4, closed=NOW0 - 2 * W, pending=1, dirty=None)
    assert idle(history, int(now * 1e9), before) and not idle(history, int(now * 1e9), after)
    assert not idle(history, int(now * 1e9))
    assert not idle(live, int(now * 1e9), before)
    assert plan(history, s, int(now * 1e9), before) == (NOW0 - 7200 - W, NOW0 - 7200 + W)  # to its newest event
    assert plan(history, s, int(now * 1e9), after) == plan(history, s, int(now * 1e9))  # the watermark
    assert plan(live, s, int(now * 1e9), before) == plan(live, s, int(now * 1e9))


def test_finding_the_input_drained_ends_ingesting_until_the_next_batch() -> None:
    state = StepState()
    state.touched()
    assert state.ingesting()
    seen = state.activity
    state.drained()
    assert not state.ingesting() and state.activity > seen  # the next step reads the due nodes
    state.touched()
    assert state.ingesting()


def test_a_live_node_is_computed_at_once_whatever_the_worker_waits_for() -> None:
    s = Settings(window_seconds=W, allowed_lateness_seconds=300)
    live = _node(newest=NOW0 - 30, sent=NOW0 - 0.5, closed=NOW0 - 3000, pending=1, dirty=NOW0 - 60)
    due = plan(live, s, int(NOW0 * 1e9))
    waiting: dict[tuple[str, str], float] = {}
    got = plans([live], s, int(NOW0 * 1e9), lambda c, n: True, waiting=waiting)
    assert due is not None and [(p.start, p.end) for p in got] == [due] and waiting == {}


def test_a_batch_within_the_window_open_at_the_last_read_makes_nothing_due() -> None:
    """Data wholly in the window that was open when the due nodes were last read cannot make a node
    due before that window ends (``recheck_at`` is never later): the next step need not read them.
    Earlier data (a late scrape, history, an attempt ended in the past), or data of unknown time,
    may make a written window dirty or an ended one due: the next step reads them."""
    now = NOW0 + 31.0
    state = StepState(seen=0, activity=0, recheck_at=NOW0 + W, read_at=now, open_from=NOW0)
    state.touched(NOW0 + 40.0)
    assert state.may_skip(now + 1) and state.ingesting()
    state.touched(NOW0 + W + 5.0)  # ahead of the wall clock, within the future tolerance
    assert state.may_skip(now + 1)
    state.drained()  # the worker found its input drained after it: no history can have become idle
    assert state.may_skip(now + 1) and not state.ingesting()
    for earliest in (NOW0 - 0.5, None):
        state = StepState(seen=0, activity=0, recheck_at=NOW0 + W, read_at=now, open_from=NOW0)
        state.touched(earliest)
        assert not state.may_skip(now + 1)
        state.seen = state.activity  # read after the batch; then the input is found drained:
        state.drained()  # what the batch held may be history that is idle now
        assert not state.may_skip(now + 1)
        state.seen = state.activity
        state.drained()  # drained again with nothing written since: nothing new
        assert state.may_skip(now + 1)
    fresh = StepState(seen=0, activity=0, recheck_at=NOW0 + W, read_at=now)  # never read: no open window known
    fresh.touched(NOW0 + 40.0)
    assert not fresh.may_skip(now + 1)


def test_a_changed_assignment_or_a_requested_rebuild_is_looked_at_in_the_next_step() -> None:
    """After a rebalance the worker's nodes changed: the next step reads the due nodes whatever
    else it knows; a rollup rebuild its own sink requested is worked off in the next step, while
    requests written elsewhere are looked for only every ``REBUILD_CHECK_S``."""
    now = NOW0 + 31.0
    state = StepState(seen=0, activity=0, recheck_at=NOW0 + W, read_at=now, open_from=NOW0)
    state.owning(frozenset({0, 1}))
    assert not state.may_skip(now + 1)
    state.seen = state.activity
    state.owning(frozenset({0, 1}))
    assert state.may_skip(now + 1)
    state.owning(frozenset({0}))
    assert not state.may_skip(now + 1)
    state.rebuilds_checked = 100.0
    assert not state.rebuilds_due(101.0) and state.rebuilds_due(100.0 + REBUILD_CHECK_S)
    state.rebuild_requested()
    assert state.rebuilds_due(101.0)
