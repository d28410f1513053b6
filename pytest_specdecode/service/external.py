"""external: a server someone else runs; never restarted, only verified."""

from __future__ import annotations

from pytest_specdecode.service.base import (
    UNKNOWN_LISTENER,
    LaunchSpec,
    ListenerCheck,
    ProcessIdentity,
)


class ExternalController:
    """Never touches the server: ``apply()`` returns the identity without restarting.

    The gate then verifies the live server against the requested config; a
    mismatch is final (nothing was restarted, so nothing stale can answer),
    and the plugin skips that config's tests with the gate's reason.
    """

    kind = "external"
    may_answer_stale = False

    def __init__(self, where: str = "external server") -> None:
        self._where = where
        self._identity = ProcessIdentity(kind=self.kind)

    def apply(self, launch: LaunchSpec) -> ProcessIdentity:
        """Return the identity; nothing is started or changed."""
        return self._identity

    def alive(self) -> bool:
        """Unknown: True (the gate sees a dead server as refused connections)."""
        return True

    def failure(self) -> str | None:
        """Always None: there is no process here to watch."""
        return None

    def logs(self, tail: int = 30) -> str:
        """No logs are reachable for an external server."""
        return ""

    def log_location(self) -> str | None:
        """None: the server's logs are wherever its owner keeps them."""
        return None

    def identity(self) -> ProcessIdentity | None:
        """The fixed external identity (no pid, no start time)."""
        return self._identity

    def check_listener(self) -> ListenerCheck:
        """Unknown: the server is not started here."""
        return UNKNOWN_LISTENER

    def stop(self) -> None:
        """Nothing to stop."""

    def restore(self) -> None:
        """Nothing to restore."""
