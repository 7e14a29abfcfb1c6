"""The FinOps Foundation's FOCUS validator on every chargeback file the demo writes.

``gpuledger demo`` (small size, isolated database and topics) writes the month's FOCUS 1.2 files,
CSV and Parquet, all rows and one per business unit. ``focus-validator`` 2.2.1 — installed with its
own CPython 3.12 by ``scripts/test-setup.d/focus-validator.sh`` — checks each against its bundled FOCUS
1.2 rules, offline: ``--block-download``, every proxy variable pointing at a local listener that
fails the test if anything connects to it, and a working directory where its rule files resolve
(it reads ``focus_validator/rules/currency_codes.csv`` relative to it). Its command line takes one
file, so each file is one call of that command line's entry point, several in one interpreter: the
validator's start-up and rule loading (about 4 of its 6 s a file) are paid once per process.

Every file must pass more than 100 rules and fail none, but for one rule the validator cannot pass
on any non-empty file: FOCUS 1.2 gives InvoiceId's nullability as two alternatives joined by OR
(``InvoiceId-C-003-C``: ``-C-004-C`` null when no invoice carries the charge, ``-C-005-C`` not null
when one does), and the validator also reports the alternative that does not apply as failed. It is
accepted only while the rule itself and the alternative gpuledger takes (null: no invoice) pass.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.demo_helpers import Demo

pytestmark = pytest.mark.integration

HOME = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpuledger" / "focus-validator"
VALIDATOR = HOME / "venv" / "bin" / "focus-validator"
# the console script's entry point, once per argument list; what each call raised, by data file
RUNNER = """
import json, sys, traceback
from focus_validator.main import main
calls, target, outcomes = json.loads(sys.argv[1]), sys.argv[2], {}
for argv in calls:
    sys.argv = ["focus-validator", *argv]
    try:
        main()
        outcomes[argv[argv.index("--data-file") + 1]] = ""
    except BaseException:
        outcomes[argv[argv.index("--data-file") + 1]] = traceback.format_exc()
with open(target, "w") as f:
    json.dump(outcomes, f)
"""
# failed rule -> (the OR rule it is an alternative of, the alternative gpuledger's rows take)
OTHER_ALTERNATIVE = {"InvoiceId-C-005-C": ("InvoiceId-C-003-C", "InvoiceId-C-004-C")}


@dataclass(frozen=True)
class Verdict:
    passed: frozenset[str]
    failed: frozenset[str]
    skipped: frozenset[str]


@dataclass
class Trap:
    """A local listener that every proxy variable points at: whoever connects is noted, never served."""

    url: str
    seen: list[str]


@pytest.fixture
def no_network() -> Iterator[Trap]:
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    trap = Trap(f"http://127.0.0.1:{server.getsockname()[1]}", [])
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(1)
                try:
                    first = conn.recv(200).decode("latin-1").split("\r\n")[0]
                except OSError:
                    first = ""
                trap.seen.append(first or "a connection")

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield trap
    finally:
        stop.set()
        thread.join()
        server.close()


def validate(files: list[Path], workdir: Path, proxy: str) -> dict[Path, Verdict]:
    """The validator's command line on each file, in one process; each JUnit report read back."""
    site = next((HOME / "venv" / "lib").glob("python3.*/site-packages"))
    workdir.mkdir(parents=True)
    (workdir / "focus_validator").symlink_to(site / "focus_validator", target_is_directory=True)
    env = {
        **os.environ,
        **{k: proxy for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")},
        "NO_PROXY": "",
        "no_proxy": "",
    }
    calls = [
        [
            "--block-download",
            "--validate-version",
            "1.2",
            "--data-file",
            str(data),
            "--output-type",
            "unittest",
            "--output-destination",
            str(workdir / f"{data.name}.xml"),
        ]
        for data in files
    ]
    outcomes = workdir / "outcomes.json"
    done = subprocess.run(
        [str(VALIDATOR.with_name("python")), "-c", RUNNER, json.dumps(calls), str(outcomes)],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300 * len(files),
    )
    assert done.returncode == 0 and outcomes.exists(), f"{done.stdout}\n{done.stderr}"
    raised = json.loads(outcomes.read_text())
    return {data: _verdict(data, workdir / f"{data.name}.xml", raised[str(data)]) for data in files}


def _verdict(data: Path, report: Path, raised: str) -> Verdict:
    assert not raised and report.exists(), f"{data.name}: {raised}"
    passed: set[str] = set()
    failed: set[str] = set()
    skipped: set[str] = set()
    suites = ET.parse(report).getroot()
    for case in suites.iter("testcase"):
        rule = case.get("name", "").split(" :: ")[0]
        bucket = (
            failed
            if case.find("failure") is not None or case.find("error") is not None
            else (skipped if case.find("skipped") is not None else passed)
        )
        bucket.add(rule)
    assert int(suites.get("tests", -1)) == len(passed) + len(failed) + len(skipped)
    return Verdict(frozenset(passed), frozenset(failed), frozenset(skipped))


def test_every_demo_chargeback_file_passes_the_focus_validator(demo: Demo, tmp_path: Path, no_network: Trap) -> None:
    if not VALIDATOR.exists():
        pytest.fail(
            f"focus-validator is not installed at {VALIDATOR}: run bash scripts/test-setup.d/focus-validator.sh",
            pytrace=False,
        )
    files = sorted(demo.out.glob("focus-chargeback-*"))
    assert {f.suffix for f in files} == {".csv", ".parquet"} and len(files) >= 6  # all rows + per business unit
    halves = [files[0::2], files[1::2]]  # two cores: two processes, each file in one of them
    verdicts: dict[Path, Verdict] = {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        for found in pool.map(lambda i: validate(halves[i], tmp_path / "v" / str(i), no_network.url), range(2)):
            verdicts.update(found)
    assert sorted(verdicts) == files
    assert no_network.seen == [], f"the validator tried the network: {no_network.seen}"
    for path, v in verdicts.items():
        assert len(v.passed) + len(v.failed) > 100, f"{path.name}: only {len(v.passed) + len(v.failed)} rules checked"
        assert v.failed <= OTHER_ALTERNATIVE.keys(), f"{path.name}: failed {sorted(v.failed)}"
        for rule in v.failed:
            assert set(OTHER_ALTERNATIVE[rule]) <= v.passed, f"{path.name}: {rule} failed, and so did its rule"
        assert {"InvoiceId-C-003-C", "InvoiceId-C-004-C"} <= v.passed, path.name
