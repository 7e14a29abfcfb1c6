"""``gpuledger collect {dcgm|kubernetes|slurm|storage}``: read a live source and publish its events.

Every command either reads once (the default; for Prometheus a time range ``--from``/``--to``,
read window by window) or keeps polling with ``--follow`` every ``--interval`` seconds until
Ctrl-C/SIGTERM (or until ``--to``). Events already published by this process are not published
again (ids are deterministic, so re-running is harmless anyway). Each poll is acknowledged by
Kafka before the next starts. A source that cannot be reached is a one-line error; with
``--follow`` it is retried at the next interval and given up after ``--max-failures`` polls in a row.
"""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from gpuledger.cli.main_errors import UsageFailure
from pipelines import process_metrics as metrics
from pipelines.collectors import dcgm as dcgm_collector
from pipelines.collectors import kubernetes as k8s_collector
from pipelines.collectors import slurm as slurm_collector
from pipelines.collectors import storage as storage_collector
from pipelines.collectors.base import Batch, Collector, Deduplicated, RunStats, producer_sink, run
from pipelines.collectors.state import default_state_path
from pipelines.errors import SourceUnavailable
from pipelines.settings import get_settings
from pipelines.times import time_hint

console = Console(stderr=True)
collect_app = typer.Typer(
    help="Live collectors: read Prometheus / dcgm-exporter, the Kubernetes API, Slurm commands or "
    "storage exporters and publish their events to Kafka (once, over a time range, or --follow).",
    no_args_is_help=True,
)

FromOpt = Annotated[
    str | None, typer.Option("--from", help="start of a time range, ISO 8601 (UTC unless an offset is given)")
]
ToOpt = Annotated[str | None, typer.Option("--to", help="end of the time range, ISO 8601 (default: now)")]
FollowOpt = Annotated[
    bool, typer.Option("--follow", help="keep polling every --interval seconds until Ctrl-C/SIGTERM (or until --to)")
]
IntervalOpt = Annotated[
    float,
    typer.Option(
        "--interval",
        min=0.1,
        help="seconds between polls with --follow; Prometheus mode without --from starts this long before now",
    ),
]
OnceOpt = Annotated[bool, typer.Option("--once", help="exactly one poll, then exit (even with --follow)")]
ClusterOpt = Annotated[str | None, typer.Option(help="cluster name stamped on the events (default GPULEDGER_CLUSTER)")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="read and validate only; publish nothing")]


class SummaryFormat(StrEnum):
    table = "table"
    json = "json"


FormatOpt = Annotated[SummaryFormat, typer.Option("--format", help="final summary as a table or JSON")]
MaxFailuresOpt = Annotated[
    int, typer.Option("--max-failures", min=1, help="with --follow: give up after this many failed polls in a row")
]
StepOpt = Annotated[
    int,
    typer.Option(
        "--scrape-interval", min=1, help="Prometheus mode: the scrape interval in whole seconds, used as the query step"
    ),
]
MatchOpt = Annotated[
    str | None, typer.Option("--match", help="Prometheus mode: extra label matchers, e.g. 'job=\"dcgm-exporter\"'")
]
LagOpt = Annotated[
    float | None,
    typer.Option(
        "--lag",
        min=0.0,
        help="Prometheus mode: stay this many seconds behind now so every scrape is written (default 2 × step)",
    ),
]
NodeOpt = Annotated[
    str | None,
    typer.Option("--node", help="exporter mode: node name for series without a host label (default: the URL's host)"),
]
DcgmPromOpt = Annotated[
    str | None,
    typer.Option(
        "--prometheus", help="Prometheus base URL: read the DCGM_FI_* series with query_range (default PROMETHEUS_URL)"
    ),
]
DcgmExporterOpt = Annotated[
    list[str] | None,
    typer.Option("--exporter", help="dcgm-exporter /metrics URL to scrape directly instead (repeatable)"),
]
StoragePromOpt = Annotated[
    str | None,
    typer.Option(
        "--prometheus",
        help="Prometheus base URL: read node_exporter disk/NFS, Lustre and GPFS byte counters with "
        "query_range (default PROMETHEUS_URL)",
    ),
]
StorageExporterOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--exporter", help="node_exporter / Lustre / GPFS exporter /metrics URL to scrape directly instead (repeatable)"
    ),
]


