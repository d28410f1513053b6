"""external: a server someone else runs; never restarted, only verified."""

from __future__ import annotations

from pytest_specdecode.service.base import BaseController, LaunchSpec, ProcessIdentity


class ExternalController(BaseController):
    """Never touches the server: ``apply()`` returns the identity without restarting.

    The gate then verifies the live server against the requested config; a
    mismatch is final (nothing was restarted, so nothing stale can answer),
    and the plugin skips that config's tests with the gate's reason. Everything
    else is the base's "unknown": no process to watch, no logs, nothing to stop.
    """

    kind = "external"

    def __init__(self, where: str = "external server") -> None:
        self._where = where
        self._fixed = ProcessIdentity(kind=self.kind)
        self._identity = self._fixed

    def apply(self, launch: LaunchSpec) -> ProcessIdentity:
        """Return the fixed identity (no pid, no start time); nothing is started or changed."""
        return self._fixed
