"""The embedded ClickHouse endpoint: one process that owns a chdb data directory and serves the
ClickHouse HTTP interface, so clickhouse-connect (and curl) work against it unchanged.

    python -m infra.clickhouse.endpoint --data DIR [--host 127.0.0.1] [--port 8123]
                                        [--user U] [--password-env VAR] [--log-level info]

chdb allows one process per data path, so this process is the single owner and everything else
talks to it over HTTP. Credentials: when CLICKHOUSE_PASSWORD (or GPULEDGER_CLICKHOUSE_PASSWORD,
or the variable named by --password-env) is non-empty, every request must carry that password for
CLICKHOUSE_USER (default "default"); otherwise no authentication is asked for. It binds loopback
unless --host says otherwise, writes no pid file (the supervisor keeps those), prints one line
"listening on http://host:port" when it is ready, and stops cleanly on SIGTERM/SIGINT: running
requests finish, then the engine is closed so its data is flushed.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from infra.clickhouse.engine import Engine
from infra.clickhouse.protocol import READER_USER, Credentials
from infra.clickhouse.server import start
from pipelines.settings import get_settings

log = logging.getLogger("gpuledger.clickhouse")


def serve(
    data_dir: str | Path,
    host: str = "127.0.0.1",
    port: int = 8123,
    user: str = "default",
    password: str = "",
    *,
    reader_user: str = READER_USER,
    reader_password: str = "",
    stop: threading.Event | None = None,
) -> None:
    """Serve until SIGTERM/SIGINT (or until ``stop`` is set); port 0 picks a free port."""
    engine = Engine(Path(data_dir))
    try:
        server, thread = start(
            engine, host, port, Credentials(user or "default", password, reader_user, reader_password)
        )
    except BaseException:
        engine.close(wait_s=0.0)
        raise
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
    print(f"listening on {server.url}", file=sys.stderr, flush=True)
    log.info("serving %s (authentication %s)", Path(data_dir).resolve(), "required" if password else "off")
    try:  # a signal's handler wakes the wait at once; a serving thread that died is noticed within 5 s
        while not stop.wait(5.0):
            if not thread.is_alive():
                break
    finally:
        server.shutdown()  # no new connections; requests already running are answered
        if not server.wait_quiet(timeout_s=60.0):
            log.warning("stopping with requests still running")
        server.server_close()
        engine.close()
        log.info("stopped")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m infra.clickhouse.endpoint", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, type=Path, help="chdb data directory (created if missing)")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default: loopback only)")
    parser.add_argument("--port", type=int, default=8123, help="TCP port (default 8123; 0 picks a free one)")
    parser.add_argument("--user", default=None, help="user name clients must present (default CLICKHOUSE_USER)")
    parser.add_argument(
        "--password-env",
        default=None,
        metavar="VAR",
        help="read the password from this environment variable instead of CLICKHOUSE_PASSWORD",
    )
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    settings = get_settings()  # read once, when the process starts
    host, port = args.host, args.port
    user = args.user or settings.clickhouse_user
    if args.password_env:
        password = os.environ.get(args.password_env, "")
    else:
        password = settings.clickhouse_password.get_secret_value()
    try:
        serve(
            args.data,
            host,
            port,
            user,
            password,
            reader_user=settings.clickhouse_reader_user,
            reader_password=settings.clickhouse_reader_password.get_secret_value(),
        )
    except OSError as exc:
        print(f"cannot serve on {host}:{port}: {exc}", file=sys.stderr)
        return 1
    except RuntimeError as exc:  # chdb refuses a data directory another process owns
        print(f"cannot open {args.data}: {str(exc).splitlines()[0] if str(exc) else exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
