"""Garbage in, no crash out: every metrics parser (dcgm, storage, checkpoint, nccl) is fed random
bytes, random text, truncations and line-level damage of every fixture. Each call either raises
NotThisFormat with a one-line message or returns a ParseResult whose events are typed envelopes
and whose dead letters carry a reason; parsing the same input twice gives the same event ids."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.events import Envelope
from pipelines.parsers import checkpoint, dcgm, nccl, storage
from pipelines.parsers.base import NotThisFormat, ParseResult

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SAMPLES = [p.read_bytes() for sub in ("dcgm", "storage", "nccl") for p in sorted((FIXTURES / sub).iterdir())]
T = datetime(2025, 11, 2, 10, 0, tzinfo=UTC)
PARSERS: list[tuple[str, Callable[..., ParseResult], dict[str, Any]]] = [
    ("dcgm", dcgm.parse, {"scrape_time": T, "node": "n0"}),
    ("storage", storage.parse, {"node": "n0", "time": T}),
    ("checkpoint", checkpoint.parse, {}),
    ("nccl", nccl.parse, {"time": T}),
]
FUZZ = settings(max_examples=120, deadline=None, database=None)
ALPHABET = sorted(set(b"".join(SAMPLES).decode()))


def _once(parser: Callable[..., ParseResult], data: bytes | str, hints: dict[str, Any]) -> list[str] | None:
    try:
        result = parser(data, cluster="c1", origin="fuzz", **hints)
    except NotThisFormat as exc:
        assert str(exc).strip() and "\n" not in str(exc)
        return None
    assert isinstance(result, ParseResult)
    for event in result.events:
        assert isinstance(event, Envelope) and event.cluster
    for dead in result.dead_letters:
        assert dead.reason.strip() and "\n" not in dead.reason
        assert dead.raw is not None and dead.topic
    return [e.id for e in result.events]


def check_all(data: bytes | str, with_hints: bool = True) -> None:
    for _, parser, hints in PARSERS:
        used = hints if with_hints else {}
        first = _once(parser, data, used)
        assert _once(parser, data, used) == first  # deterministic ids


@FUZZ
@given(st.binary(max_size=4000))
def test_random_bytes(data: bytes) -> None:
    check_all(data)


@FUZZ
@given(st.text(max_size=3000))
def test_random_text(text: str) -> None:
    check_all(text)


@FUZZ
@given(st.text(alphabet=ALPHABET, max_size=3000), st.booleans())
def test_random_text_in_the_formats_alphabet(text: str, with_hints: bool) -> None:
    check_all(text, with_hints)


@FUZZ
@given(st.sampled_from(SAMPLES), st.data())
def test_truncations(sample: bytes, data: st.DataObject) -> None:
    cut = data.draw(st.integers(min_value=0, max_value=len(sample)))
    start = data.draw(st.integers(min_value=0, max_value=cut))
    check_all(sample[:cut])
    check_all(sample[start:cut], with_hints=data.draw(st.booleans()))


@FUZZ
@given(st.sampled_from(SAMPLES), st.data())
def test_damaged_lines(sample: bytes, data: st.DataObject) -> None:
    lines = sample.split(b"\n")
    n = len(lines)
    for _ in range(data.draw(st.integers(min_value=1, max_value=6))):
        i = data.draw(st.integers(min_value=0, max_value=n - 1))
        action = data.draw(st.sampled_from(["drop", "dup", "garble", "swap"]))
        if action == "drop":
            lines[i] = b""
        elif action == "dup":
            lines.insert(i, lines[i])
        elif action == "garble":
            junk = data.draw(st.binary(min_size=1, max_size=12))
            pos = data.draw(st.integers(min_value=0, max_value=len(lines[i])))
            lines[i] = lines[i][:pos] + junk + lines[i][pos:]
        else:
            j = data.draw(st.integers(min_value=0, max_value=n - 1))
            lines[i], lines[j] = lines[j], lines[i]
    check_all(b"\n".join(lines))


def test_each_fixture_is_claimed_by_its_own_parser_only() -> None:
    """The fuzz corpus is real input, and auto-detection keeps the sources apart."""
    for sub in ("dcgm", "storage", "nccl"):
        for path in sorted((FIXTURES / sub).iterdir()):
            claimed = set()
            for name, parser, hints in PARSERS:
                try:
                    result = parser(path.read_bytes(), cluster="c1", origin=path.name, **hints)
                except NotThisFormat:
                    continue
                assert result.events, (name, path.name)
                claimed.add(name)
            expected = {"storage", "checkpoint"} if path.suffix == ".jsonl" else {sub}
            assert claimed == expected, path.name
