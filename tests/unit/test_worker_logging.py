"""The worker's logging once Faust's worker has set it up: the root logger at the level asked for.

Faust's worker keeps a start-up spinner at the WARN level and above, and for it puts the root logger
at DEBUG (its own handler filters at the level asked for). Every debug call of aiokafka (several
per fetch: one per partition fetched), Faust and mode then built a record that no handler wrote."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipelines.settings import Settings
from streams.app import StreamWorker, create_app


@pytest.fixture
def root_logging() -> Iterator[None]:
    """Put the root logger's level and handlers back after the test."""
    root = logging.getLogger()
    level, handlers = root.level, root.handlers[:]
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


@pytest.mark.parametrize(("loglevel", "level"), [("warn", logging.WARNING), ("info", logging.INFO)])
def test_the_root_logger_is_at_the_level_asked_for(
    tmp_path: Path, root_logging: None, loglevel: str, level: int
) -> None:
    app = create_app(Settings(topic_prefix="unit-logging.", home=tmp_path))
    assert app.conf.Worker is StreamWorker  # what `faust worker` (the app's main) starts
    out = io.StringIO()
    worker = StreamWorker(app, loglevel=loglevel, stdout=out, stderr=out)
    worker._setup_logging()  # what the worker does first when it starts
    fetcher = logging.getLogger("aiokafka.consumer.fetcher")
    assert logging.getLogger().level == level
    assert not fetcher.isEnabledFor(logging.DEBUG)
    assert fetcher.isEnabledFor(logging.WARNING)
    assert fetcher.isEnabledFor(logging.INFO) == (level <= logging.INFO)


def test_debug_still_reaches_the_handlers_when_asked_for(tmp_path: Path, root_logging: None) -> None:
    app = create_app(Settings(topic_prefix="unit-logging.", home=tmp_path))
    out = io.StringIO()
    worker = StreamWorker(app, loglevel="debug", stdout=out, stderr=out)
    worker._setup_logging()
    assert logging.getLogger("aiokafka.consumer.fetcher").isEnabledFor(logging.DEBUG)
