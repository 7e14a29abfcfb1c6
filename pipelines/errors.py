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