def _time(value: str | None, option: str) -> datetime | None:
    if value is None:
        return None
    try:
        result = time_hint(value)
    except ValueError:
        raise UsageFailure(f"{option} {value!r} is not an ISO 8601 time") from None
    return result


def _range(start: str | None, end: str | None, *, close_at_now: bool) -> tuple[datetime | None, datetime | None]:
    """``--from``/``--to`` as UTC times; ``close_at_now``: a range without ``--to`` ends now."""
    begin, finish = _time(start, "--from"), _time(end, "--to")
    if finish is not None and begin is None:
        raise UsageFailure("--to needs --from")
    if begin is not None and finish is not None and finish < begin:
        raise UsageFailure("--to is before --from")
    if begin is not None and finish is None and close_at_now:
        finish = datetime.now(UTC)
    return begin, finish


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGTERM and the first Ctrl-C end the loop after the current poll (a second Ctrl-C aborts)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _progress(follow: bool) -> Callable[[Batch, RunStats], None]:
    def show(batch: Batch, stats: RunStats) -> None:
        result = batch.result
        if follow or result.events or result.dead_letters:
            console.print(f"{batch.note}: {len(result.events):,} events, {len(result.dead_letters):,} dead letters")
        for warning in batch.warnings:
            console.print(f"  [yellow]warning[/]: {warning}")

    return show


def _failure(exc: SourceUnavailable) -> None:
    console.print(f"[yellow]source unavailable, retrying at the next interval[/]: {exc}")


def execute(
    collector: Collector,
    name: str,
    *,
    follow: bool,
    once: bool,
    interval: float,
    dry_run: bool,
    max_failures: int = 5,
    stop: threading.Event | None = None,
) -> RunStats:
    """Run a collector (deduplicated) into Kafka, or nowhere for a dry run; always closes it."""
    stop = stop or threading.Event()
    wrapped = Deduplicated(collector)
    show = _progress(follow)

    def on_batch(batch: Batch, stats: RunStats) -> None:
        metrics.COLLECTOR_POLLS.labels(name).inc()
        metrics.COLLECTOR_EVENTS.labels(name).inc(len(batch.result.events))
        show(batch, stats)

    def on_failure(exc: SourceUnavailable) -> None:
        metrics.COLLECTOR_POLL_ERRORS.labels(name).inc()
        _failure(exc)

    settings = get_settings()
    metrics.serve_metrics(settings.metrics_port, str(settings.metrics_host))
    options: dict[str, Any] = {
        "follow": follow and not once,
        "interval_s": interval,
        "stop": stop,
        "max_failures": max_failures,
        "on_batch": on_batch,
        "on_failure": on_failure,
        "max_polls": 1 if once else None,
    }
    try:
        with _stop_on_signals(stop):
            if dry_run:
                return run(wrapped, lambda result: None, **options)
            from pipelines.producer import EventProducer

            with EventProducer(get_settings()) as producer:
                return run(wrapped, producer_sink(producer), **options)
    finally:
        wrapped.close()


StateFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--state-file",
        help="where the collector keeps its cursor across restarts (default with --follow: "
        "$GPULEDGER_HOME/state/<source>-<cluster>.json; never written by a dry run)",
    ),
]


def _state_path(given: Path | None, collector: str, cluster: str | None, default_on: bool) -> Path | None:
    if given is not None:
        return given
    return default_state_path(get_settings().home, collector, _cluster(cluster)) if default_on else None


