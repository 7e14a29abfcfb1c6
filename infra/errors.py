"""Errors of the service layer.

InfraError                       base of everything raised under infra/
├── ServiceError                 a local service failed to start, stop or answer
└── MissingDependency            a required tool (java, mvn) or artifact is not installed
"""

from __future__ import annotations


class InfraError(RuntimeError):
    """Base class: the message is one line that tells the user what to do."""


class ServiceError(InfraError):
    pass


class MissingDependency(InfraError):
    pass
