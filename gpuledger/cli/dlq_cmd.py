"""``gpuledger dlq replay``: re-drive dead letters once their cause is fixed (``streams.dlq``)."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console

from gpuledger.cli.main_errors import UsageFailure
from gpuledger.reports import parse_time
from pipelines.settings import get_settings
from pipelines.times import EPOCH
from pipelines.topics import DATA_TOPICS

console = Console()
dlq_app = typer.Typer(help="Dead letters: records that could not become events, with the reason.", no_args_is_help=True)


@dlq_app.command("replay")
def replay(
    topic: Annotated[str | None, typer.Option(help="only letters meant for this topic, e.g. gpu.metrics")] = None,
    since: Annotated[str | None, typer.Option(help="only letters rejected at or after this time, ISO 8601")] = None,
    again: Annotated[bool, typer.Option("--again", help="also letters replayed before")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="validate only; publish nothing")] = False,
    format: Annotated[str, typer.Option("--format", help="table or json")] = "table",
) -> None:
    """Validate dead letters again with today's contract and publish the ones that are now valid
    events to their topics (same event ids: replaying twice changes nothing)."""
    from streams.dlq import replay_dead_letters

    names = [t.name for t in DATA_TOPICS]
    if topic is not None and topic not in names:
        raise UsageFailure(f"--topic must be one of {', '.join(names)}, got {topic!r}")
    report = replay_dead_letters(get_settings(), topic or "", parse_time(since, EPOCH), again, dry_run)
    if format == "json":
        typer.echo(json.dumps({"replayed": report.replayed, "still_invalid": dict(report.still_invalid)}))
        return
    verb = "valid now (not published: --dry-run)" if dry_run else "re-published"
    console.print(f"{report.replayed:,} dead letters {verb}")
    for reason, count in report.still_invalid.most_common():
        console.print(f"  [yellow]still invalid[/] ×{count}: {reason}")


def register(app: typer.Typer) -> None:
    app.add_typer(dlq_app, name="dlq")
