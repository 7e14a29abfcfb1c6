"""A minimal Faust app for the broker round-trip test: copies every message of one topic to another.

Configured from the environment so the test can point it at its own topics:
ECHO_BROKER, ECHO_IN, ECHO_OUT, ECHO_DATADIR.
"""

from __future__ import annotations

import os

import faust

app = faust.App(
    "gpuledger-echo-test",
    broker=f"kafka://{os.environ['ECHO_BROKER']}",
    store="memory://",
    datadir=os.environ["ECHO_DATADIR"],
    web_enabled=False,
    topic_allow_declare=False,
    topic_disable_leader=True,
    consumer_auto_offset_reset="earliest",
)
source = app.topic(
    os.environ["ECHO_IN"], value_type=bytes, key_type=bytes, value_serializer="raw", key_serializer="raw"
)
sink = app.topic(os.environ["ECHO_OUT"], value_type=bytes, key_type=bytes, value_serializer="raw", key_serializer="raw")


@app.agent(source)
async def echo(stream):
    async for event in stream.events():
        await sink.send(key=event.key, value=b"echo:" + event.value)