def report(stats: RunStats, fmt: SummaryFormat, dry_run: bool) -> None:
    info: dict[str, Any] = {
        "polls": stats.polls,
        "failed_polls": stats.failed_polls,
        "events": stats.events,
        "dead_letters": stats.dead_letters,
        "by_type": dict(stats.by_type),
        "dead_letter_reasons": dict(stats.dead_letter_reasons.most_common(10)),
        "warnings": stats.warnings[-10:],
        "dry_run": dry_run,
    }
    if fmt is SummaryFormat.json:
        typer.echo(json.dumps(info, indent=2))
        return
    verb = "validated" if dry_run else "published"
    console.print(f"{verb} {stats.events:,} events, {stats.dead_letters:,} dead letters in {stats.polls} polls")
    for reason, count in info["dead_letter_reasons"].items():
        console.print(f"  [yellow]dead letter[/] ×{count}: {reason}")


def _cluster(cluster: str | None) -> str:
    return cluster or get_settings().cluster


def _metrics_source(
    prometheus: str | None, exporter: list[str] | None, start: str | None, end: str | None
) -> str | None:
    """The Prometheus URL to use, or None for exporter mode; rejects conflicting options."""
    if prometheus and exporter:
        raise UsageFailure("give either --prometheus or --exporter, not both")
    if exporter:
        if start or end:
            raise UsageFailure("--from/--to need --prometheus: an exporter only knows the present")
        return None
    url = prometheus or get_settings().prometheus_url
    if not url:
        raise UsageFailure("give --prometheus URL (or set PROMETHEUS_URL) or --exporter URL")
    return url


@collect_app.command("dcgm")
def collect_dcgm(
    prometheus: DcgmPromOpt = None,
    exporter: DcgmExporterOpt = None,
    start: FromOpt = None,
    end: ToOpt = None,
    follow: FollowOpt = False,
    interval: IntervalOpt = 30.0,
    scrape_interval: StepOpt = 30,
    match: MatchOpt = None,
    lag: LagOpt = None,
    node: NodeOpt = None,
    cluster: ClusterOpt = None,
    once: OnceOpt = False,
    dry_run: DryRunOpt = False,
    max_failures: MaxFailuresOpt = 5,
    fmt: FormatOpt = SummaryFormat.table,
) -> None:
    """GPU samples (gpu.metrics), one event per node and sample time."""
    url = _metrics_source(prometheus, exporter, start, end)
    collector: Collector
    if url is None:
        collector = dcgm_collector.exporter_collector(
            exporter or [], cluster=_cluster(cluster), node=node, interval_s=interval if follow and not once else None
        )
    else:
        begin, finish = _range(start, end, close_at_now=not follow)
        collector = dcgm_collector.prometheus_collector(
            url,
            cluster=_cluster(cluster),
            step_s=scrape_interval,
            start=begin,
            end=finish,
            lag_s=lag,
            match=match,
            backfill_s=max(interval, scrape_interval),
        )
    report(
        execute(
            collector, "dcgm", follow=follow, once=once, interval=interval, dry_run=dry_run, max_failures=max_failures
        ),
        fmt,
        dry_run,
    )


@collect_app.command("storage")
def collect_storage(
    prometheus: StoragePromOpt = None,
    exporter: StorageExporterOpt = None,
    start: FromOpt = None,
    end: ToOpt = None,
    follow: FollowOpt = False,
    interval: IntervalOpt = 30.0,
    scrape_interval: StepOpt = 30,
    match: MatchOpt = None,
    lag: LagOpt = None,
    node: NodeOpt = None,
    cluster: ClusterOpt = None,
    once: OnceOpt = False,
    dry_run: DryRunOpt = False,
    max_failures: MaxFailuresOpt = 5,
    fmt: FormatOpt = SummaryFormat.table,
) -> None:
    """Storage throughput counters (storage.io), one event per node and sample time."""
    url = _metrics_source(prometheus, exporter, start, end)
    collector: Collector
    if url is None:
        collector = storage_collector.exporter_collector(exporter or [], cluster=_cluster(cluster), node=node)
    else:
        begin, finish = _range(start, end, close_at_now=not follow)
        collector = storage_collector.prometheus_collector(
            url,
            cluster=_cluster(cluster),
            step_s=scrape_interval,
            start=begin,
            end=finish,
            lag_s=lag,
            match=match,
            backfill_s=max(interval, scrape_interval),
        )
    report(
        execute(
            collector,
            "storage",
            follow=follow,
            once=once,
            interval=interval,
            dry_run=dry_run,
            max_failures=max_failures,
        ),
        fmt,
        dry_run,
    )


