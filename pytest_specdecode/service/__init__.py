"""Service control: bring a server (local, over SSH, or external) to a config.

Import the controllers from their modules; this package root re-exports the
shared types only, so importing it does not pull in fabric.
"""

from __future__ import annotations

from pytest_specdecode.service.base import (
    LaunchSpec,
    ProcessIdentity,
    ScriptFailed,
    ServiceController,
    ServiceError,
    ServiceStartError,
    SSHError,
)

__all__ = [
    "LaunchSpec",
    "ProcessIdentity",
    "SSHError",
    "ScriptFailed",
    "ServiceController",
    "ServiceError",
    "ServiceStartError",
]
