"""What the suites use of a server verified to run their config.

The coding and throughput runners ask a server, check its replies against its
config and, before they file a test's figures, ask whether it is still the server
that passed the readiness gate. That is all they take: a :class:`Server`, not the
service layer's :class:`~pytest_specdecode.service.handle.ServiceHandle` (which is
one), so the suites sit beside the service layer and never import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from pytest_specdecode.client import SGLangClient
from pytest_specdecode.config.spec import SpecConfig


class Server(Protocol):
    """A server verified to run :attr:`config`, as the suites see it."""

    @property
    def config(self) -> SpecConfig:
        """The config the readiness gate verified it runs."""
        ...

    @property
    def base_url(self) -> str:
        """Where it answers, ``http://host:port``."""
        ...

    @property
    def client(self) -> SGLangClient:
        """The HTTP client to ask it with."""
        ...

    @property
    def server_info(self) -> Mapping[str, Any]:
        """Its ``/server_info`` as read at the gate (untrusted: a server's reply)."""
        ...

    @property
    def simulated(self) -> bool:
        """Whether it is the bundled simulator (its figures are never GPU results)."""
        ...

    def changed(self) -> str | None:
        """One line when the server answering now is not the one of the gate, else None."""
        ...

    def gone(self, *, settle: float = 0.0) -> Exception | None:
        """Why it is known to have exited (waiting up to ``settle`` s to see it), or None."""
        ...
