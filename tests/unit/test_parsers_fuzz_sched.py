"""Garbage into the scheduler and reference parsers: they raise only NotThisFormat, never crash,
and every dead letter carries a one-line reason."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.parsers import kubernetes, reference, slurm
from pipelines.parsers.base import NotThisFormat, ParseResult
from pipelines.parsers.hostlist import HostlistError, expand
from pipelines.wire import decode

FIXTURES = Path(__file__).parent.parent / "fixtures"
FILES = sorted(
    path for folder in ("slurm", "kubernetes", "reference") for path in (FIXTURES / folder).iterdir() if path.is_file()
)
PARSERS: dict[str, Callable[..., ParseResult]] = {
    "slurm": slurm.parse,
    "kubernetes": kubernetes.parse,
    "reference": reference.parse,
    "org": reference.parse_org,
    "pricing": reference.parse_pricing,
}
FUZZ = settings(
    max_examples=120,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)


def check(parser: Callable[..., ParseResult], data: bytes | str) -> ParseResult | None:
    """Parse; only NotThisFormat may escape; what comes out is valid and one-line."""
    try:
        result = parser(data, cluster="c1", origin="fuzz")
    except NotThisFormat as exc:
        assert str(exc) and "\n" not in str(exc)
        return None
    for letter in result.dead_letters:
        assert letter.reason.strip() and "\n" not in letter.reason
    for event in result.events:
        assert decode(event.to_bytes()) == event
    return result


@pytest.mark.parametrize("name", PARSERS)
@FUZZ
@given(data=st.binary(max_size=3000))
def test_random_bytes(name: str, data: bytes) -> None:
    check(PARSERS[name], data)


@pytest.mark.parametrize("name", PARSERS)
@FUZZ
@given(text=st.text(max_size=2000))
def test_random_text(name: str, text: str) -> None:
    check(PARSERS[name], text)


@pytest.mark.parametrize("name", PARSERS)
@FUZZ
@given(data=st.data())
def test_truncated_fixtures(name: str, data: st.DataObject) -> None:
    raw = data.draw(st.sampled_from(FILES)).read_bytes()
    cut = data.draw(st.integers(0, len(raw)))
    check(PARSERS[name], raw[:cut])


def test_every_truncation_of_the_watch_stream_keeps_the_complete_lines() -> None:
    raw = (FIXTURES / "kubernetes" / "watch_events.jsonl").read_bytes()
    whole = kubernetes.parse(raw, cluster="c1")
    for cut in range(raw.index(b"\n") + 1, len(raw), 97):
        result = check(kubernetes.parse, raw[:cut])
        assert result is not None
        complete = raw[:cut].count(b"\n")
        assert len(result.dead_letters) <= 1 + (complete >= 17)  # the cut line (+ the ERROR line)
        assert {e.id for e in result.events} <= {e.id for e in whole.events}


def _mutate(doc: Any, data: st.DataObject) -> Any:
    """Replace one randomly chosen nested value with random JSON."""
    node = doc
    for _ in range(data.draw(st.integers(1, 6))):
        children = (
            list(node.items()) if isinstance(node, dict) else list(enumerate(node)) if isinstance(node, list) else []
        )
        if not children:
            break
        key, child = data.draw(st.sampled_from(children))
        if not isinstance(child, dict | list) or data.draw(st.booleans()):
            node[key] = data.draw(JSON)
            return doc
        node = child
    return doc


JSON_FILES = [p for p in FILES if p.suffix == ".json"]


@FUZZ
@given(data=st.data())
def test_mutated_records_become_dead_letters_not_crashes(data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(JSON_FILES))
    doc = _mutate(orjson.loads(path.read_bytes()), data)
    raw = orjson.dumps(doc, option=orjson.OPT_NON_STR_KEYS)
    parser = kubernetes.parse if path.parent.name == "kubernetes" else slurm.parse
    check(parser, raw)


@FUZZ
@given(data=st.data())
def test_mutated_watch_lines(data: st.DataObject) -> None:
    lines = (FIXTURES / "kubernetes" / "watch_events.jsonl").read_text().splitlines()
    index = data.draw(st.integers(0, len(lines) - 1))
    mutated = _mutate(orjson.loads(lines[index]), data)
    lines[index] = orjson.dumps(mutated, option=orjson.OPT_NON_STR_KEYS).decode()
    result = check(kubernetes.parse, "\n".join(lines))
    assert result is not None and result.dead_letters  # at least the ERROR event line


@FUZZ
@given(text=st.text(alphabet="gpu[]0123456789-, ", max_size=40))
def test_hostlist_garbage_raises_only_hostlist_error(text: str) -> None:
    try:
        hosts = expand(text)
    except HostlistError:
        return
    assert all(host and " " not in host for host in hosts)


@FUZZ
@given(
    parts=st.lists(
        st.tuples(
            st.sampled_from(["gpu", "n", "rack-", "x"]),
            st.lists(st.tuples(st.integers(0, 30), st.integers(0, 5)), min_size=1, max_size=3),
        ),
        min_size=1,
        max_size=3,
    )
)
def test_hostlist_expansion_matches_the_ranges(parts: list[tuple[str, list[tuple[int, int]]]]) -> None:
    text = ",".join(
        prefix + "[" + ",".join(f"{lo:03d}-{lo + span:03d}" for lo, span in ranges) + "]" for prefix, ranges in parts
    )
    expected = [f"{prefix}{n:03d}" for prefix, ranges in parts for lo, span in ranges for n in range(lo, lo + span + 1)]
    assert expand(text) == expected


def test_fixtures_are_only_their_own_format() -> None:
    owners = {"slurm": {"slurm"}, "kubernetes": {"kubernetes"}, "reference": {"reference", "org", "pricing"}}
    for path, (name, parser) in itertools.product(FILES, PARSERS.items()):
        if path.name == "pod_resources.json":
            continue  # a PodResources document, read by parse_pod_resources
        result = check(parser, path.read_bytes())
        if name in owners[path.parent.name] and name not in ("org", "pricing"):
            assert result is not None and result.events, (path.name, name)
        elif path.parent.name != "reference":
            assert result is None, (path.name, name)