@collect_app.command("kubernetes")
def collect_kubernetes(
    kubeconfig: Annotated[
        str | None,
        typer.Option(help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config; in a pod: the service account)"),
    ] = None,
    context: Annotated[str | None, typer.Option(help="kubeconfig context")] = None,
    in_cluster: Annotated[
        bool | None,
        typer.Option("--in-cluster/--no-in-cluster", help="force (or refuse) the in-cluster service account"),
    ] = None,
    namespace: Annotated[str | None, typer.Option(help="only this namespace (default: all)")] = None,
    selector: Annotated[str | None, typer.Option(help="label selector, e.g. 'team=llm'")] = None,
    pod_resources: Annotated[
        Path | None,
        typer.Option(
            help="kubelet PodResources List() JSON naming each container's GPU device ids (re-read when it changes)"
        ),
    ] = None,
    pod_resources_socket: Annotated[
        Path | None,
        typer.Option(
            help="the kubelet's PodResources gRPC socket (e.g. /var/lib/kubelet/pod-resources/kubelet.sock): ask it "
            "which GPUs each container holds; needs --node-name"
        ),
    ] = None,
    node_name: Annotated[
        str | None,
        typer.Option(
            help="only the pods bound to this node and this Node (one collector per node, e.g. a DaemonSet "
            "with NODE_NAME from spec.nodeName)"
        ),
    ] = None,
    replicas: Annotated[
        int | None,
        typer.Option(min=1, help="time-slicing replicas per GPU for nvidia.com/gpu.shared pods that do not say"),
    ] = None,
    workload_kind: Annotated[str | None, typer.Option(help="workload kind of pods without a kind label")] = None,
    nodes: Annotated[
        bool,
        typer.Option(
            "--nodes/--no-nodes", help="also list nodes: NotReady, cordoned and their GPU counts (needs list on nodes)"
        ),
    ] = True,
    dra: Annotated[
        bool,
        typer.Option(
            "--dra/--no-dra",
            help="also list ResourceClaims and ResourceSlices "
            "(resource.k8s.io/v1) at every poll: GPUs pods hold through DRA claims "
            "(needs list on them)",
        ),
    ] = True,
    page_size: Annotated[
        int,
        typer.Option(
            "--page-size", min=1, help="pods per list request (the API's limit; the rest follow by continue tokens)"
        ),
    ] = 500,
    follow: FollowOpt = False,
    interval: Annotated[
        float,
        typer.Option(
            "--interval",
            min=1.0,
            help="with --follow: seconds each watch request stays open (events are handed on as they arrive)",
        ),
    ] = 30.0,
    cluster: ClusterOpt = None,
    once: OnceOpt = False,
    dry_run: DryRunOpt = False,
    max_failures: MaxFailuresOpt = 5,
    fmt: FormatOpt = SummaryFormat.table,
    state_file: StateFileOpt = None,
) -> None:
    """Pod allocations (scheduler.allocations): list the pods, then with --follow watch them (DRA claims and
    slices are listed again at every poll)."""
    _check_kubernetes_devices(pod_resources, pod_resources_socket, node_name)
    api = k8s_collector.core_api(kubeconfig=kubeconfig, context=context, in_cluster=in_cluster)
    # one cursor per node: per-node collectors sharing a GPULEDGER_HOME must not share a state file
    name = f"kubernetes-{node_name}" if node_name else "kubernetes"
    try:
        collector = k8s_collector.PodWatcher(
            api,
            cluster=_cluster(cluster),
            namespace=namespace,
            label_selector=selector,
            watch_timeout_s=max(1, round(interval)),
            page_size=page_size,
            replicas=replicas,
            workload_kind=workload_kind,
            pod_resources=pod_resources,
            pod_resources_socket=pod_resources_socket,
            node_name=node_name,
            nodes=nodes,
            dra=dra,
            state_file=_state_path(state_file, name, cluster, follow and not dry_run),
        )
    except ValueError as exc:
        raise UsageFailure(str(exc)) from None
    report(
        execute(
            collector,
            "kubernetes",
            follow=follow,
            once=once or not follow,
            interval=interval,
            dry_run=dry_run,
            max_failures=max_failures,
        ),
        fmt,
        dry_run,
    )


