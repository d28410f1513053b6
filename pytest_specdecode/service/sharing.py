"""What the manager needs of a server it may share, and of the run's hosts.

Under pytest-xdist a worker shares its host's server with the other workers
bound there, through a lease, and follows the scheduler's placement; both
live in :mod:`pytest_specdecode.distributed`, above this layer. The manager
takes them as the protocols here, with the errors a lease raises and the
placement of a run without workers (:class:`LocalPlacement`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from pytest_specdecode.config.settings import Host
from pytest_specdecode.errors import SpecDecodeError
from pytest_specdecode.service.ownership import Registry
from pytest_specdecode.service.retry import HostDown


class LeaseHostDown(SpecDecodeError):
    """Another worker found this lease's host down (it will not come back in this run)."""


class Moved(SpecDecodeError):
    """The config this worker waits for was moved to another host while it waited."""


class NoHostLeft(HostDown):
    """Every host of the run is down: the config cannot run anywhere."""


@dataclass
class Turn:
    """A worker's turn on a lease (:meth:`Lease.turn`).

    Joining (``switching`` False): ``server`` is the live server's facts. Switching:
    ``server`` is the old server's facts (None: none known), and the turn ends with
    :meth:`switched` and the new server's."""

    key: str
    server: dict[str, Any] | None
    switching: bool
    facts: dict[str, Any] | None = None

    def switched(self, server: dict[str, Any]) -> None:
        """The server now runs :attr:`key`: ``server`` is what other workers need to use it."""
        self.facts = server


class Lease(Protocol):
    """One worker's view of the lease on its host's server
    (:class:`pytest_specdecode.distributed.lease.HostLease`)."""

    @property
    def registry(self) -> Registry:
        """Where the worker records the local servers it starts."""
        ...

    def turn(
        self, key: str, *, timeout: float, still_here: Callable[[], bool] | None = None
    ) -> AbstractContextManager[Turn]:
        """This worker's turn with config ``key``: join it, or switch the server to it."""
        ...

    def leave(self) -> None:
        """This worker no longer uses the server."""
        ...


class Placement(Protocol):
    """Where configs run; told when a host is lost."""

    def host_for(self, key: str) -> Host:
        """The host config ``key`` runs on now (raises :class:`NoHostLeft`)."""
        ...

    def mark_down(self, host: Host, reason: str, key: str) -> None:
        """``host`` cannot serve (``reason``: one line), found while starting ``key``."""
        ...

    def still_here(self, key: str, host: Host) -> bool:
        """Whether ``key`` still runs on ``host`` (False once it was moved away)."""
        ...

    def moves(self, key: str) -> list[dict[str, str]]:
        """Every move of config ``key``: from, to, reason."""
        ...


class LocalPlacement:
    """One process, several hosts: the first host not down runs everything; a lost host
    hands the rest of the sweep to the next one."""

    def __init__(self, hosts: Sequence[Host]) -> None:
        self.hosts = list(hosts)
        self.down: dict[Host, str] = {}
        self._moves: dict[str, list[dict[str, str]]] = {}

    def host_for(self, key: str) -> Host:
        for host in self.hosts:
            if host not in self.down:
                return host
        raise NoHostLeft(none_left(self.down), host=str(self.hosts[-1]))

    def mark_down(self, host: Host, reason: str, key: str) -> None:
        self.down[host] = reason
        live = [h for h in self.hosts if h not in self.down]
        self._moves.setdefault(key, []).append(
            {"from": str(host), "to": str(live[0]) if live else "", "reason": reason}
        )

    def still_here(self, key: str, host: Host) -> bool:
        return host not in self.down

    def moves(self, key: str) -> list[dict[str, str]]:
        return list(self._moves.get(key, []))


def none_left(down: Mapping[Any, str]) -> str:
    """The line of :class:`NoHostLeft`: every lost host and why."""
    shown = "; ".join(f"{host}: {reason}" for host, reason in down.items())
    return f"every host of the run is down ({shown}); bring one back and rerun with --dflash-resume"
