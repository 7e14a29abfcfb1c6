"""Errors of the collectors and the producer.

    PipelineError                  base of errors raised under pipelines/
    ├── PublishError               Kafka did not acknowledge (retryable: run the collector again;
    │                              ids are deterministic, so nothing is double counted)
    ├── SourceUnavailable          Prometheus / Kubernetes API / Slurm command unreachable (retryable)
    └── NotThisFormat              (pipelines.parsers.base) input is not that source's format (drop:
                                   exit code 2, nothing published)

Malformed *records* are not errors: they become dead letters and the run goes on.
"""

from __future__ import annotations


class PipelineError(RuntimeError):
    """Base class; the message is one line."""


class PublishError(PipelineError):
    pass


class SourceUnavailable(PipelineError):
    pass


def kafka_auth_failed(reason: str) -> str:
    """The one line for a broker that rejected our credentials (``reason``: the broker's words)."""
    return (
        f"Kafka authentication failed ({reason}): check KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD "
        "and KAFKA_SASL_MECHANISM"
    )
