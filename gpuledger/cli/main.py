"""The ``gpuledger`` command: one Typer app, subcommands registered from sibling modules.

Errors the user can act on print as one line on stderr (``error: …``) with exit code 1, or 2 for
input that is not the expected format; never a traceback (set GPULEDGER_DEBUG=1 to see one).
"""

from __future__ import annotations

import logging
import os
import sys

import typer
from kafka.errors import SaslAuthenticationFailedError

# Typer raises its bundled click's exceptions; these are the ones a user's typo produces.
from typer._click.exceptions import NoArgsIsHelpError, UsageError
from typer.exceptions import Abort

from gpuledger.cli import (
    bench_cmd,
    check_cmd,
    collect_cmd,
    demo_cmd,
    dlq_cmd,
    export_cmd,
    ingest_cmd,
    report_cmd,
    serve_cmd,
    services_cmd,
    simulate_cmd,
)
from gpuledger.cli.main_errors import UsageFailure
from pipelines.errors import kafka_auth_failed

app = typer.Typer(
    name="gpuledger",
    help="Who used which GPU-seconds, how much was useful, what it cost, and which idle time and "
    "failures burned money — for Kubernetes and Slurm GPU clusters, rebuilt from a replayable log.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
services_cmd.register(app)
ingest_cmd.register(app)
report_cmd.register(app)
collect_cmd.register(app)
simulate_cmd.register(app)
demo_cmd.register(app)
bench_cmd.register(app)
dlq_cmd.register(app)
serve_cmd.register(app)
export_cmd.register(app, report_cmd.report_app)
app.command(help="Round-trip a probe through Kafka and ClickHouse and show it.")(check_cmd.check)


class KafkaAuthFailures(logging.Handler):
    """Remembers the Kafka client's authentication failures, and ends a bootstrap at the first one.

    kafka-python's bootstrap retries a rejected authentication until its timeout (30 s) and then
    raises a bare timeout, so the cause is only in its log. The same credentials cannot succeed on
    a retry, so when the bootstrap loop logs a rejection this handler raises it again from that log
    call: the bootstrap fails at once with the rejection (a ``KafkaError``, so a caller that retries
    Kafka errors, such as a readiness probe, still does). kafka-python drops the rejections that
    arrive together with the broker's close, about three in four; one of the next few seconds'
    attempts shows it."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if "Authentication failed" in text or "SaslAuthenticationFailed" in text:
            reason = text.rsplit("SaslAuthenticationFailedError: ", 1)[-1]  # the broker's words only
            self.last = " ".join(reason.split(" (backoff", 1)[0].split())[:300]
        if record.name == "kafka.net.manager" and str(record.msg).startswith("Bootstrap connection"):
            for arg in record.args if isinstance(record.args, tuple) else ():
                if isinstance(arg, SaslAuthenticationFailedError):
                    raise arg


# an import a command needs -> the extra that brings it (pyproject.toml [project.optional-dependencies])
EXTRAS = {
    "clickhouse_connect": "stream, serve or dagster",
    "chdb": "warehouse",
    "faust": "stream",
    "dagster": "dagster",
    "dagster_webserver": "dagster",
    "fastapi": "serve",
    "uvicorn": "serve",
    "pyarrow": "serve, stream or dagster",
    "prometheus_api_client": "collect",
    "kubernetes": "collect",
    "grpc": "collect",
}


def missing_extra(exc: ModuleNotFoundError) -> str | None:
    """One line naming the extra to install, for a command run where its role was not installed."""
    top = (exc.name or "").split(".")[0]
    if top not in EXTRAS:
        return None
    return (
        f"this command needs the Python package {top!r}, which this install lacks: "
        f"pip install 'gpuledger[{EXTRAS[top].split(',')[0].split()[0]}]' (extras that bring it: {EXTRAS[top]})"
    )


def main() -> None:
    auth = KafkaAuthFailures()
    logging.getLogger("kafka").addHandler(auth)
    try:
        result = app(standalone_mode=False)
    except SystemExit:
        raise
    except NoArgsIsHelpError as exc:  # bare `gpuledger` or `gpuledger report`: show the help
        exc.show()
        raise SystemExit(0) from None
    except UsageError as exc:  # bad option or argument: one line, exit 2
        hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx is not None else ""
        sys.stderr.write(f"error: {' '.join(exc.format_message().split())}{hint}\n")
        raise SystemExit(2) from None
    except Abort:
        sys.stderr.write("aborted\n")
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        raise SystemExit(130) from None
    except Exception as exc:  # the CLI boundary: one clear line instead of a traceback
        if os.environ.get("GPULEDGER_DEBUG"):
            raise
        from gpuledger.reports import BadRequest  # a report's bad window or grouping: a bad option too

        code = 2 if isinstance(exc, UsageFailure | BadRequest) or type(exc).__name__ == "NotThisFormat" else 1
        message = " ".join(str(exc).split()) or type(exc).__name__
        if isinstance(exc, ModuleNotFoundError):
            message = missing_extra(exc) or message
        if auth.last is not None:
            message = kafka_auth_failed(auth.last)
        sys.stderr.write(f"error: {message}\n")
        raise SystemExit(code) from None
    if isinstance(result, int) and result:
        raise SystemExit(result)


if __name__ == "__main__":
    main()