def _check_kubernetes_devices(file: Path | None, socket: Path | None, node_name: str | None) -> None:
    if file is not None and socket is not None:
        raise UsageFailure("give either --pod-resources FILE or --pod-resources-socket PATH, not both")
    if node_name is not None and (not node_name.strip() or "$(" in node_name):
        # Kubernetes leaves "$(NODE_NAME)" as it is when the container has no such variable
        raise UsageFailure(f"--node-name {node_name!r} is not a node name (is NODE_NAME set from spec.nodeName?)")
    if socket is not None and node_name is None:
        raise UsageFailure("--pod-resources-socket needs --node-name: a kubelet knows only its own node's pods")


@collect_app.command("slurm")
def collect_slurm(
    squeue_cmd: Annotated[
        str, typer.Option(help='command printing `squeue --json` ("" to skip), e.g. "ssh head squeue --json"')
    ] = slurm_collector.DEFAULT_SQUEUE,
    sacct_cmd: Annotated[
        str, typer.Option(help='command printing `sacct --json` without a time window ("" to skip)')
    ] = slurm_collector.DEFAULT_SACCT,
    sacct_args: Annotated[
        str | None,
        typer.Option(help='sacct window arguments used instead of the computed one, e.g. "-S now-3600 -E now"'),
    ] = None,
    nodes_cmd: Annotated[
        str | None, typer.Option(help='command printing node states, e.g. "scontrol show nodes --json" (default: none)')
    ] = None,
    command_timeout: Annotated[float, typer.Option(min=1.0, help="seconds a command may run")] = 120.0,
    workload_kind: Annotated[
        str | None, typer.Option(help="workload kind of jobs without kind= in their comment (default batch)")
    ] = None,
    start: FromOpt = None,
    end: ToOpt = None,
    follow: FollowOpt = False,
    interval: IntervalOpt = 30.0,
    cluster: ClusterOpt = None,
    once: OnceOpt = False,
    dry_run: DryRunOpt = False,
    max_failures: MaxFailuresOpt = 5,
    fmt: FormatOpt = SummaryFormat.table,
    state_file: StateFileOpt = None,
) -> None:
    """Slurm allocations (scheduler.allocations) from squeue and sacct; --from/--to reads sacct only."""
    begin, finish = _range(start, end, close_at_now=False)
    try:
        collector = slurm_collector.SlurmCommands(
            cluster=_cluster(cluster),
            squeue_cmd=squeue_cmd,
            sacct_cmd=sacct_cmd,
            sacct_args=sacct_args,
            nodes_cmd=nodes_cmd,
            start=begin,
            end=finish,
            overlap_s=max(60.0, 2 * interval),
            timeout_s=command_timeout,
            workload_kind=workload_kind,
            state_file=_state_path(state_file, "slurm", cluster, follow and finish is None and not dry_run),
        )
    except ValueError as exc:
        raise UsageFailure(str(exc)) from None
    report(
        execute(
            collector, "slurm", follow=follow, once=once, interval=interval, dry_run=dry_run, max_failures=max_failures
        ),
        fmt,
        dry_run,
    )


def register(app: typer.Typer) -> None:
    app.add_typer(collect_app, name="collect")
