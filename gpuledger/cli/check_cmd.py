"""``gpuledger check``: a visible round trip through every service.

Publishes a probe event to ``gpuledger.control`` and reads it back by offset, writes a row to the
warehouse and reads it back with a parameterised query, and prints what it saw and how long each
step took. Exit code 1 when any step fails.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

from kafka import KafkaConsumer, TopicPartition
from rich.console import Console

from pipelines import events as ev
from pipelines import wire
from pipelines.errors import SourceUnavailable
from pipelines.producer import EventProducer
from pipelines.settings import get_settings
from pipelines.topics import CONTROL, physical_name
from sql.client import get_client

console = Console()


def check() -> None:
    """Round-trip a probe through Kafka and ClickHouse and show the result."""
    settings = get_settings()
    marker = uuid.uuid4().hex
    now = datetime.now(UTC)
    probe = wire.validate(
        {
            "id": ev.event_id("probe", marker),
            "source": "gpuledger",
            "type": "control.marker",
            "time": now.isoformat(),
            "cluster": settings.cluster,
            "data": {"marker": marker, "offsets": {}},
        }
    )
    t0 = time.perf_counter()
    with EventProducer(settings) as producer:
        producer.publish(probe)
    topic = physical_name(CONTROL, settings)
    consumer = KafkaConsumer(**settings.kafka_client_config(), enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        consumer.seek(tp, max(0, end - 50))
        found = None
        deadline = time.monotonic() + 15
        while found is None and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                for record in records:
                    if wire.decode(record.value).id == probe.id:
                        found = record
    finally:
        consumer.close()
    if found is None:
        raise SourceUnavailable(f"probe event not read back from {topic}")
    t1 = time.perf_counter()
    console.print(
        f"[green]Kafka[/] {settings.bootstrap_servers}: published and read back event {probe.id[:12]}… "
        f"at {topic}@{found.offset} in {1000 * (t1 - t0):.0f} ms"
    )
    client = get_client(settings)
    try:
        client.command(
            "CREATE TABLE IF NOT EXISTS health_probes (marker String, time DateTime64(3, 'UTC')) "
            "ENGINE = MergeTree ORDER BY time"
        )
        client.insert("health_probes", [[marker, now]], column_names=["marker", "time"])
        rows = client.query(
            "SELECT marker, time FROM health_probes WHERE marker = {m:String}", parameters={"m": marker}
        ).result_rows
    finally:
        client.close()
    if not rows:
        raise SourceUnavailable("probe row not read back from ClickHouse")
    t2 = time.perf_counter()
    console.print(
        f"[green]ClickHouse[/] {settings.clickhouse_endpoint_url}: wrote and read back {rows[0][0][:12]}… "
        f"({rows[0][1].isoformat()}) in {1000 * (t2 - t1):.0f} ms"
    )
