"""``gpuledger serve``: the read-only HTTP API, dashboard and metrics (``gpuledger.serve.app``)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated

import typer

from gpuledger.cli.main_errors import UsageFailure
from pipelines.settings import get_settings


def serve(
    host: Annotated[str, typer.Option(help="address to bind (loopback by default)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on")] = 8080,
    tokens_file: Annotated[
        Path | None,
        typer.Option(
            "--tokens-file",
            help="file of 'sha256:<hex> <scope>' lines, each optionally ending in expires=<ISO time> "
            "(instead of GPULEDGER_API_TOKENS)",
        ),
    ] = None,
    max_days: Annotated[float, typer.Option(help="longest time range one request may ask for")] = 400.0,
    stall_after: Annotated[
        float, typer.Option(help="seconds input may wait for attribution before /readyz says not ready")
    ] = 600.0,
    hash_token: Annotated[
        str | None,
        typer.Option(
            "--hash-token", help="print the tokens-file line for this token and scope ('<token>=<scope>') and exit"
        ),
    ] = None,
    access_log: Annotated[
        Path | None,
        typer.Option(
            "--access-log",
            help="append the access log (a JSON line per API and dashboard request: time, token id, "
            "scope, path, status, rows; never the token) to this file instead of standard error",
        ),
    ] = None,
) -> None:
    """Serve /api/v1 (bearer tokens, per-business-unit scopes), the login page / and /dashboard (a session
    cookie, docs/DASHBOARD.md), /healthz, /readyz and /metrics."""
    from gpuledger.serve.tokens import Tokens, hashed_line

    if hash_token is not None:
        token, _, scope = hash_token.partition("=")
        typer.echo(hashed_line(token, scope or "all"))
        return
    settings = get_settings()
    if tokens_file is not None:
        tokens = Tokens.from_file(tokens_file)
    elif settings.api_tokens is not None:
        tokens = Tokens.from_env(settings.api_tokens.get_secret_value())
    else:
        raise UsageFailure("no API tokens: set GPULEDGER_API_TOKENS or pass --tokens-file")
    if not len(tokens):
        raise UsageFailure("the token list is empty")

    import uvicorn

    from gpuledger.serve.app import access_log as access_logger
    from gpuledger.serve.app import create_app

    handler = logging.FileHandler(access_log) if access_log is not None else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    access_logger.addHandler(handler)
    access_logger.setLevel(logging.INFO)
    access_logger.propagate = False
    app = create_app(settings, tokens, max_days=max_days, stall_after_s=stall_after)
    uvicorn.run(app, host=host, port=port, log_level="warning")


def register(app: typer.Typer) -> None:
    app.command(help="Serve the read-only HTTP API, the finance dashboard and Prometheus metrics.")(serve)
